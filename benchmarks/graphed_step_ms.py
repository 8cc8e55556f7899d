"""One graphed fused bf16 training step's time, for A/B runs of two source trees in processes of their own.

Builds the thesis workload's step as the product does (GraphedStep: warm-up, cuDNN autotuning, capture), times it as
``step_alternation.step_ms`` does (median of 5 runs of 40 steps), prints one JSON line: {"label", "ms", "loss"}.
Which tree it runs is PYTHONPATH's (and its CUDA extensions TORCH_EXTENSIONS_DIR's): e.g. benchmarks/gpu_tree_ab.sh
alternates the working tree with the commit before a change. Usage (CUDA machine):
PYTHONPATH=src python3 benchmarks/graphed_step_ms.py --label new
"""
from __future__ import annotations

import argparse
import json

import step_alternation  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    data, device = step_alternation.thesis_data()
    step = step_alternation.graphed_step(data, device)
    ms, loss = step_alternation.step_ms(step, step_alternation.random_batches(len(data), device))
    print(json.dumps({"label": args.label, "ms": round(ms, 4), "loss": loss}))


if __name__ == "__main__":
    main()
