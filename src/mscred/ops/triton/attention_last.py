"""The temporal attention's backward cut to what a level's ConvLSTM backward cannot make itself.

The attention's backward (``attention.py``) writes dL/dH_k for every step k:

    dH_k = a_k dout + ds_k H_T                           (k < T)
    dH_T = a_T dout + ds_T H_T + sum_j ds_j H_j

The first line is two per-sample numbers applied to two maps every step shares (dout and H_T). A ConvLSTM backward
that reads dout and H_T itself (level 1's step kernel, ``ops/conv_cell/conv_cell_bwd.cu``'s attn_* parameters) needs
from the attention only the coefficients (a_k, ds_k) of every step and the last step's gradient, which sums over
all of them: ``last_step_grad`` writes those two, so that the T - 1 maps of the other steps are never stored and
read back (at level 1 of the training step: 4 x 7.4 MB each way of the 37 MB the attention's backward wrote).

Same passes as the attention's backward: the inner products (split over D at the training batch, the partial sums
summed in a fixed order), then one pass over D that stores the last step's map only -- it still reads every step's
H for the sum -- and, once per sample, the coefficients.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from mscred.ops.triton import attention
from mscred.ops.triton.runtime import tl, triton

if triton is not None:

    @triton.jit
    def _last_step_grad(base, dout_row, dlast_row, a, ds, t, tmask, start, length, T, D, CDT: tl.constexpr,
                        BLOCK: tl.constexpr, CHUNKED: tl.constexpr):
        """dH_T alone over [start, start + length): the attention's ``_attention_grad`` for its last row, in the
        same order of operations (a dout + ds H_T, then the sum over the steps)."""
        last = t == T - 1
        a_last = tl.sum(tl.where(last, a, 0.0), axis=0)
        ds_last = tl.sum(tl.where(last, ds, 0.0), axis=0)
        for d0 in range(0, length, BLOCK):
            d, dmask, hk, hl = attention._step_tiles(base, t, tmask, start, d0, length, T, D, CDT, BLOCK, CHUNKED)
            go = tl.load(dout_row + d, mask=dmask, other=0.0).to(CDT)
            g = a_last * go + ds_last * hl
            g += tl.sum(ds[:, None] * hk, axis=0)
            tl.store(dlast_row + d, g.to(dlast_row.dtype.element_ty), mask=dmask)

    @triton.jit
    def _store_coefficients(row, a, ds, t, tmask):
        """(a_k, ds_k) of a sample's steps to its (T, 2) row of coef."""
        tl.store(row + t * 2, a.to(row.dtype.element_ty), mask=tmask)
        tl.store(row + t * 2 + 1, ds.to(row.dtype.element_ty), mask=tmask)

    @triton.jit(do_not_specialize=["T", "D"])
    def _attn_last_kernel(h_ptr, dout_ptr, dlast_ptr, coef_ptr, T, D, CDT: tl.constexpr, T_PAD: tl.constexpr,
                          BLOCK: tl.constexpr):
        """One program per sample: the inner products, the coefficients, dH_T."""
        b = tl.program_id(0).to(tl.int64)
        base = h_ptr + b * T * D
        t = tl.arange(0, T_PAD)
        tmask = t < T
        acc_s, acc_g = attention._dot_tiles(base, dout_ptr + b * D, t, tmask, 0, D, T, D, CDT, T_PAD, BLOCK, True,
                                            False)
        a = attention._attention_weights(acc_s, tmask, T)
        ds = attention._score_grads(a, tl.sum(acc_g, axis=1), T)
        _store_coefficients(coef_ptr + b * T * 2, a, ds, t, tmask)
        _last_step_grad(base, dout_ptr + b * D, dlast_ptr + b * D, a, ds, t, tmask, 0, D, T, D, CDT, BLOCK, False)

    @triton.jit(do_not_specialize=["T", "NCHUNK"])
    def _attn_last_split_kernel(h_ptr, dout_ptr, part_ptr, dpart_ptr, dlast_ptr, coef_ptr, T, D, CHUNK, NCHUNK,
                                CDT: tl.constexpr, T_PAD: tl.constexpr, BLOCK: tl.constexpr,
                                NCHUNK_PAD: tl.constexpr):
        """Program (b, c) after the attention's first pass (``attention.backward_partials``: the scores'
        partials in part, the <H_k, dout> ones in dpart): dH_T over chunk c; chunk 0 also stores the sample's
        coefficients."""
        b = tl.program_id(0).to(tl.int64)
        c = tl.program_id(1)
        t = tl.arange(0, T_PAD)
        tmask = t < T
        a, ds = attention._split_weights_and_grads(part_ptr, dpart_ptr, b, NCHUNK, tmask, T, T_PAD, NCHUNK_PAD)
        if c == 0:
            _store_coefficients(coef_ptr + b * T * 2, a, ds, t, tmask)
        _last_step_grad(h_ptr + b * T * D, dout_ptr + b * D, dlast_ptr + b * D, a, ds, t, tmask, c * CHUNK, CHUNK,
                        T, D, CDT, BLOCK, True)


def last_step_grad(dout: torch.Tensor, h: torch.Tensor,
                   saved: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(g, dlast, coef) for the attention of h (B, T, C, H, W) stored channels-last ((B, T, H, W, C), the fused
    ConvLSTM's output) given dout (B, C, H, W), where the kernels run:

    - g: dout in h's dtype stored channels-last (itself if it is; the attention's backward takes the same copy);
    - dlast: dL/dH_{T-1}, (B, C, H, W) stored channels-last, as the attention's backward would write it;
    - coef: (B, T, 2) float32 (float64 for float64), (a_k, ds_k) of each sample and step: dL/dH_k = a_k g +
      ds_k H_{T-1} for k < T - 1 (what the attention's backward would store, rounded once to h's dtype).
    ``saved``: the forward's partials (``attention.saved_scores``).
    """
    # (stored (B, T, H, W, C): with 1 x 1 maps that is h's plain contiguous order too, which attention._channels_last
    # does not count as channels-last)
    if not h.permute(0, 1, 3, 4, 2).is_contiguous():
        raise ValueError("last_step_grad: h must be stored channels-last, (B, T, H, W, C)")
    B, T, C, H, W = h.shape
    hp = h.permute(0, 1, 3, 4, 2)
    g = attention._channels_last_copy(dout.to(h.dtype))
    dlast = torch.empty(B, H, W, C, device=h.device, dtype=h.dtype)
    coef = torch.empty(B, T, 2, device=h.device, dtype=torch.float64 if h.dtype == torch.float64 else torch.float32)
    _, _, D, meta = attention._launch_args(hp, attention.BWD_BLOCK, attention.BWD_WARPS)
    gp = g.permute(0, 2, 3, 1)
    split = attention._split(B, D)
    if split is None:
        _attn_last_kernel[(B,)](hp, gp, dlast, coef, T, D, **meta)
    else:
        part, dpart, meta = attention.backward_partials(hp, gp, split, meta, saved)
        nchunk, chunk = split[:2]
        _attn_last_split_kernel[(B, nchunk)](hp, gp, part, dpart, dlast, coef, T, D, chunk, nchunk,
                                             NCHUNK_PAD=max(triton.next_power_of_2(nchunk), 2), **meta)
    return g, dlast.permute(0, 3, 1, 2), coef


def step_grad(g: torch.Tensor, h_last: torch.Tensor, coef: torch.Tensor, t: int) -> torch.Tensor:
    """dL/dH_t (t < T - 1) from ``last_step_grad``'s g and coef and H_{T-1}: a_t g + ds_t H_{T-1}, computed in
    float32 (float64 for float64) and rounded once to g's dtype, as the attention's backward stores it; in g's
    memory format. For the ConvLSTM backward's steps that do not fold it into their kernel."""
    acc = torch.float64 if g.dtype == torch.float64 else torch.float32
    a = coef[:, t, 0].to(acc).view(-1, 1, 1, 1)
    ds = coef[:, t, 1].to(acc).view(-1, 1, 1, 1)
    return (a * g.to(acc) + ds * h_last.to(acc)).to(g.dtype)


@dataclass(frozen=True)
class FoldedGrad:
    """dL/dh of every step of a level whose hidden states feed only its temporal attention, as the ConvLSTM
    backward takes it in place of a (B, T, Ch, H, W) tensor: ``last_step_grad``'s g and coef, H_{T-1} (a view of
    the level's output) and dL/dH_{T-1} (``last``), each map (B, Ch, H, W)."""
    g: torch.Tensor
    h_last: torch.Tensor
    coef: torch.Tensor
    last: torch.Tensor

    @property
    def steps(self) -> int:
        return self.coef.shape[1]

    def step(self, t: int) -> torch.Tensor:
        """dL/dH_t, a map (``step_grad``; ``last`` at the last step)."""
        return self.last if t == self.steps - 1 else step_grad(self.g, self.h_last, self.coef, t)

    def kernel_args(self, t: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(g, h_last, coef_t (B, 2)) for a kernel that makes step t's map itself (``conv_cell.step_backward``)."""
        return self.g, self.h_last, self.coef[:, t]

    def maps(self) -> tuple[torch.Tensor, torch.Tensor]:
        """g and h_last as one-step (B, 1, Ch, H, W) views, for the checks a step's dout passes."""
        return self.g.unsqueeze(1), self.h_last.unsqueeze(1)

    def materialised(self) -> torch.Tensor:
        """Every step's map, (B, T, Ch, H, W) contiguous."""
        return torch.stack([self.step(t) for t in range(self.steps)], 1)
