"""Fused temporal attention of MSCRED: scores, softmax over the T steps and the weighted sum in one kernel.

    a_k = softmax_k(<H_k, H_T> / T),  out = sum_k a_k H_k         (per sample; the inner product runs over C*H*W)

The reference does it in five PyTorch kernels (product, sum, softmax, broadcast product, sum) and materialises the
(B, T, D) product twice. Here one program per sample streams its T x D block twice: pass 1 accumulates the T dot
products with H_T in registers (a [T_PAD, BLOCK] tile, reduced once at the end), the softmax runs on T numbers, pass 2
writes the weighted sum. That is 2 reads of H and 1 write of the output, the fewest for a two-pass softmax (the
scores need all of H_T before any output element is known).

Backward, again one kernel: pass 1 recomputes the scores and da_k = <dout, H_k>; then
ds_k = a_k (da_k - sum_j a_j da_j); pass 2 writes
    dH_k = a_k dout + (ds_k / T) H_T          (k < T)
    dH_T = a_T dout + (ds_T / T) H_T + sum_j (ds_j / T) H_j
Accumulation is float32 for float32/bf16/fp16 inputs and float64 for float64 (the tests' oracle path).

Split over D when the samples alone do not fill the GPU (the training batch: 128 samples, one program each, for 132
SMs, each program streaming its 288 KB block twice with one block of warps in flight per SM; level 1's forward took
43.6 us and its backward 63.0 us against ~12 and ~22 us of HBM traffic, benchmarks/results/step_profile_1201c/):
each sample's D is cut into chunks, a first kernel writes every (sample, chunk)'s T partial scores (and, backward,
the T partial <dout, H_k>) to a small float32 buffer, and a second kernel, one program per (sample, chunk) again,
sums the sample's partials in a fixed order (deterministic, no atomics), takes the softmax and does pass 2 on its
chunk. The second read of H mostly hits L2. ``MSCRED_ATTN_SPLIT`` = "programs per SM/BLOCK/warps" (0 programs: one
program per sample always; A/B runs); ``MSCRED_ATTN_PARTIAL_TILE`` = "BLOCK/warps" gives the first kernel a tile of its
own and ``MSCRED_ATTN_LAST_APART=1`` (or "bwd", the backward's only) its last step apart (``_dot_rows_last``; A/B
runs, neither a step gain on the H200).
"""
from __future__ import annotations

import os
from typing import Optional

import torch

from mscred.ops.padding import copy_pixels
# Importing mscred never fails without Triton: the dispatcher then falls back to the reference.
from mscred.ops.triton import runtime as _runtime
from mscred.ops.triton.runtime import interpreting as _interpreting
from mscred.ops.triton.runtime import runs_fused as _runs_fused
from mscred.ops.triton.runtime import tl, triton

# Elements of D per iteration (the register tile is [T_PAD, BLOCK]) and warps per program, one program per sample.
# Forward: on the scoring path (3,591 windows, bf16) 1024 x 8 warps ran every level 1.32-1.50x faster than the
# 2048 x 16 first chosen (more samples in flight per SM; benchmarks/results/attention_programs/, H200), and programs
# looping over samples to keep a sample's block in L2 between the two passes were slower or even. The backward
# holds two accumulators: 1024 x 16 (training, not re-swept). The CPU interpreter pays per iteration: wider tiles.
# MSCRED_ATTN_FWD_TILE="BLOCK/warps" overrides the forward's (A/B runs).
FWD_BLOCK, FWD_WARPS = 1024, 8
BWD_BLOCK, BWD_WARPS = 1024, 16
INTERPRETER_BLOCK = 8192
# The split (module docstring): chunks until about SPLIT_PER_SM programs per SM, BLOCK elements per iteration. On
# the H200 at the training shapes (benchmarks/results/pack_split/attention/), 1024 x 4 warps: the eight calls
# 1.24x faster than one program per sample at 4 per SM; 8 per SM 1.14x, 16 1.13x; 512 or 8 warps 0.3-0.74x. Three
# per SM beat four in two sweeps since (results/pack_split2/: 0.1710 against 0.1763 ms; results/attention_partial/:
# 0.1690 against 0.1799 ms, and the graphed step 2.740 / 2.734 against 2.751 / 2.751 ms in alternation).
SPLIT_PER_SM, SPLIT_BLOCK, SPLIT_WARPS = 3, 1024, 4
INTERPRETER_SPLIT_PROGRAMS = 8  # the interpreter has no SMs: split below 4 samples, so that the tests run it
# The first split kernel reads H from HBM (the second mostly from L2) and ran at about half the copy rate in the
# graphed step (level 1's forward 17.1 us for 36.9 MB, results/step_profile_final/); at the split's 1024 x 4 warps
# it holds 8 elements a thread of T_PAD = 8 rows: 115 registers forward, 187 backward by the sm_90 compile
# (benchmarks/attention_sm90.py), at most 4 / 2 programs an SM. MSCRED_ATTN_PARTIAL_TILE="BLOCK/warps" sets its tile
# apart from the second kernel's (``_partial_tile``; 1024 x 8 warps: 80 / 126 registers, but 8-byte loads; both
# kernels at 8 warps lost 0.74x in the first sweep, results/pack_split/attention/). Measured alone since
# (results/attention_partial/): no tile of its own beat the split's in sum over the step's eight calls (0.94-0.99x at
# 3 per SM); the setting stays for A/B runs on other cards.


def is_available() -> tuple[bool, str]:
    """(True, "") when the fused attention can run here: Triton and a CUDA device, or Triton's CPU interpreter."""
    return _runtime.is_available("fused attention")


def temporal_attention(h: torch.Tensor, cat: bool = False) -> torch.Tensor:
    """MSCRED's attention (contract: ``mscred.ops.temporal_attention``).

    Parameters
    ----------
    h : (B, T, C, H, W) tensor
    cat : bool
        Return the output as the upper channel half of a new (B, 2C, H, W) channels-last buffer whose lower half is
        left unwritten, for the training decoder to write its level into (``ops.attention_cat``); channels-last h
        only (else the output is as without).

    Returns
    -------
    (B, C, H, W) tensor of h's dtype. Tensors the kernel cannot run on (CPU without the interpreter) take the
    reference path. Under autocast the input keeps its dtype, as in the reference (no weights to cast).
    """
    if not _runs_fused(h):
        from mscred.ops import reference
        return reference.temporal_attention(h)
    return temporal_attention_fused(h, cat)[0]


def temporal_attention_into(h: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``temporal_attention(h)`` written into ``out`` (B, C, H, W), for inference (no autograd): the scoring
    decoder hands in the channel slice of its skip connection's concatenation buffer, so that no concatenation
    copies the attention output again. The kernel writes a channels-last h's output straight into a slice whose
    channels are contiguous; any other case computes the output and copies it in. Returns ``out``."""
    if out.shape != (h.shape[0], *h.shape[2:]):
        raise ValueError(f"attention of a {tuple(h.shape)} input into a {tuple(out.shape)} output")
    if not (_runs_fused(h) and _channels_last(h) and out.stride(1) == 1 and out.dtype == h.dtype
            and (out.shape[3] == 1 or out.stride(2) == out.shape[3] * out.stride(3))):
        return out.copy_(temporal_attention(h))
    pixel_stride = out.stride(2) if out.shape[3] == 1 else out.stride(3)
    _forward_channels_last(h, out, out.stride(0), pixel_stride, sliced=True)
    return out


def _forward_channels_last(h: torch.Tensor, out: torch.Tensor, out_sb: int, out_sp: int,
                           sliced: bool) -> torch.Tensor:
    """The forward kernel on a channels-last h (B, T, C, H, W), stored (B, T, H, W, C): element (pixel, channel) of
    sample b goes to out + b * out_sb + pixel * out_sp + channel (SLICED: out_sp may exceed C), else to the dense
    (B, H, W, C) ``out``. Returns ``_forward_kernels``' partials."""
    C = h.shape[2]
    return _forward_kernels(h.permute(0, 1, 3, 4, 2), out, out_sb, out_sp, C, sliced)  # contiguous (B, T, H, W, C)


def _forward_kernels(h: torch.Tensor, out: torch.Tensor, out_sb: int, out_sp: int, C: int,
                     sliced: bool) -> torch.Tensor:
    """The forward on a contiguous h (B, T, ...) seen as (B, T, D): one program per sample, or split over D.
    Returns the split's partials buffer (its scores' partials in [:, :, 0]; ``saved_scores``), or a (B, 0, 2,
    T_PAD) one without the split."""
    B, T, D, meta = _launch_args(h, *_fwd_tile())
    split = _split(B, D)
    if split is None:
        _attn_fwd_kernel[(B,)](h, out, out_sb, out_sp, T, D, C, SLICED=sliced, **meta)
        return _partials(h, 0, meta)
    nchunk, chunk, block, warps = split
    part = _partials(h, nchunk, meta)
    meta = dict(meta, BLOCK=block, num_warps=warps)
    first = _partial_tile(dict(meta, WITH_DOUT=False), T)
    _attn_partial_kernel[(B, nchunk)](h, h, part, T, D, chunk, nchunk, **first)
    _attn_fwd_split_kernel[(B, nchunk)](h, part, out, out_sb, out_sp, T, D, C, chunk, nchunk, SLICED=sliced,
                                        NCHUNK_PAD=max(triton.next_power_of_2(nchunk), 2), **meta)
    return part


def saved_scores() -> bool:
    """On unless MSCRED_ATTN_SAVED_SCORES=0: the split backward takes the scores' partials the forward computed (the
    op's second output) and its first kernel forms only <H_k, dout> -- one accumulator tile instead of two (115
    against 187 registers a thread at the split's tile, ``benchmarks/attention_sm90.py``). The same partials, so the
    same gradients bit for bit; the graphed step 2.479-2.486 -> 2.467-2.471 ms (``results/next_1205/``)."""
    return not _runtime.switched_off("MSCRED_ATTN_SAVED_SCORES")


def backward_partials(h: torch.Tensor, dout: torch.Tensor, split, meta: dict, saved: torch.Tensor | None):
    """The split backward's first pass on contiguous h (B, T, ...) and dout (B, ...): (the scores' partials, the
    <H_k, dout> partials, the second kernels' meta) -- one buffer of both, or with ``saved_scores`` the forward's
    ``saved`` partials (when they are of this split) and a buffer of the dout partials alone."""
    B, T, D = h.shape[0], h.shape[1], h[0, 0].numel()
    nchunk, chunk, block, warps = split
    meta = dict(meta, BLOCK=block, num_warps=warps)
    if saved is not None and saved.shape[1] == nchunk and saved_scores():
        dpart = _partials(h, nchunk, meta)
        _attn_partial_kernel[(B, nchunk)](h, dout, dpart, T, D, chunk, nchunk, WITH_DOUT=True, SCORES=False, **meta)
        return saved, dpart, meta
    part = _partials(h, nchunk, meta)
    first = _partial_tile(dict(meta, WITH_DOUT=True), T)
    _attn_partial_kernel[(B, nchunk)](h, dout, part, T, D, chunk, nchunk, **first)
    return part, part, meta


def _backward_kernels(h: torch.Tensor, dout: torch.Tensor, dh: torch.Tensor, saved: torch.Tensor | None) -> None:
    """The backward on contiguous h, dout, dh (B, T, ...), (B, ...), (B, T, ...): as ``_forward_kernels``
    (``saved``: its partials, ``backward_partials``)."""
    B, T, D, meta = _launch_args(h, BWD_BLOCK, BWD_WARPS)
    split = _split(B, D)
    if split is None:
        _attn_bwd_kernel[(B,)](h, dout, dh, T, D, **meta)
        return
    part, dpart, meta = backward_partials(h, dout, split, meta, saved)
    nchunk, chunk = split[:2]
    _attn_bwd_split_kernel[(B, nchunk)](h, dout, part, dpart, dh, T, D, chunk, nchunk,
                                        NCHUNK_PAD=max(triton.next_power_of_2(nchunk), 2), **meta)


def _split(B: int, D: int) -> tuple[int, int, int, int] | None:
    """(chunks, chunk length, BLOCK, warps) of the split kernels for B samples of D elements, or None where the
    samples alone give at least half of the programs wanted (one per sample then)."""
    per_sm, block, warps = _runtime.tile_override("MSCRED_ATTN_SPLIT", (SPLIT_PER_SM, SPLIT_BLOCK, SPLIT_WARPS),
                                                  ("programs-per-SM", "BLOCK", "warps"))
    if per_sm <= 0:
        return None
    if _interpreting():
        programs, block = INTERPRETER_SPLIT_PROGRAMS, 128
    else:
        programs = per_sm * _runtime.sm_count()
    if 2 * B >= programs:
        return None
    nchunk = min(-(-programs // B), -(-D // block))
    if nchunk <= 1:
        return None
    chunk = -(-D // nchunk)
    chunk = -(-chunk // 64) * 64  # chunks start 64-element aligned
    return -(-D // chunk), chunk, block, warps


def _partial_tile(meta: dict, T: int) -> dict:
    """The first split kernel's launch meta: the split's ``meta``, with BLOCK and warps from
    MSCRED_ATTN_PARTIAL_TILE="BLOCK/warps" where set (its chunks, and so its result, do not depend on them: each
    program sums its chunk BLOCK elements at a time); LAST_APART and ROWS from MSCRED_ATTN_LAST_APART (the
    earlier steps' tile without masked rows, the last step apart: ``_dot_rows_last``; ``_last_apart``), for the
    direction ``meta["WITH_DOUT"]`` says."""
    block, warps = _runtime.tile_override("MSCRED_ATTN_PARTIAL_TILE", (meta["BLOCK"], meta["num_warps"]))
    apart = _last_apart(meta["WITH_DOUT"])
    rows = triton.next_power_of_2(max(T - 1, 1))
    return dict(meta, BLOCK=block, num_warps=warps, LAST_APART=apart, ROWS=rows if apart else 1)


def _last_apart(backward: bool) -> bool:
    """MSCRED_ATTN_LAST_APART: 1 (on, both directions), "bwd" (the backward's first kernel only: the per-call
    timings had it 1.01-1.21x there and level 1's forward 0.87x, results/attention_apart/), else off."""
    setting = os.environ.get("MSCRED_ATTN_LAST_APART", "0").strip().lower()
    if setting == "bwd":
        return backward
    return _runtime.switched_on("MSCRED_ATTN_LAST_APART")


def _partials(h: torch.Tensor, nchunk: int, meta: dict) -> torch.Tensor:
    """The split's (B, chunks, 2, T_PAD) buffer of partial inner products, in the accumulation type."""
    dtype = torch.float64 if meta["CDT"] == tl.float64 else torch.float32
    return torch.empty(h.shape[0], nchunk, 2, meta["T_PAD"], device=h.device, dtype=dtype)


def _fwd_tile() -> tuple[int, int]:
    """(BLOCK, warps) of the forward kernel: (FWD_BLOCK, FWD_WARPS) or MSCRED_ATTN_FWD_TILE="BLOCK/warps"."""
    return _runtime.tile_override("MSCRED_ATTN_FWD_TILE", (FWD_BLOCK, FWD_WARPS))


if triton is not None:

    @triton.jit
    def _attention_weights(scores, tmask, T):
        """Softmax over the steps of the score tile's row sums (T_PAD,) divided by T; zero on the padding rows."""
        return _softmax_weights(tl.sum(scores, axis=1), tmask, T)

    @triton.jit
    def _softmax_weights(dots, tmask, T):
        """Softmax over the steps of the T inner products ``dots`` (T_PAD,) divided by T; zero on padding rows.

        Divided by the integer T in the tiles' own type, not multiplied by a precomputed 1/T: a Python float
        reaches a compiled kernel as a float32 argument, so 1/5 arrived rounded to float32 and the float64 path
        was off by ~1e-8 on the GPU (exact under the CPU interpreter, which keeps Python floats)."""
        s = dots / T
        s = tl.where(tmask, s, -float("inf"))
        e = tl.exp(s - tl.max(s, axis=0))
        e = tl.where(tmask, e, 0.0)
        return e / tl.sum(e, axis=0)

    # The two passes over a range [start, start + length) of a sample's D, shared by the one-program-per-sample
    # kernels (the whole of D, CHUNKED off: no second mask) and the split kernels (one chunk, CHUNKED).
    @triton.jit
    def _step_tiles(base, t, tmask, start, d0, length, T, D, CDT: tl.constexpr, BLOCK: tl.constexpr,
                    CHUNKED: tl.constexpr):
        """The BLOCK elements of D from start + d0 (CHUNKED: masked at the range's end too): (d, their mask, the
        (T_PAD, BLOCK) tile of every step's H there, H_T's row there) in the compute type."""
        d = start + d0 + tl.arange(0, BLOCK)
        dmask = d < D
        if CHUNKED:
            dmask = dmask & (d0 + tl.arange(0, BLOCK) < length)
        hk = tl.load(base + t[:, None] * D + d[None, :], mask=tmask[:, None] & dmask[None, :], other=0.0).to(CDT)
        hl = tl.load(base + (T - 1) * D + d, mask=dmask, other=0.0).to(CDT)
        return d, dmask, hk, hl

    @triton.jit
    def _dot_tiles(base, dout_row, t, tmask, start, length, T, D, CDT: tl.constexpr, T_PAD: tl.constexpr,
                   BLOCK: tl.constexpr, WITH_DOUT: tl.constexpr, CHUNKED: tl.constexpr,
                   WITH_SCORES: tl.constexpr = True):
        """Pass 1: the (T_PAD, BLOCK) tiles of (WITH_SCORES) <H_k, H_T> and (WITH_DOUT) <H_k, dout>, to be summed
        over axis 1 (a tile left out stays zero)."""
        acc_s = tl.zeros([T_PAD, BLOCK], dtype=CDT)
        acc_g = tl.zeros([T_PAD, BLOCK], dtype=CDT)
        for d0 in range(0, length, BLOCK):
            d, dmask, hk, hl = _step_tiles(base, t, tmask, start, d0, length, T, D, CDT, BLOCK, CHUNKED)
            if WITH_SCORES:
                acc_s += hk * hl[None, :]
            if WITH_DOUT:
                go = tl.load(dout_row + d, mask=dmask, other=0.0).to(CDT)
                acc_g += hk * go[None, :]
        return acc_s, acc_g

    @triton.jit
    def _dot_rows_last(base, dout_row, start, length, T, D, CDT: tl.constexpr, ROWS: tl.constexpr,
                       BLOCK: tl.constexpr, WITH_DOUT: tl.constexpr):
        """Pass 1 of a chunk with the last step apart (``LAST_APART``): the (ROWS, BLOCK) tiles of <H_k, H_T> and
        (WITH_DOUT) <H_k, dout> for the T - 1 earlier steps (ROWS = their count rounded up to a power of 2: 4 for
        T = 5, no masked row), and the (BLOCK,) products of H_T with itself and with dout, from the H_T row that is
        loaded anyway."""
        r = tl.arange(0, ROWS)
        rmask = r < T - 1
        acc_s = tl.zeros([ROWS, BLOCK], dtype=CDT)
        acc_g = tl.zeros([ROWS, BLOCK], dtype=CDT)
        last_s = tl.zeros([BLOCK], dtype=CDT)
        last_g = tl.zeros([BLOCK], dtype=CDT)
        for d0 in range(0, length, BLOCK):
            d = start + d0 + tl.arange(0, BLOCK)
            dmask = (d < D) & (d0 + tl.arange(0, BLOCK) < length)
            hl = tl.load(base + (T - 1) * D + d, mask=dmask, other=0.0).to(CDT)
            hk = tl.load(base + r[:, None] * D + d[None, :], mask=rmask[:, None] & dmask[None, :],
                         other=0.0).to(CDT)
            acc_s += hk * hl[None, :]
            last_s += hl * hl
            if WITH_DOUT:
                go = tl.load(dout_row + d, mask=dmask, other=0.0).to(CDT)
                acc_g += hk * go[None, :]
                last_g += hl * go
        return acc_s, acc_g, last_s, last_g

    @triton.jit
    def _store_partials(row, acc, last, T, T_PAD: tl.constexpr, ROWS: tl.constexpr):
        """One (T_PAD,) row of the partials buffer from ``_dot_rows_last``'s sums: steps < T - 1, the last step,
        zeros after it (the second kernel reads all T_PAD and multiplies the padding by a zero weight)."""
        r = tl.arange(0, ROWS)
        tl.store(row + r, tl.sum(acc, axis=1), mask=r < T - 1)
        t = tl.arange(0, T_PAD)
        tl.store(row + t, tl.where(t == T - 1, tl.sum(last, axis=0), 0.0), mask=t >= T - 1)

    @triton.jit
    def _weighted_sum(base, out_ptr, b, out_sb, out_sp, a, t, tmask, start, length, D, C, CDT: tl.constexpr,
                      BLOCK: tl.constexpr, SLICED: tl.constexpr, CHUNKED: tl.constexpr):
        """Forward pass 2: sum_k a_k H_k. SLICED: the output is a channel slice of a wider channels-last buffer
        (``temporal_attention_into``): element d = pixel * C + channel of a sample goes to pixel * out_sp +
        channel, the sample at b * out_sb."""
        for d0 in range(0, length, BLOCK):
            d = start + d0 + tl.arange(0, BLOCK)
            dmask = d < D
            if CHUNKED:
                dmask = dmask & (d0 + tl.arange(0, BLOCK) < length)
            hk = tl.load(base + t[:, None] * D + d[None, :], mask=tmask[:, None] & dmask[None, :],
                         other=0.0).to(CDT)
            o = tl.sum(hk * a[:, None], axis=0)
            if SLICED:
                dst = out_ptr + b * out_sb + (d // C) * out_sp + d % C
            else:
                dst = out_ptr + b * D + d
            tl.store(dst, o.to(out_ptr.dtype.element_ty), mask=dmask)

    @triton.jit
    def _attention_grad(base, dout_row, dbase, a, ds, t, tmask, start, length, T, D, CDT: tl.constexpr,
                        BLOCK: tl.constexpr, CHUNKED: tl.constexpr):
        """Backward pass 2: dH_k = a_k dout + ds_k H_T (+ sum_j ds_j H_j for k = T - 1); ds already over T."""
        last = (t == T - 1)[:, None]
        for d0 in range(0, length, BLOCK):
            d, dmask, hk, hl = _step_tiles(base, t, tmask, start, d0, length, T, D, CDT, BLOCK, CHUNKED)
            m2 = tmask[:, None] & dmask[None, :]
            go = tl.load(dout_row + d, mask=dmask, other=0.0).to(CDT)
            g = a[:, None] * go[None, :] + ds[:, None] * hl[None, :]
            extra = tl.sum(ds[:, None] * hk, axis=0)  # the score of every step also depends on H_T
            g += tl.where(last, extra[None, :], 0.0)
            tl.store(dbase + t[:, None] * D + d[None, :], g.to(dbase.dtype.element_ty), mask=m2)

    @triton.jit(do_not_specialize=["T", "D", "C"])
    def _attn_fwd_kernel(h_ptr, out_ptr, out_sb, out_sp, T, D, C,
                         CDT: tl.constexpr, T_PAD: tl.constexpr, BLOCK: tl.constexpr, SLICED: tl.constexpr):
        """One program per sample, both passes (SLICED: see ``_weighted_sum``)."""
        b = tl.program_id(0).to(tl.int64)
        base = h_ptr + b * T * D
        t = tl.arange(0, T_PAD)
        tmask = t < T
        acc, _ = _dot_tiles(base, base, t, tmask, 0, D, T, D, CDT, T_PAD, BLOCK, False, False)
        a = _attention_weights(acc, tmask, T)  # (T_PAD,)
        _weighted_sum(base, out_ptr, b, out_sb, out_sp, a, t, tmask, 0, D, D, C, CDT, BLOCK, SLICED, False)

    @triton.jit(do_not_specialize=["T", "D"])
    def _attn_bwd_kernel(h_ptr, dout_ptr, dh_ptr, T, D,
                         CDT: tl.constexpr, T_PAD: tl.constexpr, BLOCK: tl.constexpr):
        b = tl.program_id(0).to(tl.int64)
        base = h_ptr + b * T * D
        t = tl.arange(0, T_PAD)
        tmask = t < T
        acc_s, acc_g = _dot_tiles(base, dout_ptr + b * D, t, tmask, 0, D, T, D, CDT, T_PAD, BLOCK, True, False)
        a = _attention_weights(acc_s, tmask, T)
        ds = _score_grads(a, tl.sum(acc_g, axis=1), T)
        _attention_grad(base, dout_ptr + b * D, dh_ptr + b * T * D, a, ds, t, tmask, 0, D, T, D, CDT, BLOCK, False)

    # The split kernels leave D and CHUNK specialized (Triton's divisibility by 16): chunks start 16-element aligned
    # and the loads can be vectorised.
    @triton.jit(do_not_specialize=["T", "NCHUNK"])
    def _attn_partial_kernel(h_ptr, dout_ptr, part_ptr, T, D, CHUNK, NCHUNK, CDT: tl.constexpr,
                             T_PAD: tl.constexpr, BLOCK: tl.constexpr, WITH_DOUT: tl.constexpr,
                             LAST_APART: tl.constexpr = False, ROWS: tl.constexpr = 1, SCORES: tl.constexpr = True):
        """Split pass 1, program (b, c): <H_k, H_T> (and, WITH_DOUT, <H_k, dout>) over chunk c of sample b's D,
        to part[b, c, 0, :T] (and part[b, c, 1, :T]); part is (B, NCHUNK, 2, T_PAD) in CDT. LAST_APART: the
        earlier steps in a (ROWS, BLOCK) tile and the last step apart (``_dot_rows_last``), else one
        (T_PAD, BLOCK) tile of every step, T_PAD - T rows of it masked. SCORES=False (not with LAST_APART): the
        backward's <H_k, dout> alone, the scores' partials being the forward's (``saved_scores``)."""
        b = tl.program_id(0).to(tl.int64)
        c = tl.program_id(1)
        row = part_ptr + (b * NCHUNK + c) * 2 * T_PAD
        if LAST_APART:
            acc_s, acc_g, last_s, last_g = _dot_rows_last(h_ptr + b * T * D, dout_ptr + b * D, c * CHUNK, CHUNK, T,
                                                          D, CDT, ROWS, BLOCK, WITH_DOUT)
            _store_partials(row, acc_s, last_s, T, T_PAD, ROWS)
            if WITH_DOUT:
                _store_partials(row + T_PAD, acc_g, last_g, T, T_PAD, ROWS)
        else:
            t = tl.arange(0, T_PAD)
            acc_s, acc_g = _dot_tiles(h_ptr + b * T * D, dout_ptr + b * D, t, t < T, c * CHUNK, CHUNK, T, D, CDT,
                                      T_PAD, BLOCK, WITH_DOUT, True, SCORES)
            if SCORES:
                tl.store(row + t, tl.sum(acc_s, axis=1))
            if WITH_DOUT:
                tl.store(row + T_PAD + t, tl.sum(acc_g, axis=1))

    @triton.jit
    def _sample_dots(part_ptr, b, NCHUNK, which, T_PAD: tl.constexpr, NCHUNK_PAD: tl.constexpr):
        """Sample b's T inner products (T_PAD,): its chunks' partials (``_attn_partial_kernel``) summed in order."""
        rows = tl.arange(0, NCHUNK_PAD)
        t = tl.arange(0, T_PAD)
        p = tl.load(part_ptr + ((b * NCHUNK + rows[:, None]) * 2 + which) * T_PAD + t[None, :],
                    mask=rows[:, None] < NCHUNK, other=0.0)
        return tl.sum(p, axis=0)

    @triton.jit
    def _score_grads(a, da, T):
        """ds_k = a_k (da_k - sum_j a_j da_j) / T, the scores' gradients (T_PAD,) from the weights and
        da_k = <dout, H_k>; zero on the padding rows (a = 0 there)."""
        return a * (da - tl.sum(a * da, axis=0)) / T

    @triton.jit
    def _split_weights_and_grads(part_ptr, dpart_ptr, b, NCHUNK, tmask, T, T_PAD: tl.constexpr,
                                 NCHUNK_PAD: tl.constexpr):
        """(a, ds) of sample b in a split backward's second kernel: the scores' partials from part, the
        <H_k, dout> ones from dpart (``backward_partials``)."""
        a = _softmax_weights(_sample_dots(part_ptr, b, NCHUNK, 0, T_PAD, NCHUNK_PAD), tmask, T)
        return a, _score_grads(a, _sample_dots(dpart_ptr, b, NCHUNK, 1, T_PAD, NCHUNK_PAD), T)

    @triton.jit(do_not_specialize=["T", "C", "NCHUNK"])
    def _attn_fwd_split_kernel(h_ptr, part_ptr, out_ptr, out_sb, out_sp, T, D, C, CHUNK, NCHUNK,
                               CDT: tl.constexpr, T_PAD: tl.constexpr, BLOCK: tl.constexpr,
                               NCHUNK_PAD: tl.constexpr, SLICED: tl.constexpr):
        """Split pass 2 of the forward, program (b, c): the weighted sum over chunk c."""
        b = tl.program_id(0).to(tl.int64)
        c = tl.program_id(1)
        t = tl.arange(0, T_PAD)
        tmask = t < T
        a = _softmax_weights(_sample_dots(part_ptr, b, NCHUNK, 0, T_PAD, NCHUNK_PAD), tmask, T)
        _weighted_sum(h_ptr + b * T * D, out_ptr, b, out_sb, out_sp, a, t, tmask, c * CHUNK, CHUNK, D, C, CDT, BLOCK,
                      SLICED, True)

    @triton.jit(do_not_specialize=["T", "NCHUNK"])
    def _attn_bwd_split_kernel(h_ptr, dout_ptr, part_ptr, dpart_ptr, dh_ptr, T, D, CHUNK, NCHUNK,
                               CDT: tl.constexpr, T_PAD: tl.constexpr, BLOCK: tl.constexpr,
                               NCHUNK_PAD: tl.constexpr):
        """Split pass 2 of the backward, program (b, c): dH over chunk c; the scores' partials from part, the
        <H_k, dout> partials from dpart (the same buffer, or the forward's saved one and the backward's own)."""
        b = tl.program_id(0).to(tl.int64)
        c = tl.program_id(1)
        t = tl.arange(0, T_PAD)
        tmask = t < T
        a, ds = _split_weights_and_grads(part_ptr, dpart_ptr, b, NCHUNK, tmask, T, T_PAD, NCHUNK_PAD)
        _attention_grad(h_ptr + b * T * D, dout_ptr + b * D, dh_ptr + b * T * D, a, ds, t, tmask, c * CHUNK, CHUNK,
                        T, D, CDT, BLOCK, True)


def _launch_args(h: torch.Tensor, block: int, warps: int):
    B, T = h.shape[:2]
    D = h[0, 0].numel()
    cdt = tl.float64 if h.dtype == torch.float64 else tl.float32
    if _interpreting():
        block = INTERPRETER_BLOCK
    return B, T, D, dict(CDT=cdt, T_PAD=max(triton.next_power_of_2(T), 2), BLOCK=block, num_warps=warps)


def _channels_last(h: torch.Tensor) -> bool:
    """True when h (B, T, C, H, W) is stored as (B, T, H, W, C) (the fused ConvLSTM's output in channels-last
    mode) and not also plainly contiguous (sizes of 1 make both true)."""
    return not h.is_contiguous() and h.permute(0, 1, 3, 4, 2).is_contiguous()


# The kernels see each (b, t) slab as D = C*H*W numbers and only form inner products over it and weighted sums of
# it: any fixed order of the D entries gives the same result. A channels-last input is therefore run in its own
# (H, W, C) order, with no copy, and the output / gradient come back in that order too (channels-last (B, C, H, W)
# for the decoder's convolutions, a (B, T, H, W, C) gradient for the ConvLSTM's backward).
@torch.library.custom_op("mscred::temporal_attention_fused", mutates_args=())
def temporal_attention_fused(h: torch.Tensor, cat: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Fused forward: h (B, T, C, H, W) -> (B, C, H, W) (channels-last when h is stored channels-last; with ``cat``
    the upper channel half of a (B, 2C, H, W) one, ``temporal_attention``), and the split's partials
    (``_forward_kernels``; for the backward, ``saved_scores``)."""
    B, _, C, H, W = h.shape
    if _channels_last(h):
        buf = _output_like(h, cat)
        ct = buf.shape[-1]
        out = buf[..., ct - C:]  # (the upper channel half with ``cat``; else all of it)
        part = _forward_channels_last(h, out, H * W * ct, ct, sliced=cat)
        return out.permute(0, 3, 1, 2), part
    h = h.contiguous()
    out = torch.empty(h.shape[0], *h.shape[2:], device=h.device, dtype=h.dtype)
    part = _forward_kernels(h, out, h[0, 0].numel(), C, C, sliced=False)
    return out, part


def _output_like(h: torch.Tensor, cat: bool) -> torch.Tensor:
    """The forward's output buffer for a channels-last h (B, T, C, H, W): (B, H, W, C), or (B, H, W, 2C) with
    ``cat`` (the output its upper channel half)."""
    B, _, C, H, W = h.shape
    return h.new_empty(B, H, W, 2 * C if cat else C)


def partials_like(h: torch.Tensor) -> torch.Tensor:
    """The forward's partials buffer for h (B, T, C, H, W), empty (the ops' fakes)."""
    B, T = h.shape[:2]
    split = _split(B, h[0, 0].numel())
    dtype = torch.float64 if h.dtype == torch.float64 else torch.float32
    return h.new_empty(B, split[0] if split else 0, 2, max(triton.next_power_of_2(T), 2), dtype=dtype)


@temporal_attention_fused.register_fake
def _(h, cat):
    return output_like(h, cat), partials_like(h)


def output_like(h: torch.Tensor, cat: bool = False) -> torch.Tensor:
    """``temporal_attention_fused``'s output for h, empty (the training ops' fakes)."""
    B, _, C, H, W = h.shape
    if _channels_last(h):
        return _output_like(h, cat)[..., -C:].permute(0, 3, 1, 2)
    return h.new_empty(B, C, H, W)


def _channels_last_copy(t: torch.Tensor) -> torch.Tensor:
    """(B, C, H, W) ``t`` stored channels-last: itself if it is, else a copy in 8-byte words where the channels
    allow (``padding.copy_pixels``). The decoder's concatenation hands the attention a channel half of its
    gradient; PyTorch's strided copy of it took 10 us at level 1, and reading it in place in the backward kernel
    was slower still (level 1's backward 64.5 -> 96.4 us, benchmarks/results/train_housekeeping/)."""
    if t.is_contiguous(memory_format=torch.channels_last):
        return t
    out = torch.empty(t.shape, device=t.device, dtype=t.dtype, memory_format=torch.channels_last)
    copy_pixels(out, t)
    return out


@torch.library.custom_op("mscred::temporal_attention_fused_backward", mutates_args=())
def temporal_attention_fused_backward(dout: torch.Tensor, h: torch.Tensor,
                                      saved: Optional[torch.Tensor] = None) -> torch.Tensor:
    """dh (B, T, C, H, W) of ``temporal_attention_fused`` given dout (B, C, H, W); stored like h. ``saved``: the
    forward's partials (``saved_scores``)."""
    B, T, C, H, W = h.shape
    if _channels_last(h):
        hp = h.permute(0, 1, 3, 4, 2)
        dp = _channels_last_copy(dout.to(h.dtype)).permute(0, 2, 3, 1)
        dh = torch.empty(B, T, H, W, C, device=h.device, dtype=h.dtype)
        _backward_kernels(hp, dp, dh, saved)
        return dh.permute(0, 1, 4, 2, 3)
    h = h.contiguous()
    dout = dout.to(h.dtype).contiguous()
    dh = torch.empty(h.shape, device=h.device, dtype=h.dtype)
    _backward_kernels(h, dout, dh, saved)
    return dh


@temporal_attention_fused_backward.register_fake
def _(dout, h, saved=None):
    B, T, C, H, W = h.shape
    if _channels_last(h):
        return h.new_empty(B, T, H, W, C).permute(0, 1, 4, 2, 3)
    return h.new_empty(h.shape)


def _setup_context(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], output[1])
    ctx.mark_non_differentiable(output[1])
    ctx.set_materialize_grads(False)


def _backward(ctx, dout, _dpart):
    if dout is None:
        return None, None
    h, part = ctx.saved_tensors
    return temporal_attention_fused_backward(dout, h, part), None


temporal_attention_fused.register_autograd(_backward, setup_context=_setup_context)
