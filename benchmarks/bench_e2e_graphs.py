"""The graphed end-to-end and inference rows alone, each variant in a process of its own (the product path).

Written when bench_train.py's single "graphs" part died with SIGSEGV in ``CUDAGraph.replay`` at the third graphed
training variant of one process (H200, 2026-11-29). bench_train.py now runs every graphed variant in a process of
its own and produces these rows itself; this script remains for measuring them alone, quickly, with the same
functions (``bench_train.end_to_end``, ``bench_train.time_inference``). Usage (CUDA machine):
    PYTHONPATH=src python3 benchmarks/bench_e2e_graphs.py --out DIR
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

VARIANTS = {  # name: (backend, graphs, bf16)
    "fused + CUDA graph + bf16": ("fused", True, True),
    "fused + CUDA graph": ("fused", True, False),
}


def one(name: str) -> dict:
    import torch

    sys.path.insert(0, str(Path(__file__).parent))
    import bench_train as bt
    from mscred.signature import signature_matrices
    from mscred.train import WindowDataset

    backend, graphs, bf16 = VARIANTS[name]
    device = torch.device("cuda")
    n = 30
    values = bt.thesis_series(36_000, n)
    data = WindowDataset(torch.from_numpy(signature_matrices(values, windows=bt.WINDOWS, gap=bt.GAP)).to(device),
                         bt.STEPS)
    inference = []
    for b in (256, 1024, len(data)):  # one graph alive at a time: each is released when time_inference returns
        ms, wps, setup = bt.time_inference(backend, n, data, device, b, graphs, bf16, 6)
        inference.append({"batch": b, "ms": ms, "windows_per_s": wps, "one_time_s": setup})
    best = max(inference, key=lambda r: r["windows_per_s"])["batch"]
    row = {"variant": name, **bt.end_to_end(values, n, device, backend, graphs, bf16, epochs=5, batch=128,
                                            score_batch=best)}
    row["inference"] = inference
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--variant", default=None)
    args = ap.parse_args()
    if args.variant:
        print("RESULT " + json.dumps(one(args.variant)), flush=True)
        return
    rows = []
    for name in VARIANTS:
        proc = subprocess.run([sys.executable, "-X", "faulthandler", __file__, "--variant", name],
                              capture_output=True, text=True, timeout=120)
        lines = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
        row = json.loads(lines[-1][7:]) if lines else {"variant": name, "error": f"exit {proc.returncode}: "
                                                       + proc.stderr[-1500:]}
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "epoch_losses"}), flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "train_e2e_graphs.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
