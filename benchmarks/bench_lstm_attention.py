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

import argparse
import os

import torch

import sweep_report
from bench_resident_lstm import WORKLOADS
from bench_window_lstm import LEVELS, T, bench, level_inputs, rel

PATHS = [("one kernel", {"MSCRED_RESIDENT_LSTM": "1", "MSCRED_RESIDENT_ATTENTION": "1"}),
         ("two kernels", {"MSCRED_RESIDENT_LSTM": "1", "MSCRED_RESIDENT_ATTENTION": "0"}),
         ("per step", {"MSCRED_RESIDENT_LSTM": "0", "MSCRED_RESIDENT_ATTENTION": "0", "MSCRED_WINDOW_LSTM": "0"})]


def run(timed: list[str]) -> list[dict]:
    from mscred.ops import reference
    from mscred.ops.lstm_attention import resident_attention
    from mscred.ops.triton import attention
    from mscred.ops.triton import convlstm as fused
    os.environ["MSCRED_FUSED_LAYOUT"] = "nhwc"
    rows = []
    for name, batch, sliding in WORKLOADS:
        for ch, n in LEVELS:
            x, w, b = level_inputs(ch, n, batch, sliding)

            def call():
                with torch.no_grad():
                    one = resident_attention(x, w, b, 1.0)
                    if os.environ["MSCRED_RESIDENT_ATTENTION"] == "1":  # so that a decline is not timed as one kernel
                        assert one is not None, "the one-kernel path declined this level"
                    return one if one is not None else attention.temporal_attention(fused.convlstm(x, w, b, 1.0))

            outputs, times = {}, {}
            for label, env in PATHS:
                if label in timed or label == "per step":
                    os.environ.update(env)
                    outputs[label] = call()
                    if label in timed:
                        times[label] = bench(call)
            oracle = outputs["per step"]
            if not sliding:
                x64, w64, b64 = x.double().contiguous(), w.double(), b.double()
                oracle = reference.temporal_attention(reference.convlstm(x64, w64, b64, 1.0))
            row = dict(workload=name, batch=batch, ch=ch, n=n, steps=T,
                       ms={k: round(v, 4) for k, v in times.items()},
                       err={k: rel(v, oracle) for k, v in outputs.items()})
            rows.append(row)
            print(row, flush=True)
    for var in ("MSCRED_RESIDENT_LSTM", "MSCRED_RESIDENT_ATTENTION", "MSCRED_WINDOW_LSTM"):
        os.environ.pop(var, None)
    return rows


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
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/lstm_attention")
    ap.add_argument("--timed", default="one kernel,two kernels,per step",
                    help="the paths to time, comma-separated (default all three)")
    args = ap.parse_args()
    rows = run(args.timed.split(","))
    flags = os.environ.get("MSCRED_RESIDENT_LSTM_FLAGS", "")  # an A/B build of the resident kernel
    meta = (f"{sweep_report.machine_line()}. "
            f"Command: `{'MSCRED_RESIDENT_LSTM_FLAGS=' + repr(flags) + ' ' if flags else ''}PYTHONPATH=src python3 "
            f"benchmarks/bench_lstm_attention.py --timed '{args.timed}'`.")
    sweep_report.write(args.out, "lstm_attention", meta, rows, [to_markdown(rows, meta).rstrip("\n")])


if __name__ == "__main__":
    main()
