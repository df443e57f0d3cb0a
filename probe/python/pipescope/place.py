"""place.py — where this process sits on its job's mesh, read from the job.

A process of a job with replicas is not its pipeline rank alone: it also
has a data-parallel replica, a tensor rank (and a context or expert rank
where the job has them).  The hook records that place once, when it opens
its rank (pipescope_rank_place), so that two processes of one pipeline
rank are two processes in the trace.

The place is read from the job, never from an order of global ranks
assumed (torchtitan lays pp outermost, Megatron tp innermost, a job may put
pp anywhere), from the first of:

  1. a DeviceMesh of the job that holds the stage's group as one of its
     dimensions: the meshes reached from the stage's modules (a DTensor
     parameter's, as TP and FSDP2 make them; DDP's device_mesh) and those
     they were cut from, else any DeviceMesh alive in the process; of
     several, the one that tells the most dimensions apart;
  2. the data-parallel group the stage's module is wrapped in (DDP's
     process_group, a one-dimensional FSDP2 mesh): dp is this process's
     index in it, and tp what sets its group apart from the other dp groups
     of its pipeline rank;
  3. the global ranks of the stage's group alone (see derived()).

The arithmetic (from_mesh, derived) is plain Python over lists, importable
and testable without PyTorch; place_of() reads PyTorch's objects.
"""

PP, DP, TP, CP, EP = range(5)   # the order of coord and size

# the names torchtitan (and PyTorch's examples) give a mesh's dimensions;
# the data-parallel ones are folded into one dp, row-major in the mesh's order
_SLOT = {
    "pp": PP,
    "dp": DP, "dp_replicate": DP, "dp_shard": DP, "fsdp": DP, "hsdp": DP, "ddp": DP, "batch": DP,
    "tp": TP,
    "cp": CP,
    "ep": EP,
}


def _stride(ranks):
    """The step of an arithmetic progression of ranks (1 for one rank),
    else None."""
    if len(ranks) < 2:
        return 1
    s = ranks[1] - ranks[0]
    if s <= 0 or any(b - a != s for a, b in zip(ranks, ranks[1:])):
        return None
    return s


def _index_among(x, stride, n):
    """x's index among the ranks that share its coordinate on a dimension
    of n places laid out every stride ranks (row-major, that dimension
    anywhere): the dimensions outside it, numbered in global order."""
    return (x // (stride * n)) * stride + x % stride


def from_mesh(ranks, shape, names, g, pp_ranks, world):
    """The place of global rank g on a mesh (ranks: its global ranks,
    nested lists of the given shape; names: its dimension names or None),
    as (coord, size) of 5 ints (pp, dp, tp, cp, ep); None when the mesh
    does not hold the whole world, g, or the pipeline's group as one of
    its dimensions (then it is not the mesh of this pipeline)."""
    shape = list(shape)
    n = 1
    for d in shape:
        n *= d
    if n != world:
        return None
    flat = _flatten(ranks, len(shape))
    if len(flat) != n or g not in flat:
        return None
    coord, rest = [], flat.index(g)
    for d in reversed(shape):
        coord.append(rest % d)
        rest //= d
    coord.reverse()
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * shape[i + 1]
    base = sum(c * s for c, s in zip(coord, strides))
    P = len(pp_ranks)
    pp_dim = None
    for d, size in enumerate(shape):
        line = [flat[base + (k - coord[d]) * strides[d]] for k in range(size)]
        if line == list(pp_ranks) and (P > 1 or (names and names[d] == "pp")):
            pp_dim = d
            break
    named_pp = [d for d, nm in enumerate(names or ()) if nm == "pp"]
    if (pp_dim is None and P > 1) or (named_pp and pp_dim not in named_pp):
        return None
    out_c, out_s = [0] * 5, [1] * 5
    out_c[PP], out_s[PP] = pp_ranks.index(g), P
    for d, size in enumerate(shape):
        if d == pp_dim:
            continue
        # a dimension of another name (or none) is folded into dp, so that
        # no two processes of the mesh can claim one place
        slot = _SLOT.get(names[d] if names else None, DP)
        out_c[slot] = out_c[slot] * size + coord[d]
        out_s[slot] *= size
    return out_c, out_s


def _flatten(ranks, depth):
    if depth == 0:
        return [int(ranks)]
    out = []
    for r in ranks:
        out.extend(_flatten(r, depth - 1))
    return out


def derived(g, pp_ranks, world, dp_ranks=None):
    """The place of global rank g from its pipeline's group (pp_ranks, in
    pipeline order) and, where the job has one, its data-parallel group
    (dp_ranks); (coord, size), or None where that cannot be said without
    asking the other processes (which the hook never does).

    This is the fallback, for a job without a mesh of its pipeline: the
    processes outside this pipeline's group that hold the same pipeline
    rank are its replicas, W / P of them with this one.  Without a dp
    group they are all data-parallel replicas (dp = this process's index
    among them, tp = 0; dp size W / P, tp size 1: D x T = W / P cannot be
    split without more evidence); that index needs the pipelines laid out
    regularly (pp every s ranks, s x P dividing W), or there is no place.
    With a dp group, dp is the index in it and its size D, and tp numbers
    the dp groups of one pipeline rank (T = W / (P x D)); a dp group that
    holds every replica (D = W / P) says the place in any layout."""
    P = len(pp_ranks)
    if P == 0 or g not in pp_ranks or world % P:
        return None
    s = _stride(pp_ranks)
    # the group's first rank holds pipeline rank 0: in a regular layout it
    # lies within the first stride of its block of stride x P ranks
    if (s is None or world % (s * P) or pp_ranks[-1] >= world or pp_ranks[0] % (s * P) >= s):
        if dp_ranks is not None and g in dp_ranks and len(dp_ranks) == world // P:
            coord, size = [0] * 5, [1] * 5
            coord[PP], size[PP] = pp_ranks.index(g), P
            coord[DP], size[DP] = dp_ranks.index(g), len(dp_ranks)
            return coord, size
        return None
    p = pp_ranks.index(g)
    R = world // P
    coord, size = [0] * 5, [1] * 5
    coord[PP], size[PP] = p, P
    coord[DP], size[DP] = _index_among(g, s, P), R
    if dp_ranks is None or len(dp_ranks) <= 1:
        return coord, size
    D = len(dp_ranks)
    if g not in dp_ranks or R % D or any(x >= world or (x // s) % P != p for x in dp_ranks):
        return coord, size   # a dp group of another shape: the fallback above
    rs = sorted(_index_among(x, s, P) for x in dp_ranks)
    sd = _stride(rs)
    if sd is None:
        return coord, size
    T = R // D
    tp = _index_among(rs[0], sd, D)
    if tp >= T:
        return coord, size
    coord[DP], size[DP] = dp_ranks.index(g), D
    coord[TP], size[TP] = tp, T
    return coord, size


# ---- PyTorch's objects ---------------------------------------------------------

def _with_root(mesh):
    """The mesh and the one it was cut from: a slice's root holds every
    dimension (mesh["pp"] of ("pp", "dp")); an unflattened mesh's root is
    the 1-D world mesh it was made of (torchtitan's), so the mesh itself
    is the one to read."""
    get = getattr(mesh, "_get_root_mesh", None)
    try:
        root = get() if get is not None else mesh
    except Exception:
        root = mesh
    return (mesh,) if root is mesh else (root, mesh)


def _reached(modules):
    """The meshes reached from the stage's modules (DTensor parameters:
    TP's, FSDP2's; DDP's device_mesh) with their roots, and the
    data-parallel group the modules are wrapped in (DDP's process_group,
    else a one-dimensional data-parallel parameter mesh's: FSDP2's)."""
    meshes, dp_group, flat = {}, None, None
    try:
        from torch.nn.parallel import DistributedDataParallel as DDP
    except Exception:
        DDP = ()
    for mod in modules:
        for m in mod.modules():
            if isinstance(m, DDP):
                if dp_group is None:
                    dp_group = getattr(m, "process_group", None)
                if getattr(m, "device_mesh", None) is not None:
                    meshes.update((id(x), x) for x in _with_root(m.device_mesh))
        for p in mod.parameters():
            dm = getattr(p, "device_mesh", None)
            if dm is None:
                continue
            meshes.update((id(x), x) for x in _with_root(dm))
            names = dm.mesh_dim_names
            if flat is None and dm.ndim == 1 and (names is None or _SLOT.get(names[0]) == DP):
                flat = dm
    if dp_group is None and flat is not None:
        dp_group = flat.get_group()
    return list(meshes.values()), dp_group


def _alive_meshes(seen):
    """Every DeviceMesh alive in the process not in seen (a job that keeps
    its mesh but wraps its stages in DDP by process group only): one walk
    over the collector's objects, once."""
    import gc
    try:
        from torch.distributed.device_mesh import DeviceMesh
    except Exception:
        return []
    # by type, not isinstance: some of torch's objects answer isinstance
    # through a metaclass that warns (a deprecated name), into the job
    is_mesh, out = {}, []
    for o in gc.get_objects():
        t = type(o)
        k = is_mesh.get(t)
        if k is None:
            k = is_mesh[t] = DeviceMesh in t.__mro__
        if k and id(o) not in seen:
            seen.add(id(o))
            out.append(o)
    return out


def _best(meshes, g, pp_ranks, world):
    """The place read from the mesh that holds the pipeline and tells the
    most of dp, tp, cp and ep apart (a job may keep several meshes of one
    world: torchtitan's dense ("pp", "dp_replicate", "fsdp", "tp") beside
    ("pp", "batch", "cp", "tp")); None when none holds the pipeline."""
    best, score = None, -1
    for m in meshes:
        try:
            t = m.mesh
            got = from_mesh(t.tolist(), tuple(t.shape), m.mesh_dim_names, g, pp_ranks, world)
        except Exception:
            continue   # a mesh that will not say (a slice without this process): not this one
        if got is not None and sum(n > 1 for n in got[1][1:]) > score:
            best, score = got, sum(n > 1 for n in got[1][1:])
    return best


class NoPlace(Exception):
    """The job's groups do not say this process's place (the message says why)."""


class Unread(list):
    """The coord of a process whose place the job's groups do not say
    (pipeline rank, then 0s), with why: the hook records it as its global
    rank alone, flagged "place not read" (lib.Rank.place), never at a place
    guessed.  A list, so that it travels where a coord does."""

    def __init__(self, coord, why):
        super().__init__(coord)
        self.why = why


def unread(g, pp_ranks, world, why):
    """(coord, size) of a process whose place cannot be read: its pipeline
    rank, dp 0 of the W / P replicas the world implies (the merge numbers
    them in order of global rank), coord an Unread that says why."""
    P = len(pp_ranks)
    size = [P, max(1, world // P), 1, 1, 1]
    return Unread([pp_ranks.index(g), 0, 0, 0, 0], why), size


def place_of(dist, group, modules):
    """(coord, size) of this process (5 ints each: pp, dp, tp, cp, ep),
    its pipeline's group given (None: the world) and the stage's modules;
    None when dist is not initialized (one process: nothing to place).
    Where the groups are laid out so that no place can be read, coord is an
    Unread (see unread()): the process is recorded by its global rank,
    "place not read".  Raises NoPlace when the stage's group does not hold
    the process, anything else on a failure to read: then the hook records
    no place."""
    if not dist.is_initialized():
        return None
    g, world = dist.get_rank(), dist.get_world_size()
    pp_ranks = list(range(world)) if group is None else list(dist.get_process_group_ranks(group))
    if g not in pp_ranks:
        raise NoPlace("the stage's group does not hold this process")
    meshes, dp_group = _reached(modules)
    got = _best(meshes, g, pp_ranks, world)
    if got is None and world > len(pp_ranks):
        # replicas, and no mesh of the pipeline reached from the stage:
        # the job's own, if it keeps one (DDP given a process group only)
        got = _best(_alive_meshes({id(m) for m in meshes}), g, pp_ranks, world)
    if got is not None:
        return got
    dp_ranks = list(dist.get_process_group_ranks(dp_group)) if dp_group is not None else None
    got = derived(g, pp_ranks, world, dp_ranks)
    if got is None:
        # still a process of its pipeline rank: recorded by its global
        # rank, its place said to be not read (never a place guessed)
        return unread(g, pp_ranks, world, "the pipeline's process groups are not laid out regularly")
    return got
