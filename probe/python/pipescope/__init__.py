"""pipescope: the probe of pipescope, the pipeline-parallelism profiler, for
Python jobs.

    pipescope-cli profile -- torchrun --nproc-per-node 2 train.py

loads it into every Python process of the job with nothing changed in the
job's code; in a script, ``import pipescope.torch; pipescope.torch.instrument()``
does the same.  Recording goes through libpipescope-probe.so (probe/pipescope.h),
the C code pipescope's own runtime records with; nothing here writes a byte of
the trace format.
"""

__all__ = ["lib"]
