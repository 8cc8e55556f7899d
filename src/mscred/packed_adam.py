"""Adam whose parameters stored back to back step in one Triton kernel (``ops/triton/adam.py``).

``PackedAdam`` is ``torch.optim.Adam`` -- the same arguments, update rule, state keys and checkpoints -- whose step
first updates every *run*: parameters whose data, gradients, moments and step counts lie back to back in memory,
one launch each, with as many blocks as the run needs. It hands everything else to torch's own step (hiding the
run's gradients from it meanwhile). The moments of parameters that lie back to back are allocated back to back
(at their first step, after ``load_state_dict``, and again at a step that finds them apart), so the runs are the
parameters' own: in the fused bf16 training step the weight cache packs every convolution weight into one buffer
and the cast's backward writes their gradients into one buffer, so the weights (3,203,616 of the default model's
3,206,243 elements) are one run and the 12 biases go to torch. Torch's fused kernel gives each 65,536 elements one block (65 blocks for the default model, 42.3 us
on the H200's 132 SMs, ``results/graph_timeline_shapes/``).

The runs are found at every step from the tensors' addresses (host checks, no synchronisation), so nothing goes
stale when the weight cache packs anew or a checkpoint is loaded: parameters and gradients back to back whose
moments are not (loaded by ``load_state_dict``, or made before the weight cache packed the parameters) get their
moments packed again at that step, outside a CUDA graph's capture; a parameter whose gradient lies elsewhere (a
DistributedDataParallel run's, say) is simply left to torch. Groups with amsgrad, maximize, decoupled weight decay,
a tensor learning rate, differentiable steps or a GradScaler's scale go to torch whole, and so does everything
where the Triton kernels do not run (``runs_fused``: CUDA, or the CPU interpreter). ``MSCRED_PACKED_ADAM=0`` makes
``make_adam`` build torch's Adam instead (A/B runs).
"""
from __future__ import annotations

from typing import Iterable

import torch

from mscred.ops.triton.runtime import runs_fused, switched_off

# A run of fewer elements or tensors goes to torch: one block of its fused kernel covers 65,536 elements, one launch
# covers all its tensors, and a run of our own costs two launches (the step counts' increment and the update).
MIN_RUN_ELEMENTS = 1 << 16
MIN_RUN_TENSORS = 2


def _torch_step(optimizer: torch.optim.Adam) -> None:
    """torch's Adam step without the optimizer hooks' wrapper torch puts around a class's ``step`` (Adam's is
    wrapped once any Adam exists): ``PackedAdam.step`` has its own wrapper, and a step hook must run once a step."""
    step = torch.optim.Adam.step
    if getattr(step, "hooked", False):
        step = step.__wrapped__
    step(optimizer)


class PackedAdam(torch.optim.Adam):
    """``torch.optim.Adam`` with the runs of back-to-back parameters updated by one kernel each (module doc)."""

    def __init__(self, params, *args, **kwargs):
        super().__init__(params, *args, **kwargs)
        self._tables: dict[tuple, torch.Tensor] = {}  # block tables by (device, tensor sizes, block)
        self.kernel_elements = 0  # how many elements the last step's runs covered (tests, benchmarks)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        done: list[torch.Tensor] = []
        self.kernel_elements = 0
        if getattr(self, "grad_scale", None) is None and getattr(self, "found_inf", None) is None:
            for group in self.param_groups:
                if _group_runs_here(group):
                    done.extend(self._step_runs(group))
        grads = [p.grad for p in done]
        for p in done:  # torch's step skips parameters without a gradient
            p.grad = None
        try:
            _torch_step(self)
        finally:
            for p, grad in zip(done, grads):
                p.grad = grad
        return loss

    def load_state_dict(self, state_dict) -> None:
        super().load_state_dict(state_dict)
        # The loaded moments are the state dict's own tensors (torch keeps them when dtype and device match):
        # copied into buffers of this optimizer, back to back where the parameters are.
        for group in self.param_groups:
            if _group_runs_here(group):
                self._pack_state([p for p in group["params"] if _has_state(self.state.get(p))], copy=True)

    # ------------------------------------------------------------------------------------------------ runs
    def _step_runs(self, group: dict) -> list[torch.Tensor]:
        """Steps the group's runs; returns their parameters."""
        params = [p for p in group["params"] if p.grad is not None and _plain(p)]
        self._pack_state([p for p in params if not self.state.get(p)], copy=False)
        from mscred.ops.triton.adam import launch_tile

        tile = launch_tile()
        done = []
        capturing = bool(params) and params[0].is_cuda and torch.cuda.is_current_stream_capturing()
        for candidate in _runs(params, self.state, _GRADIENT):
            pieces = _runs(candidate, self.state, _STATE)
            if not capturing and (len(pieces) != 1 or len(pieces[0]) != len(candidate)):
                # Data and gradients back to back, the moments not: state loaded (load_state_dict) or made before
                # the parameters were packed (a checkpoint loaded before the weight cache's first forward). Packed
                # again here, outside any capture (a copy captured in a graph would run at every replay).
                self._pack_state(candidate, copy=True)
                pieces = [candidate]
            for run in pieces:
                if self._step_run(run, group, tile):
                    done.extend(run)
        return done

    def _step_run(self, run: list[torch.Tensor], group: dict, tile: tuple[int, int]) -> bool:
        """One launch over ``run``; False (nothing done) while a capture finds no block table for it."""
        from mscred.ops.triton.adam import adam_run

        table = self._table(run, tile[0])
        if table is None:
            return False
        first, total = run[0], sum(p.numel() for p in run)
        state = self.state[first]
        steps = _flat(state["step"], len(run))
        steps.add_(1)
        beta1, beta2 = group["betas"]
        adam_run(_flat(first.detach(), total), _flat(first.grad, total), _flat(state["exp_avg"], total),
                 _flat(state["exp_avg_sq"], total), steps, table, group["lr"], float(beta1), float(beta2),
                 group["eps"], group["weight_decay"], tile)
        self.kernel_elements += total
        return True

    def _table(self, run: list[torch.Tensor], block: int) -> torch.Tensor | None:
        """The run's block table, made once per layout; None while a CUDA graph is being captured and the table
        was never made (its host-to-device copy cannot be captured: torch's step takes the run then)."""
        from mscred.ops.triton.adam import block_table

        sizes = [p.numel() for p in run]
        key = (run[0].device, tuple(sizes), block)
        if key not in self._tables:
            if run[0].is_cuda and torch.cuda.is_current_stream_capturing():
                return None
            self._tables[key] = block_table(sizes, run[0].device, block)
        return self._tables[key]

    def _pack_state(self, params: list[torch.Tensor], copy: bool) -> None:
        """Adam's state for ``params`` (fresh: zero moments, step 0; ``copy``: the values they hold), the moments
        and step counts of parameters that lie back to back allocated back to back."""
        for run in _adjacent(params):
            total, device = sum(p.numel() for p in run), run[0].device
            exp_avg = torch.zeros(total, device=device, dtype=torch.float32)
            exp_avg_sq = torch.zeros(total, device=device, dtype=torch.float32)
            steps = torch.zeros(len(run), device=device, dtype=torch.float32)
            at = 0
            for i, p in enumerate(run):
                views = {"step": steps[i], "exp_avg": exp_avg[at:at + p.numel()].view_as(p),
                         "exp_avg_sq": exp_avg_sq[at:at + p.numel()].view_as(p)}
                old = self.state.get(p)
                if copy and old:
                    for key, view in views.items():
                        view.copy_(old[key])
                self.state[p].update(views)
                at += p.numel()


def _group_runs_here(group: dict) -> bool:
    """Whether the group's rule is the one the kernel runs, with a step count on the device (capturable or
    fused, as torch keeps it then) -- else torch steps the whole group."""
    return (not group["amsgrad"] and not group["maximize"] and not group.get("differentiable", False)
            and not group.get("decoupled_weight_decay", False) and not torch.is_tensor(group["lr"])
            and not any(torch.is_tensor(b) for b in group["betas"])
            and bool(group.get("capturable") or group.get("fused")))


def _plain(p: torch.Tensor) -> bool:
    """A dense float32 parameter with a dense float32 gradient, where the kernels run."""
    g = p.grad
    return (p.dtype == torch.float32 and p.is_contiguous() and runs_fused(p) and not g.is_sparse
            and g.dtype == torch.float32 and g.is_contiguous() and g.device == p.device)


def _has_state(state: dict | None) -> bool:
    return bool(state) and all(k in state for k in ("step", "exp_avg", "exp_avg_sq"))


def _next_to(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether ``b`` starts where ``a`` ends, in the same storage."""
    return (a.device == b.device and a.dtype == b.dtype and b.is_contiguous()
            and a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
            and b.data_ptr() == a.data_ptr() + a.numel() * a.element_size())


def _pieces(params: list[torch.Tensor], tensor_of) -> list[list[torch.Tensor]]:
    """``params`` cut where ``tensor_of`` of one does not follow its predecessor's in memory."""
    pieces: list[list[torch.Tensor]] = []
    for p in params:
        if pieces and _next_to(tensor_of(pieces[-1][-1]), tensor_of(p)):
            pieces[-1].append(p)
        else:
            pieces.append([p])
    return pieces


def _adjacent(params: Iterable[torch.Tensor]) -> list[list[torch.Tensor]]:
    """``params`` in address order, split where one does not follow its predecessor in memory."""
    return _pieces(sorted(params, key=lambda p: (str(p.device), p.data_ptr())), lambda p: p)


def _worth_a_launch(run: list[torch.Tensor]) -> bool:
    return len(run) >= MIN_RUN_TENSORS and sum(p.numel() for p in run) >= MIN_RUN_ELEMENTS


# What else of a parameter a run needs back to back, beside its data: its gradient, and its state.
_GRADIENT = (lambda p, state: p.grad,)
_STATE = (lambda p, state: state[p]["exp_avg"], lambda p, state: state[p]["exp_avg_sq"],
          lambda p, state: state[p]["step"])


def _runs(params: list[torch.Tensor], state, parts) -> list[list[torch.Tensor]]:
    """The runs among ``params``: back to back in data and in each of ``parts`` (gradient, state)."""
    runs = [run for run in _adjacent(params) if _worth_a_launch(run)]
    for part in parts:
        runs = [piece for run in runs for piece in _split(run, lambda p: part(p, state))]
    return runs


def _split(run: list[torch.Tensor], tensor_of) -> list[list[torch.Tensor]]:
    """``run`` cut where ``tensor_of`` of a parameter does not follow its predecessor's; pieces too small dropped."""
    return [piece for piece in _pieces(run, tensor_of) if _worth_a_launch(piece)]


def _flat(first: torch.Tensor, total: int) -> torch.Tensor:
    """The ``total`` elements from ``first``'s first on, as a 1-D view of its storage."""
    return first.as_strided((total,), (1,), first.storage_offset())


def is_available() -> tuple[bool, str]:
    """(True, "") when ``make_adam`` gives the fused backend's CUDA training ``PackedAdam`` here, else (False, why)
    (``mscred env``)."""
    from mscred.ops.triton.runtime import IMPORT_ERROR, triton

    if switched_off("MSCRED_PACKED_ADAM"):
        return False, "MSCRED_PACKED_ADAM=0"
    if triton is None:
        return False, f"triton not importable ({IMPORT_ERROR})"
    if not torch.cuda.is_available():
        return False, "no CUDA device (training on the CPU uses torch's Adam)"
    return True, ""


def make_adam(params, device: torch.device, backend: str, **kwargs) -> torch.optim.Adam:
    """The training's Adam: ``PackedAdam`` for the fused backend on CUDA (unless ``MSCRED_PACKED_ADAM=0``), else
    torch's (the reference backend stays plain PyTorch)."""
    if device.type == "cuda" and backend == "fused" and not switched_off("MSCRED_PACKED_ADAM"):
        from mscred.ops.triton.runtime import triton

        if triton is not None:
            return PackedAdam(params, **kwargs)
    return torch.optim.Adam(params, **kwargs)
