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

Then the busy time with ONE kernel running, by kernel family ("alone"): what the chain's own kernels cost, and which
weight gradients ran with nothing beside them (the backward's tail, or the chain waiting), each such stretch of 5 us
or more listed with the launch shape the trace recorded (grid, blocks an SM: a weight gradient whose blocks fill
every SM leaves none to the chain, whatever the priorities -- results/graph_priority/).

Usage (CUDA machine): PYTHONPATH=src python3 benchmarks/graph_timeline.py [--replays 5] [--out DIR]
Writes DIR/graph_timeline.md and DIR/graph_trace.json (one replay's kernels: name, start, duration, stream, and the
launch shape where the trace has it). ``--from-trace DIR/graph_trace.json`` (any machine) prints the "alone" tables
of a saved replay.
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


# kept in graph_trace.json ("blocks per SM": the grid's blocks over the SM count, not how many fit at once; the
# trace's occupancy estimate reads 0 for a graph's kernels, so it is left out)
LAUNCH_ARGS = ("grid", "block", "blocks per SM")


def family(name: str) -> str:
    """A kernel's family for the "alone" table: cuDNN's convolutions by direction, fills, copies, else its name."""
    for key, label in (("xmma_wgrad", "cuDNN weight gradient"), ("xmma_dgrad", "cuDNN data gradient"),
                       ("xmma_fprop", "cuDNN forward convolution"), ("cutlass", "cuDNN's CUTLASS kernels"),
                       ("Memset", "fill"), ("Memcpy", "copy")):
        if key in name:
            return label
    name = name.removeprefix("void ").replace("(anonymous namespace)::", "")
    return name.split("(")[0].split("<")[0][:60]


def alone(kernels: list[dict]) -> list[float]:
    """For each kernel (in the list's order), the microseconds during which it was the only one running."""
    edges = sorted([(k["ts"], 1, i) for i, k in enumerate(kernels)] +
                   [(k["ts"] + k["dur"], -1, i) for i, k in enumerate(kernels)], key=lambda e: (e[0], e[1]))
    out = [0.0] * len(kernels)
    running: set[int] = set()
    last = kernels[0]["ts"]
    for t, step, i in edges:
        if len(running) == 1:
            out[next(iter(running))] += t - last
        if step > 0:
            running.add(i)
        else:
            running.discard(i)
        last = t
    return out


def alone_lines(kernels: list[dict], min_stretch: float = 5.0) -> list[str]:
    """The "alone" tables of one replay: by family, then every weight-gradient kernel (cuDNN's and ours) alone for
    ``min_stretch`` us or more, with the kernel that started next and the launch shape the trace recorded."""
    solo = alone(kernels)
    by_family: dict[str, list[float]] = {}
    for k, a in zip(kernels, solo):
        row = by_family.setdefault(family(k["name"]), [0, 0.0, 0.0])
        row[0] += 1
        row[1] += k["dur"]
        row[2] += a
    lines = [f"One replay's busy time with one kernel running ({sum(solo):.1f} us), by family "
             "(us alone: no other kernel, copy or fill beside it):", "",
             "| family | kernels | us in all | us alone |", "| --- | --- | --- | --- |"]
    for name, (n, dur, a) in sorted(by_family.items(), key=lambda kv: -kv[1][2]):
        lines.append(f"| {name} | {n} | {dur:.1f} | {a:.1f} |")
    lines += ["", f"Weight gradients alone for {min_stretch:g} us or more (us alone of its duration; the next kernel "
              "to start and how long after the gradient began; its launch shape):", ""]
    for i, (k, a) in enumerate(zip(kernels, solo)):
        if "wgrad" not in k["name"] or a < min_stretch:  # cuDNN's and our small-channel convolutions' kernels
            continue
        nxt = next((n for n in kernels[i + 1:] if n["ts"] >= k["ts"]), None)
        after = f"{nxt['name'][:50]} at +{nxt['ts'] - k['ts']:.1f} us" if nxt else "nothing (the replay's end)"
        launch = k.get("args", {})
        shape = ", ".join(f"{key} {launch[key]}" for key in LAUNCH_ARGS if key in launch) or "not recorded"
        lines.append(f"- at {k['ts'] - kernels[0]['ts']:.1f} us: {a:.1f} of {k['dur']:.1f} us; next: {after}; "
                     f"{shape}")
    return lines


def _saved(path: Path) -> list[dict]:
    """A graph_trace.json's records in the trace's own form (ts, dur, args)."""
    rows = json.loads(path.read_text())
    return [{"name": r["name"], "ts": r["start_us"], "dur": r["dur_us"],
             "args": {"stream": r.get("stream"), **{k: r[k] for k in LAUNCH_ARGS if k in r}}} for r in rows]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/graph_timeline")
    ap.add_argument("--replays", type=int, default=5)
    ap.add_argument("--from-trace", type=Path, help="a saved graph_trace.json: print its alone tables, no GPU")
    # The separator must outlast the host's launch of the gather and the replay, or the wait for the launch shows
    # up as idle time inside the replay: under the profiler, launching the graph with its memset nodes made kernel
    # nodes took ~0.65 ms (a 120-155 us gap after the gather with 1,000,000 cycles, results/graph_memsets/timeline/;
    # 9 us without the profiler, results/graph_launch_cost/).
    ap.add_argument("--sleep-cycles", type=int, default=4_000_000,
                    help="the separator kernel's spin (GPU clock cycles; 4,000,000 ~2 ms at 1.98 GHz)")
    args = ap.parse_args()
    if args.from_trace:
        print("\n".join(alone_lines(_saved(args.from_trace))))
        return
    from torch.profiler import ProfilerActivity, profile

    _, data, idx = bt.thesis_eager_step(BATCH)
    graphed, _ = bt.make_step("fused", 30, data, idx.device, BATCH, True, True)
    for _ in range(5):
        graphed(idx)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(args.replays):
            torch.cuda._sleep(args.sleep_cycles)  # a separator: the replays' kernels are told apart by it
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
    one = replays[stats.index(med)]
    lines += [""] + alone_lines(one)
    text = "\n".join(lines) + "\n"
    (out / "graph_timeline.md").write_text(text)
    t0 = one[0]["ts"]
    (out / "graph_trace.json").write_text(json.dumps(
        [{"name": k["name"][:120], "start_us": round(k["ts"] - t0, 3), "dur_us": k["dur"],
          "stream": k.get("args", {}).get("stream"),
          **{key: k["args"][key] for key in LAUNCH_ARGS if key in k.get("args", {})}} for k in one], indent=0))
    print(text)


if __name__ == "__main__":
    main()
