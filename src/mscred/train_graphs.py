"""Step machinery of the Trainer: one training step and one inference batch, eager or captured in a CUDA graph.

Both flavours have the same interface, so the Trainer's loop does not care which one runs:

* ``EagerStep(net, optimizer, data, bf16, micro_batch)(idx) -> loss``  one Adam step on windows ``idx``, in
  micro-batches of ``micro_batch`` windows whose gradients add up to the batch's (None: one pass)
* ``GraphedStep(net, optimizer, data, batch_size, bf16)(idx)``       the same, replayed from one CUDA graph
* ``EagerInference(net, data, bf16)(idx) -> (recon, losses)``
* ``GraphedInference(net, data, batch_size, bf16)(idx)``
* ``GraphedWindowInference(net, data, batch_size, bf16)(start, b) -> recon``   windows start .. start + b - 1,
  sharing their segments (``MSCREDNet.forward_windows``): ``predict``'s graphed scoring

``idx`` is a 1-D int64 tensor of window indices on the data's device. The graphed flavours follow PyTorch's
"whole network capture" recipe (torch.cuda.graph docs): static input buffers, warm-up iterations on a side stream,
``optimizer.zero_grad(set_to_none=True)`` before capture so that backward allocates the gradients from the graph's
private pool, Adam with ``capturable=True`` (its step counter lives on the GPU), and autocast with
``cache_enabled=False``. Two choices of ours:

* The window gather runs EAGERLY, before each replay, into a static (B, T, K, n, n) input buffer: one
  ``index_select`` kernel on a strided (W, T, K, n, n) view of the segments (``WindowDataset.gather_into``). No
  indexing kernel is captured. (H2's first version captured ``segments[idx[:, None] + arange(T)]``; on the H200 at
  n = 30, batch 128 its replays hit "vectorized gather kernel index out of bounds" although every index written
  to the static buffer was in range, while the same capture with the gather outside the graph ran every variant
  correctly. See ``_GatherThenReplay`` for what we know of the cause.)
* A batch smaller than the captured one (the last of an epoch) is padded with window 0 and a per-window loss weight
  of 0, the valid windows weighted 1/b: the loss, hence every gradient, equals that of the b windows alone.

Every capture goes through ``ops.graph_memsets.capture``: the memset nodes cuDNN leaves in a graph become kernel
nodes before it is instantiated (~25 us a training step on the H200, results/graph_memsets/).

Warm-up runs real Adam steps; the parameters and the optimizer state are snapshotted before and restored after, so
capturing changes nothing (the trained weights do not depend on whether graphs were used, up to float rounding).
"""
from __future__ import annotations

import contextlib
import functools
import os

import torch
from torch import nn

from mscred.ops import graph_memsets, wgrad_stream
from mscred.ops.triton import window_loss

WARMUP_ITERS = 3  # the docs' recipe; lets cuDNN/cuBLAS pick algorithms and allocate workspaces before capture


# The Trainer autotunes the convolutions of its graphs only when enough steps are planned to repay it. On the H200
# (built-in data, fused + graphs, float32, benchmarks/results/cli_phases/): timing cuDNN's algorithms added 1.4-1.9 s
# to the step's set-up in four of six paired runs (10.0 and 12.0 s in the other two) and saved ~0.25 ms per step
# (0.062 against 0.069 s per 26-step epoch): 5,000-7,500 steps to break even at the common cost; we take the low
# end, since long runs are where the per-step gain matters.
AUTOTUNE_MIN_STEPS = 5000


def autotune_worthwhile(setting, planned_steps: int) -> bool:
    """Whether to time cuDNN's convolution algorithms in the graphs' warm-up: ``setting`` True / False as given,
    None (the default) when ``planned_steps`` reach AUTOTUNE_MIN_STEPS."""
    return bool(setting) if setting is not None else planned_steps >= AUTOTUNE_MIN_STEPS


@contextlib.contextmanager
def convolution_autotuning(enabled: bool = True):
    """Inside: cuDNN chooses each new convolution shape's algorithm by timing its candidates
    (``torch.backends.cudnn.benchmark``) when ``enabled``; the flag is restored on exit. The graphed steps have
    fixed shapes, so the timing runs in their warm-up, is baked into the captured graph, and never runs inside one.
    Scoped, not process-wide: left on, every later eager call of a new shape times its algorithms again (on the
    H200 that made `mscred train`'s one scoring pass of its training data 1.1 s instead of 0.12 s). ``enabled=False``
    leaves the flag as it is. MSCRED_CUDNN_BENCHMARK_LIMIT sets how many candidates cuDNN times per shape inside
    (``torch.backends.cudnn.benchmark_limit``; 0: all of them; unset: PyTorch's own limit), restored on exit too."""
    before = torch.backends.cudnn.benchmark
    limit_before = torch.backends.cudnn.benchmark_limit  # None without cuDNN
    limit = benchmark_limit()
    if enabled:
        torch.backends.cudnn.benchmark = True
        if limit is not None and limit_before is not None:
            torch.backends.cudnn.benchmark_limit = limit
    try:
        yield
    finally:
        torch.backends.cudnn.benchmark = before
        if enabled and limit is not None and limit_before is not None:
            torch.backends.cudnn.benchmark_limit = limit_before


def benchmark_limit() -> int | None:
    """MSCRED_CUDNN_BENCHMARK_LIMIT as a count of cuDNN candidates to time per shape (0: all), None when unset."""
    text = os.environ.get("MSCRED_CUDNN_BENCHMARK_LIMIT", "").strip()
    if not text:
        return None
    if not text.isdigit():
        raise ValueError(f"MSCRED_CUDNN_BENCHMARK_LIMIT must be a count (0: every algorithm), got {text!r}")
    return int(text)


def bf16_native(device: torch.device) -> bool:
    """Whether bf16 autocast pays on ``device``: CUDA, or a CPU whose oneDNN computes bf16 natively (AVX512-BF16
    or AMX): there the reference model trained and scored 1.7-1.8x faster than in float32 (2-core AMD EPYC with
    AVX512-BF16, `benchmarks/results/cpu_bf16/`); a CPU without it would emulate bf16, so --bf16 is ignored."""
    if device.type == "cuda":
        return True
    return device.type == "cpu" and _cpu_bf16_native()


@functools.cache
def _cpu_bf16_native() -> bool:
    """oneDNN's answer, asked once per process (``autocast`` consults it at every step)."""
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def autocast(device: torch.device, bf16: bool):
    """bf16 autocast (fp32 master weights) where it is native (``bf16_native``); a no-op elsewhere or when off.

    On CUDA ``cache_enabled=False``, because autocast's weight-cast cache must not outlive a graph capture; on a
    CPU (no graphs) the cache keeps the ConvLSTM's weights from being cast again at every step.
    """
    if bf16 and bf16_native(device):
        return torch.autocast(device.type, dtype=torch.bfloat16, cache_enabled=device.type != "cuda")
    return contextlib.nullcontext()


def forward_losses(net: nn.Module, x: torch.Tensor, bf16: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Reconstruct the last step of windows ``x`` (B, T, K, n, n): (recon fp32 (B, K, n, n), per-window MSE (B,))."""
    with autocast(x.device, bf16):
        recon = net(x)  # (B, K, n, n), bf16 under autocast
    losses = window_loss.reference(recon, x[:, -1])  # (B,); no flatten: recon may be channels-last
    return recon.float(), losses


def train_losses(net: nn.Module, x: torch.Tensor, bf16: bool, weight: torch.Tensor | None = None) -> torch.Tensor:
    """The per-window MSE (B,) of ``forward_losses`` for a training step (no reconstruction returned), times
    ``weight`` (B,) if given: with the fused backend one Triton kernel each way (``ops/triton/window_loss.py``), the
    weight's product inside them; with the reference PyTorch ops."""
    with autocast(x.device, bf16):
        recon = net(x)
    cfg = getattr(getattr(net, "module", net), "cfg", None)  # DDP wraps the network in .module
    if cfg is not None and cfg.backend == "fused":
        return window_loss.window_mse(recon, x[:, -1], weight)
    return window_loss.reference(recon, x[:, -1], weight)


def _train_step(net, optimizer, x: torch.Tensor, weight: torch.Tensor, bf16: bool) -> torch.Tensor:
    """Forward on windows ``x`` (B, T, K, n, n), weighted MSE, backward, Adam step; the gradients must be None (or
    zero) on entry."""
    loss = train_losses(net, x, bf16, weight).sum()  # = mean over the windows of weight 1/b
    loss.backward()
    wgrad_stream.join(loss.device)  # weight gradients left on a side stream (ops/wgrad_stream.py), if any
    optimizer.step()
    return loss.detach()


def accumulated_step(net, optimizer, data, idx: torch.Tensor, weight: torch.Tensor, bf16: bool,
                     micro_batch: int | None) -> torch.Tensor:
    """One Adam step on windows ``idx`` of ``data`` weighted by ``weight``, their forward and backward run in
    micro-batches of ``micro_batch`` windows (None: all at once). The loss is a weighted sum over windows, so the
    micro-batches' gradients, added up in ``.grad``, are the whole batch's (up to float rounding) while only one
    micro-batch's activations are alive: the same step in less memory, for as many passes as micro-batches.
    MSCRED has no batch statistics (no batch norm) that would make a micro-batch differ. Under
    DistributedDataParallel (``net`` has ``no_sync``) only the last micro-batch's backward all-reduces: the
    gradients accumulate locally until then, so the ranks' shards may split into different numbers of
    micro-batches. The gradients must be None (or zero) on entry."""
    if micro_batch is None or idx.numel() <= micro_batch:
        return _train_step(net, optimizer, data.batch(idx), weight, bf16)
    parts = list(zip(idx.split(micro_batch), weight.split(micro_batch)))
    losses = []
    for k, (part, part_weight) in enumerate(parts):
        local = net.no_sync() if k < len(parts) - 1 and hasattr(net, "no_sync") else contextlib.nullcontext()
        with local:
            loss = train_losses(net, data.batch(part), bf16, part_weight).sum()
            loss.backward()
            wgrad_stream.join(loss.device)
        losses.append(loss.detach())
    optimizer.step()
    return torch.stack(losses).sum()


class EagerStep:
    """One training step on the windows ``idx``, run op by op (in micro-batches of ``micro_batch`` windows when
    set: ``accumulated_step``)."""

    def __init__(self, net: nn.Module, optimizer: torch.optim.Optimizer, data, bf16: bool = False,
                 micro_batch: int | None = None):
        self.net, self.optimizer, self.data, self.bf16 = net, optimizer, data, bf16
        self.micro_batch = micro_batch

    def __call__(self, idx: torch.Tensor) -> torch.Tensor:
        self.optimizer.zero_grad(set_to_none=True)
        weight = torch.full(idx.shape, 1.0 / idx.numel(), device=idx.device)
        return accumulated_step(self.net, self.optimizer, self.data, idx, weight, self.bf16, self.micro_batch)


class StateSnapshot:
    """Copies of the parameters and optimizer state, restored in place (addresses kept, as a graph needs)."""

    def __init__(self, optimizer: torch.optim.Optimizer):
        self.params = [p for group in optimizer.param_groups for p in group["params"]]
        self.optimizer = optimizer
        with torch.no_grad():
            self.values = [p.detach().clone() for p in self.params]
            self.state = {p: {k: v.clone() for k, v in optimizer.state[p].items() if torch.is_tensor(v)}
                          for p in self.params if p in optimizer.state}

    @torch.no_grad()
    def restore(self) -> None:
        for p, value in zip(self.params, self.values):
            p.copy_(value)
        for p in self.params:
            saved = self.state.get(p)
            for key, tensor in self.optimizer.state[p].items():
                if not torch.is_tensor(tensor):
                    continue
                # State born during warm-up goes back to Adam's fresh state: step 0, zero moments.
                tensor.copy_(saved[key]) if saved is not None else tensor.zero_()


def _check_capturable(optimizer: torch.optim.Optimizer) -> None:
    for group in optimizer.param_groups:
        if not group.get("capturable", False):
            raise ValueError("CUDA-graph training needs an optimizer built with capturable=True")


class _GatherThenReplay:
    """``replay()``: gather the windows of ``static_idx`` into ``static_x`` (eagerly, one kernel), then replay.

    It stands where a ``torch.cuda.CUDAGraph`` stood, so code that fills ``static_idx`` / ``static_weight`` and
    calls ``step.graph.replay()`` (``mscred.distributed.ShardGraphedStep``) keeps working unchanged.

    Why the gather is not captured: H2's version captured ``segments[static_idx[:, None] + arange(T)]`` (an add
    and an advanced-indexing gather, PyTorch 2.11's ``vectorized_gather_kernel``). On the H200 (n = 30, B = 128,
    the reference backend) a replay asserted "index out of bounds" although every index copied into
    ``static_idx`` was in [0, W); the same step with the gather done eagerly into a static input ran every
    variant and gave the reference's losses. We could not isolate the cause without device time (candidates: the
    captured index intermediate sharing graph-pool memory with a later kernel of the step, or the vectorized
    gather's launch reading something fixed at capture). Doing the gather eagerly removes the question, costs
    nothing extra (the same one gather kernel, now outside the graph), and an out-of-range index now fails in
    ``index_select`` on the host's call, where the traceback points at the caller.
    """

    def __init__(self, graph: "torch.cuda.CUDAGraph", data, static_idx: torch.Tensor, static_x: torch.Tensor):
        self.cuda_graph, self.data, self.static_idx, self.static_x = graph, data, static_idx, static_x

    def gather(self) -> None:
        self.data.gather_into(self.static_idx, self.static_x)

    def replay(self) -> None:
        self.gather()
        self.cuda_graph.replay()


class GraphedStep:
    """A whole training step (forward, loss, backward, Adam) captured in one CUDA graph; the window gather runs
    eagerly into the static input before each replay (``_GatherThenReplay``).

    Parameters
    ----------
    net, optimizer
        On CUDA; the optimizer built with ``capturable=True`` and already holding any resumed state (loading state
        after capture would replace tensors the graph reads).
    data : WindowDataset
        On the same CUDA device; kept by this object.
    batch_size : int
        The captured batch; smaller batches are padded with zero-weight windows.
    bf16 : bool
        Capture under bf16 autocast.
    cudnn_benchmark : bool
        Autotune the convolutions in the warm-up (``convolution_autotuning``); False keeps cuDNN's heuristics.

    Attributes the distributed step uses: ``static_idx`` (B,) int64, ``static_weight`` (B,), ``static_loss`` (),
    ``graph`` (``.replay()`` gathers ``static_idx``'s windows, then replays), ``batch_size``.
    """

    def __init__(self, net: nn.Module, optimizer: torch.optim.Optimizer, data, batch_size: int, bf16: bool = False,
                 cudnn_benchmark: bool = True):
        _check_capturable(optimizer)
        device = data.segments.device
        self.batch_size, self.data = batch_size, data
        self.static_idx = torch.zeros(batch_size, dtype=torch.long, device=device)
        self.static_weight = torch.full((batch_size,), 1.0 / batch_size, device=device)
        self.static_x = data.batch(self.static_idx).clone()  # (B, T, K, n, n): the graph's input
        self._padded = False
        snapshot = StateSnapshot(optimizer)

        with convolution_autotuning(cudnn_benchmark):
            stream = torch.cuda.Stream(device=device)
            stream.wait_stream(torch.cuda.current_stream(device))
            with torch.cuda.stream(stream):
                for _ in range(WARMUP_ITERS):
                    optimizer.zero_grad(set_to_none=True)
                    _train_step(net, optimizer, self.static_x, self.static_weight, bf16)
            torch.cuda.current_stream(device).wait_stream(stream)
            snapshot.restore()
            torch.cuda.synchronize(device)

            # Gradients None before capture: backward inside the graph allocates them from the graph's pool and, on
            # every replay, overwrites them instead of accumulating.
            optimizer.zero_grad(set_to_none=True)
            with graph_memsets.capture(stream) as graph:
                self.static_loss = _train_step(net, optimizer, self.static_x, self.static_weight, bf16)
        self._stream = stream  # the capture stream lives as long as the graph
        self.graph = _GatherThenReplay(graph, data, self.static_idx, self.static_x)

    def __call__(self, idx: torch.Tensor) -> torch.Tensor:
        b = idx.numel()
        if b > self.batch_size:
            raise ValueError(f"batch of {b} windows exceeds the captured {self.batch_size}")
        if b == self.batch_size:  # the common case: one copy, the gather, then the replay
            self.static_idx.copy_(idx)
            if self._padded:
                self.static_weight.fill_(1.0 / b)
                self._padded = False
        else:
            self.static_idx.zero_()  # padding windows: index 0, weight 0
            self.static_idx[:b].copy_(idx)
            self.static_weight.zero_()
            self.static_weight[:b].fill_(1.0 / b)
            self._padded = True
        self.graph.replay()
        return self.static_loss.clone()  # the static buffer is overwritten by the next replay


def capture_no_grad(fn, device: torch.device):
    """Warm ``fn()`` up on a side stream (WARMUP_ITERS calls), then capture one more call in a CUDA graph, all
    without gradients: (graph, capture stream, the captured call's outputs). The stream must live as long as the
    graph; the outputs are static buffers that each replay overwrites."""
    stream = torch.cuda.Stream(device=device)
    stream.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(stream), torch.no_grad():
        for _ in range(WARMUP_ITERS):
            fn()
    torch.cuda.current_stream(device).wait_stream(stream)
    with graph_memsets.capture(stream) as graph, torch.no_grad():
        outputs = fn()
    return graph, stream, outputs


class EagerInference:
    """Reconstruction and per-window loss of the windows ``idx``, without gradients.

    ``windows``: a run of consecutive windows (the Trainer's validation batches) is scored by
    ``net.forward_windows`` from the segments they share (the encoder and the ConvLSTM input convolutions once per
    segment, as ``predict`` scores), not gathered; the same function (2-core CPU, the demo's 198 validation
    windows: 1.65x, the same validation loss). Other ``idx`` are gathered."""

    def __init__(self, net: nn.Module, data, bf16: bool = False, windows: bool = False):
        self.net, self.data, self.bf16, self.windows = net, data, bf16, windows

    @torch.no_grad()
    def __call__(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        b, steps = idx.numel(), self.data.steps
        if self.windows and b > 0:
            first = self.data.first_segments(idx)   # (windows of several parts: consecutive within one part only)
            start = int(first[0])
            if torch.equal(first, torch.arange(start, start + b, device=idx.device)):
                segments = self.data.segments[start:start + b + steps - 1]
                with autocast(segments.device, self.bf16):
                    recon = self.net.forward_windows(segments, steps)  # (b, K, n, n)
                return recon.float(), window_loss.reference(recon, segments[steps - 1:])
        return forward_losses(self.net, self.data.batch(idx), self.bf16)  # (b, K, n, n), (b,)


class GraphedInference:
    """One inference batch (forward, per-window loss) captured in one CUDA graph; the window gather runs eagerly
    into the static input before each replay, as in ``GraphedStep``.

    Returns views of static buffers: read or copy them before the next call. ``cudnn_benchmark`` as in GraphedStep.
    """

    def __init__(self, net: nn.Module, data, batch_size: int, bf16: bool = False, cudnn_benchmark: bool = True):
        device = data.segments.device
        self.batch_size, self.data = batch_size, data
        self.static_idx = torch.arange(batch_size, device=device) % len(data)
        self.static_x = data.batch(self.static_idx).clone()  # (B, T, K, n, n)
        with convolution_autotuning(cudnn_benchmark):
            graph, self._stream, (self.static_recon, self.static_losses) = capture_no_grad(
                lambda: forward_losses(net, self.static_x, bf16), device)
        self.graph = _GatherThenReplay(graph, data, self.static_idx, self.static_x)

    def __call__(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        b = idx.numel()
        if b > self.batch_size:
            raise ValueError(f"batch of {b} windows exceeds the captured {self.batch_size}")
        self.static_idx[:b].copy_(idx)  # rows b.. keep old (valid) indices; their outputs are not returned
        self.graph.replay()
        return self.static_recon[:b], self.static_losses[:b]


class GraphedWindowInference:
    """The reconstructions of up to ``batch_size`` consecutive windows from one CUDA graph of
    ``net.forward_windows`` (the encoder and the fused ConvLSTM's input convolutions once per segment, not once per
    window and step): ``(start, b) -> (b, K, n, n)`` for windows start .. start + b - 1.

    Before each replay the b + steps - 1 segments of those windows are copied into the static input (one copy, no
    index arithmetic); its rows past them keep earlier segments, whose windows are not returned. Returns a view of
    a static buffer: read or copy it before the next call.

    ``predict``'s graphed scoring. On the H200 (bf16, results/train.md) it scored 201,988 windows/s at batch 3591
    against 138,081 for the per-window graph (``GraphedInference``), and 151,695 against 111,700 at batch 256.
    """

    def __init__(self, net: nn.Module, data, batch_size: int, bf16: bool = False, cudnn_benchmark: bool = True):
        if not 1 <= batch_size <= len(data):
            raise ValueError(f"batch_size must be in [1, {len(data)}] (the windows there are), got {batch_size}")
        device = data.segments.device
        self.batch_size, self.data, self.steps = batch_size, data, data.steps
        self.static_seg = data.segments[:batch_size + data.steps - 1].clone()  # (B + steps - 1, K, n, n)

        def reconstruct():
            with autocast(device, bf16):
                return net.forward_windows(self.static_seg, self.steps).float()  # (B, K, n, n)

        with convolution_autotuning(cudnn_benchmark):
            self.graph, self._stream, self.static_recon = capture_no_grad(reconstruct, device)

    def __call__(self, start: int, b: int) -> torch.Tensor:
        if not 1 <= b <= self.batch_size or start < 0 or start + b > len(self.data):
            raise ValueError(f"windows {start} .. {start + b - 1} outside the captured batch of {self.batch_size} "
                             f"or the {len(self.data)} windows")
        m = b + self.steps - 1
        self.static_seg[:m].copy_(self.data.segments[start:start + m])
        self.graph.replay()
        return self.static_recon[:b]
