"""Training and inference of MSCREDNet: windows over the segments, the Trainer loop, and ``predict``.

A model input window k is segments k..k+steps-1 (steps = 5); its target is its last segment. The windows are never
materialised: ``WindowDataset.batch(idx)`` gathers ``segments[idx[:, None] + arange(steps)]`` per batch, on the
device where the segments live (the whole segments tensor goes to the GPU once; the thesis workload is ~40 MB).

The Trainer keeps the pieces a distributed run replaces apart (issue 6): ``_epoch_order`` (the sampler, seeded per
epoch like ``DistributedSampler``: ``randperm(W, seed + epoch)``), ``_make_step`` (eager or CUDA graph,
``train_graphs.py``), ``_forward_module`` (the DDP wrapper), ``_reduce`` (the cross-rank sum of a loss), and
``is_main`` (rank 0 alone writes checkpoints and shows progress).
"""
from __future__ import annotations

import dataclasses
import logging
import math
import time
import warnings
from pathlib import Path
from typing import Any, NamedTuple, Optional

import numpy as np
import torch
from torch import nn

from mscred.config import TrainConfig
from mscred.errors import IgnoredSettingWarning, InputError, NoteWarning
from mscred.ops import cpu_inference
from mscred.packed_adam import make_adam
from mscred.train_checkpoint import (CHECKPOINT_NAME, BackgroundWriter, check_resumable, checkpoint_contents,
                                     load_checkpoint, write_checkpoint)
from mscred.train_graphs import (EagerInference, EagerStep, GraphedInference, GraphedStep,
                                 GraphedWindowInference, autocast, autotune_worthwhile, bf16_native)

log = logging.getLogger(__name__)


def resolve_device(name: str) -> torch.device:
    """"auto" -> cuda when available, else cpu; "cuda" without CUDA is an InputError."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise InputError(f"device {name!r} requested but CUDA is not available here (use --device cpu or auto)")
    return device


def seed_torch(seed: int, device: str | torch.device) -> None:
    """``torch.manual_seed`` for a run on ``device``. On the CPU only the CPU generator is seeded (the same stream):
    ``torch.manual_seed`` also queues a seed for every CUDA device, so a CPU run on a GPU machine would change the
    caller's CUDA random state."""
    if torch.device(device).type == "cpu":
        torch.default_generator.manual_seed(seed)
    else:
        torch.manual_seed(seed)


class WindowDataset:
    """The windows of a segments tensor, as index views (no copy of the data).

    Parameters
    ----------
    segments : (S, K, n, n) float32 array or tensor
        Signature matrices of consecutive segments; a float32 NumPy array is shared, not copied.
    steps : int
        Segments per window (SPEC's h = 5). There are S - steps + 1 windows.
    starts : (W,) int64, optional
        The first segment of each window, where not every run of ``steps`` segments is one: segments of several
        stretches of a series (parts: ``MSCRED.fit`` of a list of tables), whose windows must not span two. None:
        window k starts at segment k.
    """

    def __init__(self, segments, steps: int = 5, starts=None):
        seg = torch.as_tensor(segments)
        if seg.ndim != 4 or seg.shape[-1] != seg.shape[-2]:
            raise ValueError(f"segments must be (S, n_scales, n, n), got {tuple(seg.shape)}")
        self.segments = seg if seg.dtype == torch.float32 else seg.float()
        self.steps = steps
        self.offsets = torch.arange(steps, device=self.segments.device)
        self.starts = None if starts is None else torch.as_tensor(starts, dtype=torch.int64,
                                                                  device=self.segments.device)
        if self.starts is not None and len(self.starts) and not (
                0 <= int(self.starts.min()) and int(self.starts.max()) <= seg.shape[0] - steps):
            raise ValueError(f"window starts must lie in [0, {seg.shape[0] - steps}]")

    def __len__(self) -> int:
        if self.starts is not None:
            return len(self.starts)
        return max(self.segments.shape[0] - self.steps + 1, 0)

    def first_segments(self, idx: torch.Tensor) -> torch.Tensor:
        """The first segment of each window ``idx``."""
        return idx if self.starts is None else self.starts[idx]

    def __getitem__(self, k: int) -> torch.Tensor:  # (steps, K, n, n), a view
        if not 0 <= k < len(self):
            raise IndexError(f"window {k} out of range [0, {len(self)})")
        first = k if self.starts is None else int(self.starts[k])
        return self.segments[first:first + self.steps]

    def batch(self, idx: torch.Tensor) -> torch.Tensor:
        """Windows ``idx`` (B,) int64 on the segments' device -> (B, steps, K, n, n)."""
        return self.segments[self.first_segments(idx)[:, None] + self.offsets]

    def windows(self) -> torch.Tensor:
        """Every run of ``steps`` segments as one strided view (S - steps + 1, steps, K, n, n) of the segments (run k
        starts at segment k: window k when ``starts`` is None)."""
        seg = self.segments
        s0 = seg.stride(0)
        runs = max(seg.shape[0] - self.steps + 1, 0)
        return seg.as_strided((runs, self.steps, *seg.shape[1:]), (s0, s0, *seg.stride()[1:]))

    def gather_into(self, idx: torch.Tensor, out: torch.Tensor) -> None:
        """Windows ``idx`` (B,) int64 into ``out`` (B, steps, K, n, n), in place: ONE ``index_select`` kernel on the
        strided windows view (no index arithmetic, no temporary; with ``starts``, one more for their first
        segments); the CUDA-graph steps call it before a replay."""
        torch.index_select(self.windows(), 0, self.first_segments(idx), out=out)

    def to(self, device: torch.device) -> "WindowDataset":
        return WindowDataset(self.segments.to(device), self.steps, self.starts)


class _Progress:
    """Per epoch on stderr: a rich progress bar (loss, windows/s) while it runs, when stderr is a terminal, and one
    summary line when it ends; nothing when disabled.

    Piped or logged, rich cannot redraw the bar and prints its last state when it stops, which repeated every epoch's
    summary line in logs; so there only the lines are written. Reading the running loss synchronises with the GPU,
    so the bar refreshes at most every ``interval`` seconds.
    """

    def __init__(self, enabled: bool, epochs: int, interval: float = 0.5):
        self.enabled, self.epochs, self.interval = enabled, epochs, interval
        self.console = self.bar = None
        if enabled:
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn)

            self.console = Console(stderr=True)
            if self.console.is_terminal:
                self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                    TextColumn("loss {task.fields[loss]}"),
                                    TextColumn("{task.fields[wps]} windows/s"), TimeElapsedColumn(),
                                    console=self.console)

    def __enter__(self):
        if self.bar is not None:
            self.bar.start()
        return self

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.stop()

    def start_epoch(self, epoch: int, windows: int) -> None:
        self.t0 = self.last = time.perf_counter()
        if self.bar is not None:
            self.task = self.bar.add_task(f"epoch {epoch}/{self.epochs}", total=windows, loss="-", wps="-")

    def update(self, seen: int, loss_sum: torch.Tensor, final: bool = False) -> None:
        if self.bar is None:
            return
        now = time.perf_counter()
        if final or now - self.last >= self.interval:
            self.last = now
            self.bar.update(self.task, completed=seen, loss=f"{loss_sum.item() / max(seen, 1):.6f}",
                            wps=f"{seen / max(now - self.t0, 1e-9):,.0f}")

    def end_epoch(self, record: dict[str, Any]) -> None:
        if self.console is not None:
            val = "-" if record["val_loss"] is None else f"{record['val_loss']:.6f}"
            self.console.print(f"epoch {record['epoch']}/{self.epochs}: train loss {record['train_loss']:.6f}, "
                                   f"val loss {val}, {record['seconds']:.1f} s, "
                                   f"{record['windows_per_s']:,.0f} windows/s")


class Trainer:
    """Train an MSCREDNet with Adam on the MSE between its output and each window's last step.

    Parameters
    ----------
    net : nn.Module
        Maps (B, steps, K, n, n) -> (B, K, n, n); its initial weights come from the caller (seed before building).
    train_cfg : TrainConfig
        epochs, batch_size, micro_batch, lr, seed, device, early_stopping_patience, bf16, cuda_graphs, progress.
    steps : int
        Segments per window (SignatureConfig.steps).

    After ``fit``: ``history`` (one dict per epoch), ``optimizer``, and ``setup_seconds`` (the one-time CUDA-graph
    warm-up and capture, kept out of the epochs' times).
    """

    def __init__(self, net: nn.Module, train_cfg: TrainConfig, steps: int = 5):
        self.net, self.cfg, self.steps = net, train_cfg, steps
        self.device = resolve_device(train_cfg.device)
        # Micro-batches run op by op (a graph captures one whole batch's step), so one smaller than the batch turns
        # the graphs off. fit plans again with the windows of its data known (_plan_for), since a batch is never
        # larger than the windows, and says so there, once: a note here, before the data is known, had been followed
        # by its retraction on tiny data.
        graphs_here = graphs_enabled(train_cfg.cuda_graphs, self.device)
        self._graphs_here = graphs_here
        plan = plan_steps(self._windows_per_step(), train_cfg.micro_batch, graphs_here)
        self.micro_batch, self.use_graphs = plan.micro_batch, plan.use_graphs
        self.bf16 = bool(train_cfg.bf16 and bf16_native(self.device))
        if train_cfg.cuda_graphs and not graphs_here:
            warnings.warn(IgnoredSettingWarning(
                f"--cuda-graphs (cuda_graphs=True) ignored: CUDA graphs need a CUDA device; training eagerly on "
                f"{self.device}"), stacklevel=2)
        if train_cfg.bf16 and not self.bf16:
            why = ("this CPU has no native bf16 (AVX512-BF16, AMX), and emulated bf16 is slower than float32"
                   if self.device.type == "cpu" else
                   f"bf16 autocast runs on CUDA and on CPUs with native bf16, not on {self.device.type}")
            warnings.warn(IgnoredSettingWarning(
                f"--bf16 (bf16=True) ignored: {why}; training in float32 on {self.device}"), stacklevel=2)
        self.rank, self.world_size = 0, 1  # a DistributedDataParallel run sets these
        self.optimizer: Optional[torch.optim.Optimizer] = None
        self.history: list[dict[str, Any]] = []
        self.setup_seconds = 0.0
        self.autotune = False  # whether fit's graphs time cuDNN's algorithms (decided in fit: autotune_worthwhile)
        self._writer = BackgroundWriter()  # per-epoch checkpoints are written while the next epoch trains

    def _windows_per_step(self) -> int:
        """The most windows one training step of this process runs: a micro-batch as large turns nothing off."""
        return self.cfg.batch_size

    def _plan_for(self, windows: int) -> None:
        """The micro-batch and the graphs of a fit on ``windows`` training windows (``plan_steps``): a batch is
        clamped to the windows (the graphs capture ``min(batch_size, windows)``), so a micro-batch as large as the
        windows is no micro-batch, and the graphs stay on (where the optimizer, if already built, can take a
        captured step). Micro-batches that do split a step turn the graphs off, said in one note where they would
        have run (asked for, or on by default)."""
        plan = plan_steps(self._windows_per_step(), self.cfg.micro_batch, self._graphs_here, windows=windows,
                          world_size=self.world_size)
        capturable = self.optimizer is None or all(g.get("capturable", False) for g in self.optimizer.param_groups)
        if plan.use_graphs and not self.use_graphs and not capturable:
            return   # (a second fit of a Trainer whose optimizer was built eager keeps running eagerly)
        if plan.micro_batch is not None and self._graphs_here:
            warnings.warn(IgnoredSettingWarning(
                f"CUDA graphs off: micro-batches of {plan.micro_batch} windows (--micro-batch, micro_batch) run "
                f"eagerly, a graph captures a whole batch's step"), stacklevel=3)
        self.micro_batch, self.use_graphs = plan.micro_batch, plan.use_graphs

    @property
    def is_main(self) -> bool:
        """Rank 0: the process that writes checkpoints and shows progress."""
        return self.rank == 0

    # ------------------------------------------------------------------------------------------------ fit
    def fit(self, train_segments, val_segments=None, checkpoint_dir: Optional[str | Path] = None,
            resume: bool = False, train_starts=None, val_starts=None) -> list[dict[str, Any]]:
        """Train for ``cfg.epochs`` epochs (fewer with early stopping); returns the history.

        Parameters
        ----------
        train_segments : (S, K, n, n) float32
            Training segments; windows of ``steps`` consecutive segments are sampled in a seeded random order.
        val_segments : (S_val, K, n, n) float32 or None
            Validation segments (the caller holds them out); None: no validation loss, and early stopping
            watches the training loss.
        checkpoint_dir : directory or None
            Where ``checkpoint.safetensors`` is written atomically after every epoch.
        resume : bool
            Continue from the checkpoint in ``checkpoint_dir`` (weights, Adam state, RNG, epoch, history); with no
            checkpoint there yet, start from scratch.
        train_starts, val_starts : (W,) int64 or None
            The first segment of each training / validation window (``WindowDataset``'s ``starts``), where the
            segments are of several parts of a series; None: every run of ``steps`` segments is a window.

        Returns
        -------
        list of dict
            Per epoch: ``epoch`` (1-based), ``train_loss`` (mean over the epoch's windows), ``val_loss`` (or None),
            ``seconds`` (the whole epoch, validation included), ``windows_per_s`` (training windows / training time).
        """
        train = WindowDataset(train_segments, self.steps, train_starts).to(self.device)
        if len(train) == 0:
            raise InputError(f"{train.segments.shape[0]} training segment(s) give no window of {self.steps} steps")
        val = (WindowDataset(val_segments, self.steps, val_starts).to(self.device) if val_segments is not None
               else None)
        if val is not None and len(val) == 0:
            val = None
        self._plan_for(len(train))
        self.net.to(self.device)
        self._build_optimizer()
        seed_torch(self.cfg.seed, self.device)

        ckpt = Path(checkpoint_dir) / CHECKPOINT_NAME if checkpoint_dir is not None else None
        start, self.history = 0, []
        if resume and ckpt is not None and ckpt.exists():
            # before any capture: it replaces Adam's state; the run's settings are compared before any weight loads
            meta = load_checkpoint(ckpt, self.net, self.optimizer, check=lambda meta: check_resumable(
                meta, ckpt, self.cfg.epochs, *self._run_configs(), steps=self.steps))
            start, self.history = meta["epoch"], meta["history"]
            # (a log line once, which no one saw: the CLI configures no logging; its notes are warnings)
            warnings.warn(NoteWarning(f"resuming from {ckpt} after epoch {start} of {self.cfg.epochs}"),
                          stacklevel=2)
        elif resume and ckpt is not None:
            warnings.warn(NoteWarning(f"resume: no checkpoint in {ckpt.parent} yet; training from the start"),
                          stacklevel=2)

        if start < self.cfg.epochs and not self._should_stop():
            planned_steps = (self.cfg.epochs - start) * math.ceil(len(train) / self.cfg.batch_size)
            self.autotune = autotune_worthwhile(self.cfg.cudnn_benchmark, planned_steps)
            t0 = time.perf_counter()
            step = self._make_step(train)
            evaluate = self._make_inference(val) if val is not None else None
            self.setup_seconds = time.perf_counter() - t0  # graph warm-up + capture: one-time, not in any epoch
            with _Progress(self.cfg.progress and self.is_main, self.cfg.epochs) as progress:
                try:
                    self._epochs(start, train, step, evaluate, val, progress, ckpt)
                finally:
                    write_error = self._writer.join()  # the last checkpoint is on disk before fit returns
            if write_error is not None:  # (an error of training itself, raised above, takes precedence)
                raise write_error
        return self.history

    def _epochs(self, start: int, train: WindowDataset, step, evaluate, val, progress, ckpt: Optional[Path]):
        for epoch in range(start, self.cfg.epochs):
            record = self._run_epoch(epoch, train, step, evaluate, val, progress)
            if not np.isfinite(record["train_loss"]):
                # Stop before a checkpoint of broken weights overwrites the last good one.
                raise FloatingPointError(f"training diverged in epoch {epoch + 1}: loss "
                                         f"{record['train_loss']} (lower the learning rate?)")
            self.history.append(record)
            progress.end_epoch(record)
            if ckpt is not None and self.is_main:
                self._save(ckpt, epoch + 1)
            if self._should_stop():
                log.info("early stopping after epoch %d", epoch + 1)
                break

    # ------------------------------------------------------------------------------------------------ parts
    def _build_optimizer(self) -> None:
        if self.optimizer is None:
            # capturable=True keeps Adam's step counter on the GPU so that optimizer.step() can be captured;
            # fused=True on CUDA: one multi-tensor kernel for all parameters instead of a chain of foreach kernels
            # (H200 profile: Adam 0.6 ms of a 7.6 ms step); same update rule, same state keys in checkpoints.
            # The fused backend's packed weights step in a kernel of our own (packed_adam.PackedAdam).
            backend = getattr(getattr(self.net, "cfg", None), "backend", "reference")
            self.optimizer = make_adam(self.net.parameters(), self.device, backend, lr=self.cfg.lr,
                                       capturable=self.use_graphs, fused=self.device.type == "cuda")

    def _epoch_order(self, epoch: int, n_windows: int) -> torch.Tensor:
        """The windows of ``epoch`` in training order: a permutation seeded by seed + epoch (DistributedSampler's
        rule), so an epoch's order does not depend on what ran before it and a resumed run repeats it exactly."""
        generator = torch.Generator().manual_seed(self.cfg.seed + epoch)
        return torch.randperm(n_windows, generator=generator)

    def _reduce(self, value: torch.Tensor) -> torch.Tensor:
        """Sum of ``value`` over ranks (identity in one process)."""
        return value

    def _forward_module(self) -> nn.Module:
        """The module the training step calls: the net itself here, its DistributedDataParallel wrapper in a
        distributed run (checkpoints always save ``self.net``, so parameter names carry no ``module.`` prefix)."""
        return self.net

    def _make_step(self, train: WindowDataset):
        module = self._forward_module()
        if self.use_graphs:
            return GraphedStep(module, self.optimizer, train, min(self.cfg.batch_size, len(train)), self.bf16,
                               cudnn_benchmark=self.autotune)
        return EagerStep(module, self.optimizer, train, self.bf16, self.micro_batch)

    def _make_inference(self, data: WindowDataset):
        if self.use_graphs:
            return GraphedInference(self.net, data, min(self.cfg.batch_size, len(data)), self.bf16,
                                    cudnn_benchmark=self.autotune)
        # On a CPU the validation batches (consecutive windows) are scored from their shared segments
        return EagerInference(self.net, data, self.bf16,
                              windows=self.device.type == "cpu" and hasattr(self.net, "forward_windows"))

    def _run_epoch(self, epoch: int, train: WindowDataset, step, evaluate, val, progress) -> dict[str, Any]:
        t0 = time.perf_counter()
        order = self._epoch_order(epoch, len(train)).to(self.device)
        batch = self.cfg.batch_size
        loss_sum = torch.zeros((), device=self.device)
        progress.start_epoch(epoch + 1, len(order))
        self.net.train()
        for start in range(0, len(order), batch):
            idx = order[start:start + batch]
            loss_sum.add_(step(idx), alpha=idx.numel())  # stays on the device: no sync per step
            progress.update(start + idx.numel(), loss_sum)
        progress.update(len(order), loss_sum, final=True)
        train_loss = self._reduce(loss_sum).item() / (len(order) * self.world_size)  # .item() waits for the GPU
        train_seconds = time.perf_counter() - t0
        val_loss = self._evaluate(evaluate, val) if evaluate is not None else None
        return {"epoch": epoch + 1, "train_loss": train_loss, "val_loss": val_loss,
                "seconds": time.perf_counter() - t0,
                "windows_per_s": len(order) * self.world_size / max(train_seconds, 1e-9)}

    def _evaluate(self, infer, data: WindowDataset) -> float:
        """Mean per-window MSE over all windows of ``data``, a batch (or micro-batch: its memory) at a time."""
        self.net.eval()
        loss_sum = torch.zeros((), device=self.device)
        order = torch.arange(len(data), device=self.device)
        batch = self.micro_batch or self.cfg.batch_size
        for start in range(0, len(order), batch):
            _, losses = infer(order[start:start + batch])
            loss_sum += losses.sum()
        return loss_sum.item() / len(data)

    def _should_stop(self) -> bool:
        """True when the watched loss (validation, else training) has not improved for ``patience`` epochs."""
        patience = self.cfg.early_stopping_patience
        if patience is None or not self.history:
            return False
        key = "val_loss" if self.history[-1]["val_loss"] is not None else "train_loss"
        losses = [record[key] for record in self.history]
        best = int(np.argmin(losses))
        return len(losses) - 1 - best >= patience

    def _run_configs(self) -> tuple[dict[str, Any], Optional[dict[str, Any]]]:
        """(train config, model config or None) as a checkpoint records them."""
        model_cfg = getattr(self.net, "cfg", None)
        model = dataclasses.asdict(model_cfg) if dataclasses.is_dataclass(model_cfg) else None
        return dataclasses.asdict(self.cfg), model

    def _save(self, path: Path, epoch: int) -> None:
        train_cfg, model_cfg = self._run_configs()
        extra = {"train_config": train_cfg, "steps": self.steps}
        if model_cfg is not None:
            extra["model_config"] = model_cfg
        # The snapshot is taken here (CPU copies); the write runs on the writer's thread while training goes on.
        self._writer.submit(write_checkpoint, path, *checkpoint_contents(self.net, self.optimizer, epoch,
                                                                          self.history, extra))


class StepPlan(NamedTuple):
    """How the training steps of one process run: ``per_step`` windows at most a step (its shard of a batch under
    DDP), in micro-batches of ``micro_batch`` windows (None: one pass), captured in CUDA graphs or not."""
    per_step: int
    micro_batch: Optional[int]
    use_graphs: bool


def plan_steps(per_step: int, micro_batch: Optional[int], graphs_here: bool, windows: Optional[int] = None,
               world_size: int = 1) -> StepPlan:
    """The micro-batch and the graphs of training steps of at most ``per_step`` windows each (the batch, or this
    rank's largest shard of it), ``micro_batch`` the setting, ``graphs_here`` whether CUDA graphs would run.

    With the number of training ``windows`` known, a step is clamped to them as the batches are (an epoch's batches
    cut ``windows`` windows; a graph captures ``min(batch_size, windows)``, each rank's shard ``ceil(that /
    world_size)``). A micro-batch at least as large as a step is no micro-batch: the step runs in one pass, and in a
    graph where graphs run. A smaller one runs eagerly, op by op: a graph captures one whole step.
    """
    if windows is not None:
        per_step = min(per_step, -(-max(windows, 1) // world_size))
    micro = micro_batch if micro_batch is not None and micro_batch < per_step else None
    return StepPlan(per_step, micro, bool(graphs_here) and micro is None)


def graphs_enabled(cuda_graphs: Optional[bool], device: torch.device) -> bool:
    """Whether to capture CUDA graphs: on a CUDA device only; ``None`` (the default setting) means yes there."""
    return device.type == "cuda" and (cuda_graphs is None or bool(cuda_graphs))


def predict(net: nn.Module, segments, batch_size: int = 256, device: str | torch.device = "auto", *,
            steps: int = 5, bf16: bool = False, cuda_graphs: bool = False,
            timings: Optional[dict] = None) -> np.ndarray:
    """Reconstruct the last step of every window of ``segments``.

    Parameters
    ----------
    net : nn.Module
        A trained MSCREDNet (moved to ``device``).
    segments : (S, K, n, n) float32
    batch_size : int
    device : "auto" | "cpu" | "cuda" | torch.device
    steps : int
        Segments per window.
    bf16, cuda_graphs : bool
        bf16 autocast (CUDA, and CPUs with native bf16: ``train_graphs.bf16_native``; ignored elsewhere) / one CUDA
        graph per inference batch (CUDA only). Each batch of
        consecutive windows runs through ``net.forward_windows`` (the encoder and the ConvLSTM input convolutions
        once per segment, not once per window and step), replayed from one CUDA graph
        (``GraphedWindowInference``) with ``cuda_graphs``; a network without it gathers its windows.
    timings : dict or None
        If given, ``timings["setup_s"]`` receives the one-time seconds of the graph warm-up and capture (0 eager),
        so that a caller can report them apart from the per-window work.

    Returns
    -------
    (W, K, n, n) float32 ndarray, W = S - steps + 1: row k reconstructs segment k + steps - 1.
    """
    device = device if isinstance(device, torch.device) else resolve_device(device)
    data = WindowDataset(segments, steps).to(device)
    n = len(data)
    out = torch.empty(n, *data.segments.shape[1:], device=device)
    if n == 0:
        return out.cpu().numpy()
    net.to(device).eval()
    on_cuda = device.type == "cuda"
    cuda_graphs = bool(cuda_graphs) and on_cuda
    if hasattr(net, "forward_windows"):
        # Consecutive windows share all but one segment: each batch of b windows is its b + steps - 1 segments,
        # and forward_windows runs the encoder and the ConvLSTM input convolutions once per segment.
        t0 = time.perf_counter()
        graphed = GraphedWindowInference(net, data, min(batch_size, n), bf16) if cuda_graphs else None
        if timings is not None:
            timings["setup_s"] = time.perf_counter() - t0 if graphed is not None else 0.0
        if bf16 and cpu_inference.scores_on(net, device):
            bf16 = False   # (on a CPU the float32 scoring path is as fast as bf16 autocast, or faster, and exact)
        with torch.no_grad(), autocast(device, bf16):
            for start in range(0, n, batch_size):
                b = min(batch_size, n - start)
                out[start:start + b] = (graphed(start, b) if graphed is not None else
                                        net.forward_windows(data.segments[start:start + b + steps - 1], steps).float())
        return out.cpu().numpy()
    t0 = time.perf_counter()
    if cuda_graphs:
        infer = GraphedInference(net, data, min(batch_size, n), bf16)
    else:  # a network without forward_windows: windows gathered per batch
        infer = EagerInference(net, data, bf16)
    if timings is not None:
        timings["setup_s"] = time.perf_counter() - t0
    order = torch.arange(n, device=device)
    for start in range(0, n, batch_size):
        idx = order[start:start + batch_size]
        recon, _ = infer(idx)
        out[start:start + idx.numel()] = recon
    return out.cpu().numpy()


__all__ = ["WindowDataset", "Trainer", "StepPlan", "graphs_enabled", "plan_steps", "predict", "resolve_device"]
