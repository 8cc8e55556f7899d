"""benchmarks/bench_cli_phases.py on CPU at a tiny size: it must keep running what `mscred train` runs (its timers
patch Trainer / MSCRED methods by name, so a rename would break it silently on the device) and its phases must add
up: every timed phase inside fit is part of fit, and fit is part of the total."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from mscred.data.synthetic import write_synthetic

ROOT = Path(__file__).resolve().parents[1]


def test_phases_add_up_on_cpu(tmp_path):
    write_synthetic(tmp_path, n_sensors=4, length=2000, seed=0)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_cli_phases.py"),
                           str(tmp_path / "train.csv"), "--epochs", "2", "--cudnn-benchmark", "on"],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    phases = row["phases_s"]
    assert len(row["epoch_seconds"]) == 2 and row["autotuned"] is True  # cudnn_benchmark on: forced
    for key in ("import torch", "load CSV", "fit: signature matrices", "fit: optimizer build",
                "epochs (incl. validation)", "per-epoch checkpoints", "reconstruct every window", "fit (all)"):
        assert phases[key] > 0, key
    assert phases["rest of fit (no timer)"] > -1e-3  # the timed parts never exceed the whole
    assert phases["total"] >= phases["fit (all)"]
