"""The product's graphed fused bf16 training step built (warm-up, cuDNN autotuning, capture) and replayed a few
times inside the NVTX range "replays", for profilers to look at the graph's own kernels only (Nsight Compute's
``--nvtx-include "replays/"`` with ``--graph-profiling node``).
Usage (CUDA machine): PYTHONPATH=src python3 benchmarks/step_replays.py [--replays 2]
"""
from __future__ import annotations

import argparse

import torch

import step_alternation  # noqa: E402 (benchmarks/ is the script's own folder)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replays", type=int, default=2)
    args = ap.parse_args()
    data, device = step_alternation.thesis_data()
    step = step_alternation.graphed_step(data, device)
    idx = step_alternation.random_batches(len(data), device, count=1)[0]
    step(idx)
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push("replays")
    for _ in range(args.replays):
        step(idx)
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
    print("replayed", args.replays, flush=True)


if __name__ == "__main__":
    main()
