"""Whole-model scoring with and without the per-window ConvLSTM kernel, across inference batch sizes.

``MSCREDNet.forward_windows`` (the shared-segment scoring that ``predict`` runs) of the thesis workload's shapes
(30 sensors, 3 scales, 5 steps, default channels), bf16 autocast, fused backend, eager (what ``mscred detect``
runs by default: ``Detector`` scores at batch 128 without CUDA graphs) and replayed from one CUDA graph
(``GraphedWindowInference``: ``predict``'s graphed path), in the same process with MSCRED_WINDOW_LSTM=0 (the
per-step ConvLSTM), =all (``window_lstm_kernel`` for the levels it takes, at every batch) and =1 (the product's
choice: the kernel for ``convlstm_window.MIN_BATCH`` .. ``MAX_BATCH`` windows), and =1 with MSCRED_SKIP_BUFFERS=0
(the decoder concatenating its skip connections instead of having them written in place). Each batch's outputs are checked against its =0
output. Times: CUDA-event medians of 30 calls after 5 warm-ups.

Usage (CUDA machine): PYTHONPATH=src python3 benchmarks/bench_window_model.py [--out DIR]
Writes DIR/window_model.md and DIR/window_model.json.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib

import torch

from bench_conv_layers import median_event_ms  # noqa: E402 (benchmarks/ is the script's own folder)

BATCHES = (32, 128, 256, 512, 1024, 2048, 3591)
SETTINGS = ("0", "all", "1", "1cat")  # "1cat": =1 with MSCRED_SKIP_BUFFERS=0 (the decoder concatenates)
STEPS, SENSORS, SCALES = 5, 30, 3


def run(batches=BATCHES) -> list[dict]:
    from mscred.config import ModelConfig
    from mscred.model import MSCREDNet
    from mscred.train import WindowDataset
    from mscred.train_graphs import GraphedWindowInference, autocast
    torch.manual_seed(0)
    device = torch.device("cuda")
    net = MSCREDNet(ModelConfig(n_sensors=SENSORS, backend="fused")).to(device).eval()
    segments = torch.rand(max(batches) + STEPS - 1, SCALES, SENSORS, SENSORS, device=device)
    data = WindowDataset(segments, STEPS)
    rows = []
    for batch in batches:
        seg = segments[:batch + STEPS - 1]

        def eager():
            with torch.no_grad(), autocast(device, True):
                return net.forward_windows(seg, STEPS).float()

        row = dict(batch=batch)
        outputs = {}
        for setting in SETTINGS:
            os.environ["MSCRED_WINDOW_LSTM"] = setting.removesuffix("cat")
            os.environ["MSCRED_SKIP_BUFFERS"] = "0" if setting.endswith("cat") else "1"
            outputs[setting] = eager().clone()
            row[f"eager_ms_{setting}"] = median_event_ms(eager)
            graphed = GraphedWindowInference(net, data, batch, bf16=True)
            row[f"graph_ms_{setting}"] = median_event_ms(lambda: graphed(0, batch))
            del graphed
        ref = outputs["0"].double()
        row["rel_err"] = max(((outputs[s].double() - ref).norm() / ref.norm()).item() for s in SETTINGS)
        rows.append(row)
        print(row, flush=True)
    os.environ.pop("MSCRED_WINDOW_LSTM", None)
    os.environ.pop("MSCRED_SKIP_BUFFERS", None)
    return rows


def to_markdown(rows: list[dict], meta: str) -> str:
    lines = ["# Whole-model scoring (forward_windows, bf16): per-step ConvLSTM (=0), per-window kernel at every batch "
             "(=all), the product's choice (=1)", "", meta, "",
             "ms per call (windows/s); speed-ups against =0 of the same mode; rel. diff: the largest of the other "
             "outputs against =0.", "",
             "| batch (windows) | eager =0 | eager =all | eager =1 | eager =1, concatenating | graph =0 | graph =all | "
             "graph =1 | graph =1, concatenating | rel. diff |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        b = r["batch"]
        cells = []
        for mode in ("eager", "graph"):
            base = r[f"{mode}_ms_0"]
            for s in SETTINGS:
                ms = r[f"{mode}_ms_{s}"]
                extra = "" if s == "0" else f", {base / ms:.2f}x"
                cells.append(f"{ms:.3f} ({b / ms * 1e3:,.0f}{extra})")
        lines.append(f"| {b} | " + " | ".join(cells) + f" | {r['rel_err']:.1e} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/window_model")
    ap.add_argument("--batches", default=",".join(map(str, BATCHES)), help="comma-separated windows per call")
    args = ap.parse_args()
    import triton
    rows = run(tuple(int(b) for b in args.batches.split(",")))
    meta = (f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}, "
            f"cuDNN {torch.backends.cudnn.version()}, {datetime.datetime.now(datetime.timezone.utc).isoformat()}. "
            "Command: `PYTHONPATH=src python3 benchmarks/bench_window_model.py`.")
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "window_model.json").write_text(json.dumps(dict(meta=meta, rows=rows), indent=1))
    md = to_markdown(rows, meta)
    (out / "window_model.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
