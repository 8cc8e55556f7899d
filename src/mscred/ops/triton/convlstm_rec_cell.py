"""One step of the per-step ConvLSTM forward as ONE Triton kernel: the recurrent convolution as a GEMM whose
epilogue is the cell update (``rec_cell_fwd_kernel``), instead of cuDNN's convolution and then ``cell_fwd_kernel``.

Why: in the graphed training step (results/step_profile_walk/, bf16, batch 128) levels 2-4 run, per step t >= 1,
cuDNN's recurrent convolution (~16-18 us a call: 4.3 GFLOP at levels 3-4, ~260 TFLOP/s, one short wave of
128 x 128 tiles) and then the cell kernel (5-9 us), which reads the convolution's bf16 gates back from memory. Here
the gates never leave the registers: a program owns BM pixels x BC hidden channels, accumulates the 4 BC gate
columns of those channels (all four gates of each channel, so the cell arithmetic needs nothing from another
program) over K = k*k taps x Ch, then adds the input convolution's gates and the bias and runs the cell update as
``cell_fwd_kernel`` does (same stores: pre, c_t, h_t into the output and into the next step's zero-bordered buffer).

The A operand of tap (dy, dx) is h_{t-1}'s zero-bordered buffer at rows (y + dy, x + dx): with channels-last
storage each pixel's K slice is one contiguous run of BK channels (a gathered row load, no im2col). The B operand
is the recurrent weight (4Ch, Ch, k, k) channels-last as stored, its gate column n = gate * Ch + channel read at
column position 4 * channel + gate of the tile, so that after the GEMM the tile's columns split into the four gates
by two ``tl.split``s.

Numerics: the recurrent gates are added in float32 (the float64 oracle path: float64) before the one rounding to
the stored dtype that the backward recomputes its activations from; the split path rounds cuDNN's output to bf16
first. So pre agrees with the split path to a bf16 rounding, and exactly in float64.

Used by ``convlstm._forward_steps`` for t >= 1 where ``runs`` says so (MSCRED_LSTM_REC_CELL): by default on CUDA
in training only (scoring ran slower with it in the one run that measured it, see ``runs``), at the default
model's levels 3-4, which train on the per-step path (levels 1-2 train on ``convlstm_concat``'s, and bf16
inference of levels 1-2 runs the resident kernel). Measured on the H200 (bf16, batch 128): the levels'
training forwards 137.7 -> 121.4 us and 115.6 -> 107.7 us (results/rec_cell_train/); the graphed training step
2.624 / 2.625 -> 2.602 / 2.603 ms in alternation (results/rec_cell_step/).

An earlier kernel of the same idea for inference only (af9527a, reverted; results/rec_cell/) gathered h_{t-1}
through masks and kept four gate accumulators: 1.43x per level at batch 128, but 0.98x on whole-model scoring,
where the per-window and resident kernels run. This one reads the training path's zero-bordered h buffers and
multiplies all four gates in one dot.

Its backward counterpart (the transposed recurrent convolution of dpre_{t+1} with the cell backward in the
epilogue, ee4e912) lost: levels 3-4's backward 0.57-0.77x, its epilogue at 255 registers with spills
(results/rec_cell_bwd/); removed.
"""
from __future__ import annotations

import os

import torch

from mscred.ops.triton.runtime import interpreting, tl, triton

# (BM, BC, BK, num_warps, num_stages) per hidden-channel count; others: DEFAULT_TILE. BM pixels x BC channels (4 BC
# gate columns) per program, BK channels of one tap per K step. The fastest of bench_rec_cell.py's sweep on the H200
# (results/rec_cell_train/, bf16, batch 128: the level's training forward 137.7 -> 121.4 us at level 3, 115.6 ->
# 107.7 us at level 4; 20 tiles each, most of them slower than the split path).
DEFAULT_TILE = (64, 32, 64, 4, 3)
TILES: dict[int, tuple[int, int, int, int, int]] = {128: (128, 64, 64, 8, 3), 256: (64, 64, 64, 8, 3)}
# Hidden-channel counts (levels) that take the kernel by default on CUDA: the default model's levels 3-4, the levels
# that train on the per-step path (levels 1-2 train on ``convlstm_concat``'s); MSCRED_LSTM_REC_CELL overrides.
DEFAULT_CHANNELS: frozenset[int] = frozenset({128, 256})


def _setting() -> str:
    return os.environ.get("MSCRED_LSTM_REC_CELL", "").strip()


def runs(dtype: torch.dtype, layout: str, ch: int, device: torch.device, training: bool = True) -> bool:
    """Whether a step t >= 1 of a level with ``ch`` hidden channels takes ``rec_cell_fwd_kernel``.

    Channels-last buffers and ch a multiple of 16 (the GEMM's K and N steps), and: on CUDA bf16 / fp16 (float32 would
    multiply in TF32 where cuDNN's float32 path is the reference's; not measured), by default the levels in
    DEFAULT_CHANNELS in ``training`` only -- graphed shared-segment scoring is slower with it: 338,668 against
    362,272 windows/s at every window, 314,657 against 330,001 at batch 1,024 (medians of 3 in alternation,
    results/rec_cell_scoring/), as the inference kernel of af9527a lost there; under the interpreter only when the
    setting asks (the tests).
    MSCRED_LSTM_REC_CELL: "0" off, "1" every eligible level and call (training and inference), or a comma-separated
    list of hidden-channel counts (A/B runs: "128,256"; training and inference too)."""
    if triton is None or layout != "nhwc" or ch % 16:
        return False
    setting = _setting()
    if setting == "0":
        return False
    if device.type == "cuda" and not interpreting() and dtype not in (torch.bfloat16, torch.float16):
        return False
    if setting == "1":
        return True
    if setting:
        try:
            return ch in {int(v) for v in setting.split(",")}
        except ValueError:
            raise ValueError(f"MSCRED_LSTM_REC_CELL={setting!r}: expected 0, 1 or hidden-channel counts such as "
                             "128,256") from None
    return training and device.type == "cuda" and not interpreting() and ch in DEFAULT_CHANNELS


def tile(ch: int) -> tuple[int, int, int, int, int]:
    """(BM, BC, BK, num_warps, num_stages) for ``ch`` hidden channels: TILES' entry or DEFAULT_TILE, or from
    MSCRED_REC_CELL_TILE, "BM/BC/BK/W/S" for every level or "CH:BM/BC/BK/W/S;CH:..." per hidden-channel count (the
    sweep's setting; ";" because the device scripts pass variables as comma-separated lists); BC and BK are cut to
    divide ch."""
    chosen = TILES.get(ch, DEFAULT_TILE)
    for entry in filter(None, os.environ.get("MSCRED_REC_CELL_TILE", "").split(";")):
        level, _, text = entry.rpartition(":")
        try:
            fields = tuple(int(v) for v in text.split("/"))
            if len(fields) != 5 or min(fields) < 1 or (level and int(level) < 1):
                raise ValueError
        except ValueError:
            raise ValueError(f"MSCRED_REC_CELL_TILE: an entry is [CH:]BM/BC/BK/WARPS/STAGES, got {entry!r}") from None
        if not level or int(level) == ch:
            chosen = fields
    bm, bc, bk, warps, stages = chosen
    while ch % bc:
        bc //= 2
    while ch % bk:
        bk //= 2
    if interpreting():  # the interpreter pays per program: larger pixel tiles, fewer programs
        bm = max(bm, 128)
    return bm, bc, bk, warps, stages


if triton is not None:
    from mscred.ops.triton.convlstm_kernels import _cell_update, _jit

    # As the cell kernels: the sizes unspecialised (one compile per level, not per batch), CH specialised.
    @_jit(do_not_specialize=["NPIX", "HW", "W", "H", "PAD_T", "PAD_L"])
    def rec_cell_fwd_kernel(
        hb_ptr, hb_sb, hb_sy, hb_sx,         # h_{t-1} zero-bordered (B, Ch, Hp, Wp), channels contiguous
        w_ptr, w_so, w_sy, w_sx,             # recurrent weight (4Ch, Ch, k, k), input channels contiguous
        gx_ptr, gx_sb, gx_sc, gx_sy, gx_sx,  # input-conv gates of this step (B, 4Ch, H, W); may be a crop
        bias_ptr,                            # (4Ch,)
        pre_ptr, pre_sb, pre_sc, pre_sp,     # out if STORE_PRE: gate pre-activations (B, 4Ch, H, W)
        cprev_ptr, c_ptr, c_sb, c_sc, c_sp,  # cell states of the previous / this step (B, Ch, H, W)
        h_ptr, h_sb, h_sc, h_sp,             # out: h_t into the output
        hp_ptr, hp_sb, hp_sc, hp_sy, hp_sx,  # out if WRITE_HP: h_t into the next step's zero-bordered buffer
        NPIX, CH, HW, W, H, PAD_T, PAD_L, forget_bias,
        KH: tl.constexpr, KW: tl.constexpr, WRITE_HP: tl.constexpr, STORE_PRE: tl.constexpr,
        STORE_C: tl.constexpr, HP_BORDER: tl.constexpr, CDT: tl.constexpr,
        BM: tl.constexpr, BC: tl.constexpr, BK: tl.constexpr, FAST_ACT: tl.constexpr = False,
    ):
        rows = tl.program_id(0) * BM + tl.arange(0, BM)
        rmask = rows < NPIX
        b = (rows // HW).to(tl.int64)
        p = rows % HW
        y = p // W
        x = p % W
        c0 = tl.program_id(1) * BC
        # Tile column j holds gate j % 4 of channel c0 + j // 4 (weight row gate * CH + channel).
        j = tl.arange(0, 4 * BC)
        n = (j % 4) * CH + c0 + j // 4
        kk = tl.arange(0, BK)
        a_rows = hb_ptr + b * hb_sb + y * hb_sy + x * hb_sx  # tap (0, 0) of each pixel: its top-left neighbour
        b_cols = w_ptr + n.to(tl.int64) * w_so
        acc = tl.zeros((BM, 4 * BC), dtype=CDT)
        steps_per_tap = CH // BK
        # One loop over every (tap, channel block), so that Triton pipelines all K steps as one sequence.
        for it in range(0, KH * KW * steps_per_tap):
            tap = it // steps_per_tap
            kc = (it % steps_per_tap) * BK
            dy = tap // KW
            dx = tap % KW
            a = tl.load(a_rows[:, None] + (dy * hb_sy + dx * hb_sx + kc) + kk[None, :], mask=rmask[:, None],
                        other=0.0)
            wt = tl.load(b_cols[None, :] + (dy * w_sy + dx * w_sx + kc) + kk[:, None])
            acc = tl.dot(a, wt, acc, out_dtype=CDT)
        # Columns (channel, a, b) with gate = 2a + b: split b, then a -> i (0), f (2) and g (1), o (3).
        even, odd = tl.split(tl.reshape(acc, (BM, BC, 2, 2)))
        ri, rf = tl.split(even)
        rg, ro = tl.split(odd)
        ch = c0 + tl.arange(0, BC)[None, :]
        bb = b[:, None]
        pp = p[:, None]
        mask = rmask[:, None] & (ch < CH)
        gx = gx_ptr + bb * gx_sb + ch * gx_sc + (pp // W) * gx_sy + (pp % W) * gx_sx
        gq = CH * gx_sc
        zi = tl.load(gx, mask=mask, other=0.0).to(CDT) + tl.load(bias_ptr + ch).to(CDT) + ri
        zg = tl.load(gx + gq, mask=mask, other=0.0).to(CDT) + tl.load(bias_ptr + CH + ch).to(CDT) + rg
        zf = tl.load(gx + 2 * gq, mask=mask, other=0.0).to(CDT) + tl.load(bias_ptr + 2 * CH + ch).to(CDT) + rf
        zo = tl.load(gx + 3 * gq, mask=mask, other=0.0).to(CDT) + tl.load(bias_ptr + 3 * CH + ch).to(CDT) + ro
        _cell_update(zi, zg, zf, zo, bb, ch, pp, mask, pre_ptr, pre_sb, pre_sc, pre_sp, cprev_ptr, c_ptr, c_sb, c_sc,
                     c_sp, h_ptr, h_sb, h_sc, h_sp, hp_ptr, hp_sb, hp_sc, hp_sy, hp_sx, CH, W, H, PAD_T, PAD_L,
                     forget_bias, True, WRITE_HP, STORE_PRE, STORE_C, HP_BORDER, CDT, FAST_ACT)


def step(hb: torch.Tensor, w_h: torch.Tensor, gxt: torch.Tensor, bias: torch.Tensor, pre_t: torch.Tensor,
         c_prev: torch.Tensor, c_t: torch.Tensor, out_t: torch.Tensor, hp: torch.Tensor, pads, forget_bias: float,
         write_hp: bool, store_pre: bool, store_c: bool, hp_border: int, cdt, fast: bool):
    """Step t >= 1 of ``convlstm._forward_steps`` in one launch: hb = h_{t-1}'s zero-bordered (B, Ch, Hp, Wp)
    buffer, w_h (4Ch, Ch, k, k), both channels-last; the other arguments as that loop hands ``cell_fwd_kernel``.
    Returns the launch's compiled kernel (its registers and spills for the benchmark)."""
    from mscred.ops.triton.convlstm import _s3, _yx

    B, Ch, H, W = out_t.shape
    k_h, k_w = w_h.shape[-2:]
    if hb.stride(1) != 1 or w_h.stride(1) != 1:
        raise ValueError("rec_cell_fwd_kernel reads channels-last h and weight buffers")
    bm, bc, bk, warps, stages = tile(Ch)
    grid = (triton.cdiv(B * H * W, bm), Ch // bc)
    return rec_cell_fwd_kernel[grid](
        hb, hb.stride(0), hb.stride(2), hb.stride(3), w_h, w_h.stride(0), w_h.stride(2), w_h.stride(3),
        gxt, *_yx(gxt), bias, pre_t, *_s3(pre_t), c_prev, c_t, *_s3(c_t), out_t, *_s3(out_t),
        hp, hp.stride(0), hp.stride(1), hp.stride(2), hp.stride(3),
        B * H * W, Ch, H * W, W, H, pads[0], pads[2], forget_bias,
        KH=k_h, KW=k_w, WRITE_HP=write_hp, STORE_PRE=store_pre, STORE_C=store_c, HP_BORDER=hp_border, CDT=cdt,
        BM=bm, BC=bc, BK=bk, FAST_ACT=fast, num_warps=warps, num_stages=stages,
    )
