"""The graphed bf16 training step's timeline: how much of a replay the GPU runs no kernel at all, and where.

``profile_train_step.py`` adds up kernel times; with the weight gradients on a side stream they overlap (2.94 ms of
kernels in a 2.49 ms step, results/train_final_1203w/), so their sum no longer says what sets the step. Here each
replay's kernels are laid on one time line (torch.profiler's trace: start and duration of every kernel) and split
into:
- busy: some kernel runs; of it, the time two or more run at once (the side stream's work beside the chain);
- idle: no kernel runs -- the gaps between dependent kernels (launch and dependency latency inside the graph) and
  waits on events; the gaps are listed by size with the kernels on either side.
Copies and fills count as work (the trace's memcpy and memset records). Idle time is what fewer kernel boundaries
(fusion, or programmatic dependent launch) could give back; busy time with one kernel running is the chain's own
kernels.

Usage (CUDA machine): PYTHONPATH=src python3 benchmarks/graph_timeline.py [--replays 5] [--out DIR]
Writes DIR/graph_timeline.md and DIR/graph_trace.json (one replay's kernels: name, start, duration, stream).
"""
from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import torch

import bench_train as bt  # noqa: E402 (benchmarks/ is the script's own folder)
import sweep_report  # noqa: E402

BATCH = 128


GPU_WORK = ("kernel", "gpu_memcpy", "gpu_memset")  # the trace's categories of work on the device


def _kernels(trace: dict) -> list[dict]:
    return sorted((e for e in trace["traceEvents"] if e.get("cat") in GPU_WORK and e.get("ph") == "X"),
                  key=lambda e: e["ts"])


def _replays(kernels: list[dict]) -> list[list[dict]]:
    """The replays' work, split at the separator kernels (``torch.cuda._sleep``'s spin kernel) between them."""
    groups: list[list[dict]] = [[]]
    for k in kernels:
        if "spin" in k["name"]:
            groups.append([])
        else:
            groups[-1].append(k)
    return [g for g in groups if g]


def timeline(kernels: list[dict]) -> dict:
    """Span, busy, idle and overlapped microseconds of one replay's kernels, and its idle gaps (size, before,
    after)."""
    t0 = kernels[0]["ts"]
    span = max(k["ts"] + k["dur"] for k in kernels) - t0
    edges = sorted([(k["ts"], 1) for k in kernels] + [(k["ts"] + k["dur"], -1) for k in kernels],
                   key=lambda e: (e[0], e[1]))
    running, last, busy, overlap = 0, t0, 0.0, 0.0
    for t, step in edges:
        if running >= 1:
            busy += t - last
        if running >= 2:
            overlap += t - last
        running += step
        last = t
    gaps, end, before = [], kernels[0]["ts"] + kernels[0]["dur"], kernels[0]["name"]
    for k in kernels[1:]:
        if k["ts"] > end:
            gaps.append((k["ts"] - end, before, k["name"]))
        if k["ts"] + k["dur"] >= end:
            end, before = k["ts"] + k["dur"], k["name"]
    return {"span": span, "busy": busy, "idle": span - busy, "overlap": overlap, "kernels": len(kernels),
            "gaps": sorted(gaps, key=lambda g: -g[0])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/graph_timeline")
    ap.add_argument("--replays", type=int, default=5)
    args = ap.parse_args()
    from torch.profiler import ProfilerActivity, profile

    _, data, idx = bt.thesis_eager_step(BATCH)
    graphed, _ = bt.make_step("fused", 30, data, idx.device, BATCH, True, True)
    for _ in range(5):
        graphed(idx)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(args.replays):
            torch.cuda._sleep(1_000_000)  # a separator: the replays' kernels are told apart by it
            graphed(idx)
            torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        trace = json.loads(path.read_text())
    replays = _replays(_kernels(trace))
    stats = [timeline(r) for r in replays]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    lines = [f"# The graphed fused bf16 training step's timeline (batch {BATCH}, n = 30)", "",
             f"{sweep_report.machine_line()}. Command: `PYTHONPATH=src python3 benchmarks/graph_timeline.py`.", "",
             "Per replay (torch.profiler's kernel records; the kernels' own durations, so a replay's span is its",
             "kernels' first start to last end, without the graph launch itself):", "",
             "| replay | kernels, copies, fills | span us | busy us | of it 2+ kernels at once | idle us (no kernel) | idle gaps |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for i, s in enumerate(stats):
        lines.append(f"| {i} | {s['kernels']} | {s['span']:.1f} | {s['busy']:.1f} | {s['overlap']:.1f} | "
                     f"{s['idle']:.1f} | {len(s['gaps'])} |")
    med = sorted(stats, key=lambda s: s["span"])[len(stats) // 2]
    sizes = [g[0] for g in med["gaps"]]
    bins = [(0, 1), (1, 2), (2, 5), (5, 10), (10, 1e9)]
    lines += ["", f"The median replay's idle gaps by size ({len(sizes)} gaps, {sum(sizes):.1f} us):", "",
              "| gap us | gaps | us in them |", "| --- | --- | --- |"]
    for lo, hi in bins:
        inside = [s for s in sizes if lo <= s < hi]
        lines.append(f"| {lo}-{hi if hi < 1e9 else ''} | {len(inside)} | {sum(inside):.1f} |")
    lines += ["", "Its 25 largest gaps (us, the kernel before -> the kernel after):", ""]
    lines += [f"- {g:.1f}: {a[:80]} -> {b[:80]}" for g, a, b in med["gaps"][:25]]
    text = "\n".join(lines) + "\n"
    (out / "graph_timeline.md").write_text(text)
    one = replays[stats.index(med)]
    t0 = one[0]["ts"]
    (out / "graph_trace.json").write_text(json.dumps(
        [{"name": k["name"][:120], "start_us": round(k["ts"] - t0, 3), "dur_us": k["dur"],
          "stream": k.get("args", {}).get("stream")} for k in one], indent=0))
    print(text)


if __name__ == "__main__":
    main()
