"""Signature-matrix benchmark: the prefix-sum method against the direct per-window loop, time and peak memory.

Workloads (BENCHMARKS.md):
- long: 1,000,000 steps x 30 sensors, windows (10, 30, 60), gap 10, every segment computed by streaming chunks
  (``iter_signature_matrices``) and consumed chunk by chunk; peak memory must stay under 2 GiB.
- thesis: 36,000 x 30; segments/s of the prefix-sum method and of the direct loop.

Each measurement runs in a fresh Python process, so that its RSS high-water mark (``ru_maxrss``) belongs to it alone;
a second fresh process measures the bytes the computation itself allocates (``tracemalloc`` peak; NumPy reports its
buffers to tracemalloc), without timing, since tracing slows small allocations. Correctness is checked first, in the
same worker: sampled segments (first, last, both sides of every chunk boundary in the thesis case) against the direct
float64 computation, to 1e-6 relative.

Usage::

    python benchmarks/bench_signature.py                 # both workloads, writes benchmarks/results/signature.{json,md}
    python benchmarks/bench_signature.py --long-steps 200000 --no-write   # a quick look
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"
WINDOWS = (10, 30, 60)
GAP = 10
CHUNK = 4096
GIB = 1024**3


# ---------------------------------------------------------------------------------------------------------- worker


def _series(steps: int, sensors: int, seed: int = 0) -> np.ndarray:
    # Normalised-looking data (min-max scaled values live in [0, 1]); float64 as load_table returns it.
    rng = np.random.default_rng(seed)
    return rng.random((steps, sensors))


def _validate(x: np.ndarray, segments: list[int], computed: dict[int, np.ndarray]) -> float:
    """Largest relative error of the computed segments against the float64 direct sums."""
    from mscred.signature import segment_ends

    ends = segment_ends(len(x), WINDOWS, GAP)
    worst = 0.0
    for s in segments:
        for i, w in enumerate(WINDOWS):
            win = x[ends[s] - w : ends[s]]
            exact = win.T @ win / w
            worst = max(worst, float(np.max(np.abs(computed[s][i] - exact) / np.abs(exact))))
    return worst


def _rss_bytes() -> int:
    # Current resident set size (Linux /proc); ru_maxrss gives only the high-water mark.
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def worker(kind: str, method: str, steps: int, sensors: int, repeats: int, trace: bool) -> dict:
    """One measurement in this (fresh) process; returns a JSON-able dict."""
    import tracemalloc

    from mscred.signature import iter_signature_matrices, segment_ends, signature_matrices_direct

    x = _series(steps, sensors)
    S = len(segment_ends(steps, WINDOWS, GAP))
    rss_input = _rss_bytes()

    def run_streaming(keep: set[int]):
        kept, checksum = {}, 0.0
        for start, chunk in iter_signature_matrices(x, WINDOWS, GAP, CHUNK):
            checksum += float(chunk[:, 0].trace(axis1=1, axis2=2).sum())  # consume every chunk
            for s in keep:
                if start <= s < start + len(chunk):
                    kept[s] = chunk[s - start].astype(np.float64)
        return kept, checksum

    def run_direct(keep: set[int]):
        out = signature_matrices_direct(x, WINDOWS, GAP)
        return {s: out[s].astype(np.float64) for s in keep}, float(out[:, 0].trace(axis1=1, axis2=2).sum())

    run = run_streaming if method == "prefix" else run_direct
    boundaries = [b + d for b in range(CHUNK, S, CHUNK) for d in (-1, 0)]
    sample = sorted({0, 1, S // 2, S - 1, *boundaries[:20]})
    result = {"kind": kind, "method": method, "steps": steps, "sensors": sensors, "segments": S}
    if trace:
        tracemalloc.start()
        run(set())
        result["alloc_peak_bytes"] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    else:
        kept, _ = run(set(sample))
        result["max_rel_error"] = _validate(x, sample, kept)
        result["validated_segments"] = len(sample)
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            run(set())
            times.append(time.perf_counter() - t0)
        result["seconds"] = times
        result["median_s"] = statistics.median(times)
        result["segments_per_s"] = S / result["median_s"]
    result["rss_input_bytes"] = rss_input
    result["rss_peak_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    return result


# ---------------------------------------------------------------------------------------------------------- driver


def fresh(kind: str, method: str, steps: int, sensors: int, repeats: int, trace: bool) -> dict:
    cmd = [sys.executable, __file__, "--worker", kind, method, str(steps), str(sensors), str(repeats), str(int(trace))]
    done = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def machine() -> dict:
    cpu = platform.processor() or "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    import pandas

    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "pandas": pandas.__version__,
        "platform": platform.platform(),
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }


def markdown(report: dict) -> str:
    m = report["machine"]
    lines = [
        "# Signature matrices: prefix sums vs the direct loop",
        "",
        f"Measured {m['date']} on {m['cpu']} ({m['cores']} cores, shared with other jobs), Python {m['python']}, "
        f"NumPy {m['numpy']}. Windows {list(WINDOWS)}, gap {GAP}, chunks of {CHUNK} segments, float64 sums, "
        "float32 output. Each row is a fresh process; RSS peak is its `ru_maxrss` (input series included), "
        "alloc peak the `tracemalloc` peak of the computation alone (separate fresh process). Command: "
        f"`{report['command']}`.",
        "",
        "| workload | method | steps x sensors | segments | median time | segments/s | max rel. error | "
        "RSS of input | RSS peak | alloc peak |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in report["rows"]:
        lines.append(
            f"| {r['kind']} | {r['method']} | {r['steps']:,} x {r['sensors']} | {r['segments']:,} | "
            f"{r['median_s']:.3f} s | {r['segments_per_s']:,.0f} | {r['max_rel_error']:.1e} | "
            f"{r['rss_input_bytes'] / 2**20:,.0f} MiB | {r['rss_peak_bytes'] / 2**20:,.0f} MiB | "
            f"{r['alloc_peak_bytes'] / 2**20:,.0f} MiB |"
        )
    lines += ["", *report["notes"], ""]
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--long-steps", type=int, default=1_000_000)
    parser.add_argument("--thesis-steps", type=int, default=36_000)
    parser.add_argument("--sensors", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=5, help="timed runs of the prefix method (median)")
    parser.add_argument("--no-write", action="store_true", help="print, do not write benchmarks/results")
    args = parser.parse_args(argv)

    plan = [
        ("long", "prefix", args.long_steps, 3),
        ("thesis", "prefix", args.thesis_steps, args.repeats),
        ("thesis", "direct", args.thesis_steps, 3),
    ]
    rows = []
    for kind, method, steps, repeats in plan:
        row = fresh(kind, method, steps, args.sensors, repeats, trace=False)
        row["alloc_peak_bytes"] = fresh(kind, method, steps, args.sensors, 1, trace=True)["alloc_peak_bytes"]
        print(json.dumps(row), flush=True)
        if row["max_rel_error"] > 1e-6:
            raise SystemExit(f"{kind}/{method}: wrong result, max relative error {row['max_rel_error']:.2e}")
        rows.append(row)

    long_row, thesis_prefix, thesis_direct = rows
    notes = [
        f"- long workload: all {long_row['segments']:,} segments streamed in {long_row['median_s']:.2f} s "
        f"(median of {len(long_row['seconds'])}), peak RSS {long_row['rss_peak_bytes'] / GIB:.2f} GiB "
        f"({'under' if long_row['rss_peak_bytes'] < 2 * GIB else 'OVER'} the 2 GiB bound); the float64 input "
        f"itself is {args.long_steps * args.sensors * 8 / 2**20:,.0f} MiB.",
        f"- thesis workload: prefix sums {thesis_prefix['segments_per_s']:,.0f} segments/s vs direct loop "
        f"{thesis_direct['segments_per_s']:,.0f} segments/s "
        f"({thesis_prefix['segments_per_s'] / thesis_direct['segments_per_s']:.1f}x).",
    ]
    report = {
        "machine": machine(),
        "command": "python benchmarks/bench_signature.py" + (" " + " ".join(argv or sys.argv[1:])).rstrip(),
        "windows": list(WINDOWS),
        "gap": GAP,
        "chunk_segments": CHUNK,
        "rows": rows,
        "notes": notes,
    }
    text = markdown(report)
    print(text)
    if not args.no_write:
        from mscred.atomic import atomic_path

        with atomic_path(RESULTS / "signature.json") as tmp:
            tmp.write_text(json.dumps(report, indent=2) + "\n")
        with atomic_path(RESULTS / "signature.md") as tmp:
            tmp.write_text(text)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        kind, method, steps, sensors, repeats, trace = sys.argv[2:8]
        print(json.dumps(worker(kind, method, int(steps), int(sensors), int(repeats), bool(int(trace)))))
    else:
        main()
