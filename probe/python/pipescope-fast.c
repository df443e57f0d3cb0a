/* pipescope-fast.c — the PyTorch hook's hot path, compiled (issue 14).
 *
 * The hook (probe/python/pipescope/torch.py) wraps about 70 calls a step of
 * a 2-rank CPU job: each block, each stage's get_*_ops, each _batch_p2p and
 * each _wait_batch_p2p (and in a multi-stage schedule each action's
 * profiler label, only to find DualPipeV's overlapped pairs).  As Python functions those wrappers cost 3 to 8 us
 * each in place (the job's blocks evict the interpreter from the cache
 * between calls), 2 to 3 % of a 23 ms step.  This module is the same four
 * wrappers in C, for the common case (the rank open, CPU stages): a call reads two clocks, the arguments it needs, and writes
 * one record into a queue here, handed to libpipescope-probe.so with one
 * pipescope_records call at a step's end, at 512 records and 50 ms after
 * the last hand-over.  In a paused step (the benchmark's unrecorded ones) it
 * runs the wrapped call and nothing else.  In every other case (CUDA,
 * failed, closed) a wrapper calls the Python wrapper it was made with,
 * which does it all.
 *
 * One rank a process: open() takes the rank's handle and the library's
 * pipescope_records and pipescope_now_ns as addresses (from ctypes, so the
 * module never links or loads a second copy of the library).  Lib.Rank puts
 * its own records (step markers, the optimizer, overlapped pairs) through
 * record(), so there is one queue and one order.
 *
 * The wrapped function runs exactly once with the arguments it was given,
 * however they were given (positionally, by keyword, defaults left out,
 * keywords it does not know of); its result and its exceptions pass
 * through untouched.  What a wrapper reads it finds by position or by
 * keyword where the wrapped function's signature puts it: wrap() is told
 * where, once (arguments.py reads the signature); an argument a call does
 * not give is recorded as -1, or its default.  A failure of the
 * module's own (an argument that is not an integer, an attribute missing)
 * switches the fast path off and reports once through the callable given
 * to set_fail; the job never sees it.
 *
 * Issue 29, what the training thread does between blocks (host.py): at
 * each block's start and end the thread's run-queue delay (schedstat, one
 * pread) and the wrappers' own time so far (PROBE_SELF_NS), each queued
 * when it changed; the schedule's own code between two wrapped calls of a
 * step (HOST_SCHEDULE); host calls the schedule makes (role host: the
 * splitting of the inputs, zero_grad).  The schedule's loss call is the
 * last stage's work (role loss, trace format 1.9: a LOSS block).
 *
 * Built per CPython version (its extension suffix); lib.py loads it only
 * under the interpreter it was built for.  Everything runs under the GIL.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

#include "pipescope.h"
#include "pp-schedstat.h"

typedef size_t (*records_fn) (pipescope_rank *, size_t, const int64_t *);
typedef int64_t (*now_fn) (void);

enum { CAPACITY = 512, RING = 256, WAITS = 256, PEERS = 64 };
#define FLUSH_NS 50000000

/* What a wrapper stands for. */
enum { ROLE_FORWARD, ROLE_BACKWARD, ROLE_WEIGHT, ROLE_GET_OPS, ROLE_BATCH_P2P, ROLE_WAIT, ROLE_LABEL,
       ROLE_HOST, ROLE_LOSS };

struct op_meta { const void *op; int32_t kind, stage, mb, peer; int64_t bytes; };
/* a Work and the transfer it finishes (a wait's peer, and what the hook's
 * own thread names as the open action: RECV_F mb 1 from 3) */
struct work_peer { const void *work; int32_t peer, kind, stage, mb; };
struct pending_wait { int32_t peer; int64_t t0, t1; };

static struct
{
  pipescope_rank *rank;
  records_fn records;
  now_fn now;
  int on;                 /* the fast path records */
  int pass;               /* a paused step: the wrapped call, nothing else */
  int step;               /* the step records belong to */
  int p2p_depth;          /* inside a _batch_p2p */
  PyObject *observed;     /* a list: blocks appended as plan actions */
  PyObject *overlap;      /* a list: blocks gathered into an overlapped pair */
  PyObject *fail;         /* fail(what, exception) */
  int64_t q[CAPACITY * PIPESCOPE_RECORD_FIELDS];
  size_t n;
  int64_t t_flush;
  unsigned long long refused;
  /* the wrappers' own time, all but the wrapped call's, summed over the
   * calls that recorded (issue 29: always, for PROBE_SELF_NS; bench-torch
   * reads it with PIPESCOPE_FAST_SELFTIME=1); entry_ns: when the
   * outermost wrapper running was entered */
  int self_time;
  int64_t orig_ns, self_ns, entry_ns;
  unsigned long long self_calls;
  /* block edges (issue 29), on the training thread only (edge_thread,
   * set by edges_open): the run-queue delay and the time on a CPU (one
   * schedstat read gives both; fd -1 where the kernel has none) and
   * self_ns, each queued as a COUNTER_RECORD only
   * when it changed since its last sample (an unchanged one is the last
   * sample's value: the reader takes the last sample at or before an
   * edge), which halves the records */
  int edges;
  unsigned long edge_thread;
  PpSchedstat sched;
  int64_t last_delay, last_self, last_cpu;
  /* the schedule's own code: from a wrapper's exit (or the step's
   * begin) to the next wrapper's entry, within a step; 0: not in one */
  int64_t sched_from;
  int depth;
  /* inside a wrapped call (in_orig), and the GC pauses the hook's GC
   * callback reported while a wrapper ran its own code (gc_self): the
   * job's collections, triggered by one of our allocations, are not our
   * time */
  int in_orig;
  int64_t gc_self;
  struct pending_wait waits[WAITS];
  size_t n_waits;
  /* the P2P ops get_*_ops made and the Works _batch_p2p returned, by
   * address (as id() in Python: no reference kept, so no tensor is held
   * longer), newest first when looked up; a ring, so bounded */
  struct op_meta ops[RING];
  size_t op_next;
  struct work_peer works[RING];
  size_t work_next;
  /* set_cut: the next block of cut_stage that holds cut_t ends there, and
   * the rest of its call is recorded as cut_kind (DDP's all-reduce that
   * finishes inside the last backward); cut_t 0: none */
  int64_t cut_t, cut_kind, cut_stage, cut_bytes;
  /* issue 37: the action the training thread is in now (kind -1: none),
   * set and cleared around the wrapped call with a few stores, never a
   * call; the hook's own thread reads it (open_action, under the GIL, as
   * every store here is made): the stage, micro-batch and work objects
   * are the wrapper's own references, alive while kind is set */
  struct open_now { int64_t kind, step, t0; PyObject *stage, *mb, *work; } open;
} S;

static PyObject *str_stage_index, *str_tensor, *str_peer, *str_nbytes, *str_is_last, *str_loss_fn;

/* ---- the queue ------------------------------------------------------------ */

static void
flush (void)
{
  if (S.n > 0 && S.rank != NULL)
    S.refused += S.records (S.rank, S.n, S.q);
  S.n = 0;
  if (S.now != NULL)
    S.t_flush = S.now ();
}

static void
push (int64_t kind, int64_t stage, int64_t mb, int64_t step, int64_t t0, int64_t t1, int64_t peer,
      int64_t bytes)
{
  if (S.rank == NULL)
    return;   /* closed: nothing more */
  int64_t *f = S.q + S.n * PIPESCOPE_RECORD_FIELDS;
  f[0] = kind, f[1] = stage, f[2] = mb, f[3] = step, f[4] = t0, f[5] = t1, f[6] = peer, f[7] = bytes;
  S.n++;
  if (S.n == CAPACITY || kind == PIPESCOPE_STEP_END || t1 - S.t_flush > FLUSH_NS)
    flush ();
}

/* A cumulative counter's sample at t, when it changed since its last. */
static void
sample (int64_t counter, int64_t value, int64_t *last, int64_t t)
{
  if (value < 0 || value == *last)
    return;
  *last = value;
  push (PIPESCOPE_COUNTER_RECORD, counter, -1, S.step, t, t, -1, value);
}

/* The run-queue delay now and, in *cpu, the time on a CPU (one pread for
 * both), -1 without schedstat. */
static int64_t
run_delay (int64_t *cpu)
{
  int64_t delay = -1;
  *cpu = -1;
  if (S.sched.fd >= 0)
    pp_schedstat_read (&S.sched, cpu, &delay);
  return delay;
}

/* The wrapped call. */
static PyObject *
call_orig (PyObject *orig, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
  S.in_orig++;
  PyObject *out = PyObject_Vectorcall (orig, args, nargsf, kwnames);
  S.in_orig--;
  return out;
}

/* Our own failure: the error raised here is reported once and cleared;
 * the fast path is off from now on.  An error that is no Exception (a
 * KeyboardInterrupt, SystemExit, raised here or by the report) is the
 * job's: it stays set and this returns -1, and the caller returns NULL, as
 * the Python wrappers, which catch Exception only, let it through. */
static int
fail (const char *what)
{
  PyObject *type, *value, *tb;
  PyErr_Fetch (&type, &value, &tb);
  PyErr_NormalizeException (&type, &value, &tb);
  S.on = 0;
  S.pass = 0;
  if (type != NULL && !PyErr_GivenExceptionMatches (type, PyExc_Exception))
    {
      PyErr_Restore (type, value, tb);
      return -1;
    }
  int rc = 0;
  PyObject *report = S.fail;
  if (report != NULL)
    {
      Py_INCREF (report);   /* the report may set another */
      PyObject *r = PyObject_CallFunction (report, "sO", what, value != NULL ? value : Py_None);
      Py_DECREF (report);
      if (r != NULL)
        Py_DECREF (r);
      else if (PyErr_ExceptionMatches (PyExc_Exception))
        PyErr_Clear ();
      else
        rc = -1;   /* the report's own KeyboardInterrupt: the job's */
    }
  Py_XDECREF (type);
  Py_XDECREF (value);
  Py_XDECREF (tb);
  return rc;
}

/* Appends a new tuple to *slot's list, if there still is one (building it
 * can run a collection, whose finalizers may replace the list). */
static int
append_to (PyObject **slot, PyObject *item)
{
  if (item == NULL)
    return -1;
  PyObject *list = *slot;
  int rc = 0;
  if (list != NULL)
    {
      Py_INCREF (list);
      rc = PyList_Append (list, item);
      Py_DECREF (list);
    }
  Py_DECREF (item);
  return rc;
}

/* An int of a Python object, or -1 with an error set. */
static int
as_int (PyObject *o, int64_t *out)
{
  long long v = PyLong_AsLongLong (o);
  if (v == -1 && PyErr_Occurred ())
    return -1;
  *out = v;
  return 0;
}

static int
attr_int (PyObject *o, PyObject *name, int64_t *out)
{
  PyObject *v = PyObject_GetAttr (o, name);
  if (v == NULL)
    return -1;
  int rc = as_int (v, out);
  Py_DECREF (v);
  return rc;
}

/* ---- the wrapper type ------------------------------------------------------ */

/* Where a call puts an argument a role reads, from the wrapped function's
 * signature: its position (self counted; -1, keyword only), its keyword
 * (NULL, positional only) and its default (NULL, none). */
typedef struct
{
  Py_ssize_t pos;
  PyObject *name;
  PyObject *dflt;
} Param;

/* What each role reads, in this order (wrap() checks the count):
 * forward, weight: self, micro-batch; backward: self, micro-batch,
 * full_backward; get_ops: self, micro-batch; batch_p2p: the ops; wait: the
 * works; label: the name; loss: self (the schedule), the stage, the
 * micro-batch. */
enum { P_SELF = 0, P_MB = 1, P_FULL = 2, P_FIRST = 0, P_LOSS_STAGE = 1, P_LOSS_MB = 2, MAX_PARAMS = 3 };

typedef struct
{
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject *orig;       /* what it wraps */
  PyObject *fallback;   /* the Python wrapper, for every case but the fast one */
  int role;
  int kind;             /* ROLE_GET_OPS: the transfers' kind */
  int n_params;
  Param params[MAX_PARAMS];
} Wrapper;

/* The value a call gives the parameter, else its default, else NULL; a new
 * reference (the wrapped call may drop the caller's last one).  By
 * position first: a valid call gives a parameter one way.  Keywords are
 * compared by address first: a call site's are interned, as the name is. */
static PyObject *
arg_of (const Param *p, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
  PyObject *v = p->dflt;
  if (p->pos >= 0 && p->pos < nargs)
    v = args[p->pos];
  else if (p->name != NULL && kwnames != NULL)
    {
      Py_ssize_t n = PyTuple_GET_SIZE (kwnames), i;
      for (i = 0; i < n && PyTuple_GET_ITEM (kwnames, i) != p->name; i++)
        ;
      for (Py_ssize_t k = 0; i == n && k < n; k++)
        if (PyUnicode_Compare (PyTuple_GET_ITEM (kwnames, k), p->name) == 0)
          i = k;
      if (i < n)
        v = args[nargs + i];
    }
  Py_XINCREF (v);
  return v;
}

static PyObject *
call_block (Wrapper *w, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
  Py_ssize_t nargs = PyVectorcall_NARGS (nargsf);
  /* read before the call: it may drop the last reference to w */
  PyObject *stage_obj = arg_of (&w->params[P_SELF], args, nargs, kwnames);
  PyObject *mb_obj = arg_of (&w->params[P_MB], args, nargs, kwnames);
  PyObject *full = w->role == ROLE_BACKWARD ? arg_of (&w->params[P_FULL], args, nargs, kwnames) : NULL;
  int64_t kind = w->role == ROLE_FORWARD ? PIPESCOPE_F : w->role == ROLE_WEIGHT ? PIPESCOPE_W : PIPESCOPE_B;
  /* the edges' samples: the delay read just outside the block's times,
   * our own time so far (this call's part before t0 included) */
  int edges = S.edges && PyThread_get_thread_ident () == S.edge_thread;
  int64_t c0 = -1, c1 = -1;
  int64_t d0 = edges ? run_delay (&c0) : -1;
  int64_t t0 = S.now ();
  int64_t pre = edges ? t0 - S.entry_ns : 0;
  int64_t self0 = S.self_ns + pre;
  struct open_now was = S.open;
  S.open = (struct open_now) { S.on ? kind : -1, S.step, t0, stage_obj, mb_obj, NULL };
  PyObject *out = call_orig (w->orig, args, nargsf, kwnames);
  S.open = was;
  int64_t t1 = S.now ();
  int64_t d1 = edges ? run_delay (&c1) : -1;
  int64_t self1 = S.self_ns + pre;   /* with what ran of ours inside (a GC's) */
  S.orig_ns = t1 - t0;
  if (out == NULL || !S.on)
    goto done;
  /* a backward's full_backward decides B against I; not given and no
   * default: B, PyTorch's */
  int64_t stage = -1, mb = -1;
  if (full != NULL)
    {
      int t = PyObject_IsTrue (full);
      if (t < 0)
        goto failed;
      kind = t ? PIPESCOPE_B : PIPESCOPE_I;
    }
  if ((stage_obj != NULL && attr_int (stage_obj, str_stage_index, &stage) < 0)
      || (mb_obj != NULL && as_int (mb_obj, &mb) < 0))
    goto failed;
  /* the waits since the last block are this block's */
  for (size_t i = 0; i < S.n_waits; i++)
    push (PIPESCOPE_WAIT, stage, mb, S.step, S.waits[i].t0, S.waits[i].t1, S.waits[i].peer, 0);
  S.n_waits = 0;
  int64_t t_end = t1, cut_kind = -1, cut_bytes = 0;
  if (S.cut_t != 0)
    {
      /* one block's, the one whose call holds the mark; never an
       * overlapped pair's half */
      if (S.overlap == NULL && S.cut_stage == stage && S.cut_t >= t0 && S.cut_t <= t1)
        t1 = S.cut_t, cut_kind = S.cut_kind, cut_bytes = S.cut_bytes;
      S.cut_t = 0;
    }
  if (S.overlap != NULL)
    {
      if (append_to (&S.overlap, Py_BuildValue ("(LLLLL)", (long long) kind, (long long) stage,
                                                (long long) mb, (long long) t0, (long long) t1)) < 0)
        goto failed;
      goto done;
    }
  if (edges && S.edges)   /* not closed meanwhile */
    {
      sample (PIPESCOPE_RUN_DELAY_NS, d0, &S.last_delay, t0);
      sample (PIPESCOPE_ON_CPU_NS, c0, &S.last_cpu, t0);
      sample (PIPESCOPE_PROBE_SELF_NS, self0, &S.last_self, t0);
    }
  push (kind, stage, mb, S.step, t0, t1, -1, 0);
  if (edges && S.edges)
    {
      sample (PIPESCOPE_RUN_DELAY_NS, d1, &S.last_delay, t1);
      sample (PIPESCOPE_ON_CPU_NS, c1, &S.last_cpu, t1);
      sample (PIPESCOPE_PROBE_SELF_NS, self1, &S.last_self, t1);
    }
  if (S.observed != NULL
      && append_to (&S.observed, Py_BuildValue ("(LLLiii)", (long long) kind, (long long) stage,
                                                (long long) mb, -1, -1, -1)) < 0)
    goto failed;
  if (cut_kind >= 0)
    {
      push (cut_kind, stage, -1, S.step, t1, t_end, -1, cut_bytes);
      if (S.observed != NULL
          && append_to (&S.observed, Py_BuildValue ("(LLiiii)", (long long) cut_kind, (long long) stage,
                                                    -1, -1, -1, -1)) < 0)
        goto failed;
    }
  goto done;
failed:
  if (fail ("a block") < 0)
    Py_CLEAR (out);
done:
  Py_XDECREF (stage_obj);
  Py_XDECREF (mb_obj);
  Py_XDECREF (full);
  return out;
}

static PyObject *
call_get_ops (Wrapper *w, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
  Py_ssize_t nargs = PyVectorcall_NARGS (nargsf);
  PyObject *stage_obj = arg_of (&w->params[P_SELF], args, nargs, kwnames);
  PyObject *chunk = arg_of (&w->params[P_MB], args, nargs, kwnames);
  int32_t kind = w->kind;   /* w may be gone after the call */
  int64_t t0 = S.now ();
  PyObject *ops = call_orig (w->orig, args, nargsf, kwnames);
  S.orig_ns = S.now () - t0;   /* not ours: out of PROBE_SELF_NS */
  PyObject *seq = NULL, *tensor = NULL;
  if (ops == NULL || !S.on || (!PyList_Check (ops) && !PyTuple_Check (ops))
      || (PyList_Check (ops) ? PyList_GET_SIZE (ops) : PyTuple_GET_SIZE (ops)) == 0)
    goto done;
  int64_t stage = -1, mb = -1;
  if ((stage_obj != NULL && attr_int (stage_obj, str_stage_index, &stage) < 0)
      || (chunk != NULL && as_int (chunk, &mb) < 0))
    goto failed;
  /* a tuple of our own: reading an op's attributes can run Python, which
   * may change the list the job gets back */
  seq = PySequence_Tuple (ops);
  if (seq == NULL)
    goto failed;
  Py_ssize_t n = PyTuple_GET_SIZE (seq);
  for (Py_ssize_t i = 0; i < n; i++)
    {
      PyObject *op = PyTuple_GET_ITEM (seq, i);
      int64_t peer = -1, bytes = 0;
      PyObject *p = PyObject_GetAttr (op, str_peer);
      if (p == NULL)
        goto failed;
      int rc = p == Py_None ? 0 : as_int (p, &peer);
      Py_DECREF (p);
      if (rc < 0)
        goto failed;
      tensor = PyObject_GetAttr (op, str_tensor);
      if (tensor == NULL)
        goto failed;
      if (tensor != Py_None && attr_int (tensor, str_nbytes, &bytes) < 0)
        goto failed;
      Py_CLEAR (tensor);
      struct op_meta *m = &S.ops[S.op_next++ % RING];
      *m = (struct op_meta) { op, kind, (int32_t) stage, (int32_t) mb, (int32_t) peer, bytes };
    }
  goto done;
failed:
  Py_XDECREF (tensor);
  if (fail ("p2p ops") < 0)
    Py_CLEAR (ops);
done:
  Py_XDECREF (seq);
  Py_XDECREF (stage_obj);
  Py_XDECREF (chunk);
  return ops;
}

/* The op's meta, taken out of the ring, or NULL. */
static struct op_meta *
take_op (const void *op)
{
  for (size_t k = 1; k <= RING && k <= S.op_next; k++)
    {
      struct op_meta *m = &S.ops[(S.op_next - k) % RING];
      if (m->op == op)
        {
          m->op = NULL;
          return m;
        }
    }
  return NULL;
}

static PyObject *
call_batch_p2p (Wrapper *w, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
  PyObject *ops = arg_of (&w->params[P_FIRST], args, PyVectorcall_NARGS (nargsf), kwnames);
  S.p2p_depth++;
  int64_t t0 = S.now ();
  PyObject *works = call_orig (w->orig, args, nargsf, kwnames);
  int64_t t1 = S.now ();
  S.orig_ns = t1 - t0;
  if (S.p2p_depth > 0)   /* a close and open within it reset it */
    S.p2p_depth--;
  PyObject *seq = NULL;
  if (works == NULL || !S.on || ops == NULL)
    goto done;
  seq = PySequence_Tuple (ops);
  if (seq == NULL)
    {
      if (fail ("a transfer") < 0)
        Py_CLEAR (works);
      goto done;
    }
  struct op_meta metas[PEERS];
  size_t known = 0;
  Py_ssize_t n = PyTuple_GET_SIZE (seq);
  for (Py_ssize_t i = 0; i < n; i++)
    {
      struct op_meta *m = take_op (PyTuple_GET_ITEM (seq, i));
      if (m == NULL)
        continue;
      push (m->kind, m->stage, m->mb, S.step, t0, t1, m->peer, m->bytes);
      if (known < PEERS)
        metas[known] = *m;
      known++;
    }
  /* a Work an op: its wait learns the peer (only when they pair up) */
  if (known > 0 && known <= PEERS && PyList_Check (works) && (size_t) PyList_GET_SIZE (works) == known)
    for (size_t i = 0; i < known; i++)
      S.works[S.work_next++ % RING] = (struct work_peer) { PyList_GET_ITEM (works, i), metas[i].peer,
                                                           metas[i].kind, metas[i].stage, metas[i].mb };
done:
  Py_XDECREF (seq);
  Py_XDECREF (ops);
  return works;
}

static PyObject *
call_wait (Wrapper *w, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
  PyObject *work = arg_of (&w->params[P_FIRST], args, PyVectorcall_NARGS (nargsf), kwnames);
  int64_t t0 = S.now ();
  struct open_now was = S.open;
  S.open = (struct open_now) { S.on ? PIPESCOPE_WAIT : -1, S.step, t0, NULL, NULL, work };
  PyObject *out = call_orig (w->orig, args, nargsf, kwnames);
  S.open = was;
  int64_t t1 = S.now ();
  S.orig_ns = t1 - t0;
  if (out != NULL && S.on)
    {
      int32_t peer = -1;
      if (work != NULL && PyList_Check (work))
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE (work); i++)
          {
            const void *wk = PyList_GET_ITEM (work, i);
            for (size_t k = 1; k <= RING && k <= S.work_next; k++)
              {
                struct work_peer *e = &S.works[(S.work_next - k) % RING];
                if (e->work == wk)
                  {
                    peer = e->peer;
                    e->work = NULL;
                    break;
                  }
              }
          }
      /* charged to the block that comes next (its stage and micro-batch) */
      if (S.n_waits < WAITS)
        S.waits[S.n_waits++] = (struct pending_wait) { peer, t0, t1 };
      else
        S.refused++;
    }
  Py_XDECREF (work);
  return out;
}

/* Host work the schedule calls between blocks (issue 29: the loss, the
 * splitting of the inputs, zero_grad): a span of the wrapper's kind, its
 * micro-batch where the call gives one. */
static PyObject *
call_host (Wrapper *w, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
  PyObject *mb_obj = arg_of (&w->params[P_FIRST], args, PyVectorcall_NARGS (nargsf), kwnames);
  int64_t kind = w->kind;   /* w may be gone after the call */
  int64_t t0 = S.now ();
  PyObject *out = call_orig (w->orig, args, nargsf, kwnames);
  int64_t t1 = S.now ();
  S.orig_ns = t1 - t0;
  if (out != NULL && S.on)
    {
      int64_t mb = -1;
      if (mb_obj != NULL && mb_obj != Py_None && as_int (mb_obj, &mb) < 0)
        {
          if (fail ("host work") < 0)
            Py_CLEAR (out);
        }
      else
        push (kind, -1, mb, S.step, t0, t1, -1, 0);
    }
  Py_XDECREF (mb_obj);
  return out;
}

/* The schedule's loss call (_maybe_compute_loss: on the last stage the
 * loss function, then the append of its result; trace format 1.9) as a
 * LOSS block of the stage and micro-batch: work of the last stage, not
 * host time.  A call that computes nothing (not the last stage, no loss
 * function) records nothing; nor does one inside an overlapped action,
 * whose pair's block already holds it. */
static PyObject *
call_loss (Wrapper *w, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
  Py_ssize_t nargs = PyVectorcall_NARGS (nargsf);
  PyObject *sched = arg_of (&w->params[P_SELF], args, nargs, kwnames);
  PyObject *stage_obj = arg_of (&w->params[P_LOSS_STAGE], args, nargs, kwnames);
  PyObject *mb_obj = arg_of (&w->params[P_LOSS_MB], args, nargs, kwnames);
  int64_t t0 = S.now ();
  PyObject *out = call_orig (w->orig, args, nargsf, kwnames);
  int64_t t1 = S.now ();
  S.orig_ns = t1 - t0;
  if (out != NULL && S.on && S.overlap == NULL && sched != NULL && stage_obj != NULL)
    {
      int64_t stage = -1, mb = -1;
      int last = -1, has_fn = -1;
      PyObject *v = PyObject_GetAttr (stage_obj, str_is_last);
      if (v != NULL)
        {
          last = PyObject_IsTrue (v);
          Py_DECREF (v);
        }
      PyObject *fn = last > 0 ? PyObject_GetAttr (sched, str_loss_fn) : NULL;
      if (fn != NULL)
        {
          has_fn = fn != Py_None;
          Py_DECREF (fn);
        }
      if (last < 0 || (last > 0 && has_fn < 0)
          || (last > 0 && has_fn > 0
              && (attr_int (stage_obj, str_stage_index, &stage) < 0
                  || (mb_obj != NULL && mb_obj != Py_None && as_int (mb_obj, &mb) < 0))))
        {
          if (fail ("the loss") < 0)
            Py_CLEAR (out);
        }
      else if (last > 0 && has_fn > 0)
        push (PIPESCOPE_LOSS_BLOCK, stage, mb, S.step, t0, t1, -1, 0);
    }
  Py_XDECREF (sched);
  Py_XDECREF (stage_obj);
  Py_XDECREF (mb_obj);
  return out;
}

/* The schedule's profiler label around an action: only an OVERLAP_F_B
 * one is the Python wrapper's (it gathers the pair); any other (a name
 * not given, not a string) is the label itself, with no frame of ours
 * around its enter and exit. */
static PyObject *
call_label (Wrapper *w, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
  PyObject *name = arg_of (&w->params[P_FIRST], args, PyVectorcall_NARGS (nargsf), kwnames);
  int overlap = 0;
  if (name != NULL && PyUnicode_Check (name))
    {
      Py_ssize_t n = PyUnicode_GetLength (name), k = (Py_ssize_t) strlen ("OVERLAP_F_B");
      PyObject *tail = n >= k ? PyUnicode_Substring (name, n - k, n) : NULL;
      overlap = tail != NULL && PyUnicode_CompareWithASCIIString (tail, "OVERLAP_F_B") == 0;
      Py_XDECREF (tail);
      PyErr_Clear ();
    }
  Py_XDECREF (name);
  return PyObject_Vectorcall (overlap ? w->fallback : w->orig, args, nargsf, kwnames);
}

/* Every role alike first: a paused step (or a _batch_p2p within one
 * already timed) runs the wrapped call alone; switched off, the Python
 * wrapper does it all. */
static PyObject *
dispatch (Wrapper *w, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
  if (S.pass || (w->role == ROLE_BATCH_P2P && S.p2p_depth > 0))
    return PyObject_Vectorcall (w->orig, args, nargsf, kwnames);
  if (!S.on)
    return PyObject_Vectorcall (w->fallback, args, nargsf, kwnames);
  switch (w->role)
    {
    case ROLE_GET_OPS:
      return call_get_ops (w, args, nargsf, kwnames);
    case ROLE_BATCH_P2P:
      return call_batch_p2p (w, args, nargsf, kwnames);
    case ROLE_WAIT:
      return call_wait (w, args, nargsf, kwnames);
    case ROLE_LABEL:
      return call_label (w, args, nargsf, kwnames);
    case ROLE_HOST:
      return call_host (w, args, nargsf, kwnames);
    case ROLE_LOSS:
      return call_loss (w, args, nargsf, kwnames);
    default:
      return call_block (w, args, nargsf, kwnames);
    }
}

static PyObject *
wrapper_vectorcall (PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
  Wrapper *w = (Wrapper *) self;
  if (!S.on)
    return dispatch (w, args, nargsf, kwnames);
  /* our own time, always (PROBE_SELF_NS); and in a step, the time since
   * the last wrapper's exit is the schedule's own code: the calls that
   * get here are every action, transfer, wait and host call the
   * schedule makes, so the gap between two holds none of them */
  S.orig_ns = 0;
  int64_t a = S.now ();
  int outer = S.depth == 0;
  /* the schedule's code is the training thread's (edges_open's) */
  int sched = outer && S.sched_from > 0 && PyThread_get_thread_ident () == S.edge_thread;
  if (outer)
    {
      if (sched && a > S.sched_from)
        push (PIPESCOPE_HOST_SCHEDULE, -1, -1, S.step, S.sched_from, a, -1, 0);
      S.entry_ns = a;
    }
  int64_t gc0 = S.gc_self;
  int in_orig = S.in_orig;
  S.in_orig = 0;
  S.depth++;
  PyObject *out = dispatch (w, args, nargsf, kwnames);
  S.depth--;
  S.in_orig = in_orig;
  int64_t b = S.now ();
  S.self_ns += b - a - S.orig_ns - (S.gc_self - gc0);
  S.self_calls++;
  if (sched && S.sched_from > 0)
    S.sched_from = b;
  return out;
}

/* A method when it is a class's attribute, as the function it replaces. */
static PyObject *
wrapper_get (PyObject *self, PyObject *obj, PyObject *type)
{
  (void) type;
  if (obj == NULL || obj == Py_None)
    {
      Py_INCREF (self);
      return self;
    }
  return PyMethod_New (self, obj);
}

/* __name__, __doc__, __wrapped__ and the rest: the wrapped function's. */
static PyObject *
wrapper_getattro (PyObject *self, PyObject *name)
{
  Wrapper *w = (Wrapper *) self;
  if (PyUnicode_CompareWithASCIIString (name, "__wrapped__") == 0)
    {
      Py_INCREF (w->orig);
      return w->orig;
    }
  if (PyUnicode_CompareWithASCIIString (name, "__doc__") == 0)
    return PyObject_GetAttr (w->orig, name);
  PyObject *v = PyObject_GenericGetAttr (self, name);
  if (v == NULL && PyErr_ExceptionMatches (PyExc_AttributeError))
    {
      PyErr_Clear ();
      v = PyObject_GetAttr (w->orig, name);
    }
  return v;
}

static int
wrapper_traverse (PyObject *self, visitproc visit, void *arg)
{
  Wrapper *w = (Wrapper *) self;
  Py_VISIT (w->orig);
  Py_VISIT (w->fallback);
  for (int i = 0; i < w->n_params; i++)
    {
      Py_VISIT (w->params[i].name);
      Py_VISIT (w->params[i].dflt);
    }
  return 0;
}

static int
wrapper_clear (PyObject *self)
{
  Wrapper *w = (Wrapper *) self;
  Py_CLEAR (w->orig);
  Py_CLEAR (w->fallback);
  for (int i = 0; i < w->n_params; i++)
    {
      Py_CLEAR (w->params[i].name);
      Py_CLEAR (w->params[i].dflt);
    }
  return 0;
}

static void
wrapper_dealloc (PyObject *self)
{
  PyObject_GC_UnTrack (self);
  wrapper_clear (self);
  Py_TYPE (self)->tp_free (self);
}

static PyObject *
wrapper_repr (PyObject *self)
{
  return PyUnicode_FromFormat ("<pipescope wrapper of %R>", ((Wrapper *) self)->orig);
}

static PyTypeObject WrapperType = {
  PyVarObject_HEAD_INIT (NULL, 0)
  .tp_name = "_pipescope_fast.Wrapper",
  .tp_basicsize = sizeof (Wrapper),
  .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL
              | Py_TPFLAGS_METHOD_DESCRIPTOR,
  .tp_vectorcall_offset = offsetof (Wrapper, vectorcall),
  .tp_call = PyVectorcall_Call,
  .tp_descr_get = wrapper_get,
  .tp_getattro = wrapper_getattro,
  .tp_traverse = wrapper_traverse,
  .tp_clear = wrapper_clear,
  .tp_dealloc = wrapper_dealloc,
  .tp_repr = wrapper_repr,
  .tp_doc = "A wrapped pipelining call, recorded in C (pipescope-fast.c).",
};

/* ---- the module's functions ---------------------------------------------- */

static const struct { const char *name; int role, n_params; } roles[] = {
  { "forward", ROLE_FORWARD, 2 }, { "backward", ROLE_BACKWARD, 3 }, { "weight", ROLE_WEIGHT, 2 },
  { "get_ops", ROLE_GET_OPS, 2 }, { "batch_p2p", ROLE_BATCH_P2P, 1 }, { "wait", ROLE_WAIT, 1 },
  { "label", ROLE_LABEL, 1 }, { "host", ROLE_HOST, 1 }, { "loss", ROLE_LOSS, 3 },
};

/* One (position, keyword[, default]) of wrap()'s params into *p (new
 * references), or -1 with an error set. */
static int
param_from (PyObject *t, Param *p)
{
  PyObject *name = Py_None, *dflt = NULL;
  Py_ssize_t pos;
  if (!PyTuple_Check (t) || !PyArg_ParseTuple (t, "nO|O:a param", &pos, &name, &dflt))
    {
      if (!PyErr_Occurred ())
        PyErr_SetString (PyExc_TypeError, "wrap: a param is (position, keyword[, default])");
      return -1;
    }
  if (pos < -1 || (name != Py_None && !PyUnicode_Check (name)))
    {
      PyErr_SetString (PyExc_ValueError, "wrap: a param's position is -1 or more, its keyword a str or None");
      return -1;
    }
  p->pos = pos;
  p->name = NULL;
  if (name != Py_None)
    {
      Py_INCREF (name);
      PyUnicode_InternInPlace (&name);   /* compared by address first */
      p->name = name;
    }
  Py_XINCREF (dflt);
  p->dflt = dflt;
  return 0;
}

static PyObject *
m_wrap (PyObject *mod, PyObject *args)
{
  (void) mod;
  const char *role;
  PyObject *orig, *fallback, *params;
  int kind = -1;
  if (!PyArg_ParseTuple (args, "sOOO!|i:wrap", &role, &orig, &fallback, &PyTuple_Type, &params, &kind))
    return NULL;
  if (!PyCallable_Check (orig) || !PyCallable_Check (fallback))
    return PyErr_Format (PyExc_TypeError, "wrap: orig and fallback must be callable");
  int r = -1, n_params = 0;
  for (size_t i = 0; i < sizeof roles / sizeof roles[0]; i++)
    if (strcmp (role, roles[i].name) == 0)
      r = roles[i].role, n_params = roles[i].n_params;
  if (r < 0)
    return PyErr_Format (PyExc_ValueError, "wrap: no role %s", role);
  if (PyTuple_GET_SIZE (params) != n_params)
    return PyErr_Format (PyExc_ValueError, "wrap: %s reads %d params, not %zd", role, n_params,
                         PyTuple_GET_SIZE (params));
  if (r == ROLE_GET_OPS && (kind < PIPESCOPE_SEND_F || kind > PIPESCOPE_RECV_B))
    return PyErr_Format (PyExc_ValueError, "wrap: get_ops needs a transfer kind, not %d", kind);
  if (r == ROLE_HOST && (kind < PIPESCOPE_GC || kind > PIPESCOPE_HOST_ZERO_GRAD))
    return PyErr_Format (PyExc_ValueError, "wrap: host needs a host kind (GC .. HOST_ZERO_GRAD), not %d", kind);
  Wrapper *w = PyObject_GC_New (Wrapper, &WrapperType);
  if (w == NULL)
    return NULL;
  w->vectorcall = wrapper_vectorcall;
  Py_INCREF (orig);
  Py_INCREF (fallback);
  w->orig = orig;
  w->fallback = fallback;
  w->role = r;
  w->kind = kind;
  w->n_params = 0;
  for (int i = 0; i < n_params; i++, w->n_params++)
    if (param_from (PyTuple_GET_ITEM (params, i), &w->params[i]) < 0)
      {
        Py_DECREF (w);   /* never tracked: dealloc's untrack does nothing */
        return NULL;
      }
  PyObject_GC_Track ((PyObject *) w);
  return (PyObject *) w;
}

static void
reset (void)
{
  S.on = 0;
  S.pass = 0;
  S.n = 0;
  S.n_waits = 0;
  S.p2p_depth = 0;
  memset (S.ops, 0, sizeof S.ops);
  memset (S.works, 0, sizeof S.works);
  S.op_next = S.work_next = 0;
  S.edges = 0;
  pp_schedstat_close (&S.sched);
  S.last_delay = S.last_self = S.last_cpu = -1;
  S.sched_from = 0;
  S.depth = 0;
  S.in_orig = 0;
  Py_CLEAR (S.observed);
  Py_CLEAR (S.overlap);
}

static PyObject *
m_open (PyObject *mod, PyObject *args)
{
  (void) mod;
  unsigned long long h, rec, now;
  if (!PyArg_ParseTuple (args, "KKK:open", &h, &rec, &now))
    return NULL;
  if (S.rank != NULL || h == 0 || rec == 0 || now == 0)
    Py_RETURN_FALSE;   /* one rank a process */
  reset ();
  S.rank = (pipescope_rank *) (uintptr_t) h;
  S.records = (records_fn) (uintptr_t) rec;
  S.now = (now_fn) (uintptr_t) now;
  S.refused = 0;
  S.step = 0;
  S.t_flush = S.now ();
  const char *st = getenv ("PIPESCOPE_FAST_SELFTIME");
  S.self_time = st != NULL && strcmp (st, "1") == 0;
  S.self_ns = 0;
  S.self_calls = 0;
  Py_RETURN_TRUE;
}

/* edges_open([samples]): the calling thread is the training thread (the
 * schedule's code is its); its block edges get samples from now on unless
 * samples is false.  True when the run-queue delay can be read
 * (schedstat), False when only our own time will be. */
static PyObject *
m_edges_open (PyObject *mod, PyObject *args)
{
  (void) mod;
  int samples = 1;
  if (!PyArg_ParseTuple (args, "|p:edges_open", &samples))
    return NULL;
  if (S.rank == NULL)
    Py_RETURN_FALSE;
  pp_schedstat_close (&S.sched);
  if (samples)
    pp_schedstat_open (&S.sched);
  S.edge_thread = PyThread_get_thread_ident ();
  S.last_delay = S.last_self = S.last_cpu = -1;
  S.edges = samples;
  return PyBool_FromLong (S.sched.fd >= 0);
}

/* sched(t): a step's schedule code runs from t (> 0) until the first
 * wrapper; sched(-t): the step ends at t, its last stretch recorded.  On
 * the training thread only, as the wrappers cut the stretches: a step run
 * on another thread (a job that starts a thread a step) has wrappers that
 * cut nothing, and its whole step would have been one HOST_SCHEDULE span
 * with its blocks inside (issue 40, finding 5). */
static PyObject *
m_sched (PyObject *mod, PyObject *arg)
{
  (void) mod;
  long long t = PyLong_AsLongLong (arg);
  if (t == -1 && PyErr_Occurred ())
    return NULL;
  int mine = PyThread_get_thread_ident () == S.edge_thread;
  if (t < 0 && mine && S.sched_from > 0 && S.on && -t > S.sched_from)
    push (PIPESCOPE_HOST_SCHEDULE, -1, -1, S.step, S.sched_from, -t, -1, 0);
  S.sched_from = t > 0 && S.on && mine ? t : 0;
  Py_RETURN_NONE;
}

static PyObject *
m_close (PyObject *mod, PyObject *noargs)
{
  (void) mod, (void) noargs;
  flush ();
  S.rank = NULL;
  reset ();
  Py_RETURN_NONE;
}

static PyObject *
m_flush (PyObject *mod, PyObject *noargs)
{
  (void) mod, (void) noargs;
  flush ();
  Py_RETURN_NONE;
}

static PyObject *
m_record (PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
  (void) mod;
  if (nargs != 6 && nargs != 8)
    return PyErr_Format (PyExc_TypeError, "record takes 6 or 8 integers, not %zd", nargs);
  int64_t f[8] = { 0, 0, 0, 0, 0, 0, -1, 0 };
  for (Py_ssize_t i = 0; i < nargs; i++)
    if (!PyLong_Check (args[i]) || as_int (args[i], &f[i]) < 0)
      {
        PyErr_Clear ();   /* not an integer, or past 64 bits: refused, counted */
        S.refused++;
        Py_RETURN_NONE;
      }
  /* a pause of the training thread inside a wrapper's own time is not the
   * wrapper's; another thread's collection (bytes: its thread) never is */
  if (f[0] == PIPESCOPE_GC && f[7] == 0 && S.depth > 0 && S.in_orig == 0 && f[5] > f[4])
    S.gc_self += f[5] - f[4];
  push (f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7]);
  Py_RETURN_NONE;
}

static PyObject *
m_refused (PyObject *mod, PyObject *noargs)
{
  (void) mod, (void) noargs;
  return PyLong_FromUnsignedLongLong (S.refused);
}

static PyObject *
m_set_on (PyObject *mod, PyObject *arg)
{
  (void) mod;
  long t = PyLong_AsLong (arg);
  if (t == -1 && PyErr_Occurred ())
    return NULL;
  if (t < 0 || t > 2)
    return PyErr_Format (PyExc_ValueError, "set_on: 0, 1 or 2, not %ld", t);
  S.on = t == 1 && S.rank != NULL;
  S.pass = t == 2 && S.rank != NULL;
  if (!S.on)
    S.n_waits = 0;   /* a wait is the next block's only while recording */
  Py_RETURN_NONE;
}

static PyObject *
m_set_cut (PyObject *mod, PyObject *args)
{
  (void) mod;
  long long kind, stage, t, bytes;
  if (!PyArg_ParseTuple (args, "LLLL", &kind, &stage, &t, &bytes))
    return NULL;
  if (kind < 0 || kind >= PIPESCOPE_STEP_BEGIN || t < 0)
    return PyErr_Format (PyExc_ValueError, "set_cut: kind %lld at %lld is not a cut", kind, t);
  S.cut_kind = kind, S.cut_stage = stage, S.cut_t = t, S.cut_bytes = bytes;
  Py_RETURN_NONE;
}

static PyObject *
m_set_step (PyObject *mod, PyObject *arg)
{
  (void) mod;
  long v = PyLong_AsLong (arg);
  if (v == -1 && PyErr_Occurred ())
    return NULL;
  if (v < 0 || v > INT32_MAX)
    return PyErr_Format (PyExc_ValueError, "set_step: %ld is not a step", v);
  S.step = (int) v;
  Py_RETURN_NONE;
}

static PyObject *
set_list (PyObject **slot, PyObject *arg, const char *what)
{
  if (arg != Py_None && !PyList_Check (arg))
    return PyErr_Format (PyExc_TypeError, "%s: a list or None", what);
  Py_XINCREF (arg == Py_None ? NULL : arg);
  Py_XSETREF (*slot, arg == Py_None ? NULL : arg);
  Py_RETURN_NONE;
}

static PyObject *
m_set_observed (PyObject *mod, PyObject *arg)
{
  (void) mod;
  return set_list (&S.observed, arg, "set_observed");
}

static PyObject *
m_set_overlap (PyObject *mod, PyObject *arg)
{
  (void) mod;
  return set_list (&S.overlap, arg, "set_overlap");
}

static PyObject *
m_set_fail (PyObject *mod, PyObject *arg)
{
  (void) mod;
  if (arg != Py_None && !PyCallable_Check (arg))
    return PyErr_Format (PyExc_TypeError, "set_fail: a callable or None");
  Py_XINCREF (arg == Py_None ? NULL : arg);
  Py_XSETREF (S.fail, arg == Py_None ? NULL : arg);
  Py_RETURN_NONE;
}

static PyObject *
m_state (PyObject *mod, PyObject *noargs)
{
  (void) mod, (void) noargs;
  return Py_BuildValue ("{s:O,s:O,s:O,s:i,s:n,s:n,s:L,s:K}", "open", S.rank != NULL ? Py_True : Py_False,
                        "on", S.on ? Py_True : Py_False, "pass", S.pass ? Py_True : Py_False, "step", S.step,
                        "queued", (Py_ssize_t) S.n, "waits", (Py_ssize_t) S.n_waits, "self_ns",
                        (long long) S.self_ns, "self_calls", S.self_calls);
}

/* open_action(): the action the training thread is in now, as (kind,
 * stage, mb, step, peer, t0), or None.  The hook's own thread calls it
 * (issue 37): what the wrappers stored, the stage's index, the
 * micro-batch and a wait's peer (its Work's, as call_wait finds it)
 * read here, off the training thread. */
static int
is_recv (int32_t kind)
{
  return kind == PIPESCOPE_RECV_F || kind == PIPESCOPE_RECV_B;
}

static PyObject *
m_open_action (PyObject *mod, PyObject *noargs)
{
  (void) mod, (void) noargs;
  struct open_now o = S.open;
  if (o.kind < 0 || S.rank == NULL)
    Py_RETURN_NONE;
  int64_t stage = -1, mb = -1, peer = -1;
  if (o.stage != NULL && attr_int (o.stage, str_stage_index, &stage) < 0)
    {
      PyErr_Clear ();
      stage = -1;
    }
  if (o.mb != NULL && as_int (o.mb, &mb) < 0)
    {
      PyErr_Clear ();
      mb = -1;
    }
  /* a wait on Works: the transfer it finishes, a receive where there is
   * one (what the process waits for), named as that transfer with its
   * micro-batch; one without a known transfer stays a WAIT */
  int64_t kind = o.kind;
  const struct work_peer *found = NULL;
  if (o.work != NULL && PyList_Check (o.work))
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE (o.work); i++)
      {
        const void *wk = PyList_GET_ITEM (o.work, i);
        for (size_t k = 1; k <= RING && k <= S.work_next; k++)
          {
            const struct work_peer *e = &S.works[(S.work_next - k) % RING];
            if (e->work != wk)
              continue;
            if (found == NULL || (!is_recv (found->kind) && is_recv (e->kind)))
              found = e;
            break;
          }
      }
  if (found != NULL)
    {
      peer = found->peer;
      if (found->kind >= 0)
        kind = found->kind, stage = found->stage, mb = found->mb;
    }
  return Py_BuildValue ("(LLLLLL)", (long long) kind, (long long) stage, (long long) mb,
                        (long long) o.step, (long long) peer, (long long) o.t0);
}

static PyMethodDef methods[] = {
  { "wrap", m_wrap, METH_VARARGS,
    "wrap(role, orig, fallback, params[, kind]): a callable recording orig; role one of forward, "
    "backward, weight, get_ops (kind: the transfers' kind), batch_p2p, wait, label, host (kind: the host "
    "kind), loss (the schedule's loss call); params: where a "
    "call puts each argument the role reads, (position or -1, keyword or None[, default]) each" },
  { "open", m_open, METH_VARARGS,
    "open(rank, pipescope_records, pipescope_now_ns), addresses: True when this process had no rank open" },
  { "close", m_close, METH_NOARGS, "Hands over what is queued; nothing is recorded after." },
  { "flush", m_flush, METH_NOARGS, "Hands over what is queued." },
  { "record", (PyCFunction) (void (*) (void)) m_record, METH_FASTCALL,
    "record(kind, stage, mb, step, t0, t1[, peer, bytes]): one record, queued in order" },
  { "refused", m_refused, METH_NOARGS, "Records refused here (not integers, too many waits)." },
  { "set_on", m_set_on, METH_O,
    "set_on(mode): 1, the wrappers record; 2, they run the wrapped call and nothing else (a paused "
    "step); 0, they call their fallback" },
  { "set_cut", m_set_cut, METH_VARARGS,
    "set_cut(kind, stage, t, bytes): the next block of stage whose call holds t ends at t; the rest of "
    "the call is recorded as kind (micro-batch -1, bytes)" },
  { "set_step", m_set_step, METH_O, "The step the wrappers' records belong to." },
  { "set_observed", m_set_observed, METH_O, "A list blocks are appended to as plan actions, or None." },
  { "set_overlap", m_set_overlap, METH_O, "A list blocks are gathered into instead of recorded, or None." },
  { "set_fail", m_set_fail, METH_O, "fail(what, exception), called once on a failure of the module's own." },
  { "state", m_state, METH_NOARGS, "The module's state, for tests." },
  { "open_action", m_open_action, METH_NOARGS,
    "The action the training thread is in now, (kind, stage, mb, step, peer, t0), or None; for the "
    "hook's own thread" },
  { "edges_open", m_edges_open, METH_VARARGS,
    "The calling thread is the training thread: its blocks' edges get run-queue delay and self-time "
    "samples; True when schedstat can be read" },
  { "sched", m_sched, METH_O,
    "sched(t): the schedule's own code runs from t until the next wrapper; sched(-t): it ends at t (the "
    "step's end), recorded" },
  { NULL, NULL, 0, NULL },
};

static struct PyModuleDef module = {
  PyModuleDef_HEAD_INIT, "_pipescope_fast",
  "The PyTorch hook's hot path in C (probe/python/pipescope-fast.c).", -1, methods,
  NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__pipescope_fast (void);

PyMODINIT_FUNC
PyInit__pipescope_fast (void)
{
  if (PyType_Ready (&WrapperType) < 0)
    return NULL;
  S.sched.fd = -1;   /* none yet (0 would be stdin) */
  S.open.kind = -1;  /* no action open (0 would be a forward) */
  str_stage_index = PyUnicode_InternFromString ("stage_index");
  str_tensor = PyUnicode_InternFromString ("tensor");
  str_peer = PyUnicode_InternFromString ("peer");
  str_nbytes = PyUnicode_InternFromString ("nbytes");
  str_is_last = PyUnicode_InternFromString ("is_last");
  str_loss_fn = PyUnicode_InternFromString ("_loss_fn");
  if (str_stage_index == NULL || str_tensor == NULL || str_peer == NULL || str_nbytes == NULL
      || str_is_last == NULL || str_loss_fn == NULL)
    return NULL;
  PyObject *m = PyModule_Create (&module);
  if (m == NULL)
    return NULL;
  /* what lib.py checks against the library it loaded */
  if (PyModule_AddIntConstant (m, "API_VERSION", PIPESCOPE_API_VERSION) < 0
      || PyModule_AddIntConstant (m, "RECORD_FIELDS", PIPESCOPE_RECORD_FIELDS) < 0)
    {
      Py_DECREF (m);
      return NULL;
    }
  Py_INCREF (&WrapperType);
  if (PyModule_AddObject (m, "Wrapper", (PyObject *) &WrapperType) < 0)
    {
      Py_DECREF (&WrapperType);
      Py_DECREF (m);
      return NULL;
    }
  return m;
}
