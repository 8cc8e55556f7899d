"""Bias + SELU (or bias alone) after a convolution run without its bias, with an optional crop: one Triton kernel
forward, one backward that also sums the bias gradient.

    out = act(y[:, :, top:top + Ho, left:left + Wo] + bias[None, :, None, None])        act = SELU or identity

Why: on CUDA, PyTorch adds a convolution's bias as a separate broadcast add over the whole output (cuDNN convolves
without it), then SELU is a second pass, its backward a third and the bias gradient a reduction (a fourth); the
decoder's TF-"same" crop adds a zero fill and a copy in the backward (``slice_backward``). Here the convolution
runs without bias and this op does the rest in one read and one write each way: forward reads the (cropped) window
of y and writes out (optionally inside a zero border, ``out_pads``: the training encoder's ConvLSTM inputs, with no
padded copy); backward reads dout (any strides, e.g. a channel slice of a concatenation's gradient) and out, writes
dy in y's full shape and layout (its zeros outside the crop window too: no fill kernels), and adds the per-channel
column sums of its tiles to the bias gradient (summed element-wise over the program's tiles, reduced once, one
atomic add per channel and program).

The SELU derivative comes from the output, as PyTorch's ``elu_backward(is_result=True)``: scale where out > 0,
out + scale * alpha elsewhere. The bias is added in float32 whatever y's dtype, so under bf16 autocast the fp32
master bias is used as is and gets its gradient in fp32. float64 inputs run the PyTorch ops (Triton rounds the
SELU constants to float32).

Tensors the kernels cannot run on (CPU without Triton's interpreter) take the same arithmetic in PyTorch.
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

from mscred.ops import encoder_xh
from mscred.ops.padding import interior, pad_copy
from mscred.ops.shared_output import SharedOutput
# Importing mscred never fails without Triton: the dispatcher then falls back to the reference.
from mscred.ops.triton import runtime as _runtime
from mscred.ops.triton.runtime import interpreting as _interpreting
from mscred.ops.triton.runtime import runs_fused as _runs_fused
from mscred.ops.triton.runtime import tl, triton

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946
# The forward's tile and warps: 1024 x 8 warps ran the model's scoring calls 1.10-1.39x faster than 2048 x 4 (the
# sub-pixel deconv2's phase read 2.37x) and its training forward calls 1.10x in sum (benchmarks/results/
# small_tiles/, H200). MSCRED_BIAS_ACT_FWD_TILE="BLOCK/warps" overrides (A/B runs).
FWD_BLOCK, FWD_WARPS = 1024, 8
MAX_BLOCK_C = 64
# The backward's tile (elements), warps and tiles per program (whose bias sums it reduces once): 1024 x 8 warps x 8
# tiles ran the training step's six calls in 0.110 ms against 0.126 ms with the earlier 2048 x 4 x 8 (CUDA-graph
# replays of the recorded calls, benchmarks/bench_bwd_tiles.py, results/step_profile_1201c/bwd_tiles/, H200).
# MSCRED_BIAS_ACT_BWD_TILE="BLOCK/warps/tiles" overrides (A/B runs).
BWD_BLOCK, BWD_WARPS, BWD_TILES = 1024, 8, 8
INTERPRETER_BLOCK = 16384  # the tile under the CPU interpreter (unless a variable names one)


def is_available() -> tuple[bool, str]:
    """(True, "") when the fused op can run here: Triton and a CUDA device, or Triton's CPU interpreter."""
    return _runtime.is_available("fused bias_act")


def reference(y: torch.Tensor, bias: torch.Tensor, selu: bool, top: int = 0, left: int = 0,
              height: Optional[int] = None, width: Optional[int] = None) -> torch.Tensor:
    """The same arithmetic in PyTorch ops (the oracle of the tests and the path without Triton)."""
    height = y.shape[2] - top if height is None else height
    width = y.shape[3] - left if width is None else width
    z = y[:, :, top:top + height, left:left + width] + bias.to(y.dtype)[None, :, None, None]
    return F.selu(z) if selu else z


def bias_act(y: torch.Tensor, bias: torch.Tensor, selu: bool, top: int = 0, left: int = 0,
             height: Optional[int] = None, width: Optional[int] = None,
             out_pads: tuple[int, int, int, int] = (0, 0, 0, 0)) -> torch.Tensor:
    """``act(y[:, :, top:top + height, left:left + width] + bias)``, act = SELU if ``selu`` else identity.

    Parameters
    ----------
    y : (B, C, H, W) tensor, any strides (NCHW or channels-last)
    bias : (C,) tensor; may be float32 while y is bf16 (autocast): it is added in float32
    selu : bool
    top, left, height, width : int
        The crop window of y (default: all of it).
    out_pads : (top, bottom, left, right)
        Return the result inside a zero border of these widths, (B, C, height + top + bottom, width + left +
        right): written there directly, for a consumer that reads the zero-bordered copy (the training encoder's
        ConvLSTM inputs) -- no copy. The border's gradient is discarded.

    Returns
    -------
    (B, C, height, width) tensor (bordered by ``out_pads``) of y's dtype, channels-last when y is channels-last,
    else contiguous.
    """
    height = y.shape[2] - top if height is None else height
    width = y.shape[3] - left if width is None else width
    _check_crop(y.shape, top, left, height, width)
    if not _runs_fused(y) or y.dtype == torch.float64:
        # float64 (the tests' oracle dtype) stays in PyTorch: Triton rounds the SELU constants to float32.
        out = reference(y, bias, selu, top, left, height, width)
        return pad_copy(out, tuple(out_pads)) if any(out_pads) else out
    return bias_act_fused(y, bias.contiguous(), bool(selu), int(top), int(left), int(height), int(width),
                          [int(p) for p in out_pads])


def bias_act_shared(y: torch.Tensor, bias: torch.Tensor, selu: bool, out_pads: tuple[int, int, int, int],
                    xh_images: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``bias_act(y, bias, selu, out_pads=out_pads)`` for two consumers: (out, a view of out), whose two gradients
    the backward kernel sums itself (``ops.shared_output``). Where the kernels do not run: (out, out).

    ``xh_images`` > 0 (where the kernels run): the second output is instead the x half of a new [x, h] buffer
    (``ops.encoder_xh``) that the kernel stores the values into as well, h_{-1} zeroed in its first ``xh_images``
    images."""
    if not _runs_fused(y) or y.dtype == torch.float64:
        if xh_images:
            raise ValueError("bias_act_shared: the [x, h] buffer is written by the fused kernel only")
        out = bias_act(y, bias, selu, out_pads=out_pads)
        return out, out
    return SharedOutput.apply(_SharedEpilogue(bool(selu), tuple(int(p) for p in out_pads), tuple(y.shape),
                                              _channels_last(y), int(xh_images)), y, bias.contiguous())


class _SharedEpilogue:
    """``bias_act_fused`` with a bordered output as a ``shared_output.SharedOutput`` producer (no crop); with
    ``xh_images``, ``bias_act_fused_xh``."""

    def __init__(self, selu: bool, pads: tuple[int, ...], y_shape: tuple[int, ...], channels_last: bool,
                 xh_images: int = 0):
        self.selu, self.pads, self.y_shape, self.channels_last = selu, pads, y_shape, channels_last
        self.xh_images = xh_images

    def forward(self, y: torch.Tensor, bias: torch.Tensor):
        if self.xh_images:
            out, xh = bias_act_fused_xh(y, bias, self.selu, list(self.pads), self.xh_images)
            return out, xh[:, :out.shape[1]], (out, bias)
        out = bias_act_fused(y, bias, self.selu, 0, 0, y.shape[2], y.shape[3], list(self.pads))
        return out, None, (out, bias)

    def backward(self, saved, g1, g2, needs_input_grad):
        out, bias = saved
        H, W = self.y_shape[2:]
        dy, db = bias_act_fused_backward(interior(g1, self.pads), interior(out, self.pads), bias, self.selu, 0, 0,
                                         H, W, self.channels_last, None if g2 is None else interior(g2, self.pads))
        return dy, db


def bias_act_into(y: torch.Tensor, bias: torch.Tensor, selu: bool, top: int, left: int,
                  out: torch.Tensor) -> torch.Tensor:
    """``bias_act(y, bias, selu, top, left, *out.shape[2:])`` written into ``out`` (any strides), for inference (no
    autograd): the scoring decoder hands in the channel slice of its skip connection's concatenation buffer, so
    that no concatenation copies the result again. Returns ``out``."""
    height, width = out.shape[2:]
    if not _runs_fused(y) or y.dtype == torch.float64 or out.dtype != y.dtype:
        return out.copy_(bias_act(y, bias, selu, top, left, height, width))
    _check_crop(y.shape, top, left, height, width)
    return _forward_into(y, bias.contiguous(), bool(selu), top, left, out)


def bias_act_subpixel_into(sub: torch.Tensor, bias: torch.Tensor, selu: bool, stride: int, top: int, left: int,
                           out: torch.Tensor) -> torch.Tensor:
    """``bias_act_into`` of a transposed convolution given as its sub-pixel phases (``ops.subpixel.convolve``):
    ``sub`` (B, s*s*O, H', W'), channels ordered (phase row, phase column, output channel), stands for the full
    (B, O, s*H', s*W') output, whose (top, left) window of ``out``'s size gets bias + act and is written into
    ``out`` (any strides). The kernel reads each output pixel's channels from its phase block: no shuffled copy.
    Inference only (no autograd). Returns ``out``."""
    B, O, height, width = out.shape
    _check_crop((B, O, sub.shape[2] * stride, sub.shape[3] * stride), top, left, height, width)
    if not _runs_fused(sub) or sub.dtype == torch.float64 or out.dtype != sub.dtype:
        from mscred.ops.subpixel import unshuffle
        return out.copy_(reference(unshuffle(sub, stride), bias, selu, top, left, height, width))
    return _forward_into(sub, bias.contiguous(), bool(selu), top, left, out, stride)


def _check_crop(shape, top: int, left: int, height: int, width: int) -> None:
    """The crop window inside a (B, C, H, W) ``shape``."""
    if not (0 <= top and top + height <= shape[2] and 0 <= left and left + width <= shape[3]):
        raise ValueError(f"crop ({top}, {left}, {height}, {width}) outside a {tuple(shape)} tensor")


def _channels_last(t: torch.Tensor) -> bool:
    return t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last) and not t.is_contiguous()


def _acc_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


if triton is not None:
    _SCALE = tl.constexpr(SELU_SCALE)
    _SCALE_ALPHA = tl.constexpr(SELU_SCALE * SELU_ALPHA)

    @triton.jit
    def selu_of(z):
        """SELU of ``z`` in its dtype: the epilogue of this file's and the small-channel convolutions' kernels."""
        return tl.where(z > 0, _SCALE * z, _SCALE_ALPHA * (tl.exp(z) - 1.0))

    @triton.jit
    def _tile(q0, P, C, HWO, WO, BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr):
        """Rows q0 .. q0 + BLOCK_P of the B*Ho*Wo output pixels x this program's BLOCK_C channels: mask (R, Cb);
        batch, out row, out column (R, 1); channel (1, Cb)."""
        q = q0 + tl.arange(0, BLOCK_P)
        ch = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
        mask = (q < P)[:, None] & (ch < C)[None, :]
        r = q % HWO
        return mask, (q // HWO).to(tl.int64)[:, None], (r // WO)[:, None], (r % WO)[:, None], ch[None, :]

    @triton.jit
    def _inside(oy, ox, WT, WL, WH, WW):
        """Whether output pixel (oy, ox) lies in the window [WT, WT + WH) x [WL, WL + WW)."""
        return (oy >= WT) & (oy < WT + WH) & (ox >= WL) & (ox < WL + WW)

    # BORDER (both kernels): the program grid covers the whole destination, and the pixels outside its window
    # [WT, WT + WH) x [WL, WL + WW) get zeros -- the zero border of a bordered output (forward, ``out_pads``), the
    # gradient outside the crop (backward) -- instead of separate fill kernels for the strips.
    @triton.jit(do_not_specialize=["P", "C", "HWO", "WO", "TOP", "LEFT", "WT", "WL", "WH", "WW"])
    def _bias_act_fwd_kernel(y_ptr, y_sb, y_sc, y_sy, y_sx, b_ptr, o_ptr, o_sb, o_sc, o_sy, o_sx,
                             P, C, HWO, WO, TOP, LEFT, WT, WL, WH, WW,
                             SELU: tl.constexpr, CDT: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr,
                             SHUFFLE: tl.constexpr, BORDER: tl.constexpr):
        _bias_act_fwd_tile(y_ptr, y_sb, y_sc, y_sy, y_sx, b_ptr, o_ptr, o_sb, o_sc, o_sy, o_sx,
                           P, C, HWO, WO, TOP, LEFT, WT, WL, WH, WW, o_ptr, 0, 0, 0, 0, 0,
                           SELU, CDT, BLOCK_P, BLOCK_C, SHUFFLE, BORDER, False)

    # The same with the output map's sizes as constants (``const_sizes``): the pixel index's two integer divisions
    # by them become multiplications (176 -> 144 instructions a thread by the sm_90 code, results/bias_act_sass/),
    # at one compilation per map size.
    @triton.jit(do_not_specialize=["P", "C", "TOP", "LEFT", "WT", "WL", "WH", "WW"])
    def _bias_act_fwd_const_kernel(y_ptr, y_sb, y_sc, y_sy, y_sx, b_ptr, o_ptr, o_sb, o_sc, o_sy, o_sx,
                                   P, C, HWO: tl.constexpr, WO: tl.constexpr, TOP, LEFT, WT, WL, WH, WW,
                                   SELU: tl.constexpr, CDT: tl.constexpr, BLOCK_P: tl.constexpr,
                                   BLOCK_C: tl.constexpr, SHUFFLE: tl.constexpr, BORDER: tl.constexpr):
        _bias_act_fwd_tile(y_ptr, y_sb, y_sc, y_sy, y_sx, b_ptr, o_ptr, o_sb, o_sc, o_sy, o_sx,
                           P, C, HWO, WO, TOP, LEFT, WT, WL, WH, WW, o_ptr, 0, 0, 0, 0, 0,
                           SELU, CDT, BLOCK_P, BLOCK_C, SHUFFLE, BORDER, False)

    # The const-sizes kernel storing its result a second time (``_forward_into``'s ``xh``): a kernel of its own, so
    # that the two above keep the arguments and sm_90 code they had before the second output existed.
    @triton.jit(do_not_specialize=["P", "C", "TOP", "LEFT", "WT", "WL", "WH", "WW", "H0"])
    def _bias_act_fwd_xh_kernel(y_ptr, y_sb, y_sc, y_sy, y_sx, b_ptr, o_ptr, o_sb, o_sc, o_sy, o_sx,
                                P, C, HWO: tl.constexpr, WO: tl.constexpr, TOP, LEFT, WT, WL, WH, WW,
                                o2_ptr, o2_sb, o2_sc, o2_sy, o2_sx, H0,
                                SELU: tl.constexpr, CDT: tl.constexpr, BLOCK_P: tl.constexpr,
                                BLOCK_C: tl.constexpr, SHUFFLE: tl.constexpr, BORDER: tl.constexpr):
        _bias_act_fwd_tile(y_ptr, y_sb, y_sc, y_sy, y_sx, b_ptr, o_ptr, o_sb, o_sc, o_sy, o_sx,
                           P, C, HWO, WO, TOP, LEFT, WT, WL, WH, WW, o2_ptr, o2_sb, o2_sc, o2_sy, o2_sx, H0,
                           SELU, CDT, BLOCK_P, BLOCK_C, SHUFFLE, BORDER, True)

    @triton.jit
    def _bias_act_fwd_tile(y_ptr, y_sb, y_sc, y_sy, y_sx, b_ptr, o_ptr, o_sb, o_sc, o_sy, o_sx,
                           P, C, HWO, WO, TOP, LEFT, WT, WL, WH, WW, o2_ptr, o2_sb, o2_sc, o2_sy, o2_sx, H0,
                           SELU: tl.constexpr, CDT: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr,
                           SHUFFLE: tl.constexpr, BORDER: tl.constexpr, HAS_O2: tl.constexpr):
        """The forward kernels' program. SHUFFLE = s > 1: y holds the s*s phases of a stride-s transposed output
        (``bias_act_subpixel_into``): row Y of the full output is row Y // s of phase row Y % s, whose channels
        start at phase * C. HAS_O2: the result stored a second time, at o2 (the x half of a ConvLSTM's [x, h]
        buffer, ``ops.encoder_xh``), whose next C channels get zeros in its first H0 images (h_{-1})."""
        mask, b, oy, ox, ch = _tile(tl.program_id(0) * BLOCK_P, P, C, HWO, WO, BLOCK_P, BLOCK_C)
        if BORDER:
            inside = _inside(oy, ox, WT, WL, WH, WW)
            load = mask & inside
            fy = oy - WT + TOP
            fx = ox - WL + LEFT
        else:
            load = mask
            fy = oy + TOP
            fx = ox + LEFT
        if SHUFFLE > 1:
            src = ch + ((fy % SHUFFLE) * SHUFFLE + fx % SHUFFLE) * C
            fy = fy // SHUFFLE
            fx = fx // SHUFFLE
        else:
            src = ch
        y = tl.load(y_ptr + b * y_sb + src * y_sc + fy * y_sy + fx * y_sx, mask=load, other=0.0)
        z = y.to(CDT) + tl.load(b_ptr + ch, mask=ch < C, other=0.0).to(CDT)
        if SELU:
            z = selu_of(z)
        if BORDER:
            z = tl.where(inside, z, 0.0)
        if HAS_O2:
            z = z.to(o_ptr.dtype.element_ty)
            tl.store(o_ptr + b * o_sb + ch * o_sc + oy * o_sy + ox * o_sx, z, mask=mask)
            o2 = o2_ptr + b * o2_sb + ch * o2_sc + oy * o2_sy + ox * o2_sx
            tl.store(o2, z, mask=mask)
            tl.store(o2 + C * o2_sc, tl.zeros_like(z), mask=mask & (b < H0))
        else:
            tl.store(o_ptr + b * o_sb + ch * o_sc + oy * o_sy + ox * o_sx, z.to(o_ptr.dtype.element_ty), mask=mask)

    @triton.jit(do_not_specialize=["P", "C", "HWO", "WO", "TOP", "LEFT", "WH", "WW"])
    def _bias_act_bwd_kernel(g_ptr, g_sb, g_sc, g_sy, g_sx, g2_ptr, g2_sb, g2_sc, g2_sy, g2_sx,
                             o_ptr, o_sb, o_sc, o_sy, o_sx, d_ptr, d_sb, d_sc, d_sy, d_sx, db_ptr,
                             P, C, HWO, WO, TOP, LEFT, WH, WW,
                             SELU: tl.constexpr, CDT: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr,
                             TILES: tl.constexpr, BORDER: tl.constexpr, HAS_G2: tl.constexpr):
        _bias_act_bwd_program(g_ptr, g_sb, g_sc, g_sy, g_sx, g2_ptr, g2_sb, g2_sc, g2_sy, g2_sx,
                              o_ptr, o_sb, o_sc, o_sy, o_sx, d_ptr, d_sb, d_sc, d_sy, d_sx, db_ptr,
                              P, C, HWO, WO, TOP, LEFT, WH, WW, d_ptr, 0, 0, 0, 0,
                              SELU, CDT, BLOCK_P, BLOCK_C, TILES, BORDER, HAS_G2, False)

    @triton.jit(do_not_specialize=["P", "C", "TOP", "LEFT", "WH", "WW"])
    def _bias_act_bwd_const_kernel(g_ptr, g_sb, g_sc, g_sy, g_sx, g2_ptr, g2_sb, g2_sc, g2_sy, g2_sx,
                                   o_ptr, o_sb, o_sc, o_sy, o_sx, d_ptr, d_sb, d_sc, d_sy, d_sx, db_ptr,
                                   P, C, HWO: tl.constexpr, WO: tl.constexpr, TOP, LEFT, WH, WW,
                                   SELU: tl.constexpr, CDT: tl.constexpr, BLOCK_P: tl.constexpr,
                                   BLOCK_C: tl.constexpr, TILES: tl.constexpr, BORDER: tl.constexpr,
                                   HAS_G2: tl.constexpr):
        _bias_act_bwd_program(g_ptr, g_sb, g_sc, g_sy, g_sx, g2_ptr, g2_sb, g2_sc, g2_sy, g2_sx,
                              o_ptr, o_sb, o_sc, o_sy, o_sx, d_ptr, d_sb, d_sc, d_sy, d_sx, db_ptr,
                              P, C, HWO, WO, TOP, LEFT, WH, WW, d_ptr, 0, 0, 0, 0,
                              SELU, CDT, BLOCK_P, BLOCK_C, TILES, BORDER, HAS_G2, False)

    # The const-sizes kernel that also copies the concatenation's other half out (``bias_act_fused_backward_cat``):
    # a kernel of its own, so that the two above keep the arguments and sm_90 code they had before.
    @triton.jit(do_not_specialize=["P", "C", "TOP", "LEFT", "WH", "WW"])
    def _bias_act_bwd_cat_kernel(g_ptr, g_sb, g_sc, g_sy, g_sx, o_ptr, o_sb, o_sc, o_sy, o_sx,
                                 d_ptr, d_sb, d_sc, d_sy, d_sx, db_ptr, P, C, HWO: tl.constexpr, WO: tl.constexpr,
                                 TOP, LEFT, WH, WW, k_ptr, k_sb, k_sc, k_sy, k_sx,
                                 SELU: tl.constexpr, CDT: tl.constexpr, BLOCK_P: tl.constexpr,
                                 BLOCK_C: tl.constexpr, TILES: tl.constexpr, BORDER: tl.constexpr):
        _bias_act_bwd_program(g_ptr, g_sb, g_sc, g_sy, g_sx, g_ptr, g_sb, g_sc, g_sy, g_sx,
                              o_ptr, o_sb, o_sc, o_sy, o_sx, d_ptr, d_sb, d_sc, d_sy, d_sx, db_ptr,
                              P, C, HWO, WO, TOP, LEFT, WH, WW, k_ptr, k_sb, k_sc, k_sy, k_sx,
                              SELU, CDT, BLOCK_P, BLOCK_C, TILES, BORDER, False, True)

    @triton.jit
    def _bias_act_bwd_program(g_ptr, g_sb, g_sc, g_sy, g_sx, g2_ptr, g2_sb, g2_sc, g2_sy, g2_sx,
                              o_ptr, o_sb, o_sc, o_sy, o_sx, d_ptr, d_sb, d_sc, d_sy, d_sx, db_ptr,
                              P, C, HWO, WO, TOP, LEFT, WH, WW, k_ptr, k_sb, k_sc, k_sy, k_sx,
                              SELU: tl.constexpr, CDT: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr,
                              TILES: tl.constexpr, BORDER: tl.constexpr, HAS_G2: tl.constexpr,
                              HAS_SKIP: tl.constexpr):
        """The backward kernels' program: dy from dout (plus a second gradient of the same output if HAS_G2, summed
        here) and out (their pixel (y, x) is dy's (y + TOP, x + LEFT)). Without BORDER the grid covers the crop
        window (WH x WW, dy's zero strips filled apart); with it, all of dy. HAS_SKIP: dout is the lower channel
        half of a concatenation's gradient whose upper half (as many channels) is copied into k, compact."""
        # The bias gradient's column sums: accumulated element-wise over the program's TILES tiles, then reduced
        # across the tile's rows once (a reduction through shared memory, with its barriers) and added with one
        # atomic per channel -- not reduced after every tile.
        acc = tl.zeros([BLOCK_P, BLOCK_C], dtype=CDT)
        for i in range(TILES):
            q0 = (tl.program_id(0) * TILES + i) * BLOCK_P
            mask, b, oy, ox, ch = _tile(q0, P, C, HWO, WO, BLOCK_P, BLOCK_C)
            if BORDER:  # (oy, ox) in dy
                load = mask & _inside(oy, ox, TOP, LEFT, WH, WW)
                gy, gx, dy, dx = oy - TOP, ox - LEFT, oy, ox
            else:       # (oy, ox) in the window
                load = mask
                gy, gx, dy, dx = oy, ox, oy + TOP, ox + LEFT
            g = tl.load(g_ptr + b * g_sb + ch * g_sc + gy * g_sy + gx * g_sx, mask=load, other=0.0).to(CDT)
            if HAS_SKIP:  # the same pixels' other half: the skip's gradient, as the attention's backward reads it
                s = tl.load(g_ptr + b * g_sb + (ch + C) * g_sc + gy * g_sy + gx * g_sx, mask=load, other=0.0)
                tl.store(k_ptr + b * k_sb + ch * k_sc + gy * k_sy + gx * k_sx, s, mask=load)
            if HAS_G2:
                g += tl.load(g2_ptr + b * g2_sb + ch * g2_sc + gy * g2_sy + gx * g2_sx, mask=load,
                             other=0.0).to(CDT)
            if SELU:
                o = tl.load(o_ptr + b * o_sb + ch * o_sc + gy * o_sy + gx * o_sx, mask=load, other=0.0).to(CDT)
                g = g * tl.where(o > 0, _SCALE, o + _SCALE_ALPHA)
            tl.store(d_ptr + b * d_sb + ch * d_sc + dy * d_sy + dx * d_sx, g.to(d_ptr.dtype.element_ty), mask=mask)
            acc += g  # elements not loaded are 0: g is 0 there (outside the window, past the end)
        ch1 = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
        tl.atomic_add(db_ptr + ch1, tl.sum(acc, axis=0), mask=ch1 < C, sem="relaxed")  # read after the kernel


def const_sizes() -> bool:
    """Whether the kernels take the map's sizes as constants (the ``_const`` kernels, compiled once per map size):
    the default; MSCRED_BIAS_ACT_CONST_SIZES=0 gives them at run time (one compilation for every size; A/B runs).
    The forward with constants ran the model's scoring calls 1.17-1.21x and its training calls 1.06-1.09x faster
    on the H200 (benchmarks/bench_bias_act_fwd.py, results/bias_act_fwd/)."""
    return not _runtime.switched_off("MSCRED_BIAS_ACT_CONST_SIZES")


def _launch(P: int, C: int, tiles: int, block: int):
    block_c = min(triton.next_power_of_2(C), MAX_BLOCK_C)
    block_p = max(block // block_c, 1)
    return block_p, block_c, (triton.cdiv(P, block_p * tiles), triton.cdiv(C, block_c))


def _cdt(dtype: torch.dtype):
    return tl.float64 if dtype == torch.float64 else tl.float32


@torch.library.custom_op("mscred::bias_act_fused", mutates_args=())
def bias_act_fused(y: torch.Tensor, bias: torch.Tensor, selu: bool, top: int, left: int, height: int,
                   width: int, pads: list[int]) -> torch.Tensor:
    """Fused forward (see ``bias_act``; ``pads`` its out_pads, whose zero border the kernel writes too); bias
    contiguous."""
    pt, pb, pl, pr = pads
    out = torch.empty(y.shape[0], y.shape[1], height + pt + pb, width + pl + pr, device=y.device, dtype=y.dtype,
                      memory_format=_memory_format(y))
    return _forward_into(y, bias, selu, top, left, out, window=(pt, pl, height, width) if any(pads) else None)


def _memory_format(t: torch.Tensor) -> torch.memory_format:
    return torch.channels_last if _channels_last(t) else torch.contiguous_format


def _forward_into(y: torch.Tensor, bias: torch.Tensor, selu: bool, top: int, left: int,
                  out: torch.Tensor, shuffle: int = 1, window: Optional[tuple[int, int, int, int]] = None,
                  xh: Optional[torch.Tensor] = None, h0_images: int = 0) -> torch.Tensor:
    """The forward kernel: ``out`` (B, C, Ho, Wo), any strides, from the (top, left) window of y; bias contiguous.
    ``shuffle`` = s > 1: y is the sub-pixel phases of the output (``bias_act_subpixel_into``). ``window`` = (top,
    left, height, width) of ``out``: the result goes there and zeros everywhere else (a bordered output). ``xh``
    (B, 2C, Ho, Wo): out's values stored into its first C channels as well, zeros into the next C of its first
    ``h0_images`` images (``ops.encoder_xh``)."""
    B, C, height, width = out.shape
    P = B * height * width
    if P == 0 or C == 0:
        return out
    block, warps = _runtime.tile_override("MSCRED_BIAS_ACT_FWD_TILE",
                                          (INTERPRETER_BLOCK, FWD_WARPS) if _interpreting() else (FWD_BLOCK, FWD_WARPS))
    block_p, block_c, grid = _launch(P, C, 1, block)
    wt, wl, wh, ww = window or (0, 0, height, width)
    if xh is not None:
        kernel, extra = _bias_act_fwd_xh_kernel, (xh, *xh.stride(), h0_images)
    else:
        kernel, extra = (_bias_act_fwd_const_kernel if const_sizes() else _bias_act_fwd_kernel), ()
    kernel[grid](y, *y.stride(), bias, out, *out.stride(), P, C, height * width, width, top, left,
                 wt, wl, wh, ww, *extra, SELU=selu, CDT=_cdt(y.dtype), BLOCK_P=block_p, BLOCK_C=block_c,
                 SHUFFLE=shuffle, BORDER=window is not None, num_warps=warps)
    return out


@bias_act_fused.register_fake
def _(y, bias, selu, top, left, height, width, pads):
    return torch.empty(y.shape[0], y.shape[1], height + pads[0] + pads[1], width + pads[2] + pads[3],
                       device=y.device, dtype=y.dtype, memory_format=_memory_format(y))


@torch.library.custom_op("mscred::bias_act_fused_xh", mutates_args=())
def bias_act_fused_xh(y: torch.Tensor, bias: torch.Tensor, selu: bool, pads: list[int], h0_images: int
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    """(out, xh): ``bias_act_fused(y, bias, selu, 0, 0, H, W, pads)`` (in the same memory format), and a new [x, h]
    buffer (``ops.encoder_xh.new_buffer``) whose x half holds out's values too (border included) and whose h
    half is zero in its first ``h0_images`` images, the rest left to the ConvLSTM; one kernel."""
    H, W = y.shape[2:]
    out = bias_act_fused_xh_like(y, pads)
    xh = encoder_xh.new_buffer(out)
    _forward_into(y, bias, selu, 0, 0, out, window=(pads[0], pads[2], H, W) if any(pads) else None, xh=xh,
                  h0_images=h0_images)
    return out, xh


def bias_act_fused_xh_like(y: torch.Tensor, pads: list[int]) -> torch.Tensor:
    """``bias_act_fused_xh``'s out, unfilled: as ``bias_act_fused``'s (channels-last where y is, which a 1 x 1 map
    is not by ``_channels_last``: its next convolution then sees the layout it sees without the second output)."""
    return torch.empty(y.shape[0], y.shape[1], y.shape[2] + pads[0] + pads[1], y.shape[3] + pads[2] + pads[3],
                       device=y.device, dtype=y.dtype, memory_format=_memory_format(y))


@bias_act_fused_xh.register_fake
def _(y, bias, selu, pads, h0_images):
    out = bias_act_fused_xh_like(y, pads)
    return out, encoder_xh.new_buffer(out)


@torch.library.custom_op("mscred::bias_act_fused_backward", mutates_args=())
def bias_act_fused_backward(dout: torch.Tensor, out: torch.Tensor, bias: torch.Tensor, selu: bool, top: int,
                            left: int, H: int, W: int, channels_last: bool, dout2: Optional[torch.Tensor] = None
                            ) -> tuple[torch.Tensor, torch.Tensor]:
    """(dy, dbias) of ``bias_act_fused``: dy (B, C, H, W), y's shape and layout (``channels_last``) and out's dtype,
    zero outside the crop; dbias in bias's dtype. ``out`` is the forward's output (read only when ``selu``).
    ``dout2``: a second gradient of the output (its other consumer's, ``shared_bordered``), summed in the kernel."""
    dy, db = _backward_kernels(dout, out, bias, selu, top, left, H, W, channels_last, dout2)
    return dy, db.to(bias.dtype)


def _backward_kernels(dout: torch.Tensor, out: torch.Tensor, bias: torch.Tensor, selu: bool, top: int, left: int,
                      H: int, W: int, channels_last: bool, dout2: Optional[torch.Tensor] = None,
                      dskip: Optional[torch.Tensor] = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``bias_act_fused_backward``'s (dy, dbias in the accumulation dtype); with ``dskip`` (B, C, height, width),
    ``bias_act_fused_backward_cat``'s: dout is then a whole concatenation's gradient, its upper half copied into
    dskip in the same pass (no ``dout2``)."""
    B, C, height, width = out.shape
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    dy = torch.empty(B, C, H, W, device=out.device, dtype=out.dtype, memory_format=fmt)
    db = torch.zeros(C, device=out.device, dtype=_acc_dtype(out.dtype))
    # A crop smaller than y: the kernel covers all of dy and writes the zeros outside the window too.
    border = (height, width) != (H, W)
    P = B * H * W if border else B * height * width
    if P and C:
        dout = dout.to(out.dtype)
        g2 = dout if dout2 is None else dout2.to(out.dtype)  # (dout stands in when there is none: HAS_G2 off)
        # (The CPU interpreter pays per program, not per element: one large tile, unless the variable names one.)
        block, warps, tiles = _runtime.tile_override(
            "MSCRED_BIAS_ACT_BWD_TILE", (INTERPRETER_BLOCK, BWD_WARPS, 1) if _interpreting() else
            (BWD_BLOCK, BWD_WARPS, BWD_TILES))
        block_p, block_c, grid = _launch(P, C, tiles, block)
        HW, WO = (H * W, W) if border else (height * width, width)
        meta = dict(SELU=selu, CDT=_cdt(out.dtype), BLOCK_P=block_p, BLOCK_C=block_c, TILES=tiles, BORDER=border,
                    num_warps=warps)
        if dskip is not None:
            _bias_act_bwd_cat_kernel[grid](dout, *dout.stride(), out, *out.stride(), dy, *dy.stride(), db, P, C, HW,
                                           WO, top, left, height, width, dskip, *dskip.stride(), **meta)
        else:
            kernel = _bias_act_bwd_const_kernel if const_sizes() else _bias_act_bwd_kernel
            kernel[grid](dout, *dout.stride(), g2, *g2.stride(), out, *out.stride(), dy, *dy.stride(), db,
                         P, C, HW, WO, top, left, height, width, HAS_G2=dout2 is not None, **meta)
    return dy, db


@bias_act_fused_backward.register_fake
def _(dout, out, bias, selu, top, left, H, W, channels_last, dout2=None):
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    return (torch.empty(out.shape[0], out.shape[1], H, W, device=out.device, dtype=out.dtype, memory_format=fmt),
            torch.empty(bias.shape, device=bias.device, dtype=bias.dtype))


@torch.library.custom_op("mscred::bias_act_fused_backward_cat", mutates_args=())
def bias_act_fused_backward_cat(dcat: torch.Tensor, out: torch.Tensor, bias: torch.Tensor, selu: bool, top: int,
                                left: int, H: int, W: int, channels_last: bool
                                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dy, dbias, dskip): ``bias_act_fused_backward`` of the lower channel half of a concatenation's gradient
    ``dcat`` (B, 2C, height, width) (``out`` (B, C, height, width) the forward's output), and its upper half copied
    out, compact and channels-last, in the same pass: the skip's gradient as the attention's backward reads it
    (``bias_act_cat``, ``ops.attention_cat``)."""
    B, C, height, width = out.shape
    if dcat.shape != (B, 2 * C, height, width):
        raise ValueError(f"bias_act_fused_backward_cat: a {tuple(dcat.shape)} gradient for a {tuple(out.shape)} "
                         f"half")
    dskip = _skip_grad_like(out)
    dy, db = _backward_kernels(dcat, out, bias, selu, top, left, H, W, channels_last, dskip=dskip)
    return dy, db.to(bias.dtype), dskip


def _skip_grad_like(out: torch.Tensor) -> torch.Tensor:
    return torch.empty(out.shape, device=out.device, dtype=out.dtype, memory_format=torch.channels_last)


@bias_act_fused_backward_cat.register_fake
def _(dcat, out, bias, selu, top, left, H, W, channels_last):
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    return (torch.empty(out.shape[0], out.shape[1], H, W, device=out.device, dtype=out.dtype, memory_format=fmt),
            torch.empty(bias.shape, device=bias.device, dtype=bias.dtype), _skip_grad_like(out))


def _setup_context(ctx, inputs, output):
    y, bias, selu, top, left, _, _, pads = inputs
    ctx.save_for_backward(output, bias)  # the output for SELU's derivative; the bias for its dtype and size
    ctx.y_shape, ctx.channels_last = tuple(y.shape), _channels_last(y)
    ctx.selu, ctx.top, ctx.left, ctx.pads = selu, top, left, tuple(pads)


def _backward(ctx, dout):
    out, bias = ctx.saved_tensors
    H, W = ctx.y_shape[2:]
    # A bordered output's border is constant zero: only its interior's gradient reaches y and the bias.
    dy, db = bias_act_fused_backward(interior(dout, ctx.pads), interior(out, ctx.pads), bias, ctx.selu, ctx.top,
                                     ctx.left, H, W, ctx.channels_last)
    return dy, db, None, None, None, None, None, None


bias_act_fused.register_autograd(_backward, setup_context=_setup_context)
