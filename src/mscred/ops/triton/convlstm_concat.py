"""The training ConvLSTM of the large levels on [x_t, h_{t-1}] concatenated: one convolution per step over both.

``convlstm_train``'s default path convolves the inputs of all steps in one call (gx) and h_{t-1} per step (gh); the
cell kernel then reads both gate tensors and writes their sum ``pre`` for the backward. Here x_t and h_{t-1} lie side
by side in one zero-bordered, time-major buffer xh (T, B, C + Ch, Hp, Wp) -- x copied in once with its border, h
written there by the cell kernel -- so that per step ONE convolution with the whole gate weight (4Ch, C + Ch, k, k)
gives the pre-activations, which the op hands out as they are, one tensor per step (``pre`` is a list on this path:
cuDNN cannot write into a slice of one buffer -- PyTorch's ``cudnn_convolution.out`` measured a device copy after
each call, 13 us per step at level 1, ``results/concat_step/``); the cell kernel reads that one tensor and stores no
gates (the backward adds the bias, ``PRE_BIAS``). Per hidden element and step the cell kernel moves 16 bytes instead
of 32 in bf16.

Backward: per step one transposed convolution with the whole weight gives [dx_t, dh_{t-1}], the cell kernel reads
dh_{t-1} from it and dx_t is copied out, and ONE weight-gradient call over xh gives both weight gradients (the
default path reads the gate gradients once per weight-gradient call).

Convolutions of one step are smaller GEMMs than the default path's all-steps input convolution; the H200 timings
of the convolutions alone (``benchmarks/bench_concat_gates.py``, ``results/concat_gates/``) favour this at level 1
(30 x 30: forward 1.04x, backward 1.19x), are mixed at level 2 (15 x 15: forward 0.85x, backward 1.11x) and lose
below (8 x 8 and 4 x 4 0.90-0.99x); on the whole graphed step levels 1-2 beat level 1 alone (3.000 / 3.003 against
3.064 / 3.047 ms in alternation, ``results/concat_levels/``: the level-2 cell kernels' halved gate traffic outweighs
its slower forward convolutions), so it runs on maps of at least ``MIN_PIXELS`` pixels.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

# convlstm.py imports this module; its helpers are looked up when called (the import is circular by design:
# these are two halves of one op's implementation).
from mscred.ops.triton import attention_last
from mscred.ops.triton import convlstm as lstm
from mscred.ops import conv_cell, wgrad_stream
from mscred.ops.padding import copy_pixels
from mscred.ops.triton.runtime import switched_off, tile_override

MIN_PIXELS = 225  # levels 1-2 of the default model (30 x 30, 15 x 15); MSCRED_LSTM_CONCAT_MIN_PIXELS overrides (0: every level)


def runs(time_major: bool, layout: str, H: int, W: int) -> bool:
    """Whether a training level takes this path: channels-last steps stored time-major (the encoder's training
    layout; then xh, pre and the gate gradients share one (T*B) image order) and maps of at least MIN_PIXELS
    pixels. MSCRED_LSTM_CONCAT=0 never (A/B runs)."""
    if layout != "nhwc" or not time_major or switched_off("MSCRED_LSTM_CONCAT"):
        return False
    return H * W >= tile_override("MSCRED_LSTM_CONCAT_MIN_PIXELS", (MIN_PIXELS,), ("pixels",))[0]


def _cudnn_flags() -> tuple[bool, bool, bool]:
    b = torch.backends.cudnn
    return b.benchmark, b.deterministic, b.allow_tf32


def conv_transpose(g: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """conv_transpose2d(g, w) (stride 1, no padding): the gradient of a convolution's input, a new tensor, read in
    place (``aten.cudnn_convolution_transpose.out`` is PyTorch's generated out= variant: a new tensor and a copy;
    ``results/concat_step_first/``). cuDNN directly where it runs channels-last (not float64)."""
    if torch.backends.cudnn.is_acceptable(g) and g.dtype in (torch.float16, torch.bfloat16, torch.float32):
        return torch.ops.aten.cudnn_convolution_transpose(g, w, [0, 0], [0, 0], [1, 1], [1, 1], 1, *_cudnn_flags())
    return F.conv_transpose2d(g, w).contiguous(memory_format=torch.channels_last)


def _whole_weight(w_x: torch.Tensor, w_h: torch.Tensor) -> torch.Tensor:
    """The gate weight (4Ch, C + Ch, k, k), channels-last, from its two halves (a copy of a few hundred KB)."""
    return torch.cat([w_x, w_h], 1).contiguous(memory_format=torch.channels_last)


def buffers(B: int, T: int, C: int, Ch: int, H: int, W: int, pads, like: torch.Tensor, cell_dtype):
    """``convlstm_train``'s outputs on this path but the gates, unfilled: out and cells as on the default path, and
    xh (T, B, C + Ch, Hp, Wp) in place of hprev (its ``T`` steps, not ``T - 1``, tell the backward which path ran)."""
    HP, WP = H + pads[0] + pads[1], W + pads[2] + pads[3]
    return (*outputs(B, T, Ch, H, W, like, cell_dtype),
            lstm._empty(T * B, C + Ch, HP, WP, like, "nhwc").view(T, B, C + Ch, HP, WP))


def outputs(B: int, T: int, Ch: int, H: int, W: int, like: torch.Tensor, cell_dtype):
    """(out, cells) of ``buffers``, unfilled: what the op allocates when it is given xh (``forward_filled``)."""
    return (lstm._out5(B, T, Ch, H, W, like, "nhwc"),
            lstm._empty(T * B, Ch, H, W, like, "nhwc", dtype=cell_dtype).view(T, B, Ch, H, W))


def gates_like(B: int, T: int, Ch: int, H: int, W: int, like: torch.Tensor) -> list[torch.Tensor]:
    """The shapes ``forward`` returns its gates in (for the op's fake): T tensors (B, 4Ch, H, W), channels-last."""
    return [lstm._empty(B, 4 * Ch, H, W, like, "nhwc") for _ in range(T)]


def took(xh: torch.Tensor, T: int, C: int, Ch: int) -> bool:
    """Whether ``convlstm_train``'s fourth output is this path's xh (else the default path's hprev)."""
    return xh.shape[0] == T and xh.shape[2] == C + Ch


def forward(images: torch.Tensor, w_x: torch.Tensor, w_h: torch.Tensor, bias: torch.Tensor, out: torch.Tensor,
            cells: torch.Tensor, xh: torch.Tensor, pads, forget_bias: float, cdt) -> list[torch.Tensor]:
    """Fills ``buffers``' tensors from the time-major zero-bordered inputs ``images`` (T*B, C, Hp, Wp); returns the
    steps' gate pre-activations without the bias (with it where ``conv_cell.stores_pre_with_bias``), T tensors
    (B, 4Ch, H, W)."""
    T, B = cells.shape[:2]
    C = w_x.shape[1]
    w = _whole_weight(w_x, w_h)
    # every x_t with its zero border (the weight gradient reads x_0 too), and h_{-1} = 0
    copy_pixels(xh.view(T * B, *xh.shape[2:])[:, :C], images, zeros=xh[0, :, C:])
    return forward_filled(xh, w_x, w_h, bias, out, cells, pads, forget_bias, cdt, images[:B], w)


def forward_filled(xh: torch.Tensor, w_x: torch.Tensor, w_h: torch.Tensor, bias: torch.Tensor, out: torch.Tensor,
                   cells: torch.Tensor, pads, forget_bias: float, cdt,
                   x0: torch.Tensor | None = None, w: torch.Tensor | None = None) -> list[torch.Tensor]:
    """``forward`` once xh holds every x_t and h_{-1} = 0 (``forward`` copies them in; the training encoder can
    write them there itself, ``ops.encoder_xh``): fills out, cells and the rest of xh, returns the gates. ``x0``:
    x_0 (B, C, Hp, Wp) as a tensor of its own, for the first step's input convolution where that takes cuDNN
    (else a copy of xh's channel slice, as the convolution would make it: made here, so that the convolution sees
    the layout ``forward``'s x0 has and gives the same numbers); ``w``: the whole weight, if made already."""
    T, B, _, H, W = cells.shape
    C, Ch = w_x.shape[1], w_h.shape[1]
    w = _whole_weight(w_x, w_h) if w is None else w
    if conv_cell.runs(xh, cells.dtype, C, Ch, tuple(w.shape[2:]), pads):  # one CUDA kernel a step (ops/conv_cell)
        w_rows, bias32 = conv_cell.packed_weight(w), bias.float().contiguous()
        gates = [lstm._empty(B, 4 * Ch, H, W, xh, "nhwc") for _ in range(T)]
        for t in range(T):  # (step 0 convolves xh_0 whole: its h half is the zeros above)
            conv_cell.step(xh[t], w_rows, bias32, cells[t - 1] if t > 0 else None, cells[t], gates[t], out[:, t],
                           xh[t + 1] if t < T - 1 else None, C, forget_bias)
        return gates
    hp_border = lstm.recurrent_border(xh[1:, :, C:], pads)
    N = B * Ch * H * W
    block, block_c, grid = lstm._launch("nhwc", B * H * W, Ch)
    fast = lstm.fast_activations(xh.dtype)  # the gates' dtype: cuDNN's output in the inputs' dtype
    gates = []
    for t in range(T):
        if t == 0 and x0 is None:
            x0 = xh[0, :, :C].contiguous(memory_format=torch.channels_last)
        z = F.conv2d(x0, w_x) if t == 0 else F.conv2d(xh[t], w)
        z = z.contiguous(memory_format=torch.channels_last)  # as the fake says (cuDNN gives float64 in NCHW order)
        gates.append(z)
        c_prev, c_t = cells[t - 1] if t > 0 else cells[t], cells[t]
        hp = xh[t + 1, :, C:] if t < T - 1 else xh[0, :, C:]  # h_t beside x_{t+1}; a dummy at the last step
        lstm.cell_fwd_kernel[grid](
            z, *lstm._yx(z), bias, z, *lstm._s3(z), z, *lstm._s3(z),
            c_prev, c_t, *lstm._s3(c_t),
            out[:, t], *lstm._s3(out[:, t]), hp, *hp.stride(),
            N, Ch, H * W, W, pads[0], pads[2], forget_bias, H,
            HAS_REC=False, HAS_CPREV=t > 0, WRITE_HP=t < T - 1, STORE_PRE=False, STORE_C=True,
            HP_BORDER=hp_border, PIX_MAJOR=True, CDT=cdt, BLOCK=block, BLOCK_C=block_c,
            FAST_ACT=fast, num_warps=lstm.NUM_WARPS,
        )
    return gates


def backward(dout: torch.Tensor, w_x: torch.Tensor, w_h: torch.Tensor, bias: torch.Tensor, pre: list[torch.Tensor],
             cells: torch.Tensor, xh: torch.Tensor, pads, forget_bias: float, cdt, acc, recompute_c: bool,
             dc_dtype: torch.dtype):
    """(dimages (T*B, C, Hp, Wp) time-major, dw_x, dw_h, dbias in the bias's dtype) of ``forward``'s output for
    dout (B, T, Ch, H, W) or an ``attention_last.FoldedGrad``; ``pre`` the gates ``forward`` returned, ``acc`` the
    bias gradient's accumulation dtype, ``recompute_c`` and ``dc_dtype`` the cell kernel's settings
    (``lstm.cell_backward_options``)."""
    T, B, _, H, W = cells.shape
    C, Ch = w_x.shape[1], w_h.shape[1]
    HP, WP = xh.shape[-2:]
    w = _whole_weight(w_x, w_h)
    dpre_tb = lstm._empty(T * B, 4 * Ch, H, W, xh, "nhwc")
    dpre = dpre_tb.view(T, B, 4 * Ch, H, W)
    dimages = lstm._empty(T * B, C, HP, WP, xh, "nhwc")
    dc = lstm._empty(B, Ch, H, W, xh, "nhwc", dtype=dc_dtype)  # (lstm.cell_backward_options)
    db = torch.zeros(4 * Ch, device=xh.device, dtype=acc)
    N = B * Ch * H * W
    block, block_c, tiles, grid = lstm._launch_bwd("nhwc", B * H * W, Ch)
    grid, grid_stride = lstm.wave_grid(grid, "nhwc")
    fast = lstm.fast_activations(pre[0].dtype)
    # Steps T - 2 .. 0 as one CUDA kernel each at level 1 on Hopper (ops/conv_cell; MSCRED_LSTM_CONV_CELL_BWD=0 off):
    # step t + 1's transposed convolution and step t's cell backward on the same rows; the last step keeps the
    # Triton cell kernel, dx_0 cuDNN's call below.
    # the gates as the forward stored them: without the bias (the cell kernel adds it), or with it (an A/B build of
    # the forward kernel, conv_cell.stores_pre_with_bias)
    pre_bias = not conv_cell.stores_pre_with_bias(xh, cells.dtype, C, Ch, tuple(w.shape[2:]), pads)
    # dout: (B, T, Ch, H, W), or the level's attention folded in (attention_last.FoldedGrad): the step kernel then
    # makes each step's map from the attention's two maps, the other kernels take it made (FoldedGrad.step)
    folded = isinstance(dout, attention_last.FoldedGrad)
    fused = T > 1 and all(conv_cell.runs_backward(xh, maps, cells.dtype, dc_dtype, recompute_c, acc, C, Ch,
                                                  tuple(w.shape[2:]), pads)
                          for maps in (dout.maps() if folded else (dout,)))
    if fused:
        w_t, bias32 = conv_cell.transposed_weight(w), bias.float().contiguous()
    dxh = None  # [dx_{t+1}, dh_t]: step t+1's transposed convolution
    for t in reversed(range(T)):
        dp = dpre[t]
        if fused and t < T - 1:
            dout_t, attention = (dout.g, dout.kernel_args(t)) if folded else (dout[:, t], None)
            conv_cell.step_backward(dpre[t + 1], w_t, bias32, pre[t], cells[t - 1] if t > 0 else None, dout_t, dc,
                                    dp, dimages[(t + 1) * B:(t + 2) * B], db, forget_bias, attention)
            if t == 0:
                copy_pixels(dimages[:B], conv_transpose(dp, w_x)[:, :C])
            continue
        dout_t = dout.step(t) if folded else dout[:, t]
        dhr = dc if dxh is None else dxh[:, C:]  # a dummy at the last step
        lstm.cell_bwd_kernel[grid](
            pre[t], *lstm._s3(pre[t]), bias, cells[t - 1] if t > 0 else cells[t], cells[t], *lstm._s3(cells[t]),
            dout_t, *lstm._s3(dout_t), dhr, *dhr.stride(),
            dc, *lstm._s3(dc), dp, *lstm._s3(dp), dp, *lstm._yx(dp), db,
            N, Ch, H * W, W, pads[0], pads[2], forget_bias,
            HAS_CPREV=t > 0, HAS_DHR=t < T - 1, HAS_DC=t < T - 1,
            PIX_MAJOR=True, CDT=cdt, BLOCK=block, BLOCK_C=block_c, DBIAS=True,
            STORE2=False, TILES=tiles, PRE_BIAS=pre_bias, FAST_ACT=fast,
            RECOMPUTE_C=recompute_c, GRID_STRIDE=grid_stride, num_warps=lstm.NUM_WARPS_BWD,
        )
        if fused:  # (t = T - 1: the kernel of step T - 2 convolves dpre_{T-1})
            continue
        # one transposed convolution per step with the whole weight: [dx_t, dh_{t-1}] (only dx_0 at step 0)
        dxh = conv_transpose(dp, w if t > 0 else w_x)
        copy_pixels(dimages[t * B:(t + 1) * B], dxh[:, :C])

    def weight_grads():  # one call over all steps (on a side stream: ops/wgrad_stream.py), split into x and h
        dw = wgrad_stream.weight_grad(dpre_tb, xh.view(T * B, C + Ch, HP, WP), w, lstm._PLAIN_CONV)
        fmt = torch.channels_last
        return dw[:, :C].contiguous(memory_format=fmt), dw[:, C:].contiguous(memory_format=fmt)

    dw_x, dw_h = wgrad_stream.run(weight_grads, (dpre_tb, xh))
    return dimages, dw_x, dw_h, db.to(bias.dtype)
