#!/usr/bin/env python3
"""test-place.py — the hook's reading of a process's place on its job's
mesh (probe/python/pipescope/place.py), over many layouts, without
PyTorch (the arithmetic is plain Python; test-torch-mesh.py runs it inside
real jobs).

For every layout (dimension names and sizes in the mesh's order, pp
anywhere in it) and every process of it, the place read from the mesh is
the process's coordinates by dimension name, and no two processes share a
place; read from the groups alone (the pipeline's, and the data-parallel
one where the job has one), it is the same place where the mesh has only
pp, dp and tp, and still distinct without a dp group.  Irregular groups and
meshes that are not the pipeline's are refused (None), never misread.
"""

import itertools
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "probe", "python"))
from pipescope import place  # noqa: E402

checks = 0
failures = []


def check(cond, what):
    global checks
    checks += 1
    if not cond:
        failures.append(what)


def mesh_of(sizes):
    """Global ranks of a row-major mesh of these sizes, as nested lists."""
    def build(dims, base):
        if not dims:
            return base
        stride = 1
        for d in dims[1:]:
            stride *= d
        return [build(dims[1:], base + i * stride) for i in range(dims[0])]
    return build(list(sizes), 0)


def coords_of(sizes):
    """Global rank -> coordinates, row-major."""
    return {g: c for g, c in enumerate(itertools.product(*[range(s) for s in sizes]))}


def line(sizes, coord, dim):
    """The global ranks along dim through coord, in order."""
    strides = [1] * len(sizes)
    for i in range(len(sizes) - 2, -1, -1):
        strides[i] = strides[i + 1] * sizes[i + 1]
    base = sum(c * s for c, s in zip(coord, strides)) - coord[dim] * strides[dim]
    return [base + k * strides[dim] for k in range(sizes[dim])]


def expected(names, sizes, coord):
    """The place by dimension name: dp folds the data-parallel names (and
    any other) row-major in the mesh's order."""
    c, s = [0] * 5, [1] * 5
    for nm, size, x in zip(names, sizes, coord):
        slot = {"pp": 0, "tp": 2, "cp": 3, "ep": 4}.get(nm, 1)
        c[slot] = c[slot] * size + x
        s[slot] *= size
    return c, s


LAYOUTS = [
    (("pp", "dp"), (2, 2)),                 # torchtitan: pp outermost
    (("dp", "pp"), (2, 2)),                 # pp innermost: pipeline rank = global % P
    (("pp", "tp"), (2, 2)),
    (("pp", "dp", "tp"), (2, 2, 2)),        # Megatron: tp innermost, pp outermost
    (("dp", "pp", "tp"), (3, 2, 2)),        # pp in the middle
    (("tp", "pp", "dp"), (2, 4, 3)),
    (("pp", "dp_replicate", "dp_shard", "cp", "tp"), (2, 2, 2, 2, 2)),   # torchtitan's names
    (("pp", "ep", "dp"), (2, 2, 3)),
    (("pp", "batch"), (4, 3)),              # a name the hook does not know: folded into dp
    (("pp",), (4,)),                        # one pipeline
    (("pp", "fsdp"), (16, 8)),
]

for names, sizes in LAYOUTS:
    world = 1
    for s in sizes:
        world *= s
    ranks = mesh_of(sizes)
    coords = coords_of(sizes)
    ppd = names.index("pp")
    seen_mesh, seen_derived, seen_dp = {}, {}, {}
    for g, coord in coords.items():
        pp_ranks = line(sizes, coord, ppd)
        want = expected(names, sizes, coord)
        got = place.from_mesh(ranks, sizes, names, g, pp_ranks, world)
        check(got == (list(want[0]), list(want[1])), f"{names}{sizes} g {g}: mesh read {got}, want {want}")
        seen_mesh[tuple(want[0])] = g
        # the groups alone
        d = place.derived(g, pp_ranks, world)
        check(d is not None and d[0][0] == coord[ppd] and d[1][1] == world // sizes[ppd],
              f"{names}{sizes} g {g}: derived without dp group {d}")
        if d is not None:
            seen_derived[tuple(d[0])] = g
        dps = [i for i, nm in enumerate(names) if nm not in ("pp", "tp")]
        if len(dps) == 1 and set(names) <= {"pp", "dp", "tp"}:
            dp_ranks = line(sizes, coord, dps[0])
            d = place.derived(g, pp_ranks, world, dp_ranks)
            check(d == (list(want[0]), list(want[1])),
                  f"{names}{sizes} g {g}: derived with dp group {dp_ranks}: {d}, want {want}")
            if d is not None:
                seen_dp[tuple(d[0])] = g
    check(len(seen_mesh) == world, f"{names}{sizes}: {len(seen_mesh)} distinct places on the mesh of {world}")
    check(len(seen_derived) == world, f"{names}{sizes}: {len(seen_derived)} distinct derived places of {world}")
    if seen_dp:
        check(len(seen_dp) == world, f"{names}{sizes}: {len(seen_dp)} distinct places with dp groups")

# a mesh that is not the pipeline's: refused
ranks = mesh_of((2, 2))
check(place.from_mesh(ranks, (2, 2), ("dp", "tp"), 0, [0, 3], 4) is None, "a mesh without the pp line")
check(place.from_mesh(ranks, (2, 2), ("pp", "dp"), 0, [0, 1], 4) is None, "a named pp that is not the group")
check(place.from_mesh(ranks, (2, 2), ("pp", "dp"), 0, [0, 2], 8) is None, "a mesh smaller than the world")
check(place.from_mesh(ranks, (2, 2), ("pp", "dp"), 5, [5, 7], 4) is None, "a rank outside the mesh")
# an unnamed mesh: its pp found by the group, the rest folded into dp
check(place.from_mesh(ranks, (2, 2), None, 3, [1, 3], 4) == ([1, 1, 0, 0, 0], [2, 2, 1, 1, 1]),
      "an unnamed mesh")
# groups not laid out regularly: nothing said
check(place.derived(0, [0, 3], 4) is None, "a pp group with no stride")
check(place.derived(1, [1, 5, 6], 8) is None, "a pp group of uneven steps")
check(place.derived(2, [1, 2], 6) is None, "a pp group not at the start of its block")
check(place.derived(2, [2, 3], 6) is not None, "[2, 3] of 6: a pipeline of a regular layout")
check(place.derived(0, [0, 1, 2], 4) is None, "a world that is no multiple of P")
check(place.derived(4, [0, 4], 4) is None, "a rank past the world")
# irregular pipelines, and a dp group of every replica: the place is its index
check(place.derived(3, [0, 3], 4, [2, 3]) == ([1, 1, 0, 0, 0], [2, 2, 1, 1, 1]), "[0, 3] with dp group [2, 3]")
check(place.derived(2, [1, 2], 4, [2, 3]) == ([1, 0, 0, 0, 0], [2, 2, 1, 1, 1]), "[1, 2] with dp group [2, 3]")
check(place.derived(0, [0, 3], 8, [0, 1]) is None, "irregular, a dp group of half the replicas")
# a dp group of another shape: the fallback (dp among the replicas, tp 0)
check(place.derived(1, [1, 3], 4, [1, 2]) == ([0, 1, 0, 0, 0], [2, 2, 1, 1, 1]),
      "a dp group across pipeline ranks")
# one process
check(place.derived(0, [0], 1) == ([0, 0, 0, 0, 0], [1, 1, 1, 1, 1]), "one process")



# meshes as PyTorch keeps them (fakes of DeviceMesh's few attributes read):
# torchtitan unflattens one world mesh into several meshes of the same
# world; the one that tells the most apart is read
class FakeTensor:
    def __init__(self, sizes):
        self.sizes = sizes

    def tolist(self):
        return mesh_of(self.sizes)

    @property
    def shape(self):
        return tuple(self.sizes)


class FakeMesh:
    def __init__(self, names, sizes, root=None):
        self.mesh_dim_names, self.mesh, self.root = names, FakeTensor(sizes), root

    def _get_root_mesh(self):
        return self.root or self


world_mesh = FakeMesh(("world",), (16,))
dense = FakeMesh(("pp", "dp_replicate", "fsdp", "tp"), (2, 2, 2, 2), world_mesh)   # fsdp = dp_shard x cp
batch = FakeMesh(("pp", "batch", "cp", "tp"), (2, 2, 2, 2), world_mesh)
check(place._with_root(dense) == (world_mesh, dense), "an unflattened mesh and its 1-D root")
g = 13   # pp 1, batch 1, cp 0, tp 1
pp13 = line((2, 2, 2, 2), coords_of((2, 2, 2, 2))[g], 0)
check(place._best([world_mesh, dense, batch], g, pp13, 16) == ([1, 1, 1, 0, 0], [2, 2, 2, 2, 1]),
      "of several meshes, the one with cp apart")
check(place._best([world_mesh], g, pp13, 16) is None, "the 1-D world mesh holds no pipeline")
check(place._best([dense], g, pp13, 16) == ([1, 2, 1, 0, 0], [2, 4, 2, 1, 1]), "the dense mesh alone")


class Refusing(FakeMesh):
    @property
    def mesh(self):
        raise RuntimeError("this rank is not in the mesh")

    @mesh.setter
    def mesh(self, value):
        pass


check(place._best([Refusing(("pp",), (2,)), dense], g, pp13, 16) == ([1, 2, 1, 0, 0], [2, 4, 2, 1, 1]),
      "a mesh that raises is passed over")

print("1..1")
if failures:
    print("not ok 1 - " + f"{len(failures)} of {checks} checks failed:\n# " + "\n# ".join(failures[:20]))
    sys.exit(1)
print(f"ok 1 - place: {len(LAYOUTS)} layouts, every process placed by name, distinct, "
      f"the same from the groups; {checks} checks")
