"""Per-epoch seconds of Trainer.fit with CUDA graphs on the thesis workload, twice in one process.

Why: bench_e2e_graphs.py measured 4.35 s for 5 graphed epochs in a fresh process, against 5.5 ms x 140 steps =
0.8 s from the graphed step's own timing. This shows whether the gap is one-time (first epoch) or per step.
Usage (CUDA machine): PYTHONPATH=src python3 benchmarks/diag_fit_epochs.py
"""
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
import bench_train as bt  # noqa: E402
from mscred.config import ModelConfig, TrainConfig  # noqa: E402
from mscred.model import MSCREDNet  # noqa: E402
from mscred.signature import signature_matrices  # noqa: E402
from mscred.train import Trainer  # noqa: E402

seg = torch.from_numpy(signature_matrices(bt.thesis_series(36_000, 30), windows=bt.WINDOWS, gap=bt.GAP)).cuda()
for run in range(2):
    for bf16 in (True, False):
        torch.manual_seed(0)
        net = MSCREDNet(ModelConfig(n_sensors=30, backend="fused")).cuda()
        trainer = Trainer(net, TrainConfig(epochs=5, batch_size=128, device="cuda", bf16=bf16, cuda_graphs=True,
                                           progress=False))
        t0 = time.perf_counter()
        hist = trainer.fit(seg)
        torch.cuda.synchronize()
        print(json.dumps({"run": run, "bf16": bf16, "setup_s": round(trainer.setup_seconds, 3),
                          "fit_s": round(time.perf_counter() - t0, 3),
                          "epoch_s": [round(h["seconds"], 3) for h in hist],
                          "losses": [round(h["train_loss"], 6) for h in hist]}), flush=True)
