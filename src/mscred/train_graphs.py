"""Step machinery of the Trainer: one training step and one inference batch, eager or captured in a CUDA graph.

Both flavours have the same interface, so the Trainer's loop does not care which one runs:

* ``EagerStep(net, optimizer, data, bf16)(idx) -> loss``            one Adam step on windows ``idx``
* ``GraphedStep(net, optimizer, data, batch_size, bf16)(idx)``       the same, replayed from one CUDA graph
* ``EagerInference(net, data, bf16)(idx) -> (recon, losses)``
* ``GraphedInference(net, data, batch_size, bf16)(idx)``

``idx`` is a 1-D int64 tensor of window indices on the data's device. The graphed flavours follow PyTorch's
"whole network capture" recipe (torch.cuda.graph docs): static input buffers, warm-up iterations on a side stream,
``optimizer.zero_grad(set_to_none=True)`` before capture so that backward allocates the gradients from the graph's
private pool, Adam with ``capturable=True`` (its step counter lives on the GPU), and autocast with
``cache_enabled=False``. Two choices of ours:

* The window gather ``segments[idx[:, None] + arange(T)]`` runs inside the graph: only the index buffer is static,
  the segments tensor stays where it is (the caller keeps it alive and unmoved while the graph exists).
* A batch smaller than the captured one (the last of an epoch) is padded with window 0 and a per-window loss weight
  of 0, the valid windows weighted 1/b: the loss, hence every gradient, equals that of the b windows alone.

Warm-up runs real Adam steps; the parameters and the optimizer state are snapshotted before and restored after, so
capturing changes nothing (the trained weights do not depend on whether graphs were used, up to float rounding).
"""
from __future__ import annotations

import contextlib

import torch
from torch import nn

WARMUP_ITERS = 3  # the docs' recipe; lets cuDNN/cuBLAS pick algorithms and allocate workspaces before capture


def autocast(device: torch.device, bf16: bool):
    """bf16 autocast on CUDA (fp32 master weights); a no-op elsewhere or when off.

    ``cache_enabled=False`` because autocast's weight-cast cache must not outlive a graph capture.
    """
    if bf16 and device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False)
    return contextlib.nullcontext()


def forward_losses(net: nn.Module, x: torch.Tensor, bf16: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Reconstruct the last step of windows ``x`` (B, T, K, n, n): (recon fp32 (B, K, n, n), per-window MSE (B,))."""
    with autocast(x.device, bf16):
        recon = net(x)  # (B, K, n, n), bf16 under autocast
    recon = recon.float()
    losses = (recon - x[:, -1]).square().flatten(1).mean(dim=1)  # (B,)
    return recon, losses


def _train_step(net, optimizer, data, idx: torch.Tensor, weight: torch.Tensor, bf16: bool) -> torch.Tensor:
    """Forward, weighted MSE, backward, Adam step; the gradients must be None (or zero) on entry."""
    x = data.batch(idx)  # (B, T, K, n, n)
    _, losses = forward_losses(net, x, bf16)
    loss = (losses * weight).sum()  # = mean over the windows of weight 1/b
    loss.backward()
    optimizer.step()
    return loss.detach()


class EagerStep:
    """One training step on the windows ``idx``, run op by op."""

    def __init__(self, net: nn.Module, optimizer: torch.optim.Optimizer, data, bf16: bool = False):
        self.net, self.optimizer, self.data, self.bf16 = net, optimizer, data, bf16

    def __call__(self, idx: torch.Tensor) -> torch.Tensor:
        self.optimizer.zero_grad(set_to_none=True)
        weight = torch.full(idx.shape, 1.0 / idx.numel(), device=idx.device)
        return _train_step(self.net, self.optimizer, self.data, idx, weight, self.bf16)


class _Snapshot:
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


class GraphedStep:
    """A whole training step (gather, forward, loss, backward, Adam) captured in one CUDA graph.

    Parameters
    ----------
    net, optimizer
        On CUDA; the optimizer built with ``capturable=True`` and already holding any resumed state (loading state
        after capture would replace tensors the graph reads).
    data : WindowDataset
        On the same CUDA device; its segments must stay alive and in place while this object is used.
    batch_size : int
        The captured batch; smaller batches are padded with zero-weight windows.
    bf16 : bool
        Capture under bf16 autocast.
    """

    def __init__(self, net: nn.Module, optimizer: torch.optim.Optimizer, data, batch_size: int, bf16: bool = False):
        _check_capturable(optimizer)
        device = data.segments.device
        self.batch_size = batch_size
        self.static_idx = torch.zeros(batch_size, dtype=torch.long, device=device)
        self.static_weight = torch.full((batch_size,), 1.0 / batch_size, device=device)
        self._padded = False
        snapshot = _Snapshot(optimizer)

        stream = torch.cuda.Stream(device=device)
        stream.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(stream):
            for _ in range(WARMUP_ITERS):
                optimizer.zero_grad(set_to_none=True)
                _train_step(net, optimizer, data, self.static_idx, self.static_weight, bf16)
        torch.cuda.current_stream(device).wait_stream(stream)
        snapshot.restore()
        torch.cuda.synchronize(device)

        # Gradients None before capture: backward inside the graph allocates them from the graph's pool and, on
        # every replay, overwrites them instead of accumulating.
        optimizer.zero_grad(set_to_none=True)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, stream=stream):
            self.static_loss = _train_step(net, optimizer, data, self.static_idx, self.static_weight, bf16)

    def __call__(self, idx: torch.Tensor) -> torch.Tensor:
        b = idx.numel()
        if b > self.batch_size:
            raise ValueError(f"batch of {b} windows exceeds the captured {self.batch_size}")
        if b == self.batch_size:  # the common case: one copy, then the replay
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


class EagerInference:
    """Reconstruction and per-window loss of the windows ``idx``, without gradients."""

    def __init__(self, net: nn.Module, data, bf16: bool = False):
        self.net, self.data, self.bf16 = net, data, bf16

    @torch.no_grad()
    def __call__(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return forward_losses(self.net, self.data.batch(idx), self.bf16)  # (b, K, n, n), (b,)


class GraphedInference:
    """One inference batch (gather, forward, per-window loss) captured in one CUDA graph.

    Returns views of static buffers: read or copy them before the next call.
    """

    def __init__(self, net: nn.Module, data, batch_size: int, bf16: bool = False):
        device = data.segments.device
        self.batch_size = batch_size
        self.static_idx = torch.zeros(batch_size, dtype=torch.long, device=device)
        stream = torch.cuda.Stream(device=device)
        stream.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(stream), torch.no_grad():
            for _ in range(WARMUP_ITERS):
                forward_losses(net, data.batch(self.static_idx), bf16)
        torch.cuda.current_stream(device).wait_stream(stream)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, stream=stream), torch.no_grad():
            self.static_recon, self.static_losses = forward_losses(net, data.batch(self.static_idx), bf16)

    def __call__(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        b = idx.numel()
        if b > self.batch_size:
            raise ValueError(f"batch of {b} windows exceeds the captured {self.batch_size}")
        self.static_idx[:b].copy_(idx)  # rows b.. keep old (valid) indices; their outputs are not returned
        self.graph.replay()
        return self.static_recon[:b], self.static_losses[:b]
