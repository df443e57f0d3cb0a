"""sitecustomize.py — how `pipescope-cli profile` reaches into every Python
process of a job without a change to its code: profile puts this folder
first on PYTHONPATH, and Python imports sitecustomize at start-up.

It runs the sitecustomize this one shadows (if any), then waits, costing
nothing, until the process imports a framework's pipeline schedules
(torch.distributed.pipelining; megatron-core's
megatron.core.pipeline_parallel.schedules; DeepSpeed's
deepspeed.runtime.pipe.engine); only then does it load that framework's
adapter (pipescope.torch, pipescope.megatron, pipescope.deepspeed) and
instrument it.
A process that never pipelines (torchrun's launcher, a data loader worker, a
tool) is left alone.
"""

import importlib.abc
import importlib.util
import os
import sys


def _chain():
    """Runs the next sitecustomize on the path, the one ours shadows."""
    here = os.path.dirname(os.path.abspath(__file__))
    for d in sys.path:
        try:
            if not d or os.path.abspath(d) == here:
                continue
        except Exception:
            continue
        p = os.path.join(d, "sitecustomize.py")
        if os.path.isfile(p):
            spec = importlib.util.spec_from_file_location("_pipescope_chained_sitecustomize", p)
            if spec and spec.loader:
                mod = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(mod)
            return


# the module whose import engages an adapter -> the adapter
_ADAPTERS = {
    "torch.distributed.pipelining": "pipescope.torch",
    "megatron.core.pipeline_parallel.schedules": "pipescope.megatron",
    "deepspeed.runtime.pipe.engine": "pipescope.deepspeed",
}


def _engage(adapter):
    try:
        import importlib
        importlib.import_module(adapter).instrument()
    except Exception as e:  # never into the job
        sys.stderr.write(f"pipescope: not recording ({e})\n")


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, targets):
        self.targets = dict(targets)

    def find_spec(self, name, path, target=None):
        adapter = self.targets.pop(name, None)
        if adapter is None:
            return None
        if not self.targets:
            sys.meta_path.remove(self)
        # the real spec, found by the finders after this one
        spec = None
        for f in sys.meta_path:
            if f is self or not hasattr(f, "find_spec"):
                continue
            spec = f.find_spec(name, path, target)
            if spec is not None:
                break
        if spec is None or spec.loader is None:
            return spec
        real = spec.loader

        class _Loader(importlib.abc.Loader):
            def create_module(self, s):
                return real.create_module(s)

            def exec_module(self, module):
                real.exec_module(module)
                _engage(adapter)

        spec.loader = _Loader()
        return spec


def _install():
    pkg = os.environ.get("PIPESCOPE_PYTHON")
    if pkg and pkg not in sys.path:
        sys.path.append(pkg)
    waiting = {}
    for target, adapter in _ADAPTERS.items():
        if target in sys.modules:
            _engage(adapter)
        else:
            waiting[target] = adapter
    if waiting:
        sys.meta_path.insert(0, _Finder(waiting))


try:
    _chain()
except Exception as e:
    sys.stderr.write(f"pipescope: the site's own sitecustomize failed: {e}\n")
try:
    if os.environ.get("PIPESCOPE_JOB") is not None:
        _install()
except Exception as e:
    sys.stderr.write(f"pipescope: not recording ({e})\n")
