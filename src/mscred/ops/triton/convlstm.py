"""Fused ConvLSTM: hoisted input convolution, no recurrent convolution at step 1, one Triton kernel per step.

The reference (``ops/reference.py``) runs, per step, one convolution over ``concat([x_t, h])`` and then eight
elementwise PyTorch kernels. Here, for one level of B samples, T steps, C input and Ch hidden channels:

    forward   gx = conv(x as (B*T, C, H, W), W[:, :C]) + bias       ONE call for all T steps (a GEMM T times larger)
              t = 0:   gates = gx_0                                  h_{-1} = 0, so no recurrent convolution
              t >= 1:  gates = gx_t + conv(pad(h_{t-1}), W[:, C:])
              _cell_fwd: gate activations, c_t, h_t in one pass; writes h_t to the output, c_t and the gate
                         pre-activations for the backward, and h_t into the zero-bordered buffer that the next
                         step's convolution reads (so no F.pad per step)
    backward  per step, newest first: _cell_bwd gives d(gate pre-activations) and dc_{t-1} from dh_t (the
              output's gradient plus the recurrent one), dc_t and the saved c/gates; the recurrent input gradient
              is one transposed convolution per step; d(W[:, C:]) is ONE weight-gradient call over all steps, and
              dx, d(W[:, :C]), dbias ONE more.

All of it is one ``torch.library`` custom op with a registered fake (meta) and autograd formula, so it can be
checked with ``torch.library.opcheck``, seen as one node by ``torch.compile``, and captured in a CUDA graph: every
launch goes to the current stream and every buffer is allocated through the caching allocator.

Numerics equal the reference's: gate order i, g, f, o along the output channels (TensorFlow's), ``forget_bias``
added to f, TensorFlow "same" padding (k = 2 pads bottom/right by 1, k = 3 pads 1 on every side). The cell state
is kept in float32 even when the gates are bf16 (autocast), and in float64 for float64 inputs (the tests' oracle
path), so the only bf16 roundings are the convolution operands and the stored h.
"""
from __future__ import annotations

import os
from typing import Optional

import torch
import torch.nn.functional as F

try:  # importing mscred never fails without Triton: the dispatcher then falls back to the reference
    import triton
    import triton.language as tl
except ImportError as _err:  # pragma: no cover - exercised only where Triton is absent
    triton = None
    _IMPORT_ERROR: Optional[Exception] = _err
else:
    _IMPORT_ERROR = None

BLOCK = 1024  # elements of one (B, Ch, H, W) step per program: 4 gates read, up to 5 outputs written


def is_available() -> tuple[bool, str]:
    """(True, "") when the fused ConvLSTM can run here: Triton and a CUDA device, or Triton's CPU interpreter."""
    if triton is None:
        return False, f"triton not importable ({_IMPORT_ERROR})"
    if torch.cuda.is_available() or _interpreting():
        return True, ""
    return False, "no CUDA device (set TRITON_INTERPRET=1 to run the kernels on the CPU interpreter)"


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def _runs_fused(x: torch.Tensor) -> bool:
    return triton is not None and (x.is_cuda or (_interpreting() and x.device.type == "cpu"))


def convlstm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, forget_bias: float) -> torch.Tensor:
    """A ConvLSTM over all steps of one level from h = c = 0 (contract: ``mscred.ops.convlstm``).

    Parameters
    ----------
    x : (B, T, C, H, W) tensor
    weight : (4*Ch, C + Ch, k, k) tensor, gate blocks i, g, f, o
    bias : (4*Ch,) tensor
    forget_bias : float

    Returns
    -------
    (B, T, Ch, H, W) tensor, every hidden state; dtype of x (of the autocast dtype under autocast).

    Tensors the kernels cannot run on (CPU without the interpreter) take the reference path.
    """
    if not _runs_fused(x):
        from mscred.ops import reference
        return reference.convlstm(x, weight, bias, forget_bias)
    device_type = x.device.type
    if torch.is_autocast_enabled(device_type):
        # Custom ops are not autocast-aware: cast here as autocast would cast a convolution (fp32 master weights
        # receive their gradient through these casts), then run the op with autocast off so that nothing inside
        # is cast a second time.
        dtype = torch.get_autocast_dtype(device_type)
        with torch.autocast(device_type, enabled=False):
            return convlstm_fused(x.to(dtype), weight.to(dtype), bias.to(dtype), float(forget_bias))[0]
    return convlstm_fused(x, weight.to(x.dtype), bias.to(x.dtype), float(forget_bias))[0]


# ----------------------------------------------------------------------------------------------------------------
# Triton kernels. One program handles BLOCK consecutive elements of the logical (B, Ch, H, W) grid of one step.
# Every (b, channel) plane of H*W pixels is contiguous in all tensors; batch and channel strides are arguments,
# so slices such as gx[:, t] or out[:, t] are read and written in place.
# ----------------------------------------------------------------------------------------------------------------
if triton is not None:

    @triton.jit
    def _sigmoid(z):
        return 1.0 / (1.0 + tl.exp(-z))

    @triton.jit
    def _tanh(z):
        # tanh from one exp of a non-positive argument: no overflow, no cancellation near 0 beyond rounding.
        e = tl.exp(-2.0 * tl.abs(z))
        t = (1.0 - e) / (1.0 + e)
        return tl.where(z < 0, -t, t)

    @triton.jit
    def _cell_fwd_kernel(
        gx_ptr, sgx_b, sgx_c,        # input-conv gates of this step (B, 4Ch, H, W): batch/channel strides
        rec_ptr,                     # recurrent-conv gates (B, 4Ch, H, W), contiguous (read if HAS_REC)
        pre_ptr,                     # out: gate pre-activations (B, 4Ch, H, W), contiguous (saved for backward)
        cprev_ptr, c_ptr, sc_b,      # cell states of the previous / this step (B, Ch, H, W), channel stride H*W
        h_ptr, sh_b,                 # out: h_t into the output (B, Ch, H, W), channel stride H*W
        hp_ptr,                      # out: h_t into the interior of a zero-bordered (B, Ch, Hp, Wp) buffer
        N, CH, HW, W, HP, WP, PAD_T, PAD_L, forget_bias,
        HAS_REC: tl.constexpr, HAS_CPREV: tl.constexpr, WRITE_HP: tl.constexpr,
        CDT: tl.constexpr, BLOCK: tl.constexpr,
    ):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < N
        chw = CH * HW
        b = (offs // chw).to(tl.int64)
        r = offs % chw                      # channel * HW + pixel
        ch = r // HW
        p = r % HW
        gx = gx_ptr + b * sgx_b + ch * sgx_c + p
        zi = tl.load(gx, mask=mask, other=0.0).to(CDT)
        zg = tl.load(gx + CH * sgx_c, mask=mask, other=0.0).to(CDT)
        zf = tl.load(gx + 2 * CH * sgx_c, mask=mask, other=0.0).to(CDT)
        zo = tl.load(gx + 3 * CH * sgx_c, mask=mask, other=0.0).to(CDT)
        pre = b * (4 * chw) + r
        if HAS_REC:
            zi += tl.load(rec_ptr + pre, mask=mask, other=0.0).to(CDT)
            zg += tl.load(rec_ptr + pre + chw, mask=mask, other=0.0).to(CDT)
            zf += tl.load(rec_ptr + pre + 2 * chw, mask=mask, other=0.0).to(CDT)
            zo += tl.load(rec_ptr + pre + 3 * chw, mask=mask, other=0.0).to(CDT)
        out_ty = pre_ptr.dtype.element_ty
        tl.store(pre_ptr + pre, zi.to(out_ty), mask=mask)
        tl.store(pre_ptr + pre + chw, zg.to(out_ty), mask=mask)
        tl.store(pre_ptr + pre + 2 * chw, zf.to(out_ty), mask=mask)
        tl.store(pre_ptr + pre + 3 * chw, zo.to(out_ty), mask=mask)
        # The backward recomputes the activations from the *stored* (possibly bf16) pre-activations; use exactly
        # those values here too, so forward and backward differentiate the same function.
        zi = zi.to(out_ty).to(CDT)
        zg = zg.to(out_ty).to(CDT)
        zf = zf.to(out_ty).to(CDT)
        zo = zo.to(out_ty).to(CDT)
        c = _sigmoid(zi) * _tanh(zg)
        cell = b * sc_b + r
        if HAS_CPREV:
            c += _sigmoid(zf + forget_bias) * tl.load(cprev_ptr + cell, mask=mask, other=0.0).to(CDT)
        tl.store(c_ptr + cell, c.to(c_ptr.dtype.element_ty), mask=mask)
        h = _sigmoid(zo) * _tanh(c)
        tl.store(h_ptr + b * sh_b + r, h.to(h_ptr.dtype.element_ty), mask=mask)
        if WRITE_HP:
            y = p // W
            xx = p % W
            hp = hp_ptr + b * (CH * HP * WP) + ch * (HP * WP) + (y + PAD_T) * WP + (xx + PAD_L)
            tl.store(hp, h.to(hp_ptr.dtype.element_ty), mask=mask)

    @triton.jit
    def _cell_bwd_kernel(
        pre_ptr,                     # gate pre-activations of this step (B, 4Ch, H, W), contiguous
        cprev_ptr, c_ptr, sc_b,      # cell states of the previous / this step, channel stride H*W
        dh_ptr, sdh_b,               # gradient of the output h_t (B, Ch, H, W), channel stride H*W
        dhr_ptr,                     # recurrent gradient of h_t, zero-bordered (B, Ch, Hp, Wp) (read if HAS_DHR)
        dc_ptr,                      # in: dc_t from step t+1 (if HAS_DC); out: dc_{t-1}; (B, Ch, H, W) contiguous
        dpre_ptr,                    # out: d(pre-activations) (B, 4Ch, H, W), contiguous
        dpre2_ptr, sdp2_b,           # out: the same again into the (B, T, 4Ch, H, W) buffer of the input conv
        N, CH, HW, W, HP, WP, PAD_T, PAD_L, forget_bias,
        HAS_CPREV: tl.constexpr, HAS_DHR: tl.constexpr, HAS_DC: tl.constexpr,
        CDT: tl.constexpr, BLOCK: tl.constexpr,
    ):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < N
        chw = CH * HW
        b = (offs // chw).to(tl.int64)
        r = offs % chw
        ch = r // HW
        p = r % HW
        pre = b * (4 * chw) + r
        zi = tl.load(pre_ptr + pre, mask=mask, other=0.0).to(CDT)
        zg = tl.load(pre_ptr + pre + chw, mask=mask, other=0.0).to(CDT)
        zf = tl.load(pre_ptr + pre + 2 * chw, mask=mask, other=0.0).to(CDT)
        zo = tl.load(pre_ptr + pre + 3 * chw, mask=mask, other=0.0).to(CDT)
        i = _sigmoid(zi)
        g = _tanh(zg)
        f = _sigmoid(zf + forget_bias)
        o = _sigmoid(zo)
        cell = b * sc_b + r
        c = tl.load(c_ptr + cell, mask=mask, other=0.0).to(CDT)
        tc = _tanh(c)
        dh = tl.load(dh_ptr + b * sdh_b + r, mask=mask, other=0.0).to(CDT)
        if HAS_DHR:
            y = p // W
            xx = p % W
            dhr = dhr_ptr + b * (CH * HP * WP) + ch * (HP * WP) + (y + PAD_T) * WP + (xx + PAD_L)
            dh += tl.load(dhr, mask=mask, other=0.0).to(CDT)
        # h = o * tanh(c):  dc collects the direct path and the path through c_{t+1} = f_{t+1} * c_t + ...
        dc = dh * o * (1.0 - tc * tc)
        if HAS_DC:
            dc += tl.load(dc_ptr + b * chw + r, mask=mask, other=0.0).to(CDT)
        d_o = dh * tc * o * (1.0 - o)
        d_i = dc * g * i * (1.0 - i)
        d_g = dc * i * (1.0 - g * g)
        if HAS_CPREV:
            cprev = tl.load(cprev_ptr + cell, mask=mask, other=0.0).to(CDT)
            d_f = dc * cprev * f * (1.0 - f)
        else:
            d_f = tl.zeros_like(dc)  # c_{-1} = 0: the forget gate has no effect at step 0
        tl.store(dc_ptr + b * chw + r, (dc * f).to(dc_ptr.dtype.element_ty), mask=mask)
        ty = dpre_ptr.dtype.element_ty
        tl.store(dpre_ptr + pre, d_i.to(ty), mask=mask)
        tl.store(dpre_ptr + pre + chw, d_g.to(ty), mask=mask)
        tl.store(dpre_ptr + pre + 2 * chw, d_f.to(ty), mask=mask)
        tl.store(dpre_ptr + pre + 3 * chw, d_o.to(ty), mask=mask)
        pre2 = dpre2_ptr + b * sdp2_b + r
        tl.store(pre2, d_i.to(ty), mask=mask)
        tl.store(pre2 + chw, d_g.to(ty), mask=mask)
        tl.store(pre2 + 2 * chw, d_f.to(ty), mask=mask)
        tl.store(pre2 + 3 * chw, d_o.to(ty), mask=mask)


def _compute_types(dtype: torch.dtype):
    """(Triton compute type, torch dtype of the cell state): float64 stays float64, everything else float32."""
    if dtype == torch.float64:
        return tl.float64, torch.float64
    return tl.float32, torch.float32


def _padding(k: int) -> tuple[int, int, int, int]:
    """TF "same" padding of a stride-1 k x k convolution: (top, bottom, left, right); the odd extra goes last."""
    before = (k - 1) // 2
    return before, k - 1 - before, before, k - 1 - before


def _input_conv(x4: torch.Tensor, w: torch.Tensor, b: torch.Tensor, pads) -> torch.Tensor:
    """conv(pad(x4), w) + b with TF same padding; symmetric padding goes to the convolution itself (no copy)."""
    top, bottom, left, right = pads
    if top == bottom and left == right:
        return F.conv2d(x4, w, b, padding=(top, left))
    return F.conv2d(F.pad(x4, (left, right, top, bottom)), w, b)


# ----------------------------------------------------------------------------------------------------------------
# The custom op. Forward returns the intermediates the backward needs (custom ops save only inputs and outputs).
# ----------------------------------------------------------------------------------------------------------------
@torch.library.custom_op("mscred::convlstm_fused", mutates_args=())
def convlstm_fused(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                   forget_bias: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Fused ConvLSTM forward. x, weight, bias of one dtype.

    Returns
    -------
    out : (B, T, Ch, H, W)            every h_t
    pre : (T, B, 4Ch, H, W)           gate pre-activations (saved for the backward)
    cells : (T, B, Ch, H, W)          c_t in float32 (float64 for float64 inputs)
    hprev : (T-1, B, Ch, Hp, Wp)      zero-bordered h_0 .. h_{T-2}, the inputs of the recurrent convolutions
    """
    B, T, C, H, W = x.shape
    Ch, k = weight.shape[0] // 4, weight.shape[-1]
    pads = _padding(k)
    HP, WP = H + pads[0] + pads[1], W + pads[2] + pads[3]
    cdt, cell_dtype = _compute_types(x.dtype)
    w_x = weight[:, :C].contiguous()
    w_h = weight[:, C:].contiguous()
    # All T input convolutions in one call: (B*T, C, H, W) -> (B*T, 4Ch, H, W), viewed as (B, T, 4Ch, H, W).
    gx = _input_conv(x.reshape(B * T, C, H, W), w_x, bias, pads).view(B, T, 4 * Ch, H, W)
    out = torch.empty(B, T, Ch, H, W, device=x.device, dtype=x.dtype)
    pre = torch.empty(T, B, 4 * Ch, H, W, device=x.device, dtype=x.dtype)
    cells = torch.empty(T, B, Ch, H, W, device=x.device, dtype=cell_dtype)
    hprev = torch.zeros(max(T - 1, 0), B, Ch, HP, WP, device=x.device, dtype=x.dtype)
    N = B * Ch * H * W
    grid = (triton.cdiv(N, BLOCK),)
    for t in range(T):
        rec = F.conv2d(hprev[t - 1], w_h) if t > 0 else pre[t]  # (B, 4Ch, H, W); at t = 0 a dummy, never read
        gxt = gx[:, t]
        _cell_fwd_kernel[grid](
            gxt, gxt.stride(0), gxt.stride(1),
            rec, pre[t],
            cells[t - 1] if t > 0 else cells[t], cells[t], cells.stride(1),
            out[:, t], out.stride(0),
            hprev[t] if t < T - 1 else out,
            N, Ch, H * W, W, HP, WP, pads[0], pads[2], forget_bias,
            HAS_REC=t > 0, HAS_CPREV=t > 0, WRITE_HP=t < T - 1, CDT=cdt, BLOCK=BLOCK,
        )
    return out, pre, cells, hprev


@convlstm_fused.register_fake
def _(x, weight, bias, forget_bias):
    B, T, C, H, W = x.shape
    Ch, k = weight.shape[0] // 4, weight.shape[-1]
    pads = _padding(k)
    cell_dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
    return (x.new_empty(B, T, Ch, H, W), x.new_empty(T, B, 4 * Ch, H, W),
            x.new_empty(T, B, Ch, H, W, dtype=cell_dtype),
            x.new_empty(max(T - 1, 0), B, Ch, H + pads[0] + pads[1], W + pads[2] + pads[3]))


@torch.library.custom_op("mscred::convlstm_fused_backward", mutates_args=())
def convlstm_fused_backward(dout: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, pre: torch.Tensor,
                            cells: torch.Tensor, hprev: torch.Tensor,
                            forget_bias: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients (dx, dweight, dbias) of ``convlstm_fused``'s ``out`` given dout (B, T, Ch, H, W)."""
    B, T, C, H, W = x.shape
    Ch, k = weight.shape[0] // 4, weight.shape[-1]
    pads = _padding(k)
    HP, WP = H + pads[0] + pads[1], W + pads[2] + pads[3]
    cdt, cell_dtype = _compute_types(x.dtype)
    dout = dout.to(x.dtype).contiguous()
    w_h = weight[:, C:].contiguous()
    dpre = torch.empty(T, B, 4 * Ch, H, W, device=x.device, dtype=x.dtype)       # per step, for the recurrence
    dpre_bt = torch.empty(B, T, 4 * Ch, H, W, device=x.device, dtype=x.dtype)    # (B*T) order of the input conv
    dc = torch.empty(B, Ch, H, W, device=x.device, dtype=cell_dtype)
    dhr = dc  # dummy until the first recurrent gradient exists
    N = B * Ch * H * W
    grid = (triton.cdiv(N, BLOCK),)
    for t in reversed(range(T)):
        _cell_bwd_kernel[grid](
            pre[t], cells[t - 1] if t > 0 else cells[t], cells[t], cells.stride(1),
            dout[:, t], dout.stride(0), dhr, dc, dpre[t], dpre_bt[:, t], dpre_bt.stride(0),
            N, Ch, H * W, W, HP, WP, pads[0], pads[2], forget_bias,
            HAS_CPREV=t > 0, HAS_DHR=t < T - 1, HAS_DC=t < T - 1, CDT=cdt, BLOCK=BLOCK,
        )
        if t > 0:  # gradient of the zero-bordered h_{t-1}: one transposed convolution, (B, Ch, HP, WP)
            dhr = torch.ops.aten.convolution_backward(
                dpre[t], hprev[t - 1], w_h, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1,
                [True, False, False])[0]
    if T > 1:  # d W[:, C:] over all recurrent convolutions in one weight-gradient call
        dw_h = torch.ops.aten.convolution_backward(
            dpre[1:].reshape((T - 1) * B, 4 * Ch, H, W), hprev.reshape((T - 1) * B, Ch, HP, WP), w_h, None,
            [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [False, True, False])[1]
    else:
        dw_h = torch.zeros_like(w_h)
    # dx, d W[:, :C], dbias of the hoisted input convolution: one call for all steps.
    top, bottom, left, right = pads
    x4 = x.reshape(B * T, C, H, W)
    symmetric = top == bottom and left == right
    xin = x4 if symmetric else F.pad(x4, (left, right, top, bottom))
    dpre_4 = dpre_bt.view(B * T, 4 * Ch, H, W)
    dx4, dw_x, _ = torch.ops.aten.convolution_backward(
        dpre_4, xin, weight[:, :C].contiguous(), None, [1, 1],
        [top, left] if symmetric else [0, 0], [1, 1], False, [0, 0], 1, [True, True, False])
    # dbias sums B*T*H*W terms of both signs: torch.sum's tree reduction (float32 accumulation for bf16) keeps
    # the cancellation error at the reference's level, where the CPU convolution backward's running sum does not.
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    db = dpre_4.sum(dim=(0, 2, 3), dtype=acc).to(x.dtype)
    if not symmetric:
        dx4 = dx4[:, :, top:top + H, left:left + W]
    dx = dx4.reshape(B, T, C, H, W).contiguous()
    return dx, torch.cat([dw_x, dw_h], dim=1), db


@convlstm_fused_backward.register_fake
def _(dout, x, weight, pre, cells, hprev, forget_bias):
    return x.new_empty(x.shape), weight.new_empty(weight.shape), weight.new_empty(weight.shape[0])


def _setup_context(ctx, inputs, output):
    x, weight, bias, forget_bias = inputs
    _, pre, cells, hprev = output
    ctx.save_for_backward(x, weight, pre, cells, hprev)
    ctx.forget_bias = forget_bias


def _backward(ctx, dout, _dpre, _dcells, _dhprev):
    x, weight, pre, cells, hprev = ctx.saved_tensors
    if dout is None:
        dout = torch.zeros(x.shape[0], x.shape[1], weight.shape[0] // 4, *x.shape[3:], device=x.device,
                           dtype=x.dtype)
    dx, dw, db = convlstm_fused_backward(dout, x, weight, pre, cells, hprev, ctx.forget_bias)
    return dx, dw, db, None


convlstm_fused.register_autograd(_backward, setup_context=_setup_context)
