"""One ConvLSTM level in bf16 inference: the window-resident CUDA kernel against the Triton paths, in one process.

For levels 1 and 2 of the default model ((32 channels, 30 x 30), (64, 15 x 15)), channels-last, no autograd, the
fused op ``ops/triton/convlstm.py`` three ways, switched by environment in the same process:

* resident  ``ops/resident_lstm`` (the default where it runs);
* window    MSCRED_RESIDENT_LSTM=0 MSCRED_WINDOW_LSTM=all: the Triton per-window kernel with the product's tiles;
* per step  MSCRED_RESIDENT_LSTM=0 MSCRED_WINDOW_LSTM=0: cuDNN recurrent convolution + the Triton cell kernel;

at the scoring batch (all 3,591 windows of the thesis workload as one sliding view of 3,595 steps, as
``MSCREDNet.forward_windows`` passes them), at 1,024 sliding windows and at 128 independent windows. Every output
is checked against the float64 reference at batch 128 and against the per-step output elsewhere. Timing:
``triton.testing.do_bench`` (L2 cleared before each call), median ms.

Usage (CUDA machine): PYTHONPATH=src python3 benchmarks/bench_resident_lstm.py [--out DIR]
Writes DIR/resident_lstm.md and DIR/resident_lstm.json.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib

import torch

from bench_window_lstm import LEVELS, T, bench, level_inputs, rel

WORKLOADS = [("scoring", 3591, True), ("1,024 windows", 1024, True), ("batch 128", 128, False)]
PATHS = [("resident", {"MSCRED_RESIDENT_LSTM": "1", "MSCRED_WINDOW_LSTM": "1"}),
         ("window", {"MSCRED_RESIDENT_LSTM": "0", "MSCRED_WINDOW_LSTM": "all"}),
         ("per step", {"MSCRED_RESIDENT_LSTM": "0", "MSCRED_WINDOW_LSTM": "0"})]


def run() -> list[dict]:
    from mscred.ops import reference
    from mscred.ops.triton import convlstm as fused
    os.environ["MSCRED_FUSED_LAYOUT"] = "nhwc"
    rows = []
    for name, batch, sliding in WORKLOADS:
        for ch, n in LEVELS:
            x, w, b = level_inputs(ch, n, batch, sliding)

            def call():
                with torch.no_grad():
                    return fused.convlstm(x, w, b, 1.0)

            outputs, times = {}, {}
            for label, env in PATHS:
                os.environ.update(env)
                outputs[label] = call()
                times[label] = bench(call)
            oracle = (reference.convlstm(x.double().contiguous(), w.double(), b.double(), 1.0) if not sliding
                      else outputs["per step"])
            row = dict(workload=name, batch=batch, ch=ch, n=n, steps=T,
                       ms={k: round(v, 4) for k, v in times.items()},
                       err={k: rel(v, oracle) for k, v in outputs.items()},
                       vs_window=times["window"] / times["resident"], vs_per_step=times["per step"] / times["resident"])
            rows.append(row)
            print(row, flush=True)
    for var in ("MSCRED_RESIDENT_LSTM", "MSCRED_WINDOW_LSTM"):
        os.environ.pop(var, None)
    return rows


def to_markdown(rows: list[dict], meta: str) -> str:
    lines = ["# One ConvLSTM level in bf16 inference: the window-resident CUDA kernel", "", meta, "",
             "ms per call (median); errors: batch 128 against float64, the sliding workloads against the per-step "
             "output.", "",
             "| workload | level (Ch, n) | resident ms | window ms | per-step ms | vs window | vs per step "
             "| err resident | err window | err per step |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        ms, err = r["ms"], r["err"]
        lines.append(f"| {r['workload']} | ({r['ch']}, {r['n']}) | {ms['resident']:.4f} | {ms['window']:.4f} | "
                     f"{ms['per step']:.4f} | {r['vs_window']:.2f}x | {r['vs_per_step']:.2f}x | "
                     f"{err['resident']:.1e} | {err['window']:.1e} | {err['per step']:.1e} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/resident_lstm")
    args = ap.parse_args()
    import triton
    rows = run()
    meta = (f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}, "
            f"cuDNN {torch.backends.cudnn.version()}, {datetime.datetime.now(datetime.timezone.utc).isoformat()}. "
            "Command: `PYTHONPATH=src python3 benchmarks/bench_resident_lstm.py`.")
    md = to_markdown(rows, meta)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "resident_lstm.json").write_text(json.dumps(dict(meta=meta, rows=rows), indent=1))
    (out / "resident_lstm.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
