"""Where the wall time of one `mscred train` goes, phase by phase, in a fresh process.

`mscred train` on the built-in data spent ~16 s on the H200 while its 10 epochs took 0.6 s
(results/pending_checks/cli.log); cProfile could not follow the fused path (dynamo's frame hook hides the callers).
This script runs what `mscred train` runs (load the CSV, MSCRED(...).fit, save) with wall-clock timers, a CUDA
synchronisation at each boundary, around: the imports, the CUDA context, the training step's set-up (warm-up, cuDNN
autotuning, graph capture: ``Trainer._make_step``), the validation set-up, the epochs, the reconstruction of every
window for calibration, the calibration, and the save. One configuration per process (the first Triton launch, the
cuDNN autotuning and the CUDA context are per-process costs); prints one JSON line.

    PYTHONPATH=src python benchmarks/bench_cli_phases.py DATA.csv [--backend auto] [--no-cuda-graphs]
        [--cudnn-benchmark auto|on|off] [--epochs 10]

``--cudnn-benchmark`` sets ``TrainConfig.cudnn_benchmark`` (auto: None, the default, which times cuDNN's
algorithms in the graphs' warm-up only for long runs; on / off: always / never), to weigh that one-time cost
against the steps it speeds up.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time

T_START = time.perf_counter()
import torch  # noqa: E402  (timed: the import is one of the phases)

T_TORCH = time.perf_counter()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data")
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--no-cuda-graphs", action="store_true")
    parser.add_argument("--cudnn-benchmark", choices=("auto", "on", "off"), default="auto")
    parser.add_argument("--epochs", type=int, default=10)
    args = parser.parse_args()
    phases: dict[str, float] = {"import torch": T_TORCH - T_START}

    def timed(name: str, fn):
        def wrapper(*a, **k):
            sync()
            t0 = time.perf_counter()
            out = fn(*a, **k)
            sync()
            phases[name] = phases.get(name, 0.0) + time.perf_counter() - t0
            return out
        return wrapper

    def sync():
        if torch.cuda.is_available():
            torch.cuda.synchronize()

    t0 = time.perf_counter()
    if torch.cuda.is_available():
        torch.zeros(1, device="cuda")
        sync()
    phases["CUDA context"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    from mscred import detector
    from mscred.data.io import Normalizer, load_table
    from mscred.detector import MSCRED
    from mscred.model import MSCREDNet
    from mscred.train import Trainer, WindowDataset
    phases["import mscred"] = time.perf_counter() - t0

    # The parts of fit outside the Trainer's loop (the "rest" below is what none of these timers covers). With the
    # background checkpoint writer, "per-epoch checkpoints" is the snapshot; the last write's wait is in the rest.
    Normalizer.fit = timed("fit: normalizer", Normalizer.fit)
    detector.MSCRED._segments = timed("fit: signature matrices", detector.MSCRED._segments)
    MSCREDNet.__init__ = timed("fit: model build", MSCREDNet.__init__)
    detector.MSCRED._make_trainer = timed("fit: trainer build", detector.MSCRED._make_trainer)
    WindowDataset.to = timed("fit: windows to the device", WindowDataset.to)
    Trainer._build_optimizer = timed("fit: optimizer build", Trainer._build_optimizer)
    detector.Calibration.fit = classmethod(timed("fit: calibration", detector.Calibration.fit.__func__))
    detector.score_windows = timed("fit: window scores", detector.score_windows)
    trainers: list = []  # the Trainer fit builds, to report whether it autotuned
    trainer_fit = Trainer.fit

    def recording_fit(self, *a, **k):
        trainers.append(self)
        return trainer_fit(self, *a, **k)

    Trainer.fit = recording_fit
    Trainer._make_step = timed("step set-up (warm-up, autotuning, capture)", Trainer._make_step)
    Trainer._make_inference = timed("validation set-up", Trainer._make_inference)
    Trainer._run_epoch = timed("epochs (incl. validation)", Trainer._run_epoch)
    Trainer._save = timed("per-epoch checkpoints", Trainer._save)
    MSCRED._reconstruct = timed("reconstruct every window", MSCRED._reconstruct)

    table = timed("load CSV", load_table)(args.data)
    model = MSCRED(epochs=args.epochs, backend=args.backend, cuda_graphs=False if args.no_cuda_graphs else None,
                   cudnn_benchmark={"auto": None, "on": True, "off": False}[args.cudnn_benchmark], progress=False)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        model.fit(table, checkpoint_dir=f"{tmp}/ckpt")
        sync()
        phases["fit (all)"] = time.perf_counter() - t0
        timed("save", model.save)(f"{tmp}/model")
    inner = sum(v for k, v in phases.items() if k.startswith("fit: ") or k in (
        "step set-up (warm-up, autotuning, capture)", "validation set-up", "epochs (incl. validation)",
        "per-epoch checkpoints", "reconstruct every window"))
    phases["rest of fit (no timer)"] = phases["fit (all)"] - inner
    phases["total"] = time.perf_counter() - T_START
    trainer_autotune = trainers[0].autotune if trainers else None
    print(json.dumps({"backend": args.backend, "cuda_graphs": not args.no_cuda_graphs,
                      "cudnn_benchmark": args.cudnn_benchmark, "autotuned": trainer_autotune,
                      "epoch_seconds": [round(h["seconds"], 4) for h in model.history_],
                      "phases_s": {k: round(v, 6) for k, v in phases.items()}}))


if __name__ == "__main__":
    main()
