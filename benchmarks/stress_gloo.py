"""How often does a 2-rank gloo training run fail? The DDP test's fit, N times, no retry (CPU, gloo).

Used to find the rare SIGABRT of a gloo rank at exit ("terminate called without an active exception"). Compare
two trees in one session by putting the other tree's src first on PYTHONPATH (the spawned ranks inherit it):

    .venv/bin/python benchmarks/stress_gloo.py 120
    PYTHONPATH=/tmp/base_src .venv/bin/python benchmarks/stress_gloo.py 120
"""
from __future__ import annotations

import sys
import tempfile
import time

import numpy as np

from mscred.config import ModelConfig, TrainConfig
from mscred.distributed import fit_segments

TINY = ModelConfig(n_sensors=5, n_scales=3, channels=(4, 8, 8, 8))


def _segments(count: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).random((count, 3, 5, 5)).astype(np.float32)


def main(runs: int) -> int:
    failed, t0 = 0, time.time()
    for i in range(runs):
        cfg = TrainConfig(epochs=2, batch_size=5, device="cpu", seed=3, progress=False)
        with tempfile.TemporaryDirectory() as folder:
            try:
                fit_segments(TINY, cfg, _segments(15, 1), _segments(8, 2), nproc=2, checkpoint_dir=folder,
                             timeout=240)
            except Exception as err:  # noqa: BLE001 - every failure is counted and named
                failed += 1
                print(f"run {i}: {type(err).__name__}: {str(err)[:200]}", flush=True)
        if (i + 1) % 10 == 0:
            print(f"{i + 1} runs, {failed} failed, {time.time() - t0:.0f} s", flush=True)
    print(f"DONE {runs} runs, {failed} failed")
    return 0


if __name__ == "__main__":  # spawned ranks re-import this module: the runs must not start again there
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 100))
