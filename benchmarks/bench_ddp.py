"""DDP benchmark: correctness of N-GPU training against one GPU first, then training throughput on 1 vs N GPUs.

Workload (thesis): the paper's synthetic data, 36,000 training steps x 30 sensors (``generate_synthetic(30,
90,000)``'s first 40 %), min-max normalised, signature matrices at windows 10/30/60 and gap 10 -> 3,595 segments ->
3,591 windows of 5 steps; MSCREDNet as SPEC.md (channels 32/64/128/256), Adam lr 2e-4.

1. Correctness: the first ``--check-windows`` windows, global batch 64, one epoch, TF32 off (so that the float32
   arithmetic of both runs is the same up to summation order): the plain single-process Trainer on one GPU against
   ``DistributedTrainer`` on N GPUs (NCCL); largest relative difference of the epoch's loss and of the weights.
2. Throughput: global batch 256 and 1024, 1 GPU (plain Trainer, no DDP) and N GPUs (DDP, each rank batch / N),
   ``--epochs`` epochs each; windows/s = windows of an epoch / its training time (validation excluded), median over
   the epochs after the first; scaling efficiency = windows/s on N GPUs / (N x windows/s on 1 GPU).

Every run is a fresh set of spawned processes (``mscred.launch``; NVLink multicast switched off in each, as the shared
hosts require). A run that fails is recorded with its error and the others go on; with ``--backend fused`` failing,
the remaining runs use the reference ops. Results go to ``OUT/ddp.json`` and ``OUT/ddp.md`` after every run (a
killed benchmark leaves what it had measured).

Usage::

    python benchmarks/bench_ddp.py --smoke --out /tmp/ddp          # CPU, gloo, tiny sizes: the harness itself
    python benchmarks/bench_ddp.py --out $OUT --backend fused --cuda-graphs   # on a machine with >= 2 GPUs
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import sys
import time
import traceback
from dataclasses import replace
from pathlib import Path

import numpy as np

for _key, _value in {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                     "NVSHMEM_DISABLE_NVLS": "1"}.items():
    os.environ.setdefault(_key, _value)  # before torch (and NCCL) load, here and in every spawned rank

RESULTS = Path(__file__).resolve().parent / "results"
RUN_TIMEOUT = 100.0  # seconds per run (spawn, CUDA init, Triton compile, capture, epochs); a hang costs no more


# ------------------------------------------------------------------------------------------------------ the ranks
def _rank_fn(rank, folder: str, model_cfg, train_cfg, windows: int, tf32: bool, save: bool) -> dict:
    """One rank: build the seeded net, train (plain Trainer alone, DistributedTrainer with others), report."""
    import torch
    from safetensors.torch import save_file

    from mscred.distributed import DistributedTrainer
    from mscred.model import MSCREDNet
    from mscred.train import Trainer

    if rank.device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
    segments = np.load(Path(folder) / "segments.npy")[: windows + 4]  # window k = segments k..k+4
    torch.manual_seed(train_cfg.seed)
    net = MSCREDNet(model_cfg)
    if rank.world_size == 1:
        trainer = Trainer(net, replace(train_cfg, device=str(rank.device)))
        graphs = trainer.use_graphs
    else:
        trainer = DistributedTrainer(net, train_cfg, device=rank.device)
    history = trainer.fit(segments)
    if rank.world_size > 1:
        graphs = trainer.graphs_used
    if save and rank.is_main:
        save_file({k: v.detach().cpu().contiguous() for k, v in net.state_dict().items()},
                  str(Path(folder) / f"weights.{rank.world_size}.safetensors"))
    peak = torch.cuda.max_memory_allocated(rank.device) if rank.device.type == "cuda" else None
    return {"history": history, "graphs_used": bool(graphs), "device": str(rank.device), "peak_bytes": peak}


def run(folder: Path, nproc: int, model_cfg, train_cfg, windows: int, tf32: bool, save: bool, timeout: float) -> dict:
    from mscred.launch import launch

    t0 = time.perf_counter()
    results = launch(_rank_fn, nproc, (str(folder), model_cfg, train_cfg, windows, tf32, save),
                     device=train_cfg.device, timeout=timeout)
    out = results[0]
    out["wall_s"] = time.perf_counter() - t0
    return out


# ------------------------------------------------------------------------------------------------------ pieces
def _nccl_version():
    import torch

    if not torch.cuda.is_available():
        return None
    version = torch.cuda.nccl.version()
    return ".".join(map(str, version)) if isinstance(version, tuple) else str(version)


def environment() -> dict:
    import torch

    info = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "python": platform.python_version(),
            "torch": torch.__version__, "cuda": torch.version.cuda, "host": platform.node(), "cpus": os.cpu_count(),
            "gpus": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())],
            "nccl": _nccl_version(),
            "env": {k: os.environ.get(k) for k in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST",
                                                    "NVSHMEM_DISABLE_NVLS")}}
    try:
        import triton

        info["triton"] = triton.__version__
    except ImportError:
        info["triton"] = None
    return info


def thesis_segments(smoke: bool) -> np.ndarray:
    from mscred.data.io import Normalizer
    from mscred.data.synthetic import generate_synthetic
    from mscred.signature import signature_matrices

    n, length = (5, 1200) if smoke else (30, 90_000)
    train = generate_synthetic(n_sensors=n, length=length, seed=0).train
    values = train[[c for c in train.columns if c != "timestamp"]].to_numpy(dtype=np.float64)
    scaled = Normalizer().fit(values).transform(values)
    return signature_matrices(scaled, windows=(10, 30, 60), gap=10)


def rel_diff(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-30)


def weight_diff(folder: Path, nproc: int) -> float:
    """Largest |w_N - w_1| / max|w_1| over the parameter tensors."""
    from safetensors.torch import load_file

    one, many = (load_file(str(folder / f"weights.{k}.safetensors")) for k in (1, nproc))
    return max(float((many[k] - one[k]).abs().max() / one[k].abs().max().clamp_min(1e-30)) for k in one)


def throughput(history: list[dict]) -> float:
    rates = [h["windows_per_s"] for h in history[1:]] or [history[0]["windows_per_s"]]
    return statistics.median(rates)


def _num(value) -> str:
    return "-" if value is None else f"{value:.7g}" if value >= 1e-3 else f"{value:.2e}"


def markdown(report: dict) -> str:
    env = report["environment"]
    lines = [f"# DDP training: 1 vs {report['nproc']} GPUs ({'smoke, CPU' if report['smoke'] else 'thesis workload'})",
             "", f"{env['date']}; GPUs {', '.join(env['gpus']) or 'none'}; torch {env['torch']}, CUDA {env['cuda']}, "
             f"NCCL {env['nccl']}, triton {env['triton']}; NVLS off: {env['env']}", "",
             f"Model backend {report['backend']}, CUDA graphs requested: {report['cuda_graphs']}; "
             f"{report['windows']} windows of 5 x {report['shape']}, {report['epochs']} epochs per throughput run "
             f"(windows/s: median over the epochs after the first; TF32 on in the throughput runs)."
             + (f" NOTE: {report['graphs_note']}" if report.get("graphs_note") else ""),
             "", "## Correctness (1 epoch, TF32 off)", ""]
    check = report.get("correctness")
    if check:
        lines += ["| windows | global batch | loss 1 GPU | loss N GPUs | rel. diff | max rel. weight diff | graphs |",
                  "|---|---|---|---|---|---|---|",
                  f"| {check['windows']} | {check['batch']} | {_num(check.get('loss_1'))} | "
                  f"{_num(check.get('loss_n'))} | {_num(check.get('loss_rel_diff'))} | "
                  f"{_num(check.get('weight_rel_diff'))} | {check.get('graphs', '-')} |"]
        if check.get("error"):
            lines += ["", f"error: `{check['error']}`"]
    lines += ["", "## Throughput", "", "| global batch | GPUs | per-rank batch | windows/s | epoch losses | graphs | "
              "scaling efficiency | note |", "|---|---|---|---|---|---|---|---|"]
    for row in report["throughput"]:
        losses = ", ".join(f"{x:.5g}" for x in row.get("losses", []))
        eff = f"{row['efficiency']:.2f}" if row.get("efficiency") is not None else ""
        wps = f"{row['windows_per_s']:,.0f}" if row.get("windows_per_s") else "-"
        lines.append(f"| {row['batch']} | {row['nproc']} | {row['batch'] // row['nproc']} | {wps} | {losses} | "
                     f"{row.get('graphs', '-')} | {eff} | {row.get('error', '')[:120]} |")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------------ driver
def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--smoke", action="store_true", help="CPU, gloo, n = 5 and a tiny model: test the harness")
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batches", type=int, nargs="+", default=[256, 1024])
    parser.add_argument("--check-windows", type=int, default=512)
    parser.add_argument("--backend", default="reference", choices=["reference", "fused"])
    parser.add_argument("--cuda-graphs", action="store_true")
    parser.add_argument("--budget", type=float, default=600.0, help="seconds; runs that would start later are skipped")
    args = parser.parse_args()

    import tempfile

    from mscred.config import ModelConfig, TrainConfig

    start = time.monotonic()
    args.out.mkdir(parents=True, exist_ok=True)
    segments = thesis_segments(args.smoke)
    n = segments.shape[-1]
    total = len(segments) - 4
    device = "cpu" if args.smoke else "cuda"
    model_cfg = ModelConfig(n_sensors=n, n_scales=3, backend=args.backend,
                            **({"channels": (4, 8, 8, 8)} if args.smoke else {}))
    train_cfg = TrainConfig(epochs=args.epochs, device=device, seed=0, progress=False,
                            cuda_graphs=args.cuda_graphs and not args.smoke)
    batches = [8, 16] if args.smoke else args.batches
    check_windows = min(args.check_windows, total) if not args.smoke else total
    report = {"environment": environment(), "smoke": args.smoke, "nproc": args.nproc, "backend": args.backend,
              "cuda_graphs": train_cfg.cuda_graphs, "windows": total, "shape": list(segments.shape[1:]),
              "epochs": args.epochs, "throughput": []}

    def save():
        (args.out / "ddp.json").write_text(json.dumps(report, indent=1) + "\n")
        (args.out / "ddp.md").write_text(markdown(report))

    def left() -> float:
        return args.budget - (time.monotonic() - start)

    with tempfile.TemporaryDirectory(prefix="bench-ddp-") as tmp:
        folder = Path(tmp)
        np.save(folder / "segments.npy", segments)

        graphs_ok = True

        def attempt(nproc, cfg, windows, tf32, save_weights):
            """One run (at most RUN_TIMEOUT s). A fused-backend failure: again with the reference ops, and so on from
            then on; a run with CUDA graphs that hangs (a collective that never completes inside a capture would):
            again eagerly, and graphs off from then on. Both are recorded in the report."""
            nonlocal model_cfg, graphs_ok
            if not graphs_ok:
                cfg = replace(cfg, cuda_graphs=False)
            try:
                return run(folder, nproc, model_cfg, cfg, windows, tf32, save_weights,
                           timeout=max(min(left() - 5, RUN_TIMEOUT), 10))
            except TimeoutError as err:
                if not cfg.cuda_graphs:
                    raise
                graphs_ok = False
                report["graphs_note"] = f"{nproc}-rank run with CUDA graphs timed out ({err}); graphs off from then on"
                print(report["graphs_note"], flush=True)
                return attempt(nproc, cfg, windows, tf32, save_weights)
            except Exception as err:  # noqa: BLE001 - record and go on: a benchmark reports what it could measure
                message = f"{type(err).__name__}: {str(err).strip().splitlines()[-1] if str(err).strip() else ''}"
                traceback.print_exc()
                if model_cfg.backend == "fused":
                    print(f"fused backend failed ({message}); the remaining runs use the reference ops", flush=True)
                    model_cfg = replace(model_cfg, backend="reference")
                    report["backend"] = "reference (fused failed: " + message[:200] + ")"
                    return attempt(nproc, cfg, windows, tf32, save_weights)
                raise RuntimeError(message) from err

        # 1. correctness
        check = {"windows": check_windows, "batch": 64 if not args.smoke else 8}
        cfg = replace(train_cfg, epochs=1, batch_size=check["batch"])
        try:
            one = attempt(1, cfg, check_windows, False, True)
            many = attempt(args.nproc, cfg, check_windows, False, True)
            check.update(loss_1=one["history"][0]["train_loss"], loss_n=many["history"][0]["train_loss"],
                         graphs=many["graphs_used"])
            check["loss_rel_diff"] = rel_diff(check["loss_n"], check["loss_1"])
            check["weight_rel_diff"] = weight_diff(folder, args.nproc)
        except Exception as err:  # noqa: BLE001
            check["error"] = str(err)
        report["correctness"] = check
        save()
        print(json.dumps(check), flush=True)

        # 2. throughput
        for batch in batches:
            base = None
            for nproc in (1, args.nproc):
                row = {"batch": batch, "nproc": nproc}
                if left() < 20:
                    row["error"] = "skipped: out of time budget"
                else:
                    try:
                        res = attempt(nproc, replace(train_cfg, batch_size=batch), total, True, False)
                        row.update(windows_per_s=throughput(res["history"]), graphs=res["graphs_used"],
                                   backend_used=model_cfg.backend,
                                   losses=[h["train_loss"] for h in res["history"]], wall_s=res["wall_s"],
                                   epoch_s=[h["seconds"] for h in res["history"]], peak_bytes=res["peak_bytes"])
                        if nproc == 1:
                            base = row["windows_per_s"]
                        elif base:
                            row["efficiency"] = row["windows_per_s"] / (nproc * base)
                    except Exception as err:  # noqa: BLE001
                        row["error"] = str(err)
                report["throughput"].append(row)
                save()
                print(json.dumps(row), flush=True)
    print(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
