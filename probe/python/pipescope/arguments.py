"""arguments.py — what a wrapper of the hook reads from a call, found once.

A wrapper takes (*args, **kwargs) and hands them to the wrapped function
untouched, as wrapt's do: however a caller may call the function —
positionally, by keyword, with defaults left out, with keywords a later
version adds — it may call the wrapper.  What the wrapper records (a stage,
a micro-batch) it reads from the same arguments, where the wrapped
function's signature says a call puts them.  The signature is read once,
when the wrapper is made; a read per call is a tuple index or a dict
lookup.  A value the call does not give, and the function has no default
for, reads as MISSING: the wrapper then records less, never fails the call.
"""

import inspect


class _Missing:
    def __repr__(self):
        return "MISSING"

    def __bool__(self):
        return False


MISSING = _Missing()


class Param:
    """Where a call of fn puts the parameter called name: its position
    among the positional arguments (self counted; None when it cannot be
    passed by position), its keyword (None when it cannot be passed by
    keyword) and its default (MISSING: none).

    pos and default are PyTorch's own layout, kept where fn's signature
    cannot say more: fn has none that inspect can read, or fn is a
    pass-through of (*args, **kwargs) that does not name it (someone's
    wrapper without functools.wraps).  A signature that can say, and has no
    such parameter, leaves nothing to read: every call reads MISSING."""

    __slots__ = ("name", "pos", "default")

    def __init__(self, fn, name, pos=None, default=MISSING):
        self.name, self.pos, self.default = name, pos, default
        try:
            sig = inspect.signature(fn)
        except Exception:
            # not only TypeError and ValueError: a signature may evaluate
            # annotations or run a __signature__ of someone's
            return
        params = list(sig.parameters.values())
        p = sig.parameters.get(name)
        if p is None or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            # not named: a pass-through may still be given it, where
            # PyTorch's layout puts it; anything else never is
            if not any(q.kind == q.VAR_POSITIONAL for q in params):
                self.pos = None
            if not any(q.kind == q.VAR_KEYWORD for q in params):
                self.name = None
            if self.pos is None and self.name is None:
                self.default = MISSING
            return
        positional = p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        self.pos = params.index(p) if positional else None
        self.name = None if p.kind == p.POSITIONAL_ONLY else name
        self.default = MISSING if p.default is p.empty else p.default

    def of(self, args, kwargs):
        """The value a call (args, kwargs) gives it, else its default, else
        MISSING.  By position first: a valid call gives a parameter one way."""
        pos = self.pos
        if pos is not None and pos < len(args):
            return args[pos]
        if kwargs and self.name is not None:
            return kwargs.get(self.name, self.default)
        return self.default

    def spec(self):
        """As the compiled wrappers take it (pipescope-fast.c): (position or
        -1, keyword or None), and the default where there is one."""
        head = (-1 if self.pos is None else self.pos, self.name)
        return head if self.default is MISSING else head + (self.default,)

    def __repr__(self):
        return f"Param({self.name!r}, pos={self.pos!r}, default={self.default!r})"
