"""sitecustomize.py — how `pipescope-cli profile` reaches into every Python
process of a job without a change to its code: profile puts this folder
first on PYTHONPATH, and Python imports sitecustomize at start-up.

It runs the sitecustomize this one shadows (if any), then waits, costing
nothing, until the process imports torch.distributed.pipelining; only then
does it load pipescope.torch and instrument it.  A process that never
pipelines (torchrun's launcher, a data loader worker, a tool) is left alone.
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


class _Finder(importlib.abc.MetaPathFinder):
    TARGET = "torch.distributed.pipelining"

    def find_spec(self, name, path, target=None):
        if name != self.TARGET:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        real = spec.loader

        class _Loader(importlib.abc.Loader):
            def create_module(self, s):
                return real.create_module(s)

            def exec_module(self, module):
                real.exec_module(module)
                try:
                    import pipescope.torch
                    pipescope.torch.instrument()
                except Exception as e:  # never into the job
                    sys.stderr.write(f"pipescope: not recording ({e})\n")

        spec.loader = _Loader()
        return spec


def _install():
    pkg = os.environ.get("PIPESCOPE_PYTHON")
    if pkg and pkg not in sys.path:
        sys.path.append(pkg)
    if "torch.distributed.pipelining" in sys.modules:
        import pipescope.torch
        pipescope.torch.instrument()
    else:
        sys.meta_path.insert(0, _Finder())


try:
    _chain()
except Exception as e:
    sys.stderr.write(f"pipescope: the site's own sitecustomize failed: {e}\n")
try:
    if os.environ.get("PIPESCOPE_JOB") is not None:
        _install()
except Exception as e:
    sys.stderr.write(f"pipescope: not recording ({e})\n")
