"""pp_tap.py — what the Python tests share: TAP lines (ok, fail) and a
trace's spans through `pipescope-cli export --format csv`."""

import csv
import os
import subprocess
import sys

_n = 0


def ok(msg):
    """One passed check: "ok N - msg"."""
    global _n
    _n += 1
    print(f"ok {_n} - {msg}")


def fail(msg):
    """The next check failed: "not ok N - msg" (later lines as comments), exit 1."""
    print(f"not ok {_n + 1} - " + msg.replace("\n", "\n# "))
    sys.exit(1)


def spans_of(cli, trace, tmp):
    """The trace's spans as the CSV export's rows (dicts), or fail."""
    out = os.path.join(tmp, "spans.csv")
    p = subprocess.run([cli, "export", trace, "--format", "csv", "-o", out],
                       capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        fail(f"export {trace}: {p.stderr.strip()}")
    with open(out) as f:
        return list(csv.DictReader(f))


def raw_trace(path, streams=False):
    """A pptrace read raw (docs/trace-format.md), times on the writers'
    own clocks: (spans as (rank, kind, step, start, end), counters as
    (rank, kind, time, value)); streams: each span's stream last (a GC
    span's collecting thread, format 1.8)."""
    import struct
    data = open(path, "rb").read()
    off = struct.unpack_from("<I", data, 16)[0]
    spans, counters = [], []
    while off + 8 <= len(data):
        size, ftype = struct.unpack_from("<IH", data, off)
        if size < 8 or off + size > len(data):
            break
        if ftype == 3:   # SPANS: 40-byte slots, an EXT one followed by its extension
            slot = off + 8
            while slot + 40 <= off + size:
                start, dur, _, step, _, stream = struct.unpack_from("<qIIiII", data, slot)
                rank, = struct.unpack_from("<h", data, slot + 28)
                kind, flags = data[slot + 38], data[slot + 39]
                if flags & 1:
                    end, = struct.unpack_from("<q", data, slot + 40)
                    rank, = struct.unpack_from("<i", data, slot + 56)
                    kind, = struct.unpack_from("<H", data, slot + 72)
                    slot += 80
                else:
                    end = start + dur
                    slot += 40
                spans.append((rank, kind, step, start, end) + ((stream,) if streams else ()))
        elif ftype == 4:   # COUNTER
            t, v, rank, _, kind = struct.unpack_from("<qdiiH", data, off + 8)
            counters.append((rank, kind, t, v))
        off += size
    return spans, counters
