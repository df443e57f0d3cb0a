#!/usr/bin/env python3
"""make-import-seeds.py [FOLDER] — the importer's hostile seeds (a small input costs little).

Writes under FOLDER (default: this script's) one seed of each kind of
input that once cost far more than its size, so that test-fuzz runs them
once under ASan, -rss_limit_mb and -timeout:

corpus-json-heavy/ (run once, not fuzzed from: each costs a second or
more under the sanitizers, and the old code a timeout or 1 GiB):
  import-bomb-values.json.gz   63 MiB of [0,0,...] in 64 KB of gzip
                               (16 bytes a value: 734 MB)
  import-nested-blocks.json.gz 40,000 labels nested over 40,000 operators
                               (a walk per label per operator)
  import-budget.bin            three gzips of 22 MiB each, 66 MiB in all:
                               under the least budget each, not together

corpus-json/ (fuzzed from, small):
  import-bomb-small.json.gz    1 MiB of [0,0,...]: too dense at once
  import-nested-small.json.gz  300 labels nested over 300 operators
  import-huge-steps.json       ProfilerStep#1073741824 beside a rank
                               without steps (an array by step number)
  import-same-rank.json        50 traces of one rank at different times
                               (merged one by one)
  import-too-many.json         4097 traces, one more than an import takes
  import-world-claimed.json    world_size 65536 in 1 KB

fuzz-import.c splits an input at every SEP (ff fe fd fc) into traces; no
gzip here holds one (checked).
"""
import os
import sys
import zlib


SEP = b"\xff\xfe\xfd\xfc"


def gzip_without_sep(text):
    for level in (9, 8, 7, 6):
        c = zlib.compressobj(level, zlib.DEFLATED, 31)
        data = c.compress(text) + c.flush()
        if SEP not in data:
            return data
    sys.exit("make-import-seeds: every gzip of this text holds the separator")


def ann(name, ts, dur, cat="user_annotation"):
    return '{"ph":"X","cat":"%s","name":"%s","pid":1,"tid":1,"ts":%s,"dur":%s}' % (cat, name, ts, dur)


def trace(events, rank=None, world=None):
    di = ('"distributedInfo":{"backend":"gloo","rank":%d,"world_size":%d},' % (rank, world)
          if rank is not None else "")
    return '{%s"baseTimeNanoseconds":1700000000000000000,"traceEvents":[%s]}' % (di, ",".join(events))


def nested(n):
    return trace([ann("PP:0F0", 0, 1000)] * n + [ann("aten::mm", 1, 5, cat="cpu_op")] * n, 0, 1).encode()


def main():
    top = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    heavy, light = {}, {}
    heavy["import-bomb-values.json.gz"] = gzip_without_sep(b"[" + b"0," * (63 << 19) + b"0]")
    heavy["import-nested-blocks.json.gz"] = gzip_without_sep(nested(40000))
    blank = gzip_without_sep(b'{"traceEvents":[' + b" " * (22 << 20) + b"]}")
    heavy["import-budget.bin"] = SEP.join([blank] * 3)
    light["import-bomb-small.json.gz"] = gzip_without_sep(b"[" + b"0," * (1 << 19) + b"0]")
    light["import-nested-small.json.gz"] = gzip_without_sep(nested(300))
    steps = [ann("ProfilerStep#0", 0, 100), ann("PP:0F0", 10, 10), ann("PP:0B0", 30, 10),
             ann("ProfilerStep#1073741824", 200, 100), ann("PP:0F0", 210, 10), ann("PP:0B0", 230, 10),
             ann("ProfilerStep#1073741825", 400, 10)]
    other = [ann("PP:1F0", 10, 10), ann("PP:1B0", 30, 10), ann("PP:1F0", 210, 10), ann("PP:1B0", 230, 10)]
    light["import-huge-steps.json"] = trace(steps, 0, 2).encode() + SEP + trace(other, 1, 2).encode()
    light["import-same-rank.json"] = SEP.join(
        trace([ann("PP:0F0", 1000 * i, 10), ann("PP:0B0", 1000 * i + 20, 10)], 0, 1).encode()
        for i in range(50))
    light["import-too-many.json"] = SEP.join([b"[]"] * 4097)
    light["import-world-claimed.json"] = trace(
        [ann("PP:0F%d" % m, 20 * m, 10) for m in range(4)]
        + [ann("PP:0B%d" % m, 100 + 20 * m, 10) for m in range(4)], 0, 65536).encode()
    for folder, seeds in (("corpus-json-heavy", heavy), ("corpus-json", light)):
        os.makedirs(os.path.join(top, folder), exist_ok=True)
        for name, data in seeds.items():
            with open(os.path.join(top, folder, name), "wb") as f:
                f.write(data)
            print("%s/%s: %d bytes" % (folder, name, len(data)))


if __name__ == "__main__":
    main()
