"""One ConvLSTM level and its temporal attention in bf16 inference: one kernel against two, in one process.

For levels 1 and 2 of the default model ((32 channels, 30 x 30), (64, 15 x 15)), channels-last, no autograd:

* one kernel   ``ops.lstm_attention.resident_attention``: the resident ConvLSTM kernel finishing each window's
               attention on the SM (the default where it runs);
* two kernels  MSCRED_RESIDENT_ATTENTION=0: the resident kernel writes every h_t, the Triton attention reads them;
* per step     MSCRED_RESIDENT_LSTM=0: cuDNN recurrent convolution + the Triton cell kernel per step, then the
               attention kernel (the yardstick of the errors, and timed with --timed);

at the scoring batch (all 3,591 windows of the thesis workload as one sliding view of 3,595 steps, as
``MSCREDNet.forward_windows`` passes them), at 1,024 sliding windows and at 128 independent windows. Errors: at
batch 128 against the float64 reference, elsewhere against the per-step output. Timing: ``triton.testing.do_bench``
(L2 cleared before each call), median ms.

Usage (CUDA machine): PYTHONPATH=src python3 benchmarks/bench_lstm_attention.py [--out DIR] [--timed PATHS]
Writes DIR/lstm_attention.md and DIR/lstm_attention.json.
"""
from __future__ import annotations

import os

import torch

from bench_resident_lstm import run_paths, timed_paths_main

PATHS = [("one kernel", {"MSCRED_RESIDENT_LSTM": "1", "MSCRED_RESIDENT_ATTENTION": "1"}),
         ("two kernels", {"MSCRED_RESIDENT_LSTM": "1", "MSCRED_RESIDENT_ATTENTION": "0"}),
         ("per step", {"MSCRED_RESIDENT_LSTM": "0", "MSCRED_RESIDENT_ATTENTION": "0", "MSCRED_WINDOW_LSTM": "0"})]


def run(timed: list[str]) -> list[dict]:
    """The level with its attention on each path (``bench_resident_lstm.run_paths``)."""
    from mscred.ops import reference
    from mscred.ops.lstm_attention import resident_attention
    from mscred.ops.triton import attention
    from mscred.ops.triton import convlstm as fused

    def make_call(x, w, b):
        def call():
            with torch.no_grad():
                one = resident_attention(x, w, b, 1.0)
                if os.environ["MSCRED_RESIDENT_ATTENTION"] == "1":  # so that a decline is not timed as one kernel
                    assert one is not None, "the one-kernel path declined this level"
                return one if one is not None else attention.temporal_attention(fused.convlstm(x, w, b, 1.0))
        return call

    def float64(x, w, b):
        return reference.temporal_attention(reference.convlstm(x, w, b, 1.0))

    return run_paths(PATHS, timed, make_call, float64)


def to_markdown(rows: list[dict], meta: str) -> str:
    labels = [label for label, _ in PATHS]
    lines = ["# One ConvLSTM level + its temporal attention in bf16 inference: one kernel against two", "", meta,
             "", "ms per call (median, the shared input convolution included); errors: batch 128 against float64, "
             "the sliding workloads against the per-step output.", "",
             "| workload | level (Ch, n) | " + " | ".join(f"{k} ms" for k in labels)
             + " | two / one | per step / one | " + " | ".join(f"err {k}" for k in labels) + " |",
             "| --- | --- | " + "--- | " * (2 * len(labels) + 2)]
    for r in rows:
        ms, err = r["ms"], r["err"]
        cells = [format(ms[k], ".4f") if k in ms else "-" for k in labels]
        ratios = [f"{ms[k] / ms['one kernel']:.2f}x" if k in ms and "one kernel" in ms else "-"
                  for k in ("two kernels", "per step")]
        errs = [format(err[k], ".1e") if k in err else "-" for k in labels]
        lines.append(f"| {r['workload']} | ({r['ch']}, {r['n']}) | " + " | ".join(cells + ratios + errs) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    timed_paths_main(__doc__, "bench_lstm_attention.py", "lstm_attention", "one kernel,two kernels,per step", run,
                     to_markdown)


if __name__ == "__main__":
    main()
