#!/usr/bin/env python3
"""test-import-mesh.py CLI DATA_DIR — `pipescope-cli import` of a job of
many pipelines: tests/data/kineto/fsdp/ (tools/gen-kineto-fixtures.py), a
real PP 2 x DP 2 job of 4 processes, FSDP2 per stage, Interleaved1F1B,
one torch.profiler trace per global rank.

The JSON is read here with Python's json module and compared with what
the imported trace holds (`export --format csv`, `info`):

- 4 processes, each at its mesh place (pp, dp from the mesh_pp / mesh_dp
  groups of distributedInfo.pg_config), P = 2, no replica refused or put
  on another's row;
- per process, the count of each FSDP action (UNSHARD, RESHARD,
  REDUCE_GRAD, WAIT_REDUCE_GRAD) and of F and B is its JSON's `PP:` labels';
- without the mesh groups (place not read): still 4 processes, flagged
  'place not read', pipeline rank from the stages they run, dp numbered
  by global rank within it, as merge numbers them;
- one process's trace twice, or two processes claiming one place: exit 2
  and one line naming both files; a mesh group larger than the world: exit
  2, one line.
"""
import collections
import csv
import glob
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile

CLI, DATA = sys.argv[1], os.path.join(sys.argv[2], "kineto", "fsdp")
DP_KINDS = ("UNSHARD", "RESHARD", "REDUCE_GRAD", "WAIT_REDUCE_GRAD")
LABEL = re.compile(r"^PP:(\d+)(F|B|UNSHARD|RESHARD|REDUCE_GRAD|WAIT_REDUCE_GRAD)\d*$")
failures = 0
n_checks = 0


def check(cond, what):
    global failures, n_checks
    n_checks += 1
    print(("ok " if cond else "not ok ") + str(n_checks) + " - " + " ".join(what.split()))
    if not cond:
        failures += 1


def run(*args):
    p = subprocess.run([CLI, *args], capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def load(path):
    with gzip.open(path, "rt") as f:
        return json.load(f)


def label_counts(doc):
    """kind -> count of the PP: labels of the kinds compared."""
    c = collections.Counter()
    for e in doc["traceEvents"]:
        m = LABEL.match(e.get("name", "")) if e.get("ph") == "X" else None
        if m:
            c[m.group(2)] += 1
    return c


def imported(files, tmp, name):
    out = os.path.join(tmp, name + ".pptrace")
    rc, so, se = run("import", *files, "-o", out)
    return rc, so, se, out


def csv_counts(trace, tmp):
    """process -> Counter of kinds, and process -> (rank, dp) of its spans."""
    path = trace + ".csv"
    rc, _, se = run("export", trace, "--format", "csv", "-o", path)
    check(rc == 0, f"export csv: {se.strip()}")
    kinds, place = collections.defaultdict(collections.Counter), {}
    with open(path) as f:
        for row in csv.DictReader(f):
            g = int(row["process"])
            kinds[g][row["kind"]] += 1
            place.setdefault(g, set()).add((int(row["rank"]), int(row["dp"])))
    return kinds, place


def write_json(doc, path):
    with gzip.open(path, "wt") as f:
        json.dump(doc, f)


def main():
    files = sorted(glob.glob(os.path.join(DATA, "process*.json.gz")))
    check(len(files) == 4, f"4 fixture files ({len(files)})")
    docs = {int(load(p)["distributedInfo"]["rank"]): load(p) for p in files}
    with tempfile.TemporaryDirectory(prefix="pp-import-mesh-") as tmp:
        rc, so, se, trace = imported(files, tmp, "placed")
        check(rc == 0, f"import of the 4 processes: rc {rc} {se.strip()}")
        check("2 ranks from 4 traces" in so and "4 processes (pp 2 × dp 2 × tp 1)" in so,
              f"import says 2 ranks, 4 processes: {so!r}")
        rc, info, _ = run("info", trace)
        check(rc == 0 and "ranks: 2\n" in info and "processes: 4 (pp 2 × dp 2 × tp 1)" in info,
              "info: 2 ranks, 4 processes")
        # the place each process's mesh groups give it
        for g, doc in docs.items():
            pgs = {p["pg_desc"]: p["ranks"] for p in doc["distributedInfo"]["pg_config"]}
            pp, dp = pgs["mesh_pp"].index(g), pgs["mesh_dp"].index(g)
            check(f"process {g}: pp {pp} dp {dp} tp 0 host" in info,
                  f"info: process {g} at pp {pp} dp {dp}")
        check("place not read" not in info, "every place read")
        kinds, place = csv_counts(trace, tmp)
        check(sorted(kinds) == [0, 1, 2, 3], f"spans of the 4 processes ({sorted(kinds)})")
        for g, doc in docs.items():
            want = label_counts(doc)
            for k in DP_KINDS + ("F", "B"):
                check(kinds[g][k] == want[k] and want[k] > 0,
                      f"process {g}: {k} {kinds[g][k]}, its labels {want[k]}")
            pgs = {p["pg_desc"]: p["ranks"] for p in doc["distributedInfo"]["pg_config"]}
            check(place.get(g) == {(pgs["mesh_pp"].index(g), pgs["mesh_dp"].index(g))},
                  f"process {g}: every span on its rank and replica ({place.get(g)})")

        # the place not read: no mesh groups in the traces
        bare = []
        for g, doc in docs.items():
            d = json.loads(json.dumps(doc))
            d["distributedInfo"]["pg_config"] = [p for p in d["distributedInfo"]["pg_config"]
                                                 if not p["pg_desc"].startswith("mesh_")]
            path = os.path.join(tmp, f"bare{g}.json.gz")
            write_json(d, path)
            bare.append(path)
        rc, so, se, trace = imported(bare, tmp, "bare")
        check(rc == 0, f"import without mesh groups: rc {rc} {se.strip()}")
        rc, info, _ = run("info", trace)
        check("processes: 4" in info, "without mesh groups: 4 processes")
        # its stages say the pipeline rank; dp in order of global rank within it
        for g, want in {0: (0, 0), 1: (0, 1), 2: (1, 0), 3: (1, 1)}.items():
            check(re.search(rf"process {g}: pp {want[0]} dp {want[1]} tp 0 .*place not read", info)
                  is not None, f"unplaced process {g} at pp {want[0]} dp {want[1]}, said so")
        kinds, place = csv_counts(trace, tmp)
        check(all(sum(kinds[g][k] for k in DP_KINDS) == 16 for g in range(4)),
              "unplaced: 16 FSDP actions a process")

        # one process twice; two processes claiming one place
        rc, so, se, _ = imported(files + [files[0]], tmp, "twice")
        check(rc == 2 and len(se.strip().splitlines()) == 1 and "both hold process 0" in se,
              f"a process's trace twice: exit 2, one line ({rc}, {se.strip()!r})")
        d = json.loads(json.dumps(docs[1]))
        for p in d["distributedInfo"]["pg_config"]:
            if p["pg_desc"] == "mesh_dp":
                p["ranks"] = [1, 0]     # says dp 0: process 0's place
        liar = os.path.join(tmp, "liar1.json.gz")
        write_json(d, liar)
        rc, so, se, _ = imported([files[0], liar, files[2], files[3]], tmp, "claim")
        check(rc == 2 and len(se.strip().splitlines()) == 1 and "both claim the place pp 0 dp 0" in se
              and "liar1.json.gz" in se, f"two processes of one place: exit 2, one line ({rc}, {se.strip()!r})")
        # a mesh group wider than the world: no 3001 rows from a 4-process job
        d = json.loads(json.dumps(docs[0]))
        for p in d["distributedInfo"]["pg_config"]:
            if p["pg_desc"] == "mesh_pp":
                p["ranks"] = list(range(1, 3001)) + [0]
        wide = os.path.join(tmp, "wide0.json.gz")
        write_json(d, wide)
        rc, so, se, _ = imported([wide] + files[1:], tmp, "wide")
        check(rc == 2 and len(se.strip().splitlines()) == 1 and "larger than its world size 4" in se,
              f"a mesh group larger than the world: exit 2, one line ({rc}, {se.strip()!r})")
    print(f"1..{n_checks}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
