"""Opt-in ConvLSTM forward whose recurrent convolution is an implicit GEMM with the cell update in its epilogue.

``convlstm.py`` (the product's fused op) runs, for every step t >= 2 (index t >= 1 here), one cuDNN convolution
h_{t-1} -> (B, 4Ch, H, W) gate pre-activations, written to HBM, then ``_cell_fwd_kernel`` reading them back. On the
H200 the convolutions are 57 % of the fused bf16 step (``benchmarks/results/train_profile.txt``). Here that pair is
one Triton kernel per step:

    program (b, pixel block, channel block):
        acc_q[p, co] = sum over taps (ky, kx) and input channels ci of
                       h_{t-1}[b, ci, y + ky - top, x + kx - left] * W_h[q*Ch + co, ci, ky, kx]     q = i, g, f, o
                       (an implicit GEMM: the h tile is gathered with masks, TF "same" padding = masked-out taps;
                       the packed W_h tiles come through a TMA tensor descriptor; one tl.dot per gate per
                       (tap, K chunk), or with the opt-in one-dot variant one dot of N = 4Ch for all four gates;
                       fp32 accumulation; the tap loop software-pipelined within a shared-memory budget)
        z_q = acc_q + gx_t[q] + bias[q]          (gx_t: the step's input-conv gates, all T computed in one call)
        c_t = sigmoid(z_f + forget_bias) * c_{t-1} + sigmoid(z_i) * tanh(z_g);  h_t = sigmoid(z_o) * tanh(c_t)

so the recurrent gates never reach HBM. Step 1 (index 0) has h = 0, no recurrent term, and reuses
``_cell_fwd_kernel`` unchanged. The gate pre-activations are written only when a backward will need them
(``save``); the backward is ``convlstm.py``'s own (``convlstm_fused_backward``), fed the same saved tensors: the
pre-activations, the fp32 cell states and the zero-bordered h_0 .. h_{T-2} (written by the kernels only when saving;
inference reads h_{t-1} straight from the output, so it needs no padded copy at all).

Numerics follow ``_cell_fwd_kernel``: gate order i, g, f, o, ``forget_bias`` on f, cell state in float32 (float64
for float64), the pre-activations rounded to the output dtype before the activations (so the saved ones are exactly
what the forward used). One difference: the recurrent sum is kept in fp32 until it is added to gx_t, where the
cuDNN path rounds it to bf16 first (under bf16 this op is slightly *more* accurate). float32 follows
``torch.backends.cudnn.allow_tf32`` (what the cuDNN recurrent convolution it replaces does): tl.dot's "tf32" or
"ieee" input precision.

Not the default: select it with ``MSCRED_CONVLSTM_REC=1`` (or call ``convlstm`` directly). The product dispatch
(``mscred.ops``, backend "fused") calls ``select``, which takes ``convlstm.py``'s op unless that variable is set,
so the whole model (training, scoring with shared segments) can be A/B'd; it stays opt-in until the H200 numbers
(``benchmarks/bench_convlstm_rec.py`` per level, ``gpu_train_variants.sh`` on the whole step and scoring) show it
is faster. Block sizes: ``default_blocks`` (checked for registers, spills and shared memory by compiling for
sm_90a ahead of time, ``benchmarks/regs_convlstm_rec.py``), not yet tuned by timing on the GPU.
"""
from __future__ import annotations

import os

import torch

from mscred.ops.convlstm_sliding import sliding
from mscred.ops.padding import zero_border
from mscred.ops.triton import convlstm as _fused
from mscred.ops.triton.runtime import interpreting as _interpreting
from mscred.ops.triton.runtime import runs_fused as _runs_fused
from mscred.ops.triton.runtime import tl, triton

if triton is not None:
    from triton.tools.tensor_descriptor import TensorDescriptor as _TensorDescriptor

ENV = "MSCRED_CONVLSTM_REC"


def enabled() -> bool:
    """Whether ``select`` routes to this op (``MSCRED_CONVLSTM_REC=1``; read at call time)."""
    return os.environ.get(ENV, "0") == "1"


def is_available() -> tuple[bool, str]:
    """(True, "") when the kernels can run here: Triton and a CUDA device, or Triton's CPU interpreter."""
    return _fused.is_available()


if triton is not None:
    from mscred.ops.triton.convlstm import _sigmoid, _tanh  # the activations of _cell_fwd_kernel, bit for bit

    @triton.jit
    def _h_tile(hb, h_sc, h_sy, h_sx, y, x, pmask, tap, k0, H, W, PAD_T, PAD_L,
                CH: tl.constexpr, KS: tl.constexpr, BLOCK_K: tl.constexpr):
        """The implicit GEMM's left operand for one (tap, K chunk): h[y + ky - top, x + kx - left, k0 : k0 + BLOCK_K]
        of the pixels (y, x), (BLOCK_P, BLOCK_K). TF "same" padding: a tap outside the image reads a zero (masked,
        other=0), so h needs no padded copy; so do channels past CH."""
        ky = tap // KS
        kx = tap - ky * KS
        yy = y + (ky - PAD_T)
        xx = x + (kx - PAD_L)
        inb = pmask & (yy >= 0) & (yy < H) & (xx >= 0) & (xx < W)
        ci = k0 + tl.arange(0, BLOCK_K)
        offs = (yy * h_sy + xx * h_sx)[:, None] + ci[None, :] * h_sc
        return tl.load(hb + offs, mask=inb[:, None] & (ci < CH)[None, :], other=0.0)

    @triton.jit
    def _rec_cell_kernel(
        h_ptr, h_sb, h_sc, h_sy, h_sx,            # h_{t-1} (B, Ch, H, W), unpadded (the previous step's output)
        w_desc,                                   # TensorDescriptor of the (K*K*Ch, 4Ch) packed W_h, block
                                                  # (BLOCK_K, BLOCK_C), (BLOCK_K, 4 BLOCK_C) if ONE_DOT:
                                                  # row (ky*K + kx)*Ch + ci, col q*Ch + co
        gx_ptr, gx_sb, gx_sc, gx_sy, gx_sx,       # this step's input-conv gates (B, 4Ch, H, W), may be a crop
        bias_ptr,                                 # (4Ch,)
        pre_ptr, pre_sb, pre_sc, pre_sy, pre_sx,  # out if STORE_PRE: gate pre-activations (B, 4Ch, H, W)
        cprev_ptr, c_ptr, c_sb, c_sc, c_sy, c_sx,  # c_{t-1} in, c_t out (B, Ch, H, W), same strides
        o_ptr, o_sb, o_sc, o_sy, o_sx,            # out: h_t (B, Ch, H, W)
        hp_ptr, hp_sb, hp_sc, hp_sy, hp_sx,       # out if WRITE_HP: h_t into a zero-bordered (B, Ch, Hp, Wp)
        H, W, PAD_T, PAD_L, forget_bias,
        CH: tl.constexpr, KS: tl.constexpr,
        STORE_PRE: tl.constexpr, WRITE_HP: tl.constexpr, UPCAST: tl.constexpr, ONE_DOT: tl.constexpr,
        CDT: tl.constexpr, DOT_PREC: tl.constexpr,
        BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_K: tl.constexpr,
    ):
        # CH is a compile-time constant (one per MSCRED level): the K loop below is then fully unrolled.
        # Addresses: a 64-bit scalar base per image (b * batch stride) plus 32-bit tensor offsets within the image
        # (one image of any buffer here is far below 2^31 elements): 64-bit pointer tensors cost two registers per
        # element and pushed the kernel into spills.
        b = tl.program_id(0).to(tl.int64)
        p = tl.program_id(1) * BLOCK_P + tl.arange(0, BLOCK_P)
        c0 = tl.program_id(2) * BLOCK_C
        co = c0 + tl.arange(0, BLOCK_C)
        pmask = p < H * W
        cmask = co < CH
        y = p // W
        x = p % W
        hb = h_ptr + b * h_sb
        # A runtime loop over the taps (not unrolled): an unrolled one lets the compiler hoist every tap's loads at
        # once, which (ptxas, sm_90a) took 255 registers and spilled; rolled, the loads of the next tap can be
        # software-pipelined through shared memory instead.
        # The weight tiles come through a tensor descriptor (TMA on sm_90: straight to shared memory, no
        # per-element addresses in registers; per-element pointer tiles took ptxas to 255 registers). They need no
        # masks: rows past this tap's CH (when BLOCK_K > CH) are the next tap's, multiplied by the zero columns of
        # the h tile; columns past the gate's CH (BLOCK_C > CH) are the next gate's and land in accumulator columns
        # the epilogue never stores; past the matrix, TMA reads zeros.
        if ONE_DOT:
            # BLOCK_C == CH: the four gates' columns of W_h are one contiguous (BLOCK_K x 4CH) tile, so one dot of
            # N = 4CH (a wider MMA) instead of four of N = CH; the gates are split out of the accumulator after.
            acc = tl.zeros((BLOCK_P, 4 * BLOCK_C), dtype=CDT)
            for tap in range(KS * KS):
                for k0 in tl.static_range(0, CH, BLOCK_K):
                    a = _h_tile(hb, h_sc, h_sy, h_sx, y, x, pmask, tap, k0, H, W, PAD_T, PAD_L, CH, KS, BLOCK_K)
                    wt = w_desc.load([tap * CH + k0, 0])
                    if UPCAST:  # see below
                        a = a.to(tl.float32)
                        wt = wt.to(tl.float32)
                    acc = tl.dot(a, wt, acc, input_precision=DOT_PREC)
            # column q * CH + c, q = 2 * q1 + q0  ->  (p, c, q1, q0); split q0, then q1
            acc4 = tl.permute(tl.reshape(acc, (BLOCK_P, 2, 2, BLOCK_C)), (0, 3, 1, 2))
            even, odd = tl.split(acc4)        # q0 = 0: gates i (q1 = 0), f (q1 = 1); q0 = 1: g, o
            acc_i, acc_f = tl.split(even)
            acc_g, acc_o = tl.split(odd)
        else:
            acc_i = tl.zeros((BLOCK_P, BLOCK_C), dtype=CDT)
            acc_g = tl.zeros((BLOCK_P, BLOCK_C), dtype=CDT)
            acc_f = tl.zeros((BLOCK_P, BLOCK_C), dtype=CDT)
            acc_o = tl.zeros((BLOCK_P, BLOCK_C), dtype=CDT)
            for tap in range(KS * KS):
                for k0 in tl.static_range(0, CH, BLOCK_K):
                    a = _h_tile(hb, h_sc, h_sy, h_sx, y, x, pmask, tap, k0, H, W, PAD_T, PAD_L, CH, KS, BLOCK_K)
                    wr = tap * CH + k0
                    wi = w_desc.load([wr, c0])
                    wg = w_desc.load([wr, c0 + CH])
                    wf = w_desc.load([wr, c0 + 2 * CH])
                    wo = w_desc.load([wr, c0 + 3 * CH])
                    if UPCAST:
                        # Triton's CPU interpreter multiplies bf16 blocks wrongly (checked with Triton 3.9);
                        # bf16 x bf16 products are exact in fp32, so upcasting changes only the summation order.
                        a = a.to(tl.float32)
                        wi = wi.to(tl.float32)
                        wg = wg.to(tl.float32)
                        wf = wf.to(tl.float32)
                        wo = wo.to(tl.float32)
                    # The accumulator goes into tl.dot (the MMA accumulates in place; fp32, or fp64 for fp64).
                    acc_i = tl.dot(a, wi, acc_i, input_precision=DOT_PREC)
                    acc_g = tl.dot(a, wg, acc_g, input_precision=DOT_PREC)
                    acc_f = tl.dot(a, wf, acc_f, input_precision=DOT_PREC)
                    acc_o = tl.dot(a, wo, acc_o, input_precision=DOT_PREC)
        # Epilogue: the step's input-conv gates and the bias, then the cell update of _cell_fwd_kernel.
        mask = pmask[:, None] & cmask[None, :]
        yc = y[:, None]
        xc = x[:, None]
        cc = co[None, :]
        gx = (gx_ptr + b * gx_sb) + (cc * gx_sc + yc * gx_sy + xc * gx_sx)
        gq = CH * gx_sc
        zi = acc_i + tl.load(gx, mask=mask, other=0.0).to(CDT)
        zg = acc_g + tl.load(gx + gq, mask=mask, other=0.0).to(CDT)
        zf = acc_f + tl.load(gx + 2 * gq, mask=mask, other=0.0).to(CDT)
        zo = acc_o + tl.load(gx + 3 * gq, mask=mask, other=0.0).to(CDT)
        zi += tl.load(bias_ptr + co, mask=cmask, other=0.0).to(CDT)[None, :]
        zg += tl.load(bias_ptr + CH + co, mask=cmask, other=0.0).to(CDT)[None, :]
        zf += tl.load(bias_ptr + 2 * CH + co, mask=cmask, other=0.0).to(CDT)[None, :]
        zo += tl.load(bias_ptr + 3 * CH + co, mask=cmask, other=0.0).to(CDT)[None, :]
        # As in _cell_fwd_kernel: the activations use the pre-activations rounded to the stored dtype, so that the
        # backward (which recomputes them from the stored ones) differentiates the function the forward ran.
        out_ty = o_ptr.dtype.element_ty
        zi = zi.to(out_ty).to(CDT)
        zg = zg.to(out_ty).to(CDT)
        zf = zf.to(out_ty).to(CDT)
        zo = zo.to(out_ty).to(CDT)
        if STORE_PRE:
            pre = (pre_ptr + b * pre_sb) + (cc * pre_sc + yc * pre_sy + xc * pre_sx)
            pq = CH * pre_sc
            tl.store(pre, zi.to(out_ty), mask=mask)
            tl.store(pre + pq, zg.to(out_ty), mask=mask)
            tl.store(pre + 2 * pq, zf.to(out_ty), mask=mask)
            tl.store(pre + 3 * pq, zo.to(out_ty), mask=mask)
        cb = b * c_sb
        cell = cc * c_sc + yc * c_sy + xc * c_sx
        cprev = tl.load((cprev_ptr + cb) + cell, mask=mask, other=0.0).to(CDT)
        c = _sigmoid(zi) * _tanh(zg) + _sigmoid(zf + forget_bias) * cprev
        tl.store((c_ptr + cb) + cell, c.to(c_ptr.dtype.element_ty), mask=mask)
        h = (_sigmoid(zo) * _tanh(c)).to(out_ty)
        tl.store((o_ptr + b * o_sb) + (cc * o_sc + yc * o_sy + xc * o_sx), h, mask=mask)
        if WRITE_HP:
            hp = (hp_ptr + b * hp_sb) + (cc * hp_sc + (yc + PAD_T) * hp_sy + (xc + PAD_L) * hp_sx)
            tl.store(hp, h, mask=mask)


def default_blocks(ch: int, hw: int, elem_size: int = 2) -> tuple[int, int, int, int]:
    """(BLOCK_P, BLOCK_C, BLOCK_K, num_warps) for ``ch`` hidden channels, ``hw`` pixels per image and operands of
    ``elem_size`` bytes (K chunks of 32 for 4- and 8-byte types: half the shared memory per stage).

    tl.dot needs every block dimension >= 16. On the GPU: 64 pixels x up to 64 channels per program (four fp32
    accumulators of 64 x 64 = 64 KiB of registers over 8 warps), K chunks of up to 64 input channels: the blocks
    of those tried that ptxas (sm_90a, compiled here ahead of time) fits in 255 registers without spilling. Not
    tuned on the GPU yet: ``benchmarks/bench_convlstm_rec.py`` times alternatives. Under the CPU interpreter the
    cost is per program and per block op, so one program covers a whole small image and as many channels as
    possible.
    """
    c = max(16, min(triton.next_power_of_2(ch), 64))
    if _interpreting():
        return max(16, min(triton.next_power_of_2(hw), 256)), c, c, 4
    if elem_size >= 8:  # float64 (the tests' oracle path): no tensor cores; small tiles, little shared memory
        return 32, min(c, 32), 16, 4
    return 64, c, c if elem_size <= 2 else min(c, 32), 8 if c >= 64 else 4


SHARED_BUDGET = 160 * 1024  # bytes of shared memory for the pipelined tiles (the H200 has 227 KiB per block; the
                            # rest is left for the epilogue's layout conversions)


def num_stages(blocks, elem_size: int, ch: int) -> int:
    """Software-pipelining depth of the tap loop (1..3) that keeps its tiles within SHARED_BUDGET: each stage holds,
    for each of the ceil(Ch / BLOCK_K) chunks of the (unrolled) K loop, one (BLOCK_P x BLOCK_K) h tile and four
    (BLOCK_K x BLOCK_C) weight tiles. Triton's default of 3 stages took float32 at (64, 64, 64) to 245 KiB and
    float64 at Ch = 64 to 164 KiB (ahead-of-time compiles for sm_90a), more than a block may have."""
    bp, bc, bk = blocks[:3]
    per_stage = -(-ch // bk) * (bp * bk + 4 * bk * bc) * elem_size
    return max(1, min(3, SHARED_BUDGET // per_stage))


def _dot_precision(dtype: torch.dtype) -> str:
    """tl.dot input precision: for float32 TF32 exactly when cuDNN would use it for the convolution replaced
    (``torch.backends.cudnn.allow_tf32``); "ieee" otherwise (it is ignored for bf16 and float64)."""
    if dtype == torch.float32 and torch.backends.cudnn.allow_tf32 and not _interpreting():
        return "tf32"
    return "ieee"


def forward(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, forget_bias: float, layout: str,
            save: bool, blocks: list[int]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """All T steps of one level; the same outputs as ``convlstm.convlstm_fused`` (see there), except that
    ``hprev`` is empty, shape (0, B, Ch, Hp, Wp), when not ``save``.

    Parameters
    ----------
    x : (B, T, C, H, W) tensor
    weight : (4Ch, C + Ch, k, k) tensor of x's dtype
    bias : (4Ch,) tensor, x's dtype or float32
    forget_bias : float
    layout : "nhwc" or "nchw", the buffer order
    save : bool, keep the pre-activations and the zero-bordered h_0 .. h_{T-2} for the backward
    blocks : [BLOCK_P, BLOCK_C, BLOCK_K, num_warps] of the recurrent kernel, or [] for ``default_blocks``; a fifth
        entry 1 selects the one-dot variant (all four gates' weights as one (BLOCK_K x 4Ch) tile; BLOCK_C = Ch)
    """
    B, T, C, H, W = x.shape
    Ch, k = weight.shape[0] // 4, weight.shape[-1]
    pads = _fused._padding(k)
    HP, WP = H + pads[0] + pads[1], W + pads[2] + pads[3]
    cdt, cell_dtype = _fused._compute_types(x.dtype)
    fmt = torch.channels_last if layout == "nhwc" else torch.contiguous_format
    w_x = weight[:, :C].contiguous(memory_format=fmt)
    # W_h as the GEMM's (K*K*Ch, 4Ch) right operand: one K chunk of one tap is a contiguous row block.
    w_pk = weight[:, C:].permute(2, 3, 1, 0).reshape(k * k * Ch, 4 * Ch).contiguous()
    # All input convolutions in one call (once per distinct step for sliding windows at inference; see convlstm.py).
    gx = _fused.step_gates(x, w_x, pads, fmt, shared=not save and sliding(x))
    out = _fused._out5(B, T, Ch, H, W, x, layout)
    pre = _fused._empty(T * B if save else 0, 4 * Ch, H, W, x, layout).view(T if save else 0, B, 4 * Ch, H, W)
    cells = _fused._empty(T * B, Ch, H, W, x, layout, dtype=cell_dtype).view(T, B, Ch, H, W)
    nhp = max(T - 1, 0) if save else 0
    hprev = _fused._empty(nhp * B, Ch, HP, WP, x, layout).view(nhp, B, Ch, HP, WP)
    zero_border(hprev, pads)
    # Step 0: h_{-1} = c_{-1} = 0, no recurrent term: convlstm.py's cell kernel as it is.
    block, block_c, grid = _fused._launch(layout, B * H * W, Ch)
    gx0, pre0, hp0 = gx[:, 0], pre[0] if save else cells[0], hprev[0] if nhp else out[:, 0]
    _fused._cell_fwd_kernel[grid](
        gx0, *_fused._yx(gx0), bias, cells[0], *_fused._s3(cells[0]), pre0, *_fused._s3(pre0),
        cells[0], cells[0], *_fused._s3(cells[0]),
        out[:, 0], *_fused._s3(out[:, 0]), hp0, *hp0.stride(),
        B * Ch * H * W, Ch, H * W, W, pads[0], pads[2], forget_bias,
        HAS_REC=False, HAS_CPREV=False, WRITE_HP=nhp > 0, STORE_PRE=save,
        PIX_MAJOR=layout == "nhwc", CDT=cdt, BLOCK=block, BLOCK_C=block_c,
    )
    bp, bc, bk, warps = blocks[:4] if blocks else default_blocks(Ch, H * W, x.element_size())
    one_dot = len(blocks) > 4 and bool(blocks[4])
    if one_dot and (bc != Ch or 4 * Ch > 256):
        raise ValueError(f"one-dot gates need BLOCK_C == Ch and 4 Ch <= 256 (a TMA box), got BLOCK_C {bc}, Ch {Ch}")
    rgrid = (B, triton.cdiv(H * W, bp), triton.cdiv(Ch, bc))
    w_desc = _TensorDescriptor.from_tensor(w_pk, [bk, 4 * bc if one_dot else bc])
    stages = num_stages((bp, bc, bk), x.element_size(), Ch)
    upcast = _interpreting() and x.dtype in (torch.bfloat16, torch.float16)
    prec = _dot_precision(x.dtype)
    for t in range(1, T):
        hin, gxt, ot = out[:, t - 1], gx[:, t], out[:, t]
        pre_t = pre[t] if save else cells[t]  # a dummy when not stored
        hp = hprev[t] if t < nhp else ot      # a dummy when not written
        _rec_cell_kernel[rgrid](
            hin, *hin.stride(), w_desc, gxt, *gxt.stride(), bias, pre_t, *pre_t.stride(),
            cells[t - 1], cells[t], *cells[t].stride(), ot, *ot.stride(), hp, *hp.stride(),
            H, W, pads[0], pads[2], forget_bias,
            CH=Ch, KS=k, STORE_PRE=save, WRITE_HP=t < nhp, UPCAST=upcast, ONE_DOT=one_dot, CDT=cdt, DOT_PREC=prec,
            BLOCK_P=bp, BLOCK_C=bc, BLOCK_K=bk, num_warps=warps, num_stages=stages,
        )
    return out, pre, cells, hprev


# ----------------------------------------------------------------------------------------------------------------
# The custom op: the same shape of op as convlstm.py's (fake kernel, autograd through its backward), so it can be
# captured in a CUDA graph and seen as one node by torch.compile.
# ----------------------------------------------------------------------------------------------------------------
@torch.library.custom_op("mscred::convlstm_fused_rec", mutates_args=())
def convlstm_fused_rec(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, forget_bias: float, layout: str,
                       save: bool, blocks: list[int]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor,
                                                           torch.Tensor]:
    """``forward`` as a torch.library op: returns (out, pre, cells, hprev)."""
    return forward(x, weight, bias, forget_bias, layout, save, list(blocks))


@convlstm_fused_rec.register_fake
def _(x, weight, bias, forget_bias, layout, save, blocks):
    B, T, C, H, W = x.shape
    Ch, k = weight.shape[0] // 4, weight.shape[-1]
    pads = _fused._padding(k)
    cell_dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
    HP, WP = H + pads[0] + pads[1], W + pads[2] + pads[3]
    nhp = max(T - 1, 0) if save else 0
    return (_fused._out5(B, T, Ch, H, W, x, layout),
            _fused._empty(T * B if save else 0, 4 * Ch, H, W, x, layout).view(T if save else 0, B, 4 * Ch, H, W),
            _fused._empty(T * B, Ch, H, W, x, layout, dtype=cell_dtype).view(T, B, Ch, H, W),
            _fused._empty(nhp * B, Ch, HP, WP, x, layout).view(nhp, B, Ch, HP, WP))


def _backward(ctx, dout, _dpre, _dcells, _dhprev):
    """convlstm.py's backward, unchanged: the saved tensors are the ones it expects."""
    return (*_fused.backward_from_saved(ctx, dout, "convlstm_fused_rec"), None, None, None, None)


convlstm_fused_rec.register_autograd(_backward, setup_context=_fused.save_for_backward)


def convlstm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, forget_bias: float,
             blocks: list[int] | None = None) -> torch.Tensor:
    """A ConvLSTM over all steps of one level from h = c = 0 (contract: ``mscred.ops.convlstm``), the recurrent
    convolution and cell update fused. Casts as ``convlstm.convlstm`` does (autocast: x, weight to the autocast
    dtype, the bias kept float32); the pre-activations are stored only when autograd needs them.

    Parameters
    ----------
    x : (B, T, C, H, W) tensor
    weight : (4*Ch, C + Ch, k, k) tensor, gate blocks i, g, f, o; k = 2 or 3 (any k works: TF "same" padding)
    bias : (4*Ch,) tensor
    forget_bias : float
    blocks : optional [BLOCK_P, BLOCK_C, BLOCK_K, num_warps] of the recurrent kernel (benchmarks)

    Returns
    -------
    (B, T, Ch, H, W) tensor, every hidden state.
    """
    # float64 on a GPU stays in PyTorch: Triton's float64 tl.dot did not compile there (H200, Triton 3.6,
    # results/convlstm_rec_gpu.txt); the float64 oracle rows of the tests run the kernel on the CPU interpreter.
    if not _runs_fused(x) or (x.is_cuda and x.dtype == torch.float64):
        from mscred.ops import reference
        return reference.convlstm(x, weight, bias, forget_bias)
    return _fused.run_cast(convlstm_fused_rec, x, weight, bias, forget_bias, list(blocks or []))


def select(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, forget_bias: float) -> torch.Tensor:
    """The opt-in switch: this op when ``MSCRED_CONVLSTM_REC=1``, else ``convlstm.py``'s fused op (the product's).
    Same contract as ``mscred.ops.convlstm``; meant as the "fused" entry once the GPU numbers justify it."""
    if enabled() and suits(weight.shape[0] // 4, x.dtype):
        return convlstm(x, weight, bias, forget_bias)
    return _fused.convlstm(x, weight, bias, forget_bias)


def suits(hidden_channels: int, dtype: torch.dtype) -> bool:
    """Whether the kernel takes ``hidden_channels``: its TMA loads of the packed recurrent weights start every gate
    block at a multiple of the hidden width, which must be 16-byte aligned (bf16: multiples of 8 channels; MSCRED's
    32-256 are). Under autocast the kernel runs in bf16, so that is the width checked for float32 too."""
    size = 8 if dtype == torch.float64 else 2
    return (hidden_channels * size) % 16 == 0
