#!/usr/bin/env python3
"""bench-megatron.py CLI — what recording costs a megatron-core job (issue 28).

The 2-process CPU gloo job of tests/pytorch/megatron-train.py (1F1B, pp 2,
M 8, 8 layers of width 256, sequence 64, micro-batch 2) under
`pipescope-cli profile`, in paired steps (paired_steps.py).  Target: < 1.01.
Needs PIPESCOPE_TORCH_PYTHON with megatron-core; else exits 77.
"""

import os
import subprocess
import sys

import paired_steps

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    cli = sys.argv[1]
    py = os.environ.get("PIPESCOPE_TORCH_PYTHON")
    if not py or subprocess.run([py, "-c", "import megatron.core"], capture_output=True).returncode:
        print("bench-megatron: skipped: PIPESCOPE_TORCH_PYTHON with megatron-core is not set (./dev.sh test)")
        return 77
    return paired_steps.measure(
        "bench-megatron", cli, py, os.path.join(HERE, "..", "pytorch", "megatron-train.py"),
        ["--pp", "2", "--microbatches", "8", "--layers", "8", "--hidden", "256", "--seq", "64"],
        "2 processes, 1F1B pp 2 M 8", int(os.environ.get("BENCH_MEGATRON_ROUNDS", "3")))


if __name__ == "__main__":
    sys.exit(main())
