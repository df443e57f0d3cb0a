"""heartbeat.py — what the process is doing now, said by the hook's own
thread (issue 37; trace format 1.10's OPEN frames; docs/stuck.md).

The training thread only stores its open action: the C wrappers in their
module state (lib.Rank.fast.open_action reads it), the Python wrappers in
Recorder.now_open, a tuple (kind, stage, mb, step, peer, t0) or None; a wait
whose transfer is known only from its Works gives the Work list as peer,
read here: the wait is then named as the transfer it finishes (RECV_F mb 1
from 3), as the C wrappers' open_action names it.  This thread looks four
times a second and writes an OPEN frame when the action changed, and at least once a second (the heartbeat: a process
whose frames stop is dead or frozen whole).  Once an action has lasted
STACK_AFTER_S, it takes the training thread's Python stack
(sys._current_frames) and names the innermost frame of the job's own code
(train.py:88 forward) in the frame.  Nothing here runs on the training
thread; a failure stops the heartbeat and is said once, never raised.
"""

import os
import sys
import threading
import time

from .lib import RECV_B as _RECV_B, RECV_F as _RECV_F

LOOK_S = 0.25
BEAT_S = 1.0
STACK_AFTER_S = 2.0
_HERE = os.path.dirname(os.path.abspath(__file__))
# the interpreter's own library (a venv's base's, where the job runs in one)
_STDLIB = tuple(p + os.sep + "lib" for p in {sys.prefix, sys.base_prefix})


def where(frame):
    """The innermost frame of the job's own code under frame ("train.py:88
    forward"): the first outside the interpreter's library, site-packages
    and this package; the innermost one where all are."""
    first = None
    f = frame
    while f is not None:
        code = f.f_code
        path = code.co_filename or ""
        text = f"{os.path.basename(path)}:{f.f_lineno} {code.co_name}"
        if first is None:
            first = text
        if not (path.startswith(_HERE) or "site-packages" in path or "dist-packages" in path
                or path.startswith(_STDLIB) or path.startswith("<")):
            return text
        f = f.f_back
    return first or ""


class Heartbeat:
    def __init__(self, hook, rank, thread_id, say):
        self.hook = hook
        self.rank = rank
        self.thread_id = thread_id    # the training thread's (threading.get_ident)
        self.say = say
        self.lock = threading.Lock()  # held around each write; close takes it
        self.stop = threading.Event()
        self.idle_since = 0           # when the last action ended (as seen here)
        self.where = ""
        self.thread = threading.Thread(target=self.run, name="pipescope-heartbeat", daemon=True)
        self.thread.start()

    def now_action(self):
        """(kind, stage, mb, step, peer, t0) or None, from the C wrappers or
        the Python ones (the later begun, where both say one)."""
        a = None
        fast = self.hook.fast
        if fast is not None and self.hook.rank is not None:
            a = fast.open_action()
        b = self.hook.now_open
        if b is not None:
            works = b[4]
            if isinstance(works, list):   # a wait's Works: the transfer it finishes, a receive first
                known = getattr(self.hook, "work_peer", {})
                ops = [m for m in (known.get(id(w)) for w in works) if m is not None]
                ops.sort(key=lambda m: m[0] not in (_RECV_F, _RECV_B))
                if ops:   # (kind, stage, mb, peer, bytes): named as that transfer, with its micro-batch
                    kind, stage, mb, peer, _ = ops[0]
                    b = (kind, stage, mb, b[3], peer, b[5])
                else:
                    b = b[:4] + (-1,) + b[5:]
            if a is None or b[5] >= a[5]:
                a = b
        dp = self.hook.dp_open   # a DDP stage's last backward past its last gradient: the all-reduce
        if a is not None and dp is not None and dp[2] >= a[5] and a[1] == dp[0]:
            a = (dp[1], dp[0], -1, a[3], -1, dp[2])
        return a

    def run(self):
        wrote, prev = 0.0, None
        try:
            self.idle_since = self.rank.now()
            while not self.stop.wait(LOOK_S):
                a = self.now_action()
                now = self.rank.now()
                changed = a != prev
                if changed:
                    if a is None:
                        self.idle_since = now
                    self.where = ""
                    prev = a
                t0 = a[5] if a is not None else self.idle_since
                took = False
                if not self.where and t0 and now - t0 >= STACK_AFTER_S * 1e9:
                    frame = sys._current_frames().get(self.thread_id)
                    self.where = where(frame) if frame is not None else ""
                    took = bool(self.where)
                if changed or took or time.monotonic() - wrote >= BEAT_S:
                    self.write(a)
                    wrote = time.monotonic()
        except Exception as e:
            self.say(f"the heartbeat stopped ({e.__class__.__name__}: {e}); recording goes on")

    def write(self, a, closed=False):
        with self.lock:
            if self.rank is None:
                return
            if a is None:
                self.rank.open_action(-1, -1, -1, -1, -1, self.idle_since, self.where, closed)
            else:
                kind, stage, mb, step, peer, t0 = a
                self.rank.open_action(kind, stage, mb, step, peer, t0, self.where, closed)

    def close(self):
        """Stops the thread and says the rank closed (nothing open); before
        the rank closes."""
        self.stop.set()
        self.thread.join(timeout=2.0)
        try:
            self.write(None, closed=True)
        except Exception:
            pass
        with self.lock:
            self.rank = None
