"""The fused bf16 training step's weight casts in one pass each way.

Under autocast every convolution weight of the fused model is cast from its float32 master to bf16 in the order its
kernel reads -- channels-last for cuDNN (``model._CastChannelsLast``), the input and recurrent halves of each
ConvLSTM gate weight (``convlstm._SplitWeight``) -- one small kernel per weight and step, and as many again for the
gradients coming back: 41 weight-shaped copies, 0.12 ms of the 3.6 ms graphed step on the H200
(benchmarks/results/train_housekeeping2/step_summary.md). Here all of them are made at once when the step's
forward starts (``cast_once``): the masters cast into one buffer (one multi-tensor copy) and gathered into every
target layout by one precomputed permutation (one kernel); the backward concatenates the targets' gradients,
gathers them back by the inverse permutation and casts them to float32 (three kernels), handing each master its
gradient as a view of that one buffer. The modules look their weight up (``lookup``) and fall back to their own casts where it is not there.

Every master element lands in exactly one target (a ConvLSTM weight's two halves cover it), so the gather is a
permutation and the gradient needs no accumulation. MSCRED_WEIGHT_CACHE=0 turns it off (A/B runs).

Where the Triton kernels run (CUDA, or the CPU interpreter) and the masters are float32, ``plan_for`` first packs
them into one float32 buffer in the plan's order -- each master's ``.data`` becomes a view of it, values unchanged,
as the contiguous parameter buffers of large-model trainers -- so that the forward is one kernel that reads the
masters in place and writes every target, cast (``ops/triton/weight_transpose.py``: each output channel of each
target is a small transpose of its master row, listed in the plan's ``blocks`` table); the backward runs the same
table the other way into float32, reading the targets' gradients where they lie (below). Before, in PyTorch ops
(still the path where the masters are not packed, or the kernels do not run: the plan's index maps, copied to the
device only then): a multi-tensor cast and an int64 gather forward, a concatenation, a gather and a cast backward,
67 us of the graphed step on the H200 (benchmarks/results/step_profile_1201c/); with an int32 gather-and-cast kernel
each way instead of the table, 46 us (benchmarks/results/pack_split2/). A master moved or replaced later
(``module.to``, ``param.data = ...``) is simply no longer packed, and the PyTorch ops serve it. MSCRED_WEIGHT_PACK=0
keeps the masters as they are (A/B runs). The backward reads the targets' gradients where they lie, one pointer
argument each (``weight_transpose.transpose_parts``), without concatenating them first (the concatenation took 11.4
us; the graphed step 2.454-2.463 -> 2.445-2.452 ms, benchmarks/results/next_1204/); MSCRED_WEIGHT_GRAD_PARTS=0
concatenates them.
"""
from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass, field
from typing import Iterator, Sequence

import torch

from mscred.ops import wgrad_stream
from mscred.ops.triton.runtime import runs_fused, switched_off
from mscred.ops.triton.weight_transpose import MAX_PARTS, part_table, transpose_blocks, transpose_parts

# (weight, part) of a target: part "all" (the whole weight, channels-last), or "x" / "h" (input channels [0, C) /
# [C, end) of a ConvLSTM gate weight, channels-last), with C.
Target = tuple[torch.Tensor, str, int]

_ACTIVE: contextvars.ContextVar[dict | None] = contextvars.ContextVar("mscred_weight_cache", default=None)


def lookup(weight: torch.Tensor, part: str = "all") -> torch.Tensor | None:
    """The cast of ``weight`` (``part`` as in ``Target``) made by the ``cast_once`` around this call, or None."""
    table = _ACTIVE.get()
    return None if table is None else table.get((id(weight), part))


def made_here(*tensors: torch.Tensor) -> bool:
    """Whether every one of ``tensors`` is a cast made by the ``cast_once`` around this call: their gradients then go
    back through ``_CastAll.backward``, which joins the weight-gradient side stream (``wgrad_stream``) first."""
    table = _ACTIVE.get()
    if table is None:
        return False
    made = {id(t) for t in table.values()}
    return all(id(t) in made for t in tensors)


@dataclass
class Plan:
    """The permutation of one set of targets on one device: ``blocks``, as ``weight_transpose`` transposes it (int32
    rows on the device: master start, target start, channels, taps), with ``taps`` the most taps of a block; the
    same as index maps, kept on the host for where the kernels do not run: ``gather`` (target element -> master
    element, in the masters' concatenation) and ``scatter`` its inverse; ``device``; each target's channels-last
    shape and offset; each master's offset; ``packed``, the float32 buffer the masters are views of in that order,
    or None."""
    key: tuple
    gather: torch.Tensor
    scatter: torch.Tensor
    device: torch.device
    shapes: list[tuple[int, int, int, int]]
    offsets: list[int]
    master_offsets: list[int]
    blocks: torch.Tensor
    taps: int
    packed: torch.Tensor | None = None
    _on_device: dict = field(default_factory=dict)

    def index(self, name: str) -> torch.Tensor:
        """``gather`` or ``scatter`` on the plan's device, copied there on first use (the warm-up steps, before a
        CUDA graph capture): packed masters on the kernels' path never need them there."""
        cached = self._on_device.get(name)
        if cached is None:
            cached = self._on_device[name] = getattr(self, name).to(self.device, torch.int32)
        return cached

    def part_blocks(self) -> torch.Tensor:
        """``blocks`` with target-local starts and target indices (``weight_transpose.part_table``), on the device,
        made on first use (the warm-up steps, before a CUDA graph capture)."""
        cached = self._on_device.get("parts")
        if cached is None:
            cached = self._on_device["parts"] = part_table(self.blocks, self.offsets)
        return cached

    def reads_packed(self, masters: Sequence[torch.Tensor]) -> bool:
        """Whether ``masters`` still are the views of ``packed`` that ``plan_for`` made (a cheap host check)."""
        if self.packed is None:
            return False
        base, size = self.packed.data_ptr(), self.packed.element_size()
        return all(m.dtype == self.packed.dtype and m.is_contiguous() and m.data_ptr() == base + at * size
                   for m, at in zip(masters, self.master_offsets))


def plan_for(targets: Sequence[Target], previous: Plan | None = None) -> Plan:
    """The ``Plan`` of ``targets`` (reusing ``previous`` when it was made for the same weights), built on the host
    and copied to the weights' device once (before a CUDA graph capture: the warm-up steps run it)."""
    masters = _masters(targets)
    key = (masters[0].device, tuple((id(w), tuple(w.shape)) for w in masters),
           tuple((id(w), part, c) for w, part, c in targets))
    if previous is not None and previous.key == key:
        return previous
    base, master_offsets = {}, []
    total = 0
    for w in masters:
        base[id(w)] = total
        master_offsets.append(total)
        total += w.numel()
    pieces, blocks, shapes, offsets, at = [], [], [], [], 0
    for w, part, c in targets:
        O, I, kh, kw = w.shape
        lo, hi = {"all": (0, I), "x": (0, c), "h": (c, I)}[part]
        o, y, x, i = torch.meshgrid(torch.arange(O), torch.arange(kh), torch.arange(kw), torch.arange(lo, hi),
                                    indexing="ij")  # channels-last memory order of the target
        pieces.append((base[id(w)] + ((o * I + i) * kh + y) * kw + x).reshape(-1))
        # Output channel o: master elements (o, lo:hi, :, :), contiguous as (hi - lo, taps), go to the target's
        # (o, :, :, :) as (taps, hi - lo).
        rows = torch.arange(O)
        blocks.append(torch.stack([base[id(w)] + (rows * I + lo) * kh * kw, at + rows * kh * kw * (hi - lo),
                                   torch.full((O,), hi - lo), torch.full((O,), kh * kw)], 1))
        shapes.append((O, hi - lo, kh, kw))
        offsets.append(at)
        at += pieces[-1].numel()
    gather = torch.cat(pieces)
    if at != total or not torch.equal(torch.sort(gather).values, torch.arange(total)):
        raise ValueError("weight_cache targets must cover every master element exactly once")
    scatter = torch.empty_like(gather)
    scatter[gather] = torch.arange(total)
    device = masters[0].device
    table = torch.cat(blocks)
    plan = Plan(key, gather, scatter, device, shapes, offsets, master_offsets, table.to(device, torch.int32),
                int(table[:, 3].max()))
    if total < 2 ** 31 and all(m.dtype == torch.float32 and runs_fused(m) for m in masters) \
            and not switched_off("MSCRED_WEIGHT_PACK"):
        plan.packed = _pack(masters, total)
    return plan


@torch.no_grad()
def _pack(masters: Sequence[torch.Tensor], total: int) -> torch.Tensor:
    """One float32 buffer holding ``masters`` in order; each master's ``.data`` becomes its view there."""
    packed = torch.empty(total, device=masters[0].device, dtype=torch.float32)
    at = 0
    for m in masters:
        view = packed[at:at + m.numel()].view(m.shape)
        view.copy_(m)
        m.data = view
        at += m.numel()
    return packed


def _masters(targets: Sequence[Target]) -> list[torch.Tensor]:
    """The distinct weights of ``targets``, in first-seen order."""
    seen: dict[int, torch.Tensor] = {}
    for w, _, _ in targets:
        seen.setdefault(id(w), w)
    return list(seen.values())


@contextlib.contextmanager
def cast_once(targets: Sequence[Target], plan: Plan, dtype: torch.dtype) -> Iterator[None]:
    """Within the block, ``lookup(w, part)`` gives each target cast to ``dtype`` (channels-last), all made by one
    autograd function whose backward returns every master's float32 gradient."""
    masters = _masters(targets)
    casts = _CastAll.apply(plan, dtype, *masters)
    token = _ACTIVE.set({(id(w), part): t for (w, part, _), t in zip(targets, casts)})
    try:
        yield
    finally:
        _ACTIVE.reset(token)


class _CastAll(torch.autograd.Function):
    @staticmethod
    def forward(ctx, plan: Plan, dtype: torch.dtype, *masters: torch.Tensor):
        ctx.plan, ctx.master_shapes, ctx.master_dtype = plan, [m.shape for m in masters], masters[0].dtype
        total = plan.gather.numel()
        if plan.reads_packed(masters):  # one kernel: every target transposed from the masters in place and cast
            flat = transpose_blocks(plan.packed, plan.blocks, total, dtype, plan.taps)
        else:  # one multi-tensor cast into one buffer (PyTorch's foreach copy casts on its fast path), one gather
            cast = torch.empty(total, device=plan.device, dtype=dtype)
            torch._foreach_copy_([cast[at:at + m.numel()] for m, at in zip(masters, plan.master_offsets)],
                                 [m.reshape(-1) for m in masters])
            flat = cast.index_select(0, plan.index("gather"))
        return tuple(flat[at:at + O * I * kh * kw].view(O, kh, kw, I).permute(0, 3, 1, 2)
                     for (O, I, kh, kw), at in zip(plan.shapes, plan.offsets))

    @staticmethod
    def backward(ctx, *grads: torch.Tensor | None):
        plan = ctx.plan
        wgrad_stream.join(plan.device)  # gradients queued on the side stream are read from here on
        parts = [(g if g is not None else torch.zeros(shape, device=plan.device, dtype=torch.float32))
                 .permute(0, 2, 3, 1).reshape(-1) for g, shape in zip(grads, plan.shapes)]
        dtype = next((g.dtype for g in grads if g is not None), ctx.master_dtype)
        if _reads_parts(parts, dtype):  # the gradients read where they lie: no concatenation
            flat = transpose_parts(parts, plan.part_blocks(), plan.gather.numel(), ctx.master_dtype, plan.taps)
        else:
            flat = torch.cat([p.to(dtype) for p in parts])
            if runs_fused(flat):  # the forward's transposes the other way, cast to float32 on the way
                flat = transpose_blocks(flat, plan.blocks, flat.numel(), ctx.master_dtype, plan.taps, inverse=True)
            else:
                flat = flat.index_select(0, plan.index("scatter")).to(ctx.master_dtype)
        master_grads = tuple(flat[at:at + shape.numel()].view(shape)
                             for shape, at in zip(ctx.master_shapes, plan.master_offsets))
        return (None, None, *master_grads)


def _reads_parts(parts: list[torch.Tensor], dtype: torch.dtype) -> bool:
    """Whether the backward reads the targets' gradients in place (``transpose_parts``; MSCRED_WEIGHT_GRAD_PARTS=0
    concatenates them): where the kernels run, for at most MAX_PARTS contiguous gradients of one dtype and device."""
    return (not switched_off("MSCRED_WEIGHT_GRAD_PARTS") and 0 < len(parts) <= MAX_PARTS and runs_fused(parts[0])
            and all(p.dtype == dtype and p.is_contiguous() and p.device == parts[0].device for p in parts))
