#!/usr/bin/env python3
"""bench-deepspeed.py CLI — what recording costs a DeepSpeed pipe engine job
(issue 39).

The 2-process CPU gloo job of tests/pytorch/deepspeed-train.py
(PipelineEngine, TrainSchedule, pp 2, M 8, 8 layers of width 512,
micro-batch 16) under `pipescope-cli profile`, in paired steps
(paired_steps.py).  Target: < 1.01.  Needs PIPESCOPE_TORCH_PYTHON with
DeepSpeed; else exits 77.
"""

import os
import subprocess
import sys

import paired_steps

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    cli = sys.argv[1]
    py = os.environ.get("PIPESCOPE_TORCH_PYTHON")
    env = dict(os.environ, DS_ACCELERATOR="cpu")
    if not py or subprocess.run([py, "-c", "import deepspeed.runtime.pipe.engine"], env=env,
                                capture_output=True).returncode:
        print("bench-deepspeed: skipped: PIPESCOPE_TORCH_PYTHON with DeepSpeed is not set (./dev.sh test)")
        return 77
    return paired_steps.measure(
        "bench-deepspeed", cli, py, os.path.join(HERE, "..", "pytorch", "deepspeed-train.py"),
        ["--pp", "2", "--microbatches", "8", "--layers", "8", "--hidden", "512", "--batch", "16"],
        "2 processes, DeepSpeed TrainSchedule pp 2 M 8", int(os.environ.get("BENCH_DEEPSPEED_ROUNDS", "3")),
        env_extra={"DS_ACCELERATOR": "cpu"})


if __name__ == "__main__":
    sys.exit(main())
