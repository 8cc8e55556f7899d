"""bf16 autocast on a CPU: the reference model's training step and scoring in float32 and in bf16, same process.

    PYTHONPATH=src python3 benchmarks/bench_cpu_bf16.py [--batch 32] [--repeats 5] [--out benchmarks/results/cpu_bf16]

Uses the Trainer's own step object (``train_graphs.EagerStep``, Adam) and ``predict`` on random windows of the
thesis shape (n = 30, 3 scales, 5 steps), both precisions from the same initial weights, alternating so that a
drifting clock hits both. Reports ms per step (median), windows/s for scoring, and how far bf16's reconstructions
and first loss are from float32's. Whether bf16 is native here is printed too (``train_graphs.bf16_native``): on a
CPU without AVX512-BF16 / AMX the product ignores --bf16.
"""
from __future__ import annotations

import argparse
import copy
import json
import statistics
import time
from pathlib import Path

import torch

from bench_signature import machine  # the CPU's name as the other CPU benchmarks report it
from mscred.config import ModelConfig
from mscred.model import MSCREDNet
from mscred.train import WindowDataset, predict
from mscred.train_graphs import EagerStep, bf16_native


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--segments", type=int, default=260, help="signature matrices to score (windows = this - 4)")
    ap.add_argument("--out", default="benchmarks/results/cpu_bf16")
    args = ap.parse_args()
    torch.manual_seed(0)
    device = torch.device("cpu")
    segments = torch.rand(args.segments, 3, 30, 30, generator=torch.Generator().manual_seed(1))
    data = WindowDataset(segments, steps=5)
    idx = torch.arange(args.batch)
    base = MSCREDNet(ModelConfig())
    nets = {p: copy.deepcopy(base) for p in ("float32", "bf16")}
    steps = {p: EagerStep(net, torch.optim.Adam(net.parameters(), 1e-3), data, p == "bf16")
             for p, net in nets.items()}
    first_loss = {p: float(steps[p](idx)) for p in steps}  # also the warm-up
    times: dict[str, list[float]] = {p: [] for p in steps}
    for _ in range(args.repeats):
        for p, step in steps.items():
            t0 = time.perf_counter()
            step(idx)
            times[p].append(time.perf_counter() - t0)
    # scoring, from the same (untrained) weights for both precisions
    recon, score_s = {}, {}
    for p in ("float32", "bf16"):
        predict(base, segments, batch_size=64, device=device, bf16=p == "bf16")  # warm-up
        t0 = time.perf_counter()
        recon[p] = torch.as_tensor(predict(base, segments, batch_size=64, device=device, bf16=p == "bf16"))
        score_s[p] = time.perf_counter() - t0
    rel = ((recon["bf16"] - recon["float32"]).norm() / recon["float32"].norm()).item()
    step_ms = {p: 1e3 * statistics.median(t) for p, t in times.items()}
    windows = len(recon["float32"])
    result = {
        "cpu": machine()["cpu"], "threads": torch.get_num_threads(), "torch": torch.__version__,
        "bf16_native": bf16_native(device), "batch": args.batch, "repeats": args.repeats,
        "step_ms": step_ms, "step_speedup": step_ms["float32"] / step_ms["bf16"],
        "first_loss": first_loss, "first_loss_rel_diff": abs(first_loss["bf16"] - first_loss["float32"])
        / first_loss["float32"],
        "scoring_windows_per_s": {p: windows / s for p, s in score_s.items()},
        "scoring_speedup": score_s["float32"] / score_s["bf16"], "recon_rel_diff": rel,
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "cpu_bf16.json").write_text(json.dumps(result, indent=2))
    md = [f"# bf16 autocast on a CPU: {result['cpu']}, {result['threads']} threads, torch {result['torch']}",
          "", f"{result['date']}. Command: `PYTHONPATH=src python3 benchmarks/bench_cpu_bf16.py --batch {args.batch} "
          f"--repeats {args.repeats}`. bf16 native here: {result['bf16_native']}.", "",
          "| | float32 | bf16 | bf16 vs float32 |", "| --- | --- | --- | --- |",
          f"| training step, batch {args.batch} (median ms) | {step_ms['float32']:.0f} | {step_ms['bf16']:.0f} | "
          f"{result['step_speedup']:.2f}x |",
          f"| scoring, {windows} windows (windows/s) | {result['scoring_windows_per_s']['float32']:.0f} | "
          f"{result['scoring_windows_per_s']['bf16']:.0f} | {result['scoring_speedup']:.2f}x |",
          f"| first loss | {first_loss['float32']:.6f} | {first_loss['bf16']:.6f} | "
          f"rel. diff {result['first_loss_rel_diff']:.1e} |",
          "", f"Reconstructions of the same weights: bf16 vs float32 relative difference {rel:.1e}."]
    (out / "cpu_bf16.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
