"""Where the time of CPU scoring goes (``MSCRED.detect`` of a long series), phase by phase, before and after.

For each size (SENSORS x ROWS) a model is trained once on the first ``--train-rows`` rows (epochs 1; kept in
``--work`` and reused), then every measurement runs in a fresh Python process -- a one-shot ``mscred detect`` pays
the first touch of every buffer, so a warm loop would hide part of the cost -- alternating "before" (the HEAD
versions of ``src/mscred/signature.py`` and ``src/mscred/detect.py``, read with ``git show`` and imported under
other names) and "after" (the working tree), ``--repeats`` times; the table gives medians. Phases, as
``mscred detect`` runs them: read + validate the CSV (``load_table``), normalise, signature matrices, the network
forward, scoring (residuals, per-scale scores, thresholds, root causes: ``score_windows``), the output frame
(``MSCRED.detect``'s per-row columns) and writing the CSV.

The forward (the same code before and after, so timed in the "after" runs only) is timed after a first call of
one window (oneDNN's set-up, reported on its own row) on its first ``--forward-windows`` windows and scaled to all
windows (``--forward-windows 0``: all of them; ~20-120 windows/s on the shared 2-core box, so minutes per run); the
scoring phase scores every window, with those windows' real reconstructions and the targets x 0.98 for the rest.
Before timing, one process checks that both versions give bit-equal signature matrices and window results on the
size's data. ``--threads-forward 1`` adds a row: the forward with one torch thread (``OMP_NUM_THREADS=1``).

Usage::

    PYTHONPATH=src python benchmarks/bench_cpu_detect.py --sizes 30x50000 80x20000 --repeats 3 \\
        --out benchmarks/results/cpu_detect
"""
from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
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

ROOT = Path(__file__).resolve().parents[1]
PHASES = ["read+validate", "normalise", "signature", "forward first call", "forward", "scoring", "frame",
          "write csv"]
FORWARD = ("forward first call", "forward")


# ------------------------------------------------------------------------------------------------ data and models
def _series(sensors: int, rows: int, seed: int) -> np.ndarray:
    """The paper's synthetic sensors (sin/cos of (t - t0) / omega + 0.3 eps), five 30-step anomalies on 3 sensors."""
    rng = np.random.default_rng(seed)
    t = np.arange(rows)[:, None]
    t0, omega = rng.uniform(50, 100, sensors), rng.uniform(40, 50, sensors)
    x = np.where(rng.random(sensors) < 0.5, np.sin((t - t0) / omega), np.cos((t - t0) / omega))
    x = x + 0.3 * rng.standard_normal((rows, sensors))
    for k in range(5):
        start = rows // 2 + k * rows // 12
        x[start:start + 30, rng.choice(sensors, 3, replace=False)] += 2.0
    return x


def _prepare(work: Path, sensors: int, rows: int, train_rows: int, seed: int) -> tuple[Path, Path]:
    import pandas as pd

    data = work / f"test_{sensors}x{rows}_seed{seed}.csv"
    model = work / f"model_{sensors}_train{train_rows}_seed{seed}"
    frame = None
    if not data.exists():
        frame = pd.DataFrame(_series(sensors, rows, seed), columns=[f"s{i}" for i in range(sensors)])
        frame.to_csv(data, index=False)
    if not (model / "config.json").exists():
        from mscred import MSCRED

        frame = pd.read_csv(data) if frame is None else frame
        t = time.perf_counter()
        MSCRED(epochs=1, seed=seed, device="cpu").fit(frame.iloc[:train_rows]).save(model)
        print(f"trained {model.name} in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    return data, model


# ------------------------------------------------------------------------------------------------ versions
def _head_modules(work: Path):
    """(signature, detect) of HEAD, imported as mscred_head_signature / mscred_head_detect."""
    mods = []
    for name in ("signature", "detect"):
        src = subprocess.run(["git", "show", f"HEAD:src/mscred/{name}.py"], cwd=ROOT, check=True,
                             capture_output=True, text=True).stdout
        path = work / f"mscred_head_{name}.py"
        path.write_text(src)
        spec = importlib.util.spec_from_file_location(f"mscred_head_{name}", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # (dataclasses look their module up there)
        spec.loader.exec_module(module)
        mods.append(module)
    return mods


def _modules(variant: str, work: Path):
    if variant == "before":
        return _head_modules(work)
    import mscred.detect as detect
    import mscred.signature as signature
    return signature, detect


# ------------------------------------------------------------------------------------------------ worker
def _worker(variant: str, model_dir: str, data: str, forward_windows: int, work: Path) -> dict:
    import torch

    from mscred.data.io import load_table, write_table
    from mscred.detector import MSCRED

    S, D = _modules(variant, work)
    m = MSCRED.load(model_dir, device="cpu")
    sig = m.config.signature
    times = {}
    t = time.perf_counter()
    table = load_table(data, missing=m.config.train.missing)
    values = m._aligned(table)
    times["read+validate"] = time.perf_counter() - t
    t = time.perf_counter()
    scaled = m.normalizer_.transform(values)
    times["normalise"] = time.perf_counter() - t
    t = time.perf_counter()
    segments = S.signature_matrices(scaled, windows=sig.windows, gap=sig.gap, chunk_segments=sig.chunk_segments)
    times["signature"] = time.perf_counter() - t
    target = segments[sig.steps - 1:]
    n_win = len(target)
    timed = n_win if forward_windows == 0 else min(abs(forward_windows), n_win)
    recon = target * np.float32(0.98)
    if forward_windows >= 0:  # (-1: the "before" runs skip the forward: the same code as "after")
        t = time.perf_counter()  # the first call: oneDNN's set-up and one window, counted once, not scaled
        m._reconstruct(segments[: sig.steps])
        times["forward first call"] = time.perf_counter() - t
        t = time.perf_counter()
        recon[:timed] = m._reconstruct(segments[: timed + sig.steps - 1])
        times["forward"] = (time.perf_counter() - t) * n_win / timed
    t = time.perf_counter()
    result = D.score_windows(target, recon, m.config.score, sig.windows, m.calibration_)
    times["scoring"] = time.perf_counter() - t
    m._windows = lambda X: (table, result)  # detect()'s own frame code on these window results
    t = time.perf_counter()
    frame = m.detect(table)
    times["frame"] = time.perf_counter() - t
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        write_table(frame, os.path.join(tmp, "scores.csv"))
        times["write csv"] = time.perf_counter() - t
    return {"times": times, "windows": n_win, "forward_timed": timed, "threads": torch.get_num_threads(),
            "anomalous_rows": int(frame["is_anomaly"].sum())}


def _check_equal(model_dir: str, data: str, work: Path) -> str:
    """Both versions' signature matrices and window results on this data, bit for bit."""
    from mscred.data.io import load_table
    from mscred.detector import MSCRED

    (S0, D0), (S1, D1) = _modules("before", work), _modules("after", work)
    m = MSCRED.load(model_dir, device="cpu")
    sig = m.config.signature
    scaled = m.normalizer_.transform(m._aligned(load_table(data)))
    a = S0.signature_matrices(scaled, sig.windows, sig.gap, sig.chunk_segments)
    b = S1.signature_matrices(scaled, sig.windows, sig.gap, sig.chunk_segments)
    if not np.array_equal(a.view(np.uint32), b.view(np.uint32)):
        return "signature matrices DIFFER"
    target = a[sig.steps - 1:]
    recon = target * np.float32(0.98) + np.float32(1e-3) * np.sin(np.arange(target.size, dtype=np.float32)).reshape(
        target.shape)
    r0 = D0.score_windows(target, recon, m.config.score, sig.windows, m.calibration_)
    r1 = D1.score_windows(target, recon, m.config.score, sig.windows, m.calibration_)
    for name in ("score", "is_anomaly", "root_causes", "scales_lit"):
        x, y = np.asarray(getattr(r0, name)), np.asarray(getattr(r1, name))
        if x.shape != y.shape or not np.array_equal(x.view(np.uint8), y.view(np.uint8)):
            return f"window {name} DIFFER"
    return f"bit-equal ({len(a)} segments x {a.shape[1]} scales, {len(target)} windows, method {m.config.score.method})"


# ------------------------------------------------------------------------------------------------ driver
def _run_worker(variant, model, data, args, threads=None, forward=True) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    cmd = [sys.executable, __file__, "--worker", variant, str(model), str(data), "--forward-windows",
           str(args.forward_windows if forward else -1), "--work", str(args.work)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out.strip().splitlines()[-1])


def _loadavg() -> str:
    try:
        return " ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:
        return "n/a"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", nargs="+", default=["30x50000", "80x20000"], help="SENSORSxROWS")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--train-rows", type=int, default=1500)
    p.add_argument("--forward-windows", type=int, default=256, help="windows the forward is timed on; 0: all")
    p.add_argument("--threads-forward", type=int, default=0, help="also time the forward with this many threads")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "mscred_bench_cpu_detect")
    p.add_argument("--out", type=Path, default=None, help="write results.md / results.json here")
    p.add_argument("--worker", nargs=3, metavar=("VARIANT", "MODEL", "DATA"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    if args.worker:
        variant, model, data = args.worker
        print(json.dumps(_worker(variant, model, data, args.forward_windows, args.work)))
        return 0

    import torch

    lines = [f"# CPU detect phases, before (HEAD signature.py + detect.py) / after (working tree)", "",
             f"- date: {dt.datetime.now().isoformat(timespec='seconds')}",
             f"- machine: {platform.node()}, {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; "
             f"python {platform.python_version()}, torch {torch.__version__}, numpy {np.__version__}; "
             f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}",
             f"- command: `{' '.join([Path(sys.executable).name, 'benchmarks/bench_cpu_detect.py', *(argv or sys.argv[1:])])}`",
             f"- each cell: median of {args.repeats} fresh processes, before/after alternating (min-max in brackets); "
             f"forward (same code in both) timed in the after runs on {args.forward_windows or 'all'} windows after a "
             f"first call of one window, scaled to all windows",
             f"- load average at start: {_loadavg()}", ""]
    record = {"sizes": {}, "args": {k: str(v) for k, v in vars(args).items()}}
    for size in args.sizes:
        sensors, rows = (int(v) for v in size.lower().split("x"))
        data, model = _prepare(args.work, sensors, rows, args.train_rows, args.seed)
        check = _check_equal(str(model), str(data), args.work)
        print(f"{size}: outputs {check}", file=sys.stderr)
        runs = {"before": [], "after": [], "after, 1 thread fwd": []}
        for r in range(args.repeats):
            for variant in (("before", "after") if r % 2 == 0 else ("after", "before")):
                runs[variant].append(_run_worker(variant, model, data, args, forward=variant == "after"))
                print(f"{size} {variant} #{r}: " + " ".join(f"{k} {v:.3f}" for k, v in runs[variant][-1]["times"].items())
                      + f"  (load {_loadavg()})", file=sys.stderr)
            if args.threads_forward:
                runs["after, 1 thread fwd"].append(_run_worker("after", model, data, args, args.threads_forward))
        w = runs["after"][0]
        lines += [f"## {sensors} sensors x {rows:,} rows ({w['windows']:,} windows; model trained on "
                  f"{args.train_rows} rows, 1 epoch; torch threads {w['threads']})", "",
                  f"Outputs of the two versions: {check}. Load average after: {_loadavg()}.", "",
                  "| phase | before (s) | after (s) | speed-up |", "| --- | --- | --- | --- |"]
        for x in runs["before"]:  # the forward is timed in the "after" runs only: the same code
            x["times"].update({ph: statistics.median(y["times"][ph] for y in runs["after"]) for ph in FORWARD})
        med = {v: {ph: statistics.median(x["times"][ph] for x in runs[v]) for ph in PHASES} for v in runs if runs[v]}
        span = {v: {ph: (min(x["times"][ph] for x in runs[v]), max(x["times"][ph] for x in runs[v])) for ph in PHASES}
                for v in runs if runs[v]}
        for ph in PHASES + ["total", "total without forward"]:
            if ph == "total":
                b, a = (sum(med[v].values()) for v in ("before", "after"))
                rng = ""
            elif ph == "total without forward":
                b, a = (sum(t for k, t in med[v].items() if k not in FORWARD) for v in ("before", "after"))
                rng = ""
            elif ph in FORWARD:
                b, a = med["before"][ph], med["after"][ph]
                rng = " (after's)", f" [{span['after'][ph][0]:.3f}-{span['after'][ph][1]:.3f}]"
            else:
                b, a = med["before"][ph], med["after"][ph]
                rng = f" [{span['before'][ph][0]:.3f}-{span['before'][ph][1]:.3f}]", \
                      f" [{span['after'][ph][0]:.3f}-{span['after'][ph][1]:.3f}]"
            rb, ra = rng if rng else ("", "")
            lines.append(f"| {ph} | {b:.3f}{rb} | {a:.3f}{ra} | {b / a:.2f}x |" if a > 0 else f"| {ph} | {b:.3f} | {a:.3f} | |")
        if runs["after, 1 thread fwd"]:
            f1 = med["after, 1 thread fwd"]["forward"]
            f0 = med["after, 1 thread fwd"]["forward first call"]
            lines += ["", f"Forward with {args.threads_forward} thread(s) (`OMP_NUM_THREADS={args.threads_forward}`, "
                      f"code unchanged): {f1:.2f} s (+ {f0:.2f} s first call) against {med['after']['forward']:.2f} s "
                      f"(+ {med['after']['forward first call']:.2f} s) with {w['threads']} threads "
                      f"({med['after']['forward'] / f1:.2f}x; runs "
                      + ", ".join(f"{x['times']['forward']:.2f}" for x in runs["after, 1 thread fwd"]) + ")."]
        lines.append("")
        record["sizes"][size] = {"check": check, "runs": runs}
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "results.md").write_text(text + "\n")
        (args.out / "results.json").write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
