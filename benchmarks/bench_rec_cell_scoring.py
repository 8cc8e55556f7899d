"""Levels 3-4's fused recurrent step (``ops/triton/convlstm_rec_cell.py``) in scoring: graphed bf16 shared-segment
scoring with it against the defaults (training only), in alternation in one process.

The fused step is the training default only because one A/B run had shared-segment scoring slower with it (338,703
against 362,225 / 362,564 windows/s, ``results/rec_cell_step/``): one run, no repeats. Here the same measurement as
``bench_train.py``'s "fused + CUDA graph + bf16, shared segments" rows (``time_inference_shared``: the thesis
workload's 3,591 windows of 30 sensors, each call a fresh graph captured under the setting), ROUNDS times each way,
the two settings alternating, at the bench's batches (1,024 and every window at once).

MSCRED_LSTM_REC_CELL is read at every call of the ConvLSTM, so setting it between captures switches the path; each
row's graph is captured after its setting is in place. ``--var NAME --values A,B`` measures another switch read at
call time the same way (e.g. MSCRED_SMALL_CONV_FWD_TAPS 1,0; '' leaves the variable unset).

Usage (CUDA machine): PYTHONPATH=src python3 benchmarks/bench_rec_cell_scoring.py [--rounds 3] [--out DIR]
    [--var NAME --values A,B]
Writes DIR/rec_cell_scoring.md and .json (DIR default benchmarks/results/rec_cell_scoring).
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_train as bt  # noqa: E402

# label: MSCRED_LSTM_REC_CELL (None: unset, the defaults: the fused step in training only); --var / --values
# replace both
VARIABLE = "MSCRED_LSTM_REC_CELL"
SETTINGS = {"defaults (training only)": None, "levels 3-4 in scoring too": "128,256"}


def _use(variable: str, setting: str | None) -> None:
    if setting is None:
        os.environ.pop(variable, None)
    else:
        os.environ[variable] = setting


def outputs_agree(n: int, data, device, variable: str, settings: dict) -> dict:
    """One network, every window scored from a graph captured under each setting: the relative norm of the
    reconstructions' difference (one bf16 rounding apart is expected: the fused step adds the recurrent gates in
    float32) and of the per-window scores' (the mean squared residual, as ``predict`` ranks windows)."""
    net, _ = bt.build("fused", n, device)
    net.eval()
    recon = {}
    for label, setting in settings.items():
        _use(variable, setting)
        graphed = bt.GraphedWindowInference(net, data, len(data), True)
        recon[label] = graphed(0, len(data)).double().clone()  # (windows, K, n, n)
    _use(variable, None)
    a, b = recon.values()
    target = data.segments[data.steps - 1:].double()  # each window's last segment, what it reconstructs
    sa, sb = ((a - target) ** 2).flatten(1).mean(1), ((b - target) ** 2).flatten(1).mean(1)
    return {"recon_rel_diff": ((a - b).norm() / b.norm()).item(),
            "score_rel_diff": ((sa - sb).norm() / sb.norm()).item()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/rec_cell_scoring")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=10, help="timed calls per row (median)")
    ap.add_argument("--var", help="another switch than MSCRED_LSTM_REC_CELL (with --values)")
    ap.add_argument("--values", help="comma-separated values of --var; '' leaves it unset")
    args = ap.parse_args()
    variable, settings = VARIABLE, SETTINGS
    if args.var:
        variable, settings = args.var, {f"{args.var}={v!r}": (v or None) for v in args.values.split(",")}
    if not torch.cuda.is_available():
        sys.exit("bench_rec_cell_scoring.py needs a CUDA GPU (the fused step runs on CUDA only outside the tests)")
    device = torch.device("cuda")
    torch.backends.cudnn.benchmark = True
    n = 30
    values = bt.thesis_series(36_000, n)
    data = bt.WindowDataset(torch.from_numpy(bt.signature_matrices(values, windows=bt.WINDOWS, gap=bt.GAP))
                            .to(device), bt.STEPS)
    agreement = outputs_agree(n, data, device, variable, settings)
    print("outputs:", agreement, flush=True)
    rows = []
    for rnd in range(1, args.rounds + 1):
        for label, setting in settings.items():
            _use(variable, setting)
            for batch in (1024, len(data)):
                ms, wps, setup = bt.time_inference_shared("fused", n, data, device, batch, True, True, args.iters)
                rows.append({"round": rnd, "setting": label, "batch": min(batch, len(data)), "ms": ms,
                             "windows_per_s": wps, "one_time_s": setup})
                print(f"round {rnd} {label:28s} batch {batch:5d}: {wps:10.0f} windows/s ({ms:.3f} ms)", flush=True)
                torch.cuda.empty_cache()
    _use(variable, None)
    meta = {"date_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
            "windows": len(data), "rounds": args.rounds, "iters": args.iters, "outputs": agreement}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "rec_cell_scoring.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    lines = [f"# Graphed bf16 shared-segment scoring, {' / '.join(settings)} ({meta['gpu']}, "
             f"torch {meta['torch']}, {meta['date_utc']})", "",
             "| round | setting | batch | ms a call | windows/s |", "| --- | --- | --- | --- | --- |"]
    lines += [f"| {r['round']} | {r['setting']} | {r['batch']:,} | {r['ms']:.3f} | {r['windows_per_s']:,.0f} |"
              for r in rows]
    lines += ["", f"Outputs, the two settings' graphs on one network: {agreement}", "", "Medians over the rounds:",
              "", "| setting | batch | windows/s (median) | spread |", "| --- | --- | --- | --- |"]
    for label in settings:
        for batch in sorted({r["batch"] for r in rows}):
            wps = [r["windows_per_s"] for r in rows if r["setting"] == label and r["batch"] == batch]
            lines.append(f"| {label} | {batch:,} | {statistics.median(wps):,.0f} | {min(wps):,.0f}-{max(wps):,.0f} |")
    (out / "rec_cell_scoring.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
