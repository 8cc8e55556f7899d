"""Data-parallel training of ONE MSCREDNet over several processes with PyTorch's DistributedDataParallel.

Same result as one process with the same global batch (up to float rounding), by construction:

* Initial weights: every rank seeds and builds the same net, and DDP broadcasts rank 0's weights anyway.
* Sample order: every rank draws the single-process permutation of the epoch (``randperm(W, seed + epoch)``,
  the Trainer's ``_epoch_order``, DistributedSampler's rule) and cuts each global batch of b windows into
  ``world_size`` contiguous shards (sizes differ by at most one). This is DistributedSampler's split done per batch
  instead of per epoch, so that batch k of the distributed run holds exactly the windows of batch k of one process,
  the last, partial batch included.
* Loss scale: rank r minimises ``(world_size / b) * sum of its windows' MSE``. DDP averages gradients over ranks,
  so the gradient each rank applies is ``(1 / b) * sum over the whole batch``: the single-process gradient, also
  when the shards are unequal (b not a multiple of world_size, the last batch). A rank whose shard is empty (b <
  world_size) runs one padding window of weight 0, since every rank must take part in the gradient all-reduce.
* Adam then takes identical steps on every rank.

Only rank 0 writes checkpoints and shows progress (the Trainer's ``is_main``); the epoch's training loss and the
validation loss are sums all-reduced over the ranks, so every rank sees the same numbers and early stopping decides
alike everywhere (a rank that stopped alone would leave the others waiting in a collective).

CUDA graphs (``cuda_graphs=True``) follow PyTorch's recipe for DDP ("CUDA Graphs / Usage with
DistributedDataParallel" in the CUDA semantics notes): DDP is built on a side stream, ``static_graph=True``, and at
least 11 DDP-enabled eager iterations run before the capture (DDP's first iterations do bookkeeping, such as bucket
rebuilding and runtime statistics, that cannot be captured); the captured step then contains NCCL's all-reduce
(NCCL >= 2.9.6 supports capture). Should the capture fail anyway, training goes on eagerly after one warning.
The fused Triton kernels are ordinary ops under DDP: nothing changes for them. Verified on 2 x H200 (torch 2.11,
NCCL 2.28; benchmarks/results/ddp.md): fused + graphs on 2 GPUs give the 1-GPU loss to 7e-8. PyTorch warns once per
rank that an AccumulateGrad node's stream differs from the backward's (DDP keeps nodes made on the stream it was built
on; GraphedStep captures on a stream of its own): harmless here, the captured step is correct.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import time
from typing import Any, Optional

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from mscred.config import TrainConfig
from mscred.train import Trainer, WindowDataset, seed_torch
from mscred.train_graphs import GraphedStep, StateSnapshot, accumulated_step

log = logging.getLogger(__name__)

DDP_WARMUP_ITERS = 11  # PyTorch's CUDA-graph notes: at least 11 DDP-enabled eager iterations before capture


def shard(batch: torch.Tensor, rank: int, world_size: int) -> torch.Tensor:
    """This rank's contiguous part of a global batch of window indices (B,) -> (B_r,), B_r in {B // N, B // N + 1}."""
    return torch.tensor_split(batch, world_size)[rank]


class ShardEagerStep:
    """One Adam step on this rank's shard, run op by op; the loss is scaled so DDP's mean gives the global mean."""

    def __init__(self, module: nn.Module, optimizer: torch.optim.Optimizer, data: WindowDataset, bf16: bool = False,
                 micro_batch: Optional[int] = None):
        self.module, self.optimizer, self.data, self.bf16 = module, optimizer, data, bf16
        self.micro_batch = micro_batch

    def __call__(self, idx: torch.Tensor, scale: float) -> torch.Tensor:
        """Windows ``idx`` (b_r,) of a global batch, ``scale`` = world_size / b. Returns the scaled local loss."""
        self.optimizer.zero_grad(set_to_none=True)
        weight = torch.full(idx.shape, scale, device=idx.device)
        if idx.numel() == 0:  # an empty shard still joins the all-reduce, with one window of weight 0
            idx = torch.zeros(1, dtype=torch.long, device=idx.device)
            weight = torch.zeros(1, device=idx.device)
        # DDP all-reduces (averages) the gradients in the (last micro-batch's) backward
        return accumulated_step(self.module, self.optimizer, self.data, idx, weight, self.bf16, self.micro_batch)


class ShardGraphedStep(GraphedStep):
    """The whole step of ``GraphedStep`` (gather, forward, backward with DDP's all-reduce, Adam) in one CUDA graph,
    fed with a shard and the per-window weight ``scale`` instead of 1/b; padding windows weigh 0."""

    def __call__(self, idx: torch.Tensor, scale: float) -> torch.Tensor:
        b = idx.numel()
        if b > self.batch_size:
            raise ValueError(f"shard of {b} windows exceeds the captured {self.batch_size}")
        self.static_idx.zero_()
        self.static_idx[:b].copy_(idx)
        self.static_weight.zero_()
        self.static_weight[:b].fill_(scale)
        self.graph.replay()
        return self.static_loss.clone()


class DistributedTrainer(Trainer):
    """The Trainer of ``mscred.train`` under DistributedDataParallel; call inside an initialised process group.

    Parameters
    ----------
    net, train_cfg, steps
        As ``Trainer``; ``train_cfg.batch_size`` is the GLOBAL batch (each rank runs about batch_size / world_size).
    device : torch.device, optional
        This rank's device (``cuda:<local rank>`` from ``mscred.launch.setup``); else ``train_cfg.device``, with
        the current CUDA device made explicit.
    """

    def __init__(self, net: nn.Module, train_cfg: TrainConfig, steps: int = 5,
                 device: Optional[torch.device] = None):
        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError("DistributedTrainer needs an initialised process group (mscred.launch.setup)")
        super().__init__(net, train_cfg, steps)
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        if device is not None:
            self.device = torch.device(device)
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        self.ddp: Optional[DistributedDataParallel] = None
        self.graphs_used = False

    # ------------------------------------------------------------------------------------------------ hooks
    def _windows_per_step(self) -> int:
        """This rank's largest shard of a global batch (a micro-batch that large leaves the graphs on)."""
        return -(-self.cfg.batch_size // dist.get_world_size())

    def _forward_module(self) -> nn.Module:
        if self.ddp is None:
            # static_graph lets a CUDA graph capture DDP's all-reduce; eager steps go without it, since with it the
            # micro-batches' no_sync() crashes or stops all-reducing (pytorch/pytorch#187732, open in 2026). Keyed
            # to the graphs, the same on every rank, not to the micro-batch, which a CPU rank may pick from the
            # memory it sees (the ranks' DDP must be built alike).
            kwargs: dict[str, Any] = {"static_graph": self.use_graphs}
            if self.device.type == "cuda":
                kwargs["device_ids"] = [self.device.index]
                stream = torch.cuda.Stream(self.device)  # the recipe: build DDP on a side stream
                stream.wait_stream(torch.cuda.current_stream(self.device))
                with torch.cuda.stream(stream):
                    self.ddp = DistributedDataParallel(self.net, **kwargs)
                torch.cuda.current_stream(self.device).wait_stream(stream)
            else:
                self.ddp = DistributedDataParallel(self.net, **kwargs)
        return self.ddp

    def _reduce(self, value: torch.Tensor) -> torch.Tensor:
        total = value.detach().clone()
        dist.all_reduce(total)
        return total

    def _local_batch(self, n_windows: int) -> int:
        """The largest shard any rank gets: ceil(min(batch, W) / world_size)."""
        return -(-min(self.cfg.batch_size, n_windows) // self.world_size)

    def _make_step(self, train: WindowDataset):
        module = self._forward_module()
        if not self.use_graphs:
            return ShardEagerStep(module, self.optimizer, train, self.bf16, self.micro_batch)
        local = self._local_batch(len(train))
        try:
            self._ddp_warmup(module, train, local)
            step = ShardGraphedStep(module, self.optimizer, train, local, self.bf16,
                                    cudnn_benchmark=self.autotune)
            self.graphs_used = True
            return step
        except RuntimeError as err:  # every rank runs the same capture, so every rank lands here alike
            if self.is_main:
                log.warning("CUDA-graph capture under DistributedDataParallel failed (%s); training eagerly",
                            str(err).splitlines()[0])
            torch.cuda.synchronize(self.device)
            return ShardEagerStep(module, self.optimizer, train, self.bf16, self.micro_batch)

    def _ddp_warmup(self, module: nn.Module, train: WindowDataset, local: int) -> None:
        """DDP_WARMUP_ITERS - WARMUP_ITERS eager DDP steps on a side stream (GraphedStep runs the rest), undone."""
        from mscred.train_graphs import WARMUP_ITERS

        snapshot = StateSnapshot(self.optimizer)
        step = ShardEagerStep(module, self.optimizer, train, self.bf16, self.micro_batch)
        idx = torch.zeros(local, dtype=torch.long, device=self.device)
        stream = torch.cuda.Stream(self.device)
        stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(stream):
            for _ in range(max(DDP_WARMUP_ITERS - WARMUP_ITERS, 0)):
                step(idx, 1.0 / local)
        torch.cuda.current_stream(self.device).wait_stream(stream)
        snapshot.restore()
        self.optimizer.zero_grad(set_to_none=True)
        torch.cuda.synchronize(self.device)

    # ------------------------------------------------------------------------------------------------ loop
    def _run_epoch(self, epoch: int, train: WindowDataset, step, evaluate, val, progress) -> dict[str, Any]:
        t0 = time.perf_counter()
        order = self._epoch_order(epoch, len(train)).to(self.device)  # the same global permutation on every rank
        batch, world = self.cfg.batch_size, self.world_size
        loss_sum = torch.zeros((), device=self.device)  # sum of this rank's per-window losses
        progress.start_epoch(epoch + 1, len(order))
        self.net.train()
        for start in range(0, len(order), batch):
            glob = order[start:start + batch]
            scale = world / glob.numel()
            loss_sum += step(shard(glob, self.rank, world), scale) / scale
            progress.update(start + glob.numel(), loss_sum * world)  # rank 0's share, scaled: a display estimate
        train_loss = self._reduce(loss_sum).item() / len(order)  # .item() waits for the GPU
        progress.update(len(order), loss_sum * world, final=True)
        train_seconds = time.perf_counter() - t0
        val_loss = self._evaluate(evaluate, val) if evaluate is not None else None
        return {"epoch": epoch + 1, "train_loss": train_loss, "val_loss": val_loss,
                "seconds": time.perf_counter() - t0, "windows_per_s": len(order) / max(train_seconds, 1e-9)}

    def _evaluate(self, infer, data: WindowDataset) -> float:
        """Mean per-window MSE over all windows of ``data``, each rank scoring its contiguous share."""
        self.net.eval()
        mine = shard(torch.arange(len(data), device=self.device), self.rank, self.world_size)
        loss_sum = torch.zeros((), device=self.device)
        batch = self.micro_batch or self.cfg.batch_size   # (a micro-batch's memory, as Trainer._evaluate)
        for start in range(0, len(mine), batch):
            _, losses = infer(mine[start:start + batch])
            loss_sum += losses.sum()
        return self._reduce(loss_sum).item() / len(data)


# ---------------------------------------------------------------------------------------------------- entry points
def fit_segments(model_cfg, train_cfg: TrainConfig, train_segments, val_segments=None, *, nproc: int,
                 steps: int = 5, checkpoint_dir=None, resume: bool = False, backend: Optional[str] = None,
                 timeout: Optional[float] = None) -> tuple[list[dict[str, Any]], dict[str, torch.Tensor], dict]:
    """Train one MSCREDNet on segments with ``nproc`` DDP processes; the library twin of ``Trainer.fit``.

    Parameters
    ----------
    model_cfg : ModelConfig
        Every rank seeds ``train_cfg.seed`` and builds ``MSCREDNet(model_cfg)`` (as ``MSCRED.fit`` does).
    train_cfg : TrainConfig
        ``batch_size`` is the global batch.
    train_segments, val_segments : (S, K, n, n) float32 arrays
    nproc : int
        Processes (one GPU each on CUDA).
    checkpoint_dir, resume
        As ``Trainer.fit``; rank 0 alone writes.

    Returns
    -------
    (history, state_dict on the CPU, info) with info = {"world_size", "graphs_used", "device"} of rank 0.
    """
    from pathlib import Path

    import numpy as np
    from safetensors.torch import load_file

    from mscred.atomic import scratch_dir
    from mscred.launch import launch

    with scratch_dir("mscred-ddp-") as folder:
        np.save(Path(folder) / "train.npy", np.asarray(train_segments, dtype=np.float32))
        if val_segments is not None:
            np.save(Path(folder) / "val.npy", np.asarray(val_segments, dtype=np.float32))
        results = launch(_fit_segments_rank, nproc,
                         (folder, model_cfg, train_cfg, steps, None if checkpoint_dir is None else str(checkpoint_dir),
                          resume), device=train_cfg.device, backend=backend, timeout=timeout)
        state = load_file(str(Path(folder) / "weights.safetensors"))
    info = results[0]
    return info.pop("history"), state, info


def _fit_segments_rank(rank, folder: str, model_cfg, train_cfg: TrainConfig, steps: int,
                       checkpoint_dir: Optional[str], resume: bool) -> dict[str, Any]:
    from pathlib import Path

    import numpy as np
    from safetensors.torch import save_file

    from mscred.model import MSCREDNet, cpu_state
    from mscred.ops import resolve_model_backend

    train = np.load(Path(folder) / "train.npy")
    val_path = Path(folder) / "val.npy"
    val = np.load(val_path) if val_path.exists() else None
    seed_torch(train_cfg.seed, rank.device)
    net = MSCREDNet(dataclasses.replace(model_cfg, backend=resolve_model_backend(model_cfg.backend, rank.device)))
    trainer = DistributedTrainer(net, train_cfg, steps, device=rank.device)
    history = trainer.fit(train, val, checkpoint_dir=checkpoint_dir, resume=resume)
    if rank.is_main:
        state = cpu_state(net)
        save_file(state, str(Path(folder) / "weights.safetensors"))
    return {"history": history, "world_size": rank.world_size, "graphs_used": trainer.graphs_used,
            "device": str(rank.device)}


def train_distributed(data, out, overrides: Optional[dict[str, Any]] = None, *, nproc: int = 1,
                      checkpoint_dir=None, resume: bool = False, timeout: Optional[float] = None,
                      encoding: Optional[str] = None) -> Optional[dict]:
    """``mscred train DATA --out OUT --nproc N``: fit the MSCRED estimator with DDP and save it from rank 0.

    Spawns ``nproc`` processes, or, under torchrun, runs this process's rank (then ``nproc`` is ignored: torchrun's
    ``--nproc-per-node`` decides). Every rank loads DATA and runs ``MSCRED.fit`` with a DistributedTrainer; rank 0
    saves the model directory OUT atomically and removes ``checkpoint_dir`` (rank 0's per-epoch checkpoints).

    Parameters
    ----------
    data : path of the training table (CSV, Parquet, .npy), or a list of paths: the parts of the training data
        (``MSCRED.fit`` of a list of tables: no window spans two)
    out : model directory to write
    overrides : MSCRED settings by name (``epochs``, ``batch_size`` = the GLOBAL batch, ``device``, ...)
    nproc : processes (one GPU each on CUDA)
    checkpoint_dir, resume : as ``MSCRED.fit``
    encoding : text encoding of a CSV DATA, as ``load_table``'s (None: UTF-8, a BOM allowed); every rank reads it so

    Returns
    -------
    On rank 0 a summary dict (epochs, seconds, val_loss, theta, threshold, world_size, graphs, out); None on the
    other ranks of a torchrun launch.
    """
    from mscred.data.io import load_table
    from mscred.data.reading import settings_reading
    from mscred.launch import launch, setup, teardown, under_torchrun

    paths = [str(data)] if isinstance(data, (str, os.PathLike)) else [str(path) for path in data]
    for path in paths:   # bad input fails here, as one line
        load_table(path, missing=(overrides or {}).get("missing", TrainConfig.missing), encoding=encoding,
                   reading=settings_reading(overrides or {}))
    overrides = dict(overrides or {})
    device = overrides.get("device", "auto")
    # (encoding beside the overrides, not in them: those are MSCRED settings, and it is the file's, not the model's)
    args = (paths, str(out), overrides, None if checkpoint_dir is None else str(checkpoint_dir), resume, encoding)
    if under_torchrun():
        rank = setup(device)
        try:
            return _train_rank(rank, *args)
        finally:
            teardown()
    return launch(_train_rank, nproc, args, device=device, timeout=timeout)[0]


def summary_line(summary: dict) -> str:
    """The line ``mscred train`` prints, for a distributed run."""
    from mscred.cli.train import score_text

    val = summary["val_loss"] if summary["val_loss"] is not None else float("nan")
    return (f"trained {summary['epochs']} epoch(s) in {summary['seconds']:.1f} s on {summary['world_size']} "
            f"process(es) (DDP, {'CUDA graphs' if summary['graphs'] else 'eager'}; val loss {val:.4g}); "
            f"{score_text(summary['theta'], summary['method'])}; threshold {summary['threshold']:.4g}; "
            f"wrote {summary['out']}")


def _train_rank(rank, paths: list[str], out: str, overrides: dict, checkpoint_dir: Optional[str],
                resume: bool, encoding: Optional[str] = None) -> Optional[dict]:
    import shutil
    from pathlib import Path

    from mscred.data.io import load_table
    from mscred.data.reading import settings_reading
    from mscred.detector import MSCRED

    parts = [load_table(path, missing=overrides.get("missing", TrainConfig.missing), encoding=encoding,
                        reading=settings_reading(overrides)) for path in paths]
    model = MSCRED(**overrides)
    trainers: list[DistributedTrainer] = []

    def make(net, train_cfg, steps=5):
        trainers.append(DistributedTrainer(net, train_cfg, steps, device=rank.device))
        return trainers[-1]

    from mscred.errors import note_lines

    start = time.perf_counter()
    # rank 0 says what train says in one process; the others, which fit the same windows, stay quiet
    with _trainer_factory(model, make, rank.world_size), note_lines(show=rank.is_main):
        model.fit(parts if len(parts) > 1 else parts[0], checkpoint_dir=checkpoint_dir, resume=resume)
    if not rank.is_main:
        return None  # the other ranks trained the same weights; rank 0 alone writes them
    model.save(out)
    if checkpoint_dir is not None:
        shutil.rmtree(checkpoint_dir, ignore_errors=True)  # the saved model supersedes the checkpoints
    last = model.history_[-1] if model.history_ else {}
    return {"epochs": len(model.history_), "seconds": time.perf_counter() - start, "val_loss": last.get("val_loss"),
            "theta": list(model.theta_), "method": model.config_.score.method, "threshold": float(model.threshold_),
            "world_size": rank.world_size,
            "graphs": bool(trainers and trainers[-1].graphs_used), "out": str(Path(out))}


class _trainer_factory:
    """Make ``model.fit`` build its Trainer through ``make``, via the estimator's ``_make_trainer`` hook, and plan
    its memory for ``world_size`` ranks sharing each batch (``_ddp_world_size``: fleet's processes, in a process
    group too, each train a whole batch of their own)."""

    def __init__(self, model, make, world_size: int):
        self.model, self.make, self.world_size = model, make, world_size

    def __enter__(self):
        self.model._make_trainer = self.make
        self.model._ddp_world_size = self.world_size
        return self

    def __exit__(self, *exc):
        self.model.__dict__.pop("_make_trainer", None)
        self.model.__dict__.pop("_ddp_world_size", None)


def main(argv: Optional[list[str]] = None) -> int:
    """``python -m mscred.distributed train|fleet ...``, the torchrun entry:

        torchrun --nproc-per-node 2 -m mscred.distributed train DATA --out MODEL [train options]
        torchrun --nproc-per-node 2 -m mscred.distributed fleet SOURCE --out DIR [fleet options]

    (or without torchrun, with ``--nproc N``). Bad input: one line on stderr, exit code 2.
    """
    import click

    from mscred.cli.distributed_train import train_ddp
    from mscred.cli.fleet import fleet
    from mscred.cli.main import main as run

    # (through the CLI's own runner: a usage error was click's three lines, and a path that could not be written
    # or an internal error a traceback, where `mscred` says one line)
    group = click.Group("mscred-distributed", commands={"train": train_ddp, "fleet": fleet})
    return run(argv, group=group, prog_name="python -m mscred.distributed")


__all__ = ["DistributedTrainer", "ShardEagerStep", "ShardGraphedStep", "shard", "fit_segments",
           "train_distributed", "summary_line", "DDP_WARMUP_ITERS"]

if __name__ == "__main__":
    import sys

    from mscred.distributed import main as _main  # the imported module's functions, which the spawned ranks unpickle

    sys.exit(_main())
