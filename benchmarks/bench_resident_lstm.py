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
import os

import torch

import sweep_report
from bench_window_lstm import LEVELS, T, bench, level_inputs, rel

WORKLOADS = [("scoring", 3591, True), ("1,024 windows", 1024, True), ("batch 128", 128, False)]
PATHS = [("resident", {"MSCRED_RESIDENT_LSTM": "1", "MSCRED_WINDOW_LSTM": "1"}),
         ("window", {"MSCRED_RESIDENT_LSTM": "0", "MSCRED_WINDOW_LSTM": "all"}),
         ("per step", {"MSCRED_RESIDENT_LSTM": "0", "MSCRED_WINDOW_LSTM": "0"})]


def run_paths(paths, timed: list[str], make_call, float64) -> list[dict]:
    """A row per workload and level: ms of the ``timed`` paths (each a label and the environment that selects it),
    the errors of every path that ran: against ``float64(x, w, b)`` of the float64 inputs at batch 128, against the
    per-step path's output on the sliding workloads (so that path always runs). ``make_call(x, w, b)`` gives the
    call to time (it reads the environment at each call)."""
    os.environ["MSCRED_FUSED_LAYOUT"] = "nhwc"
    rows = []
    for name, batch, sliding in WORKLOADS:
        for ch, n in LEVELS:
            x, w, b = level_inputs(ch, n, batch, sliding)
            call = make_call(x, w, b)
            outputs, times = {}, {}
            for label, env in paths:
                if label in timed or label == "per step":
                    os.environ.update(env)
                    outputs[label] = call()
                    if label in timed:
                        times[label] = bench(call)
            oracle = (float64(x.double().contiguous(), w.double(), b.double()) if not sliding
                      else outputs["per step"])
            row = dict(workload=name, batch=batch, ch=ch, n=n, steps=T,
                       ms={k: round(v, 4) for k, v in times.items()},
                       err={k: rel(v, oracle) for k, v in outputs.items()},
                       flags=os.environ.get("MSCRED_RESIDENT_LSTM_FLAGS", ""))
            rows.append(row)
            print(row, flush=True)
    for var in {var for _, env in paths for var in env}:
        os.environ.pop(var, None)
    return rows


def run(timed: list[str]) -> list[dict]:
    """The fused ConvLSTM op on each path (``run_paths``)."""
    from mscred.ops import reference
    from mscred.ops.triton import convlstm as fused

    def make_call(x, w, b):
        def call():
            with torch.no_grad():
                return fused.convlstm(x, w, b, 1.0)
        return call

    return run_paths(PATHS, timed, make_call, lambda x, w, b: reference.convlstm(x, w, b, 1.0))


def to_markdown(rows: list[dict], meta: str) -> str:
    lines = ["# One ConvLSTM level in bf16 inference: the window-resident CUDA kernel", "", meta, "",
             "ms per call (median); errors: batch 128 against float64, the sliding workloads against the per-step "
             "output.", "",
             "| workload | level (Ch, n) | resident ms | window ms | per-step ms | vs window | vs per step "
             "| err resident | err window | err per step |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    def cell(d, key, fmt):
        return format(d[key], fmt) if key in d else "-"

    for r in rows:
        ms, err = r["ms"], r["err"]
        ratio = {k: f"{ms[k] / ms['resident']:.2f}x" if k in ms and "resident" in ms else "-"
                 for k in ("window", "per step")}
        lines.append(f"| {r['workload']} | ({r['ch']}, {r['n']}) | {cell(ms, 'resident', '.4f')} | "
                     f"{cell(ms, 'window', '.4f')} | {cell(ms, 'per step', '.4f')} | {ratio['window']} | "
                     f"{ratio['per step']} | {cell(err, 'resident', '.1e')} | {cell(err, 'window', '.1e')} | "
                     f"{cell(err, 'per step', '.1e')} |")
    return "\n".join(lines) + "\n"


def timed_paths_main(doc: str, script: str, stem: str, timed: str, run, to_markdown) -> None:
    """The command line of the per-level benchmarks that time some of their paths (this one and
    bench_lstm_attention.py): --out, --timed (comma-separated path labels, default ``timed``); the table with the
    machine line and the command, MSCRED_RESIDENT_LSTM_FLAGS (an A/B build of the kernel) included, into
    OUT/STEM.{md,json}."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--out", default=f"benchmarks/results/{stem}")
    ap.add_argument("--timed", default=timed, help=f"the paths to time, comma-separated (default {timed!r})")
    args = ap.parse_args()
    rows = run(args.timed.split(","))
    flags = os.environ.get("MSCRED_RESIDENT_LSTM_FLAGS", "")
    meta = (f"{sweep_report.machine_line()}. "
            f"Command: `{'MSCRED_RESIDENT_LSTM_FLAGS=' + repr(flags) + ' ' if flags else ''}PYTHONPATH=src python3 "
            f"benchmarks/{script} --timed '{args.timed}'`.")
    sweep_report.write(args.out, stem, meta, rows, [to_markdown(rows, meta).rstrip("\n")])


def main() -> None:
    timed_paths_main(__doc__, "bench_resident_lstm.py", "resident_lstm", "resident,window,per step", run,
                     to_markdown)


if __name__ == "__main__":
    main()
