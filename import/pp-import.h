/* pp-import.h — traces people already have, as pipescope traces.
 *
 * torch.profiler (Kineto) Chrome traces, one file per rank, as
 * prof.export_chrome_trace and tensorboard_trace_handler write them (plain
 * or gzip, told apart by the magic bytes), become one run:
 *
 *   - ranks: each file's distributedInfo.rank (world_size from there too,
 *     but no more ranks than the files' ranks and the stages their labels
 *     name make: each pipeline rank runs a stage; without distributedInfo
 *     the files are ranks 0, 1, ... in the order given; one rank's files
 *     of different times, as tensorboard_trace_handler writes one a
 *     profiling cycle, are that rank's, of the same time an error); the
 *     host from host_name; times are baseTimeNanoseconds + ts
 *     (microseconds), read exactly, on one clock for all ranks;
 *   - blocks: the `PP:<action>` ranges of PyTorch's multi-stage runtime
 *     (PP:0F0, PP:3I0, PP:1W3, PP:(0F3;3B1)OVERLAP_F_B) and ScheduleGPipe's
 *     `Forward i` / `Backward i` (stage = rank), a label cut at its first
 *     comma (an NVTX suffix); each span is named by its label, an
 *     overlapped pair's span carries its backward half (format 1.2);
 *   - steps: the ProfilerStep#N ranges (N counted from the first one), else
 *     a new step wherever a rank runs an action again;
 *   - transfers: gloo and NCCL point-to-point operations, one layer of
 *     them: the calls (c10d::send, c10d::recv_) where a rank has them, else
 *     record_param_comms, else the backend's ranges (gloo:send, nccl:recv,
 *     which run on asynchronously until the peer is done); their kind,
 *     stage and micro-batch from the PP:<stage>SEND_F<mb> ... range or the
 *     block around them, the peer from the stages' placement; those before
 *     a rank's first action (the shapes PyTorch's _initialize_stages sends
 *     before the first step) are set-up, left out and counted;
 *   - waits: PyTorch waits for an action's input inside the action's
 *     label; where the receive that brought it (gloo:recv, nccl:recv,
 *     under the PP:<s>RECV_F<m> label the block needs, or inside GPipe's
 *     block; the last such label before the block) ended inside the
 *     block, or communication calls of its thread (c10d::, gloo:, nccl:,
 *     record_param_comms) open it, it waited: the block starts when the
 *     waits are over and the time before is a WAIT span of its stage and
 *     micro-batch, as pipescope's own runs record it; where communication
 *     calls of its thread close it (GPipe's sends) the block ends with its
 *     last operator (cpu_op, any thread), else with the label.  So a block
 *     is the stage's call, and the plan's costs are the stages' work;
 *   - data-parallel communication: FSDP's PP:<s>UNSHARD, RESHARD,
 *     REDUCE_GRAD and WAIT_REDUCE_GRAD ranges become spans of their kinds
 *     (their stage, micro-batch -1), not blocks of the plan;
 *   - a job of many pipelines (data-parallel replicas, one file a global
 *     rank): each file is a process (PROCESS frame, its frames tagged),
 *     its place from the process groups a DeviceMesh names in
 *     distributedInfo.pg_config (mesh_pp, mesh_dp, mesh_tp, mesh_cp,
 *     mesh_ep); where the trace has none, its pipeline rank from the
 *     stages it runs and the place flagged PP_TRACE_PROCESS_UNPLACED,
 *     numbered as merge numbers it; two processes of one place are an
 *     error; a pipeline rank's first replica gives its order;
 *   - the optimizer: Optimizer.step#... ranges become OPT spans;
 *   - device work: kernels, copies and memsets (cat kernel, gpu_memcpy,
 *     gpu_memset) under the block that launched them (correlation id, or
 *     the ac2g flow), as child spans with its stage and micro-batch; such a
 *     block then runs from its first kernel's start to its last one's end,
 *     as pipescope's own CUDA runs measure blocks (its host range is only
 *     when it was launched);
 *   - the plan: the observed per-rank order of the first step; when it is
 *     the order of a schedule pipescope knows for that P, M and V, the run
 *     is named for it (so Why and What if rebuild it), else "observed";
 *     simulated with the per-stage costs of the blocks as imported.
 *
 * pipescope's own Chrome export (`export --format chrome`, recognised by
 * its top-level "pipescope" member) is not a torch.profiler trace: it is
 * read back as the run it was exported from (pp-import-chrome.c), alone.
 *
 * Untrusted input: a file that is not such a trace, is cut short or lies
 * is PP_EFORMAT with one line naming the file and the reason; a trace with
 * no pipeline labels at all (Schedule1F1B labels nothing) is PP_EUNSUPPORTED
 * with one line that points to `pipescope-cli profile`.
 *
 * A small input costs little: one budget of JSON text bounds the whole
 * import (pp_import_budget: a plain input counts its size, a gzip'd one
 * PP_IMPORT_MAX_RATIO times its size, and the import at least
 * PP_IMPORT_MIN_BUDGET, once); a file's JSON values are bounded by its text
 * (one per PP_IMPORT_BYTES_PER_VALUE bytes: real traces have one per 11);
 * what is kept of each file (its events) is linear in its text, and every
 * pass over them is linear or n log n.
 *
 * And a bound on memory, whatever the input (issue 40: a 13 MiB gzip of
 * small events, within the budget of text, held 6.2 GiB): an import holds
 * at most PP_IMPORT_MAX_MEMORY at once while it reads, counted before each
 * allocation: the file being read (its bytes while they are gunzipped, its
 * JSON text, the nodes of what is outside its traceEvents, 16 bytes a
 * value), and the events kept of the files read so far (at most
 * PP_IMPORT_MAX_KEPT of it, names included).  The traceEvents are read
 * one event at a time (pp_json_elements), its nodes at most
 * PP_IMPORT_MAX_EVENT, reused for the next.  With the CLI's own 220 MiB
 * resident (its libraries) an import stays under 1 GiB.  A real trace
 * keeps about a fifth of its JSON text as events: files of some 450 MiB
 * of JSON each import.
 *
 * Past a bound, one line says which and the import stops.  Nothing
 * recurses.  No GLib.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "pp-status.h"
#include "pp-trace.h"

#define PP_IMPORT_MAX_FILES  4096
#define PP_IMPORT_MAX_BYTES  ((size_t) 1 << 30)   /* JSON text of one file */
/* gzip: text / compressed.  The real traces of tests/data/kineto gzip 12
 * to 13 times; what gzips 100 times is a bomb more likely than a trace */
#define PP_IMPORT_MAX_RATIO  100
#define PP_IMPORT_MIN_BUDGET ((size_t) 64 << 20)  /* small inputs may still give this, in all */
#define PP_IMPORT_MAX_MEMORY ((size_t) 640 << 20) /* held at once while the files are read */
#define PP_IMPORT_MAX_KEPT   ((size_t) 256 << 20) /* of it, the events kept of all the files */
#define PP_IMPORT_BYTES_PER_VALUE 4               /* the densest text a file's values may be */
#define PP_IMPORT_MAX_EVENT  ((size_t) 16 << 20)  /* the nodes of one event (a million values) */
#define PP_IMPORT_MAX_STAGES 4096
#define PP_IMPORT_MAX_MICROBATCHES (1 << 20)
#define PP_IMPORT_MAX_STEP   (1 << 30)            /* ProfilerStep#N past it: not a step */

/* One input: its name for messages, and its bytes (plain JSON or gzip). */
typedef struct {
  const char *name;
  const void *data;
  size_t      size;
} PpImportInput;

typedef struct {
  int    ranks;              /* world size */
  int    files;
  int    microbatches, stages_per_rank;
  int    steps;              /* steps that hold blocks (numbered from the first; gaps not counted) */
  int    matched;            /* the order is a known schedule's */
  char   schedule[64];       /* its name, or "observed" */
  char   backend[32];        /* distributedInfo.backend */
  size_t blocks, transfers, device_spans, skipped;  /* skipped: events that made no sense */
  size_t setup_transfers;    /* before a rank's first action (shape inference): left out */
  size_t waits;              /* blocks whose label held a wait for their input */
  char   missing[128];       /* ranks of the world with no file ("2,3"), "" when none */
  int    world_claimed;      /* distributedInfo's world size when more than the traces'
                              * ranks and stages make (ranks is those), else 0 */
  int    processes;          /* a job of many pipelines (replicas): its processes, one
                              * PROCESS frame each; 0 when the files are the ranks */
  int    unplaced;           /* of those, whose place was not in their trace */
  int32_t mesh_size[PP_TRACE_MESH_DIMS];  /* the mesh they make (pp, dp, tp, cp, ep) */
  size_t dp_actions;         /* FSDP's UNSHARD, RESHARD, REDUCE_GRAD, WAIT_REDUCE_GRAD */
  int    from_export;        /* the input was pipescope's own Chrome export: the run
                              * it was exported from, given back (pp-import-chrome.c) */
} PpImportSummary;

/* What an input of n bytes whose first bytes are head[head_len] adds to
 * its import's budget of JSON text: n when plain, PP_IMPORT_MAX_RATIO
 * times n (at most PP_IMPORT_MAX_BYTES) when it starts with the gzip magic. */
size_t   pp_import_cost (const void *head, size_t head_len, size_t n);
/* The same of the file at path (a regular file, readable): PP_EIO or
 * PP_EINVAL with one line when it is not. */
PpStatus pp_import_file_cost (const char *path, size_t *cost, PpError *err);
/* An import's budget of JSON text from its inputs' costs summed
 * (saturating): that sum, at least PP_IMPORT_MIN_BUDGET. */
size_t   pp_import_budget (size_t costs);

/* Reads path whole (gunzipped when it starts with the gzip magic) into
 * *data (malloc'd, NUL-terminated): at most limit bytes of text (what is
 * left of the import's budget) and PP_IMPORT_MAX_BYTES, and at most mem
 * bytes of memory held at once (the file's bytes and its text: what the
 * import's memory has left); past either, PP_EFORMAT with one line, said
 * before the file is read where its size tells. */
PpStatus pp_import_read_file (const char *path, size_t limit, size_t mem, char **data, size_t *size,
                              PpError *err);
/* Gunzips (or copies) in[n] into *data (malloc'd, NUL-terminated), bounded
 * the same way (mem bounds the text: in is the caller's). */
PpStatus pp_import_decode (const char *name, const void *in, size_t n, size_t limit, size_t mem,
                           char **data, size_t *size, PpError *err);

/* Converts the inputs (one per rank) into w: description, rank frames,
 * plan, names, step markers, spans.  sum may be NULL. */
PpStatus pp_import_kineto (const PpImportInput *inputs, size_t n, PpTraceWriter *w,
                           PpImportSummary *sum, PpError *err);

/* The same from files, written to out_path (created 0600 via a temporary
 * beside it, renamed when whole: a failed import leaves no file). */
PpStatus pp_import_kineto_files (const char *const *paths, size_t n, const char *out_path,
                                 PpImportSummary *sum, PpError *err);

/* Does the file at path look like JSON to import (gzip magic, or its first
 * non-blank byte '{' or '['), rather than a pipescope trace? */
int      pp_import_is_json_file (const char *path);
