"""CPU scoring end to end (``MSCRED.detect`` of a long series) with the CPU scoring batch's byte budget
``detector.INFER_BYTES_CPU`` at 1x, 2x, 4x its value: does a larger batch (fewer batches, so fewer re-encoded
``steps - 1`` segments and fewer thread start-ups per window) score faster, and what does it cost in memory?

For each size (SENSORSxROWS) a model is trained once, 1 epoch on the first ``--train-rows`` rows of a synthetic
series (the paper's sin/cos sensors, as bench_cpu_detect.py's), and kept in ``--work``. Every measurement then runs
in a fresh Python process (``--worker``): it loads the model and the series, sets ``detector.INFER_BYTES_CPU`` to
FACTOR x its value (the module attribute that ``detector.inference_batch`` reads), resets the process's peak RSS
(``/proc/self/clear_refs`` 5, so VmHWM starts from the current RSS), and times ``MSCRED.detect`` twice: the first
call as ``mscred detect`` runs it once (oneDNN's set-up and the first touch of every buffer included) and a second,
warm one. Peak RSS growth: VmHWM after the calls minus VmRSS before them. The variants alternate (order rotated per
repeat), ``--repeats`` times each; the table gives medians, and the spread (max - min) of the repeats. Other
processes may share the cores: before each run the parent waits until they use at most ``--max-foreign`` cores
(/proc/stat's busy time over 3 s), and a run during which they took more (the machine's busy time minus the
worker's CPU time, over its wall time) is measured again, up to ``--attempts`` times.

The batch is min(max(train batch, INFER_BATCH), INFER_BYTES_CPU // (SCORE_BYTES_PER_WINDOW_SENSOR2 * n^2)) windows:
at 30 sensors the budget does not bind (128 windows at every factor here), so there the variants run the same code
and their differences are the run-to-run noise.

``--forward-repeats N`` also times the scoring forward alone (``MSCRED._reconstruct``, the ``train.predict`` call
detect makes) of the whole series, every factor in one fresh process in alternation, N times each: that cancels
the differences between processes (``_worker_forward``); ``--repeats 0`` runs only that.

Usage (results/cpu_batch/)::

    PYTHONPATH=src python benchmarks/bench_cpu_batch.py --sizes 30x20000 80x8000 --factors 1 2 4 --repeats 5 \\
        --out benchmarks/results/cpu_batch --tag 2
    PYTHONPATH=src python benchmarks/bench_cpu_batch.py --sizes 30x20000 80x8000 --factors 1 2 4 --repeats 0 \\
        --forward-repeats 7 --out benchmarks/results/cpu_batch --tag 5
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench_cpu_detect import _series  # noqa: E402 (benchmarks/ is the script's folder: the paper's synthetic sensors)

ROOT = Path(__file__).resolve().parents[1]


def _prepare(work: Path, sensors: int, rows: int, train_rows: int, seed: int) -> tuple[Path, Path]:
    import pandas as pd

    work.mkdir(parents=True, exist_ok=True)
    data = work / f"series_{sensors}x{rows}_seed{seed}.npy"
    model = work / f"model_{sensors}_train{train_rows}_seed{seed}"
    if not data.exists():
        np.save(data, _series(sensors, rows, seed).astype(np.float32))
    if not (model / "config.json").exists():
        from mscred import MSCRED

        frame = pd.DataFrame(np.load(data)[:train_rows], columns=[f"s{i}" for i in range(sensors)])
        t = time.perf_counter()
        MSCRED(epochs=1, seed=seed, device="cpu").fit(frame).save(model)
        print(f"trained {model.name} in {time.perf_counter() - t:.1f} s", file=sys.stderr, flush=True)
    return data, model


def _status() -> dict[str, int]:
    """VmRSS / VmHWM of this process, bytes."""
    out = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(("VmRSS:", "VmHWM:")):
                key, value = line.split(":")
                out[key] = int(value.split()[0]) * 1024
    return out


def _worker(factor: float, model: str, data: str) -> None:
    """One measurement in this (fresh) process: prints one JSON line."""
    import pandas as pd
    import torch

    from mscred import MSCRED, detector

    load = os.getloadavg()[0]
    values = np.load(data)
    frame = pd.DataFrame(values, columns=[f"s{i}" for i in range(values.shape[1])])
    det = MSCRED.load(model, device="cpu")
    base = detector.INFER_BYTES_CPU
    detector.INFER_BYTES_CPU = int(base * factor)
    batch = detector.inference_batch("cpu", det.config.train.batch_size, values.shape[1])
    windows = int(det.window_of_row(len(values)).max()) + 1  # windows scored
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")  # VmHWM := VmRSS
    rss0 = _status()["VmRSS"]
    times = []
    for _ in range(2):
        c, t = time.process_time(), time.perf_counter()
        out = det.detect(frame)
        times.append((time.perf_counter() - t, time.process_time() - c))
        del out
    print(json.dumps({"factor": factor, "infer_bytes_cpu": detector.INFER_BYTES_CPU, "base": base, "batch": batch,
                      "windows": windows, "cold_s": times[0][0], "cold_cpu_s": times[0][1], "warm_s": times[1][0],
                      "warm_cpu_s": times[1][1], "rss_before": rss0, "peak_growth": _status()["VmHWM"] - rss0,
                      "load1_start": load, "load1_end": os.getloadavg()[0], "threads": torch.get_num_threads()}))


def _worker_forward(model: str, data: str, factors: list[float], repeats: int) -> None:
    """The scoring forward alone (``MSCRED._reconstruct``: ``train.predict`` in ``inference_batch`` batches) of the
    whole series' segments, every factor in this one process, in alternation (order rotated per repeat), after one
    warm-up call: differences between processes (which moved cold and warm calls together) cancel. A call during
    which other processes took more than BENCH_MAX_FOREIGN cores is made again. One JSON line."""
    import torch

    from mscred import MSCRED, detector

    values = np.load(data)
    det = MSCRED.load(model, device="cpu")
    segments = det._segments(values)
    base = detector.INFER_BYTES_CPU
    det._reconstruct(segments[:64])  # oneDNN's set-up
    times: dict[str, list[float]] = {str(f): [] for f in factors}
    foreign: dict[str, list[float]] = {str(f): [] for f in factors}
    limit = float(os.environ.get("BENCH_MAX_FOREIGN", "0.25"))
    batches = {}
    for r in range(repeats):
        for f in factors[r % len(factors):] + factors[:r % len(factors)]:
            detector.INFER_BYTES_CPU = int(base * f)
            batches[str(f)] = detector.inference_batch("cpu", det.config.train.batch_size, values.shape[1])
            for _ in range(5):  # a call during which other processes took more than `limit` cores: again
                _wait_quiet(limit, sys.stderr)
                b, c, t = _busy(), time.process_time(), time.perf_counter()
                det._reconstruct(segments)
                wall = time.perf_counter() - t
                others = max(0.0, _busy() - b - (time.process_time() - c)) / wall
                print(f"  forward repeat {r} x{f:g}: {wall:.2f} s, others' CPU {others:.2f} cores", file=sys.stderr,
                      flush=True)
                if others <= limit:
                    break
            times[str(f)].append(wall)
            foreign[str(f)].append(others)
    detector.INFER_BYTES_CPU = base
    windows = len(segments) - det.config.signature.steps + 1
    print(json.dumps({"times": times, "foreign": foreign, "batches": batches, "windows": windows,
                      "threads": torch.get_num_threads()}))


def _busy() -> float:
    """CPU seconds the whole machine has spent busy (all cores, /proc/stat), idle and iowait excluded."""
    with open("/proc/stat") as fh:
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fh.readline().split()[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _wait_quiet(limit: float, log, sample: float = 3.0, max_wait: float = 900.0) -> None:
    """Wait (up to ``max_wait`` s) until other processes use at most ``limit`` cores over ``sample`` seconds."""
    start = time.perf_counter()
    while True:
        b = _busy()
        time.sleep(sample)
        used = (_busy() - b) / sample
        if used <= limit or time.perf_counter() - start > max_wait:
            return
        print(f"  (waiting: other processes use {used:.2f} cores)", file=log, flush=True)
        time.sleep(20)


def _measure(cmd: list[str], env: dict, log=None) -> dict:
    """One worker's measurement, with the CPU time other processes took meanwhile (the machine's busy time minus
    the worker's own CPU time), in cores."""
    import resource

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    b, t = _busy(), time.perf_counter()
    res = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=log, text=True, env=env, cwd=ROOT)
    wall = time.perf_counter() - t
    busy = _busy() - b
    ru2 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode:
        raise SystemExit(f"worker failed: {' '.join(cmd)}")
    m = json.loads(res.stdout.strip().splitlines()[-1])
    own = ru2.ru_utime - ru.ru_utime + ru2.ru_stime - ru.ru_stime
    m["foreign_cores"] = max(0.0, busy - own) / wall
    return m


def _uptime(tag: str, log) -> None:
    line = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"[{tag}] uptime: {line}", file=log, flush=True)


def _detect_table(rows: list[dict], first: float) -> list[str]:
    if not rows:
        return []
    base = {r["sensors"]: r for r in rows if r["factor"] == first}
    table = ["| sensors x rows | INFER_BYTES_CPU | batch | windows | detect cold median (s) [spread] | windows/s cold "
             "| speed-up cold | detect warm median (s) [spread] | windows/s warm | speed-up warm | peak RSS growth "
             "median (max) MB | others' CPU max (cores) | noisy runs |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        b = base[r["sensors"]]
        budget = f"{r['factor']:g}x ({r['infer_bytes_cpu'] / 2 ** 30:g} GiB)"
        table.append(
            f"| {r['sensors']} x {r['rows']} | {budget} | {r['batch']} | {r['windows']} "
            f"| {r['cold_median']:.2f} [{r['cold_spread']:.2f}] "
            f"| {r['windows'] / r['cold_median']:.1f} | {b['cold_median'] / r['cold_median']:.3f}x "
            f"| {r['warm_median']:.2f} [{r['warm_spread']:.2f}] | {r['windows'] / r['warm_median']:.1f} "
            f"| {b['warm_median'] / r['warm_median']:.3f}x "
            f"| {r['peak_growth_median'] / 2 ** 20:.0f} ({r['peak_growth_max'] / 2 ** 20:.0f}) "
            f"| {max(r['foreign_cores']):.2f} | {sum(m['noisy'] for m in r['runs'])} |")
    return table


def _forward_table(rows: list[dict], first: float) -> list[str]:
    if not rows:
        return []
    base = {r["sensors"]: r for r in rows if r["factor"] == first}
    table = ["| sensors x rows | INFER_BYTES_CPU | batch | windows | forward median (s) [spread] | windows/s "
             "| speed-up | others' CPU max (cores) |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        b = base[r["sensors"]]
        table.append(f"| {r['sensors']} x {r['rows']} | {r['factor']:g}x | {r['batch']} | {r['windows']} "
                     f"| {r['median']:.2f} [{r['spread']:.2f}] | {r['windows'] / r['median']:.1f} "
                     f"| {b['median'] / r['median']:.3f}x | {r['foreign_cores']:.2f} |")
    return table


def _forward_only(args, model: Path, data: Path, env: dict, log) -> dict:
    """``_worker_forward`` in a fresh process (which checks other processes' CPU time call by call)."""
    cmd = [sys.executable, __file__, "--worker-forward", str(model), str(data),
           ",".join(str(f) for f in args.factors), str(args.forward_repeats)]
    _wait_quiet(args.max_foreign, log)
    m = _measure(cmd, dict(env, BENCH_MAX_FOREIGN=str(args.max_foreign)), log)
    print(f"forward alone: {json.dumps(m)}", file=log, flush=True)
    return m


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", nargs="+", default=["30x20000", "80x8000"], help="SENSORSxROWS")
    p.add_argument("--factors", nargs="+", type=float, default=[1.0, 2.0, 4.0], help="x INFER_BYTES_CPU")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--train-rows", type=int, default=1500)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-foreign", type=float, default=0.25,
                   help="measure again when other processes used more cores than this during a run")
    p.add_argument("--attempts", type=int, default=5, help="tries per measurement (--max-foreign)")
    p.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "mscred_bench_cpu_batch")
    p.add_argument("--out", type=Path, default=None, help="write results.json / table.md here")
    p.add_argument("--tag", default="", help="suffix of the file names under --out (results<TAG>.json, ...)")
    p.add_argument("--forward-repeats", type=int, default=0,
                   help="also time the forward alone, all factors in one process, this many times each (0: no)")
    p.add_argument("--worker-forward", nargs=4, help=argparse.SUPPRESS)
    p.add_argument("--worker", nargs=3, metavar=("FACTOR", "MODEL", "DATA"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        _worker(float(args.worker[0]), args.worker[1], args.worker[2])
        return 0
    if args.worker_forward:
        model, data, factors, repeats = args.worker_forward
        _worker_forward(model, data, [float(f) for f in factors.split(",")], int(repeats))
        return 0
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    log = sys.stdout
    _uptime("start", log)
    rows, forward = [], []
    for size in args.sizes:
        sensors, n_rows = (int(v) for v in size.split("x"))
        data, model = _prepare(args.work, sensors, n_rows, args.train_rows, args.seed)
        _uptime(f"{size} before", log)
        if args.forward_repeats:
            fw = _forward_only(args, model, data, env, log)
            for f in args.factors:
                t = fw["times"][str(f)]
                forward.append({"sensors": sensors, "rows": n_rows, "factor": f, "batch": fw["batches"][str(f)],
                                "windows": fw["windows"], "times": t, "median": statistics.median(t),
                                "spread": max(t) - min(t), "foreign_cores": max(fw["foreign"][str(f)])})
        runs: dict[float, list[dict]] = {f: [] for f in args.factors if args.repeats}
        for r in range(args.repeats):  # (--repeats 0: the forward alone)
            order = args.factors[r % len(args.factors):] + args.factors[:r % len(args.factors)]
            for f in order:
                cmd = [sys.executable, __file__, "--worker", str(f), str(model), str(data)]
                for attempt in range(args.attempts):
                    _wait_quiet(args.max_foreign, log)
                    m = _measure(cmd, env)
                    print(f"{size} repeat {r} x{f:g}: batch {m['batch']} cold {m['cold_s']:.2f} s warm "
                          f"{m['warm_s']:.2f} s peak +{m['peak_growth'] / 2 ** 20:.0f} MB load1 {m['load1_start']:.2f}"
                          f"-{m['load1_end']:.2f} others' CPU {m['foreign_cores']:.2f} cores", file=log, flush=True)
                    if m["foreign_cores"] <= args.max_foreign:
                        break
                    print(f"  (other processes used {m['foreign_cores']:.2f} cores: measured again)", file=log,
                          flush=True)
                m["attempts"] = attempt + 1
                m["noisy"] = m["foreign_cores"] > args.max_foreign  # (kept: every attempt had company)
                runs[f].append(m)
        _uptime(f"{size} after", log)
        for f in runs:
            ms = runs[f]
            cold = [m["cold_s"] for m in ms]
            warm = [m["warm_s"] for m in ms]
            peak = [m["peak_growth"] for m in ms]
            rows.append({"sensors": sensors, "rows": n_rows, "factor": f,
                         "infer_bytes_cpu": ms[0]["infer_bytes_cpu"],
                         "batch": ms[0]["batch"], "windows": ms[0]["windows"], "cold": cold, "warm": warm,
                         "cold_median": statistics.median(cold), "warm_median": statistics.median(warm),
                         "cold_spread": max(cold) - min(cold), "warm_spread": max(warm) - min(warm),
                         "peak_growth_median": statistics.median(peak), "peak_growth_max": max(peak),
                         "load1": [(m["load1_start"], m["load1_end"]) for m in ms],
                         "foreign_cores": [m["foreign_cores"] for m in ms], "attempts": [m["attempts"] for m in ms],
                         "runs": ms})
    _uptime("end", log)
    table = _detect_table(rows, args.factors[0]) + [""] + _forward_table(forward, args.factors[0])
    print("\n".join(table))
    if args.out:
        import torch

        args.out.mkdir(parents=True, exist_ok=True)
        meta = {"command": " ".join([Path(sys.executable).name, *sys.argv]),
                "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "torch": torch.__version__,
                "python": platform.python_version(), "threads": torch.get_num_threads(), "cpus": os.cpu_count()}
        (args.out / f"results{args.tag}.json").write_text(json.dumps({"meta": meta, "rows": rows, "forward": forward},
                                                                         indent=1))
        (args.out / f"table{args.tag}.md").write_text("\n".join(table) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
