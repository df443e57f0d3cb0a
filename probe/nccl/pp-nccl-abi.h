/* pp-nccl-abi.h — NCCL's profiler plugin interface, versions 4 to 6, as the
 * structures NCCL passes to a plugin (NCCL's documented nccl_profiler.h and
 * profiler_v4.h ... profiler_v6.h), written here in C from that description.
 *
 * NCCL opens the library named by NCCL_PROFILER_PLUGIN and looks for the
 * newest symbol it knows, then older ones: 2.28.9 names _v1 ... _v5 and
 * 2.30.7 _v1 ... _v6 (checked with `strings` on their libnccl.so); the
 * development branch looks for _v7 first and falls back to _v6.  NCCL
 * 2.26 and 2.27 take _v4 (their headers; not checked on a library here).  Only the fields the plugin reads are relied upon; the
 * unions are laid out member by member as NCCL's, so every member starts
 * at the union's start.
 *
 * No NCCL header is needed to build it (the toolkit ships none for the
 * profiler).  Private to probe/nccl/ and its test. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef int PpNcclResult;                  /* ncclResult_t: 0 is ncclSuccess */
#define PP_NCCL_SUCCESS 0
#define PP_NCCL_INTERNAL_ERROR 3
/* ncclDebugLogger_t: level, flags, file, line, format, ... */
typedef void (*PpNcclLogger) (int level, unsigned long flags, const char *file, int line,
                              const char *fmt, ...);

/* Event types: the bits of the activation mask. */
enum {
  PP_NCCL_GROUP        = 1 << 0,
  PP_NCCL_COLL         = 1 << 1,
  PP_NCCL_P2P          = 1 << 2,
  PP_NCCL_PROXY_OP     = 1 << 3,
  PP_NCCL_PROXY_STEP   = 1 << 4,
  PP_NCCL_PROXY_CTRL   = 1 << 5,
  PP_NCCL_KERNEL_CH    = 1 << 6,
  PP_NCCL_NET_PLUGIN   = 1 << 7,
  PP_NCCL_GROUP_API    = 1 << 8,   /* v5 */
  PP_NCCL_COLL_API     = 1 << 9,   /* v5 */
  PP_NCCL_P2P_API      = 1 << 10,  /* v5 */
  PP_NCCL_KERNEL_LAUNCH = 1 << 11, /* v5 */
  PP_NCCL_CE_COLL      = 1 << 12,  /* v6 */
  PP_NCCL_CE_SYNC      = 1 << 13,  /* v6 */
  PP_NCCL_CE_BATCH     = 1 << 14,  /* v6 */
};

/* Event states (recordEventState), the numbers every version shares. */
enum {
  PP_NCCL_STEP_SEND_GPU_WAIT   = 8,   /* the proxy waits for the GPU to hand it a chunk */
  PP_NCCL_STEP_SEND_WAIT       = 9,   /* the chunk is on the wire */
  PP_NCCL_STEP_RECV_WAIT       = 10,  /* a receive posted, no data yet */
  PP_NCCL_STEP_RECV_FLUSH_WAIT = 11,  /* data in, flushed towards the GPU */
  PP_NCCL_STEP_RECV_GPU_WAIT   = 12,  /* data in, waiting for the GPU to take it */
  PP_NCCL_PROXY_OP_IN_PROGRESS = 19,  /* v4 */
  PP_NCCL_STEP_SEND_PEER_WAIT  = 20,  /* v4: the receiver has not cleared the chunk to send */
  PP_NCCL_KERNEL_CH_STOP       = 22,  /* v4: the channel's kernel ended, args->kernelCh.pTimer */
};

/* ---- version 4 (NCCL 2.26, 2.27) --------------------------------------- */

typedef struct {
  uint8_t type;
  void   *parentObj;
  int     rank;
  union {
    struct {
      uint64_t    seqNumber;
      const char *func;
      const void *sendBuff;
      void       *recvBuff;
      size_t      count;
      int         root;
      const char *datatype;
      uint8_t     nChannels;
      uint8_t     nWarps;
      const char *algo;
      const char *proto;
    } coll;
    struct {
      const char *func;
      void       *buff;
      const char *datatype;
      size_t      count;
      int         peer;
      uint8_t     nChannels;
    } p2p;
    struct {
      pid_t   pid;
      uint8_t channelId;
      int     peer;
      int     nSteps;
      int     chunkSize;
      int     isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t  channelId;
      uint64_t pTimer;      /* the GPU's globaltimer at the channel's start */
    } kernelCh;
    struct {
      int64_t id;
      void   *data;
    } netPlugin;
  };
} PpNcclDescrV4;

typedef union {
  struct { size_t transSize; } proxyStep;
  struct { int appendedProxyOps; } proxyCtrl;
  struct { void *data; } netPlugin;
  struct { uint64_t pTimer; } kernelCh;
} PpNcclStateArgsV4;

typedef struct {
  const char *name;
  PpNcclResult (*init) (void **context, int *eActivationMask, const char *commName, uint64_t commHash,
                        int nNodes, int nranks, int rank, PpNcclLogger logfn);
  PpNcclResult (*startEvent) (void *context, void **eHandle, PpNcclDescrV4 *eDescr);
  PpNcclResult (*stopEvent) (void *eHandle);
  PpNcclResult (*recordEventState) (void *eHandle, int eState, PpNcclStateArgsV4 *eStateArgs);
  PpNcclResult (*finalize) (void *context);
} PpNcclProfilerV4;

/* ---- versions 5 (NCCL 2.28) and 6 (2.29, 2.30) --------------------------
 * v6 adds copy-engine collectives to v5's union (which the plugin leaves
 * off in its mask) and keeps v5's state arguments: one layout serves both
 * for every member the plugin reads. */

typedef struct {
  uint64_t type;
  void    *parentObj;
  int      rank;
  union {
    struct {
      bool graphCaptured;
      int  groupDepth;
    } groupApi;
    struct {
      const char *func;
      size_t      count;
      const char *datatype;
      int         root;
      void       *stream;
      bool        graphCaptured;
    } collApi;
    struct {
      const char *func;
      size_t      count;
      const char *datatype;
      void       *stream;
      bool        graphCaptured;
    } p2pApi;
    struct {
      void *stream;
    } kernelLaunch;
    struct {
      uint64_t    seqNumber;
      const char *func;
      const void *sendBuff;
      void       *recvBuff;
      size_t      count;
      int         root;
      const char *datatype;
      uint8_t     nChannels;
      uint8_t     nWarps;
      const char *algo;
      const char *proto;
      void       *parentGroup;
    } coll;
    struct {
      const char *func;
      void       *buff;
      const char *datatype;
      size_t      count;
      int         peer;
      uint8_t     nChannels;
      void       *parentGroup;
    } p2p;
    struct {
      pid_t   pid;
      uint8_t channelId;
      int     peer;
      int     nSteps;
      int     chunkSize;
      int     isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t  channelId;
      uint64_t pTimer;
    } kernelCh;
    struct {
      int64_t id;
      void   *data;
    } netPlugin;
  };
} PpNcclDescrV5;

typedef PpNcclDescrV5 PpNcclDescrV6;

typedef union {
  struct { size_t transSize; } proxyStep;
  struct { int appendedProxyOps; } proxyCtrl;
  struct { void *data; } netPlugin;
  struct { uint64_t pTimer; } kernelCh;
} PpNcclStateArgsV5;

typedef struct {
  const char *name;
  PpNcclResult (*init) (void **context, uint64_t commId, int *eActivationMask, const char *commName,
                        int nNodes, int nranks, int rank, PpNcclLogger logfn);
  PpNcclResult (*startEvent) (void *context, void **eHandle, PpNcclDescrV5 *eDescr);
  PpNcclResult (*stopEvent) (void *eHandle);
  PpNcclResult (*recordEventState) (void *eHandle, int eState, PpNcclStateArgsV5 *eStateArgs);
  PpNcclResult (*finalize) (void *context);
} PpNcclProfilerV5;

typedef PpNcclProfilerV5 PpNcclProfilerV6;

/* The layout NCCL relies on (x86-64 and aarch64, LP64). */
_Static_assert (offsetof (PpNcclDescrV4, parentObj) == 8 && offsetof (PpNcclDescrV4, rank) == 16
                  && offsetof (PpNcclDescrV4, p2p) == 24,
                "v4 descriptor: type, parentObj, rank, the union at 24");
_Static_assert (offsetof (PpNcclDescrV5, rank) == 16 && offsetof (PpNcclDescrV5, coll) == 24
                  && offsetof (PpNcclDescrV5, coll.nChannels) == 24 + 56
                  && offsetof (PpNcclDescrV5, p2p.peer) == 24 + 32
                  && offsetof (PpNcclDescrV5, kernelCh.pTimer) == 24 + 8,
                "v5 descriptor as NCCL lays it out");
