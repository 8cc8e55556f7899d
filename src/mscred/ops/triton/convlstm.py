"""Fused ConvLSTM: hoisted input convolution, no recurrent convolution at step 1, one Triton kernel per step.

The reference (``ops/reference.py``) runs, per step, one convolution over ``concat([x_t, h])`` and then eight
elementwise PyTorch kernels. Here, for one level of B samples, T steps, C input and Ch hidden channels:

    forward   gx = conv(x as (B*T, C, H, W), W[:, :C])              ONE call for all T steps (a GEMM T times larger)
              t = 0:   gates = gx_0 + bias                           h_{-1} = 0, so no recurrent convolution
              t >= 1:  gates = gx_t + bias + conv(pad(h_{t-1}), W[:, C:])   (the bias added inside _cell_fwd)
              _cell_fwd: gate activations, c_t, h_t in one pass; writes h_t to the output, c_t and the gate
                         pre-activations for the backward, and h_t into the zero-bordered buffer that the next
                         step's convolution reads (so no F.pad per step)
              inference of the small levels at small batches: all steps of each window in one program instead
                         (``convlstm_window``: the recurrent convolution and the cell update per pixel tile)
              training of levels 3-4 on CUDA: t >= 1's convolution and _cell_fwd as one kernel instead
                         (``convlstm_rec_cell``: the gates stay in registers)
    backward  per step, newest first: _cell_bwd gives d(gate pre-activations) and dc_{t-1} from dh_t (the
              output's gradient plus the recurrent one), dc_t and the saved c/gates; the recurrent input gradient
              is one transposed convolution per step; d(W[:, C:]) is ONE weight-gradient call over all steps, and
              dx, d(W[:, :C]) ONE more; dbias is summed inside _cell_bwd (column sums over each program's row
              tiles, one atomic add per program and gate, ``bwd_tiles``) in channels-last order, by one
              reduction in NCHW order.

Two ops. ``convlstm_fused`` is inference: TF's asymmetric k = 2 padding as the input convolution's own padding 1,
the gates read as the (H, W) window of its (H+1, W+1) output (no padded copy of x), and the per-window kernels
where they run. ``convlstm_train`` (``train``) takes x already zero-bordered -- the encoder's bordered buffer, which
its next strided convolution reads too -- and its steps in the encoder's training order, time-major (T*B
images), so that the gate gradients of one buffer serve the recurrent convolutions (per step, contiguous) and the
input convolution (all steps) alike: the cell backward writes them once, and no border is zeroed or cropped. On
the large levels (level 1 of the default model) it takes ``convlstm_concat``'s path instead: x_t and h_{t-1} side by
side in one buffer, one convolution per step over both (as the reference, but written for the cell kernels).

Layout (MSCRED_FUSED_LAYOUT, default "nhwc"): channels-last buffers throughout; the output h is stored (B, T, H, W,
Ch), so the attention and the decoder's channels-last convolutions read it without a copy, and a channels-last
input (the encoder's, see ``model.py``) is used in place.

Each is one ``torch.library`` custom op with a registered fake (meta), the training op with its autograd formula,
so they can be checked with ``torch.library.opcheck``, seen as one node by ``torch.compile``, and captured in a
CUDA graph: every launch goes to the current stream and every buffer is allocated through the caching allocator.

Numerics equal the reference's: gate order i, g, f, o along the output channels (TensorFlow's), ``forget_bias``
added to f, TensorFlow "same" padding (k = 2 pads bottom/right by 1, k = 3 pads 1 on every side). The cell
arithmetic is float32 (float64 for float64 inputs, the tests' oracle path); the cell state is stored in float32,
or in float16 when the gates are bf16 / fp16 (autocast): 2^-11 relative, below the bf16 roundings of the
convolution operands, the stored gates and h (see ``_compute_types``); for such gates on CUDA the sigmoids and
tanhs are the special-function unit's tanh, 2^-11 relative too (``fast_activations``).
"""
from __future__ import annotations

import os
from typing import Optional

import torch
import torch.nn.functional as F

from mscred.ops.convlstm_sliding import distinct_steps, sliding
from mscred.ops import resident_lstm, weight_cache, wgrad_stream
from mscred.ops.padding import pad_copy, zero_border
# Importing mscred never fails without Triton: the dispatcher then falls back to the reference.
from mscred.ops.triton import attention_last, convlstm_concat, convlstm_gemm, convlstm_rec_cell, convlstm_window
from mscred.ops.triton import runtime as _runtime
from mscred.ops.triton.runtime import interpreting as _interpreting
from mscred.ops.triton.runtime import runs_fused as _runs_fused
from mscred.ops.triton.runtime import switched_off as _switched_off
from mscred.ops.triton.runtime import tl, triton

BLOCK = 1024  # elements of one (B, Ch, H, W) step per program: 4 gates read, up to 5 outputs written
INTERPRETER_BLOCK = 16384  # the CPU interpreter pays per program, not per element: fewer, larger programs
MAX_BLOCK_C = 64  # channels per program in channels-last order (a row of the 2-D tile: 128 contiguous bytes in bf16)
NUM_WARPS = 4  # of the forward cell kernel (Triton's default; benchmarks/bench_cell_blocks.py sweeps it)
NUM_WARPS_BWD = 4  # of the backward cell kernel (benchmarks/bench_train_cells.py sweeps it)
# (BLOCK, TILES) of the backward cell kernel per hidden-channel count (``bwd_tiles``); others: (BLOCK, 1). The
# fastest of benchmarks/bench_cell_bwd_tiles.py's sweep on the H200 per level (bf16, batch 128): each level's backward
# 1.08x, 1.11x, 1.15x, 1.01x; the graphed training step 3.65 / 3.66 -> 3.50 / 3.51 ms in alternation
# (results/cell_bwd_tiles/). Fewer, longer programs: the bias sums' shared-memory reduction and atomic adds once per
# program instead of once per tile, and smaller tiles (fewer registers per thread) for the same bytes in flight.
BWD_TILES: dict[int, tuple[int, int]] = {32: (512, 4), 64: (256, 8), 128: (512, 4), 256: (512, 2)}


def is_available() -> tuple[bool, str]:
    """(True, "") when the fused ConvLSTM can run here: Triton and a CUDA device, or Triton's CPU interpreter."""
    return _runtime.is_available("fused ConvLSTM")


if triton is not None:  # the kernels (convlstm_kernels.py); without Triton every call takes the reference
    from mscred.ops.triton.convlstm_kernels import cell_bwd_kernel, cell_fwd_kernel


def _compute_types(dtype: torch.dtype, save: bool = True):
    """(Triton compute type, torch dtype of the cell state). The arithmetic is float64 for float64, else float32.

    The cell state is stored in float64 / float32 too, except for bf16 / fp16 inputs, where it is stored in float16:
    in inference c_t is read and written once per step and hidden element, 8 of the per-step path's ~28 bytes in
    float32; in training the forward writes every c_t and the backward reads c_{t-1} (and c_t, unless it recomputes
    it: ``cell_backward_options``; 12 of its ~80 bytes per hidden element and step in float32 when both are read, by
    our count of the cell kernels' loads and stores). |c_t| <= t + 1
    (|i * g| < 1, 0 < f < 1), so float16's 11-bit significand rounds it to within 2^-11 relative -- an eighth of
    the bf16 rounding (2^-8) that h_t = o * tanh(c_t) gets anyway when stored, and that the bf16 gates the backward
    recomputes its activations from already have. The backward's running dc and the bias gradient stay float32
    (``cell_backward_options``).
    MSCRED_LSTM_HALF_CELL=0 keeps float32 everywhere, MSCRED_LSTM_HALF_CELL_TRAIN=0 in training only (A/B runs).
    For the same inputs the activations run on the special-function unit (``fast_activations``)."""
    if dtype == torch.float64:
        return tl.float64, torch.float64
    half = dtype in (torch.bfloat16, torch.float16) and not _switched_off("MSCRED_LSTM_HALF_CELL")
    if half and (not save or not _switched_off("MSCRED_LSTM_HALF_CELL_TRAIN")):
        return tl.float32, torch.float16
    return tl.float32, torch.float32


def _padding(k: int) -> tuple[int, int, int, int]:
    """TF "same" padding of a stride-1 k x k convolution: (top, bottom, left, right); the odd extra goes last."""
    before = (k - 1) // 2
    return before, k - 1 - before, before, k - 1 - before


def _memory_format(layout: str) -> torch.memory_format:
    """The torch memory format of a buffer layout ("nhwc": channels-last, "nchw": contiguous)."""
    return torch.channels_last if layout == "nhwc" else torch.contiguous_format


def _empty(n: int, c: int, h: int, w: int, like: torch.Tensor, layout: str, dtype=None, zero=False):
    """An (n, c, h, w) buffer in NCHW or channels-last order (cuDNN's tensor-core convolutions prefer the latter)."""
    fmt = _memory_format(layout)
    buf = torch.empty(n, c, h, w, device=like.device, dtype=dtype or like.dtype, memory_format=fmt)
    return buf.zero_() if zero else buf


def _s3(t: torch.Tensor) -> tuple[int, int, int]:
    """(batch, channel, pixel) strides of a (B, C, H, W) view whose H, W flatten to one pixel index."""
    sb, sc, sy, sx = t.stride()
    if t.shape[3] == 1:  # pixel = y: PyTorch may give a size-1 dim any stride
        return sb, sc, sy
    if t.shape[2] != 1 and sy != t.shape[3] * sx:
        raise ValueError(f"pixel dims of a {tuple(t.shape)} tensor with strides {t.stride()} do not flatten")
    return sb, sc, sx


def fast_activations(dtype: torch.dtype) -> bool:
    """Whether the cell kernels take their sigmoids and tanhs from the special-function unit
    (``convlstm_kernels._tanh_sfu``, relative error ~2^-11): for bf16 / fp16 gates, whose own rounding is coarser
    or comparable, on CUDA (the interpreter cannot run inline PTX; it runs the exact forms, as float32 and float64 do
    everywhere). MSCRED_LSTM_FAST_ACT=0 keeps the exact forms (A/B runs)."""
    return (dtype in (torch.bfloat16, torch.float16) and not _interpreting()
            and not _switched_off("MSCRED_LSTM_FAST_ACT"))


def cell_backward_options(dtype: torch.dtype) -> tuple[bool, torch.dtype]:
    """(RECOMPUTE_C, the running dc's dtype) of the backward cell kernel for gates of ``dtype``.

    RECOMPUTE_C: c_t = f c_{t-1} + i g recomputed from the pre-activations and c_{t-1} that the kernel loads anyway,
    instead of read back (one of the eight tensors it moves; MSCRED_LSTM_RECOMPUTE_C=0 reads it). The running dc
    stays in float32 (float64 for float64); MSCRED_LSTM_BF16_DC=1 stores it in bf16 for bf16 / fp16 gates, two
    of the backward's ~16 bytes per hidden element and step instead of eight (an A/B setting: dpre, which the
    convolutions' gradients read, is already stored in the gates' dtype)."""
    acc = torch.float64 if dtype == torch.float64 else torch.float32
    if dtype in (torch.bfloat16, torch.float16) and os.environ.get("MSCRED_LSTM_BF16_DC") == "1":
        acc = torch.bfloat16
    return not _switched_off("MSCRED_LSTM_RECOMPUTE_C"), acc


# Programs per SM of the backward cell kernel's one-wave grid (``wave_grid``); 0 keeps the default grid. The fastest
# of bench_cell_math.py --set waves on the H200 (results/cell_waves/, results/cell_wave_default/, bf16, batch 128):
# 6 per SM (level 1's 79 registers a thread allow 6 blocks of 4 warps) 35.6 -> 31.3 us at level 1, 24.5 -> 23.1 at
# level 2. The forward as one wave lost at every count tried (level 1: 17.1 -> 17.6-23.1 us) and keeps one tile a
# program; its grid-stride path was removed on 2026-12-02 (recoverable from commit 9ee25d9).
WAVE_PER_SM = 6


def wave_grid(grid: tuple[int, ...], layout: str) -> tuple[tuple[int, ...], bool]:
    """(grid, GRID_STRIDE) of the backward cell kernel: a channels-last ``grid`` of more programs than fit on the
    card at once becomes one wave of grid-stride programs (SMs x ``WAVE_PER_SM`` on CUDA, or MSCRED_CELL_WAVE="N"
    per SM; 0 keeps the default grid), each walking the row tiles num_programs apart, so that no last, partly empty
    wave runs alone and each program reduces and adds its bias sums once. Level 1's backward launches 1,800
    programs for 6 x 132 slots (2.27 waves); levels 3-4's fit in one wave and keep their grids. Without CUDA (the
    interpreter) the default is off and the machine counts as one SM, so that CI's interpreter tests run both
    paths: the default grid, and the grid-stride one when they set it. The setting's earlier "F/B" form (forward /
    backward) is still read when F is 0."""
    setting = os.environ.get("MSCRED_CELL_WAVE", "")
    on_gpu = torch.cuda.is_available() and not _interpreting()
    if layout != "nhwc":
        return grid, False
    if setting:
        per_sm = _wave_setting(setting)
    elif on_gpu:
        per_sm = WAVE_PER_SM
    else:
        return grid, False
    return one_wave(grid, per_sm, _runtime.sm_count() if on_gpu else 1, forced=bool(setting))


def _wave_setting(setting: str) -> int:
    """MSCRED_CELL_WAVE's programs per SM: "N", or "0/N" (the form from when the forward had a count too)."""
    forward, _, backward = setting.rpartition("/")
    try:
        per_sm = int(backward)
        if per_sm < 0 or forward not in ("", "0"):
            raise ValueError
    except ValueError:
        raise ValueError(f"MSCRED_CELL_WAVE={setting!r}: expected the backward cell kernel's programs per SM, e.g. 6 "
                         "(0: the default grid; the forward's grid-stride path was removed)") from None
    return per_sm


def one_wave(grid: tuple[int, ...], per_sm: int, sms: int, forced: bool = False) -> tuple[tuple[int, ...], bool]:
    """(grid, GRID_STRIDE): ``grid`` as one wave of ``per_sm`` grid-stride programs per SM on ``sms`` SMs where it
    holds more programs than that (anywhere if ``forced``: a set MSCRED_CELL_WAVE); ``per_sm`` 0 keeps it.
    ``wave_grid``'s arithmetic, also what benchmarks/cell_kernel_sass.py reports for the H200."""
    rows = max(1, sms * per_sm // grid[1])  # programs along the row tiles, per channel block
    if per_sm == 0 or (rows >= grid[0] and not forced):
        return grid, False
    return (min(grid[0], rows), *grid[1:]), True


def _launch(layout: str, pixels: int, ch: int) -> tuple[int, int, tuple[int, ...]]:
    """(BLOCK, BLOCK_C, grid) of the cell kernels for ``pixels`` = B*H*W pixels of ``ch`` channels."""
    block = INTERPRETER_BLOCK if _interpreting() else BLOCK
    if layout == "nhwc":
        block_c = min(triton.next_power_of_2(ch), MAX_BLOCK_C, block)
        return block, block_c, (triton.cdiv(pixels, block // block_c), triton.cdiv(ch, block_c))
    return block, 1, (triton.cdiv(pixels * ch, block),)


def _launch_bwd(layout: str, pixels: int, ch: int) -> tuple[int, int, int, tuple[int, ...]]:
    """(BLOCK, BLOCK_C, TILES, grid) of the backward cell kernel: ``_launch``'s tile, and for channels-last
    buffers TILES row tiles per program (``BWD_TILES``, MSCRED_CELL_BWD_TILES), whose bias sums it reduces once."""
    block, block_c, grid = _launch(layout, pixels, ch)
    if layout != "nhwc":
        return block, block_c, 1, grid
    block, tiles = bwd_tiles(ch, block)
    block_c = min(block_c, block)
    rows = triton.cdiv(pixels, block // block_c)
    return block, block_c, tiles, (triton.cdiv(rows, tiles), triton.cdiv(ch, block_c))


def bwd_tiles(ch: int, block: int) -> tuple[int, int]:
    """(BLOCK, TILES) of the backward cell kernel for ``ch`` hidden channels: ``BWD_TILES``'s entry, else
    (``block``, 1), unless MSCRED_CELL_BWD_TILES names one ("CH:BLOCK/TILES;..." with CH a channel count or *; "/"
    and ";" because the device scripts pass variables as comma-separated lists). The interpreter keeps its own
    BLOCK."""
    chosen = BWD_TILES.get(ch, (block, 1))
    for entry in filter(None, os.environ.get("MSCRED_CELL_BWD_TILES", "").split(";")):
        level, _, tile = entry.partition(":")
        try:
            fields = tuple(int(v) for v in tile.split("/"))
        except ValueError:
            fields = ()
        if len(fields) != 2 or min(fields) < 1 or fields[0] & (fields[0] - 1):
            raise ValueError(f"MSCRED_CELL_BWD_TILES: an entry is CH:BLOCK/TILES, BLOCK a power of two, got "
                             f"{entry!r}")
        if level in ("*", str(ch)):
            chosen = fields
    if _interpreting():
        chosen = (block, chosen[1])
    return chosen


def _out5(B: int, T: int, C: int, H: int, W: int, like: torch.Tensor, layout: str) -> torch.Tensor:
    """A (B, T, C, H, W) tensor stored (B, T, H, W, C) for "nhwc" (each step a channels-last (B, C, H, W) view, so
    h_t is written where the attention / the next level reads it), contiguous for "nchw"."""
    if layout == "nhwc":
        return torch.empty(B, T, H, W, C, device=like.device, dtype=like.dtype).permute(0, 1, 4, 2, 3)
    return torch.empty(B, T, C, H, W, device=like.device, dtype=like.dtype)


def _pixels_flatten(t: torch.Tensor) -> bool:
    """Whether every (B, C, H, W) step of ``t`` (B, T, C, H, W) addresses its pixels as one index (see ``_s3``)."""
    H, W = t.shape[-2:]
    return H == 1 or W == 1 or t.stride(-2) == W * t.stride(-1)


def _grown(pads) -> tuple[int, int, int, int]:
    """(Py, Px, oy, ox): TF "same" padding (top, bottom, left, right) done as the convolution's own symmetric
    padding (Py, Px) = (max(top, bottom), max(left, right)); the TF output is the window [oy, oy + H) x [ox, ox + W)
    of that larger output (k = 2: padding 1, output (H+1) x (W+1), window from (1, 1); k = 3: no growth)."""
    top, bottom, left, right = pads
    py, px = max(top, bottom), max(left, right)
    return py, px, py - top, px - left


def _padded_copy_pays(H: int, W: int, pads) -> bool:
    """Whether inference's hoisted input convolution (``convlstm_fused``) runs on a zero-padded copy of x with the
    exact TF output (``True``) instead of the convolution's own symmetric padding and a grown output read through a
    window (no copy of x). Training always takes a zero-bordered x, the encoder's bordered buffer (``train``).

    For k = 2 the grown output has (H+1)(W+1)/(HW) - 1 more gates, convolution work and gradient traffic: 7% at
    30 x 30, 14% at 15 x 15, 27% at 8 x 8, 56% at 4 x 4. The copy costs one pass over x each way (x has a quarter of
    the gates' channels), and the input convolutions of the small levels are compute-bound (K = 4C = 512, 1024):
    from 20% growth up the copy pays (levels 3 and 4 of the default model). k = 3 never grows.
    MSCRED_LSTM_PADDED_COPY=0 keeps the grown output everywhere (A/B runs)."""
    if _switched_off("MSCRED_LSTM_PADDED_COPY"):
        return False
    HG, WG = _grown_shape(H, W, pads)
    return HG * WG > 1.2 * H * W


def _grown_shape(H: int, W: int, pads) -> tuple[int, int]:
    """(rows, columns) of the input convolution's output with its symmetric padding ``_grown`` (H x W for k = 3,
    (H+1) x (W+1) for k = 2)."""
    py, px, _, _ = _grown(pads)
    return H + 2 * py - pads[0] - pads[1], W + 2 * px - pads[2] - pads[3]


def input_gates(x4: torch.Tensor, w_x: torch.Tensor, pads, B: int, T: int) -> torch.Tensor:
    """The input convolutions of all T steps in one call: x4 (B*T, C, H, W) -> gates (B, T, 4Ch, H, W), a view
    (of a grown output's window, or of the exact output of the padded copy; see ``_padded_copy_pays``). The bias is
    not added here (the cell kernel adds it)."""
    H, W = x4.shape[-2:]
    if _padded_copy_pays(H, W, pads):
        g = F.conv2d(pad_copy(x4, pads), w_x)
        return g.view(B, T, g.shape[1], H, W)
    py, px, oy, ox = _grown(pads)
    g = F.conv2d(x4, w_x, None, padding=(py, px))
    return g.view(B, T, g.shape[1], *g.shape[-2:])[:, :, :, oy:oy + H, ox:ox + W]


def step_gates(x: torch.Tensor, w_x: torch.Tensor, pads, fmt, shared: bool) -> torch.Tensor:
    """The input-convolution gates of every (window, step) of x (B, T, C, H, W): (B, T, 4Ch, H, W), a view.

    ``shared`` (inference on sliding windows, see ``ops.convlstm_sliding.sliding``): each distinct step is convolved
    once, B + T - 1 images instead of B * T, and the gates are handed out as sliding views of that one output (the
    cell kernel reads them through strides). Otherwise the B * T images in one call (a copy of x if it is not stored
    so)."""
    B, T, C, H, W = x.shape
    if shared:
        S = B + T - 1
        steps = distinct_steps(x).contiguous(memory_format=fmt)
        g = input_gates(steps, w_x, pads, 1, S)[0]  # (S, 4Ch, H, W)
        return g.as_strided((B, T, *g.shape[1:]), (g.stride(0), *g.stride()), g.storage_offset())
    return input_gates(x.reshape(B * T, C, H, W).contiguous(memory_format=fmt), w_x, pads, B, T)


def _yx(t: torch.Tensor) -> tuple[int, int, int, int]:
    """(batch, channel, row, column) strides of a (B, C, H, W) view."""
    return tuple(t.stride())


def buffer_layout() -> str:
    """Buffer order of the fused op: "nhwc" (channels-last, default) or "nchw"; MSCRED_FUSED_LAYOUT overrides."""
    layout = os.environ.get("MSCRED_FUSED_LAYOUT", "nhwc").lower()
    if layout not in ("nhwc", "nchw"):
        raise ValueError(f"MSCRED_FUSED_LAYOUT must be nhwc or nchw, got {layout!r}")
    return layout


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

    Tensors the kernels cannot run on (CPU without the interpreter) take the reference path. Without autograd
    (inference) the gate pre-activations are not stored.
    """
    if not _runs_fused(x):
        from mscred.ops import reference
        return reference.convlstm(x, weight, bias, forget_bias)
    return run_cast(x, weight, bias, forget_bias)


def run_cast(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, forget_bias: float) -> torch.Tensor:
    """The fused ConvLSTM's output with the casts autocast would make: ``train`` when autograd will need a backward,
    else the inference op ``convlstm_fused``.

    Custom ops are not autocast-aware: cast here as autocast would cast a convolution (fp32 master weights receive
    their gradient through these casts), then run the op with autocast off so that nothing inside is cast a second
    time. The bias is not cast under autocast: the cell kernel adds it in float32 and its gradient comes back in
    float32 (no bf16 rounding of either, two kernels fewer).
    """
    if torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad or bias.requires_grad):
        return train(x, weight, bias, forget_bias)
    x, weight, bias = cast_inputs(x, weight, bias)
    with torch.autocast(x.device.type, enabled=False):
        return convlstm_fused(x, weight, bias, float(forget_bias), buffer_layout())[0]


def cast_inputs(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor):
    """(x, weight, bias) as the fused op takes them: under autocast x and the weight in the autocast dtype and the
    bias as it is (float32 master), else the weight and bias in x's dtype (see ``run_cast``)."""
    x, bias = _cast_x_bias(x, bias)
    return x, weight.to(x.dtype), bias


def _cast_x_bias(x: torch.Tensor, bias: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``cast_inputs`` without the weight (``train`` casts it while splitting it): x in the autocast dtype and the
    float32 master bias as it is, or the bias in x's dtype outside autocast."""
    if torch.is_autocast_enabled(x.device.type):
        return x.to(torch.get_autocast_dtype(x.device.type)), bias.contiguous()
    return x, bias.to(x.dtype).contiguous()


def train(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, forget_bias: float,
          padded: bool = False) -> torch.Tensor:
    """The ConvLSTM of one level with autograd (``convlstm_train``), casts as in ``run_cast``.

    x (B, T, C, H, W); with ``padded``, already its zero-bordered copy (B, T, C, H + top + bottom, W + left +
    right) for TF's "same" padding of the kernel (``_padding``): the encoder's, which its next strided convolution
    reads too (``model.Encoder``), so that the two share one buffer and their input gradients are summed in place.
    Steps stored time-major (the (T*B) image order the encoder runs in while training) are read in place, and then
    the backward's gate gradients serve the recurrent convolutions (per step) and the input convolution (all
    steps) from one buffer. Returns every h_t, (B, T, Ch, H, W).
    """
    xp, w_x, w_h, bias, layout = train_operands(x, weight, bias, padded)
    with torch.autocast(xp.device.type, enabled=False):
        return convlstm_train(xp, w_x, w_h, bias, float(forget_bias), layout)[0]


def train_operands(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, padded: bool):
    """(xp, w_x, w_h, bias, layout): what ``train`` hands the training op, cast as in ``run_cast`` -- x
    zero-bordered (itself with ``padded``), the weight's two halves (the weight cache's casts where the step made
    them), the bias."""
    layout = buffer_layout()
    fmt = _memory_format(layout)
    x, bias = _cast_x_bias(x, bias)
    w_x, w_h = weight_cache.lookup(weight, "x"), weight_cache.lookup(weight, "h")  # the step's casts, if made
    if w_x is None or w_h is None or w_x.dtype != x.dtype or fmt != torch.channels_last:
        w_x, w_h = _SplitWeight.apply(weight, x.shape[2], x.dtype, fmt)
    if not padded:
        x = pad_steps(x, _padding(weight.shape[-1]), fmt)
    return x, w_x, w_h, bias, layout


class _SplitWeight(torch.autograd.Function):
    """The gate weight (4Ch, C + Ch, k, k) as the training op takes it: (w_x, w_h), its input and recurrent halves,
    each in ``dtype`` and ``fmt`` order by ONE copy (slice, cast and layout at once); backward, both gradients
    written into one tensor of the master's dtype and order (two copies).

    Autocast's cast, then the two slice copies, and in the backward the slices again, a cat, a contiguous copy
    and the cast back made 8-9 small kernels per level and training step (the 53 weight-shaped copies of
    benchmarks/results/train_cells/step_summary.md); here 4."""

    @staticmethod
    def forward(ctx, weight: torch.Tensor, C: int, dtype: torch.dtype, fmt):
        ctx.C, ctx.master = C, weight.dtype
        return (weight[:, :C].to(dtype=dtype, memory_format=fmt), weight[:, C:].to(dtype=dtype, memory_format=fmt))

    @staticmethod
    def backward(ctx, dw_x: torch.Tensor | None, dw_h: torch.Tensor | None):
        ref = dw_x if dw_x is not None else dw_h
        dw = torch.zeros if dw_x is None or dw_h is None else torch.empty
        shape = (ref.shape[0], ctx.C + (dw_h.shape[1] if dw_h is not None else 0), *ref.shape[2:])
        grad = dw(shape, device=ref.device, dtype=ctx.master)
        if dw_x is not None:
            grad[:, :ctx.C].copy_(dw_x)
        if dw_h is not None:
            grad[:, ctx.C:].copy_(dw_h)
        return grad, None, None, None


def _images(x: torch.Tensor, fmt) -> tuple[torch.Tensor, bool]:
    """(images, time_major): x (B, T, C, H, W) as (B*T or T*B, C, H, W) images in ``fmt`` order. A view when the
    steps are stored time-major (``time_major``: T*B order, what the encoder produces while training) or
    batch-major; else a (B*T)-ordered copy."""
    B, T = x.shape[:2]
    if B == 1 or T == 1 or x.stride(1) == B * x.stride(0):  # the (T, B) dims merge: a view
        images = x.transpose(0, 1).view(T * B, *x.shape[2:])
        if images.is_contiguous(memory_format=fmt):
            return images, True
    return x.reshape(B * T, *x.shape[2:]).contiguous(memory_format=fmt), False


def _steps(images: torch.Tensor, B: int, T: int, time_major: bool) -> torch.Tensor:
    """``_images`` undone: (T*B or B*T, C, H, W) -> a (B, T, C, H, W) view."""
    if time_major:
        return images.view(T, B, *images.shape[1:]).transpose(0, 1)
    return images.view(B, T, *images.shape[1:])


def pad_steps(x: torch.Tensor, pads, fmt) -> torch.Tensor:
    """x (B, T, C, H, W) -> its zero-bordered copy (B, T, C, H + top + bottom, W + left + right), in x's step order
    (time-major stays time-major); the gradient is handed back as a view (``padding.pad_copy``)."""
    images, time_major = _images(x, fmt)
    return _steps(pad_copy(images, pads), x.shape[0], x.shape[1], time_major)


def train_inputs(x: torch.Tensor, weight: torch.Tensor, layout: str = "nhwc"):
    """(xp, w_x, w_h): what ``train`` hands ``convlstm_train`` for x (B, T, C, H, W) and the gate weight, in x's
    dtype, without autograd (benchmarks and tests call the op with them)."""
    fmt = _memory_format(layout)
    with torch.no_grad():
        w_x, w_h = _SplitWeight.apply(weight, x.shape[2], x.dtype, fmt)
        return pad_steps(x, _padding(weight.shape[-1]), fmt), w_x, w_h


# ----------------------------------------------------------------------------------------------------------------
# The inference op.
# ----------------------------------------------------------------------------------------------------------------
@torch.library.custom_op("mscred::convlstm_fused", mutates_args=())
def convlstm_fused(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, forget_bias: float, layout: str
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Fused ConvLSTM forward for inference (no autograd: training runs ``convlstm_train``). x and weight of one
    dtype, bias of that dtype or float32 (under autocast); layout "nhwc" or "nchw" (internal buffers only).

    Returns
    -------
    out : (B, T, Ch, H, W)            every h_t; stored (B, T, H, W, Ch) for "nhwc" (what the attention and the
                                      decoder's channels-last convolutions read without a copy), else contiguous
    pre : (0, B, 4Ch, H, W)           (training's gate pre-activations, not stored here)
    cells : (1, B, Ch, H, W)          the working cell state the steps update in place (float32, float64 for
                                      float64, float16 for bf16 / fp16 inputs, see ``_compute_types``), not a
                                      result; (0, B, ...) with the resident kernel: its cells stay on the SM
    hprev : (T-1, B, Ch, Hp, Wp)      zero-bordered h_0 .. h_{T-2}, the inputs of the recurrent convolutions
                                      ((0, B, ...) with the per-window kernels: they read h_{t-1} from ``out``
                                      or from shared memory)
    """
    B, T, C, H, W = x.shape
    Ch, k = weight.shape[0] // 4, weight.shape[-1]
    cdt, cell_dtype = _compute_types(x.dtype, save=False)
    gx, w_h, pads = gates_and_recurrent_weight(x, weight, layout, save=False)
    resident, window = _window_paths(x, layout, False, Ch, k)
    out, pre, cells, hprev = _buffers(B, T, Ch, H, W, pads, x, layout, False, cell_dtype, window, resident)
    if resident:  # bf16 inference of levels 1-2: a window's whole state on the SM (CUDA C++)
        resident_lstm.run(gx, bias, w_h, out, pads, forget_bias)
    elif window:  # other inference of the small levels: a Triton program per window
        convlstm_window.run(gx, bias, w_h, cells[0], out, pads, forget_bias)
    else:
        _forward_steps(gx, bias, w_h, out, pre, cells, hprev, pads, forget_bias, layout, False, cdt)
    return out, pre, cells, hprev


def _forward_steps(gx: torch.Tensor, bias: torch.Tensor, w_h: torch.Tensor, out: torch.Tensor, pre: torch.Tensor,
                   cells: torch.Tensor, hprev: torch.Tensor, pads, forget_bias: float, layout: str, save: bool,
                   cdt) -> None:
    """The per-step path: for each step the recurrent convolution (cuDNN; none at step 0, h_{-1} = 0) and the cell
    kernel, filling ``out``, and with ``save`` (training) ``pre`` and every c_t of ``cells``; ``hprev`` gets each
    h_t but the last inside its zero border."""
    B, T, _, H, W = gx.shape
    Ch = out.shape[2]
    hp_border = recurrent_border(hprev, pads)
    N = B * Ch * H * W
    block, block_c, grid = _launch(layout, B * H * W, Ch)
    fast = fast_activations(gx.dtype)
    fused_rec = convlstm_rec_cell.runs(gx.dtype, layout, Ch, gx.device, training=save)
    for t in range(T):
        gxt = gx[:, t]
        # Training keeps every c_t for the backward; inference updates one buffer in place (each element is read
        # and written by the same thread) and does not store the last step's c, which nothing reads.
        c_prev, c_t = (cells[t - 1] if t > 0 else cells[t], cells[t]) if save else (cells[0], cells[0])
        if t > 0 and fused_rec:  # the recurrent convolution and the cell update in one kernel
            pre_t = pre[t] if save else c_t
            hp = hprev[t] if t < T - 1 else hprev[0]
            convlstm_rec_cell.step(hprev[t - 1], w_h, gxt, bias, pre_t, c_prev, c_t, out[:, t], hp, pads,
                                   forget_bias, t < T - 1, save, save or t < T - 1, hp_border, cdt, fast)
            continue
        # (B, 4Ch, H, W); a dummy at step 0, never read (h_{-1} = 0)
        rec = F.conv2d(hprev[t - 1], w_h) if t > 0 else c_t
        pre_t = pre[t] if save else c_t                       # dummy when not stored
        hp = hprev[t] if t < T - 1 else hprev[0] if T > 1 else out[:, 0]  # dummy at the last step
        cell_fwd_kernel[grid](
            gxt, *_yx(gxt), bias, rec, *_s3(rec), pre_t, *_s3(pre_t),
            c_prev, c_t, *_s3(c_t),
            out[:, t], *_s3(out[:, t]), hp, hp.stride(0), hp.stride(1), hp.stride(2), hp.stride(3),
            N, Ch, H * W, W, pads[0], pads[2], forget_bias, H,
            HAS_REC=t > 0, HAS_CPREV=t > 0, WRITE_HP=t < T - 1, STORE_PRE=save, STORE_C=save or t < T - 1,
            HP_BORDER=hp_border,
            PIX_MAJOR=layout == "nhwc", CDT=cdt, BLOCK=block, BLOCK_C=block_c,
            FAST_ACT=fast, num_warps=NUM_WARPS,
        )


def recurrent_border(buf: torch.Tensor, pads) -> int:
    """The forward cell kernel's HP_BORDER for the zero-bordered h buffer ``buf`` (..., Hp, Wp): the kernel writes
    every interior element, and for borders of width <= 1 (kernels up to 3 x 3) the border too (its sides as bits):
    no fill kernels. Wider borders are zeroed here (and 0 returned)."""
    if max(pads) > 1:
        zero_border(buf, pads)
        return 0
    return sum(bit for bit, pad in zip((1, 2, 4, 8), pads) if pad)


def gates_and_recurrent_weight(x: torch.Tensor, weight: torch.Tensor, layout: str, save: bool):
    """What every forward path starts from: (gx, w_h, pads). gx (B, T, 4Ch, H, W) are the input convolutions of all
    steps in one call, a view (see ``input_gates``), once per distinct step for sliding windows at inference
    (``step_gates``); w_h the recurrent half of the weight in the layout's memory format; pads TF's "same" padding
    (top, bottom, left, right) of the kernel."""
    C, k = x.shape[2], weight.shape[-1]
    pads = _padding(k)
    fmt = _memory_format(layout)
    w_x = weight[:, :C].contiguous(memory_format=fmt)
    w_h = weight[:, C:].contiguous(memory_format=fmt)
    return step_gates(x, w_x, pads, fmt, shared=not save and sliding(x)), w_h, pads


def _window_paths(x: torch.Tensor, layout: str, save: bool, Ch: int, k: int) -> tuple[bool, bool]:
    """(resident, window): whether this level runs the resident CUDA kernel (``ops.resident_lstm``), else whether
    the Triton per-window kernel (``convlstm_window``); neither: the per-step path."""
    B, _, _, H, W = x.shape
    if resident_lstm.runs(x.dtype, layout, save, Ch, k, H * W, x.device):
        return True, False
    return False, convlstm_window.runs(x.dtype, layout, save, Ch, k, B, x.device)


def _buffers(B: int, T: int, Ch: int, H: int, W: int, pads, x: torch.Tensor, layout: str, save: bool, cell_dtype,
             window: bool, resident: bool = False):
    """``convlstm_fused``'s outputs, unfilled (its docstring has their shapes). Inference (not ``save``) keeps one
    cell state buffer, updated in place: cells (1, B, ...); the resident kernel keeps it in shared memory: (0, B, ...).
    The per-window kernels (``window``, ``resident``) read h_{t-1} from the output or from shared memory: no
    zero-bordered copies."""
    HP, WP = H + pads[0] + pads[1], W + pads[2] + pads[3]
    cell_steps = T if save else 0 if resident else 1
    bordered = 0 if window or resident else max(T - 1, 0)
    return (_out5(B, T, Ch, H, W, x, layout),
            _empty(T * B if save else 0, 4 * Ch, H, W, x, layout).view(T if save else 0, B, 4 * Ch, H, W),
            _empty(cell_steps * B, Ch, H, W, x, layout, dtype=cell_dtype).view(cell_steps, B, Ch, H, W),
            _empty(bordered * B, Ch, HP, WP, x, layout).view(bordered, B, Ch, HP, WP))


@convlstm_fused.register_fake
def _(x, weight, bias, forget_bias, layout):
    B, T, C, H, W = x.shape
    Ch, k = weight.shape[0] // 4, weight.shape[-1]
    cell_dtype = _compute_types(x.dtype, save=False)[1]
    resident, window = _window_paths(x, layout, False, Ch, k)
    return _buffers(B, T, Ch, H, W, _padding(k), x, layout, False, cell_dtype, window, resident)


# ----------------------------------------------------------------------------------------------------------------
# The training op. Forward returns the intermediates the backward needs (custom ops save only inputs and outputs).
# ----------------------------------------------------------------------------------------------------------------
def _unpadded(xp: torch.Tensor, w_h: torch.Tensor):
    """(B, T, C, Ch, H, W, pads) of the training op's zero-bordered input ``xp`` and recurrent weight."""
    B, T, C, HP, WP = xp.shape
    pads = _padding(w_h.shape[-1])
    return B, T, C, w_h.shape[0] // 4, HP - pads[0] - pads[1], WP - pads[2] - pads[3], pads


@torch.library.custom_op("mscred::convlstm_train", mutates_args=())
def convlstm_train(xp: torch.Tensor, w_x: torch.Tensor, w_h: torch.Tensor, bias: torch.Tensor, forget_bias: float,
                   layout: str) -> tuple[torch.Tensor, list[torch.Tensor], torch.Tensor, torch.Tensor]:
    """Fused ConvLSTM forward for training (see ``train``). xp (B, T, C, Hp, Wp): the steps' zero-bordered inputs
    (TF's "same" padding of the k x k kernel), in any step order (time-major is read in place); w_x (4Ch, C, k, k)
    and w_h (4Ch, Ch, k, k) the input and recurrent weights, of xp's dtype; bias (4Ch,) of that dtype or float32.

    Returns
    -------
    out : (B, T, Ch, H, W)            every h_t (stored as ``convlstm_fused``'s)
    pre : [(T, B, 4Ch, H, W)]         gate pre-activations, for the backward (one tensor in a list; the large
                                      levels' path, ``convlstm_concat``: T tensors (B, 4Ch, H, W) without the bias)
    cells : (T, B, Ch, H, W)          every c_t, for the backward (float16 for bf16 / fp16, see ``_compute_types``)
    hprev : (T-1, B, Ch, Hp, Wp)      zero-bordered h_0 .. h_{T-2}, the inputs of the recurrent convolutions
                                      (``convlstm_concat``: xh (T, B, C + Ch, Hp, Wp), x_t and h_{t-1} side by side)

    The input convolutions of all steps are one call on the padded images: the gates come out exactly (H, W).
    """
    return train_forward(xp, w_x, w_h, bias, forget_bias, layout)


def train_forward(xp: torch.Tensor, w_x: torch.Tensor, w_h: torch.Tensor, bias: torch.Tensor, forget_bias: float,
                  layout: str) -> tuple[torch.Tensor, list[torch.Tensor], torch.Tensor, torch.Tensor]:
    """``convlstm_train``'s work, for the ops that run it (it and ``convlstm_attention.convlstm_attention_train``)."""
    B, T, C, Ch, H, W, pads = _unpadded(xp, w_h)
    cdt, cell_dtype = _compute_types(xp.dtype)
    fmt = _memory_format(layout)
    images, time_major = _images(xp, fmt)
    if convlstm_concat.runs(time_major, layout, H, W):  # the large levels: [x_t, h_{t-1}] in one buffer
        out, cells, xh = convlstm_concat.buffers(B, T, C, Ch, H, W, pads, xp, cell_dtype)
        gates = convlstm_concat.forward(images, w_x, w_h, bias, out, cells, xh, pads, forget_bias, cdt)
        return out, gates, cells, xh
    gx = _steps(F.conv2d(images, w_x), B, T, time_major)
    out, pre, cells, hprev = _buffers(B, T, Ch, H, W, pads, xp, layout, True, cell_dtype, False)
    _forward_steps(gx, bias, w_h, out, pre, cells, hprev, pads, forget_bias, layout, True, cdt)
    return out, [pre], cells, hprev


@convlstm_train.register_fake
def _(xp, w_x, w_h, bias, forget_bias, layout):
    return train_like(xp, w_h, layout)


def train_like(xp: torch.Tensor, w_h: torch.Tensor, layout: str):
    """``train_forward``'s outputs, empty (the training ops' fakes)."""
    B, T, C, Ch, H, W, pads = _unpadded(xp, w_h)
    cell_dtype = _compute_types(xp.dtype)[1]
    if convlstm_concat.runs(_images(xp, _memory_format(layout))[1], layout, H, W):
        out, cells, xh = convlstm_concat.buffers(B, T, C, Ch, H, W, pads, xp, cell_dtype)
        return out, convlstm_concat.gates_like(B, T, Ch, H, W, xp), cells, xh
    out, pre, cells, hprev = _buffers(B, T, Ch, H, W, pads, xp, layout, True, cell_dtype, False)
    return out, [pre], cells, hprev


_PLAIN_CONV = ([1, 1], [0, 0], [1, 1], False, [0, 0], 1)  # stride, padding, dilation, transposed, out pad, groups


@torch.library.custom_op("mscred::convlstm_train_backward", mutates_args=())
def convlstm_train_backward(dout: torch.Tensor, xp: torch.Tensor, w_x: torch.Tensor, w_h: torch.Tensor,
                            bias: torch.Tensor, pre: list[torch.Tensor], cells: torch.Tensor, hprev: torch.Tensor,
                            forget_bias: float, layout: str, attn_g: Optional[torch.Tensor] = None,
                            attn_hl: Optional[torch.Tensor] = None, attn_coef: Optional[torch.Tensor] = None
                            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients (dxp, dw_x, dw_h, dbias) of ``convlstm_train``'s ``out`` given dout (B, T, Ch, H, W). dxp has
    xp's shape and step order (its border rows hold the convolution's gradient there, which the zero border
    discards: ``padding.pad_copy`` hands back the interior); the weight gradients in the layout's order, dbias in
    the bias's dtype.

    With ``attn_g``, ``attn_hl`` and ``attn_coef`` (``triton.attention_last.last_step_grad``'s g and coef and
    h_{T-1}): out feeds only the level's temporal attention, dout is dL/dh_{T-1} alone (B, Ch, H, W), and the other
    steps' dL/dh_t = a_t g + ds_t h_{T-1} are made where they are read (``attention_last.FoldedGrad``)."""
    B, T, C, Ch, H, W, pads = _unpadded(xp, w_h)
    top, left = pads[0], pads[2]
    HP, WP = xp.shape[-2:]
    cdt, _ = _compute_types(xp.dtype)
    acc = torch.float64 if xp.dtype == torch.float64 else torch.float32  # the bias gradient
    recompute_c, dc_dtype = cell_backward_options(xp.dtype)
    fmt = _memory_format(layout)
    if attn_g is not None:  # (only the concatenated path's backward folds it; the others get every step's map)
        folded = attention_last.FoldedGrad(attn_g.to(xp.dtype), attn_hl.to(xp.dtype), attn_coef, dout.to(xp.dtype))
        dout = folded if convlstm_concat.took(hprev, T, C, Ch) else folded.materialised()
    else:
        dout = dout.to(xp.dtype)
    if isinstance(dout, torch.Tensor) and not _pixels_flatten(dout):  # the kernel addresses a step by (batch,
        dout = dout.contiguous()                                        # channel, pixel) strides
    # hprev is the forward's xh: xp is not read (it may be xh's x half, ops/encoder_xh.py, whose images are no view)
    if convlstm_concat.took(hprev, T, C, Ch):
        dimages, dw_x, dw_h, db = convlstm_concat.backward(dout, w_x, w_h, bias, pre, cells, hprev, pads,
                                                           forget_bias, cdt, acc, recompute_c, dc_dtype)
        return _steps(dimages, B, T, True), dw_x, dw_h, db
    images, time_major = _images(xp, fmt)
    pre = pre[0]
    # d(gate pre-activations), per step (T, B, ...) for the recurrence; in the images' order for the input
    # convolution. Time-major images: the same buffer (written once); else a second, (B*T)-ordered one.
    dpre_tb = _empty(T * B, 4 * Ch, H, W, xp, layout)
    dpre = dpre_tb.view(T, B, 4 * Ch, H, W)
    dpre_images = dpre_tb if time_major else _empty(B * T, 4 * Ch, H, W, xp, layout)
    dpre_bt = None if time_major else dpre_images.view(B, T, 4 * Ch, H, W)
    dc = _empty(B, Ch, H, W, xp, layout, dtype=dc_dtype)
    dhr = hprev[0] if T > 1 else dc  # dummy until the first recurrent gradient exists
    N = B * Ch * H * W
    block, block_c, tiles, grid = _launch_bwd(layout, B * H * W, Ch)
    grid, grid_stride = wave_grid(grid, layout)
    fast = fast_activations(pre.dtype)
    taps = convlstm_gemm.dgrad_by_gemm(layout, w_h.shape[-1], pads, xp)
    # The bias gradient inside the cell kernel (channels-last tiles); for NCHW one reduction after the loop.
    fused_db = layout == "nhwc"
    db_acc = torch.zeros(4 * Ch, device=xp.device, dtype=acc)
    for t in reversed(range(T)):
        dout_t = dout[:, t]
        dp2 = dpre[t] if time_major else dpre_bt[:, t]
        cell_bwd_kernel[grid](
            pre[t], *_s3(pre[t]), bias, cells[t - 1] if t > 0 else cells[t], cells[t], *_s3(cells[t]),
            dout_t, *_s3(dout_t), dhr, dhr.stride(0), dhr.stride(1), dhr.stride(2), dhr.stride(3),
            dc, *_s3(dc), dpre[t], *_s3(dpre[t]), dp2, *_yx(dp2), db_acc,
            N, Ch, H * W, W, top, left, forget_bias,
            HAS_CPREV=t > 0, HAS_DHR=t < T - 1, HAS_DC=t < T - 1,
            PIX_MAJOR=layout == "nhwc", CDT=cdt, BLOCK=block, BLOCK_C=block_c, DBIAS=fused_db,
            STORE2=not time_major, TILES=tiles, PRE_BIAS=False, FAST_ACT=fast,
            RECOMPUTE_C=recompute_c, GRID_STRIDE=grid_stride, DHR_TAPS=taps, num_warps=NUM_WARPS_BWD,
        )
        if t > 0 and taps:  # its four tap shares from one GEMM, summed by the next step's cell kernel
            dhr = convlstm_gemm.recurrent_dgrad_taps(dpre[t], w_h)
        elif t > 0:  # gradient of the zero-bordered h_{t-1}: one transposed convolution, (B, Ch, HP, WP)
            dhr = torch.ops.aten.convolution_backward(
                dpre[t], hprev[t - 1], w_h, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1,
                [True, False, False])[0]
    # dxp of the input convolutions: one call for all steps, on the padded images (no crop, no border).
    dimages = torch.ops.aten.convolution_backward(
        dpre_images, images, w_x, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [True, False, False])[0]

    def weight_grads():  # d w_x and d w_h, each over all steps in one call (on a side stream: ops/wgrad_stream.py)
        dw_x = wgrad_stream.weight_grad(dpre_images, images, w_x, _PLAIN_CONV)
        if T == 1:
            return dw_x.contiguous(memory_format=fmt), torch.zeros_like(w_h, memory_format=fmt)
        dw_h = wgrad_stream.weight_grad(dpre[1:].reshape((T - 1) * B, 4 * Ch, H, W),
                                        hprev.reshape((T - 1) * B, Ch, HP, WP), w_h, _PLAIN_CONV)
        return dw_x.contiguous(memory_format=fmt), dw_h.contiguous(memory_format=fmt)

    dw_x, dw_h = wgrad_stream.run(weight_grads, (dpre_images, images, dpre_tb, hprev))
    # dbias sums B*T*H*W terms of both signs: a tree reduction (per tile in the kernel, then one atomic add per
    # tile; or torch.sum) in float32 (float64 for float64) keeps the cancellation error at the reference's level,
    # where the CPU convolution backward's running sum does not.
    db = (db_acc if fused_db else dpre_images.sum(dim=(0, 2, 3), dtype=acc)).to(bias.dtype)
    dxp = _steps(dimages.contiguous(memory_format=fmt), B, T, time_major)
    return dxp, dw_x, dw_h, db


@convlstm_train_backward.register_fake
def _(dout, xp, w_x, w_h, bias, pre, cells, hprev, forget_bias, layout, attn_g=None, attn_hl=None, attn_coef=None):
    fmt = _memory_format(layout)
    B, T = xp.shape[:2]
    images, time_major = _images(xp, fmt)
    dxp = _steps(torch.empty(images.shape, device=xp.device, dtype=xp.dtype, memory_format=fmt), B, T, time_major)
    return (dxp, torch.empty(w_x.shape, device=w_x.device, dtype=w_x.dtype, memory_format=fmt),
            torch.empty(w_h.shape, device=w_h.device, dtype=w_h.dtype, memory_format=fmt), bias.new_empty(bias.shape))


def _setup_context(ctx, inputs, output) -> None:
    _, pre, cells, hprev = output
    # pre, cells and hprev are outputs only because a custom op saves nothing else: no gradient flows into them.
    # Without these two calls autograd materialises a zero gradient for each of them before every backward (on
    # the H200, bf16, batch 128: fills of ~250 MB per step, level 1's (T, B, 4Ch, H, W) gates alone 147 MB).
    ctx.mark_non_differentiable(*pre, cells, hprev)
    save(ctx, inputs, pre, cells, hprev)


def save(ctx, inputs, pre, cells, hprev) -> None:
    """What ``_backward`` reads, in ``ctx``: the op's ``inputs`` and the forward's ``pre``, ``cells`` and ``hprev``
    (outputs of this op; intermediates of ``convlstm_in_xh``'s, which calls ``_backward`` too)."""
    xp, w_x, w_h, bias, forget_bias, layout = inputs
    ctx.save_for_backward(xp, w_x, w_h, bias, cells, hprev, *pre)
    ctx.set_materialize_grads(False)
    ctx.forget_bias, ctx.layout = forget_bias, layout
    ctx.side_wgrad = weight_cache.made_here(w_x, w_h)  # their gradients are joined by the cast cache's backward


def _backward(ctx, dout, _dpre, _dcells, _dhprev):
    xp, w_x, w_h, bias, cells, hprev, *pre = ctx.saved_tensors
    if dout is None:
        dout = xp.new_zeros(xp.shape[0], xp.shape[1], w_h.shape[0] // 4, *_unpadded(xp, w_h)[4:6])
    with wgrad_stream.allowed(ctx.side_wgrad):
        dxp, dw_x, dw_h, dbias = convlstm_train_backward(dout, xp, w_x, w_h, bias, pre, cells, hprev,
                                                         ctx.forget_bias, ctx.layout)
    return dxp, dw_x, dw_h, dbias, None, None


convlstm_train.register_autograd(_backward, setup_context=_setup_context)
