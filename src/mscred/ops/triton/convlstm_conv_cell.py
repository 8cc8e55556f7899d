"""The training forward of the concatenated-gates ConvLSTM (``convlstm_concat``) in one kernel per step: the gate
convolution over [x_t, h_{t-1}] and the cell update in its epilogue, the operands brought in by the copy engine.

``convlstm_concat.forward`` runs per step cuDNN's convolution of xh_t (its gates, bf16, a new tensor) and then the
cell kernel, which reads those gates back: at level 1 (batch 128, 30 x 30, 32 hidden channels) 29.5 MB written and
read again per step, and two launches. Here one Triton kernel computes a tile of the gates with ``tl.dot`` and
finishes the cell update on it before anything leaves the SM; it still stores the gates (the backward reads them)
but never reads them back.

Why the copy engine: the per-step Triton fusion tried on 2026-12-01 (docs/kernel-experiments.md, "The recurrent
convolution inside the training cell kernels") gathered its operands through registers into shared memory and drew
11-21% of the DRAM bandwidth. Here every tap of the 2 x 2 convolution is ONE rectangular box of xh_t: xh_t is
zero-bordered at the bottom and right (TF's "same" padding of an even kernel: pads (0, 1, 0, 1)) and stored
channels-last, so, with its (B, Hp, Wp) positions flattened to rows of a (B * Hp * Wp, C + Ch) matrix, the output
pixel at bordered position q reads tap (dy, dx) at row q + dy * Wp + dx. A tile of BLOCK_M consecutive positions is
therefore, per tap, a (BLOCK_M, C + Ch) box at a shifted row -- a TMA load (``TensorDescriptor``; rows past the end
read zeros) -- and the gate weight a (taps * (C + Ch), 4Ch) matrix, each gate's columns a box of their own. The
positions on the border (x = W or y = H) are computed too (6.8% more rows at level 1) and masked at the stores;
they are exactly the positions of h_t's zero border in xh_{t+1}, so the kernel writes that border as well.

Every tile's arithmetic equals the cell kernel's (``convlstm_kernels.cell_fwd_kernel`` with STORE_PRE=False): the
gates are rounded to the storage dtype, stored, and the activations taken of (stored gates + bias) rounded again,
so that forward and backward differentiate the same function. Runs where ``eligible`` says so: CUDA on sm_90 or
newer, bf16 / fp16, pads (0, 1, 0, 1); the CPU interpreter runs it in any float dtype (CI checks it against float64).
``MSCRED_LSTM_CONV_CELL=1`` switches it on (off by default until measured on the H200).
"""
from __future__ import annotations

import torch

from mscred.ops.triton.runtime import interpreting, sm_count, switched_on, tile_override, tl, triton

try:  # TMA descriptors built on the host (Triton >= 3.4)
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:  # pragma: no cover
    TensorDescriptor = None

# Rows (bordered positions) per program and warps: BLOCK_M x 4Ch float32 accumulators spread over the warps (level 1:
# 128 x 128 over 8 warps, 64 a thread). MSCRED_LSTM_CONV_CELL_TILE="BLOCK_M/warps/stages/programs-per-SM"
# overrides (A/B runs).
# Persistent programs (PROGRAMS_PER_SM > 0) loop over tiles with the loads of the next in flight (``FLATTEN``);
# MSCRED_LSTM_CONV_CELL_RESIDENT=1 keeps the weight in shared memory, MSCRED_LSTM_CONV_CELL_WS=1 warp-specialises
# the loop instead of flattening it (A/B runs; both only for persistent programs).
BLOCK_M, NUM_WARPS, NUM_STAGES, PROGRAMS_PER_SM = 128, 8, 2, 0
MAX_GATE_COLUMNS = 128  # 4Ch: the accumulators' registers; level 2 (256) would need another tiling


def eligible(xh: torch.Tensor, pads, kernel: tuple[int, int], ch: int) -> bool:
    """Whether the step kernel runs for xh (T, B, C + Ch, Hp, Wp) of a level with ``ch`` hidden channels: switched
    on, a Triton with TMA descriptors, the model's 2 x 2 kernel with pads (0, 1, 0, 1), Ch and C + Ch powers of 2
    of at least 16 (the boxes' and the dots' shapes), 4Ch at most MAX_GATE_COLUMNS, and CUDA sm_90+ in bf16 / fp16
    -- or the CPU interpreter."""
    if not switched_on("MSCRED_LSTM_CONV_CELL") or triton is None or TensorDescriptor is None:
        return False
    if tuple(pads) != (0, 1, 0, 1) or tuple(kernel) != (2, 2) or 4 * ch > MAX_GATE_COLUMNS:
        return False
    if not all(n >= 16 and n & (n - 1) == 0 for n in (ch, xh.shape[2])):
        return False
    if xh.device.type == "cpu":
        return interpreting()
    return (xh.is_cuda and xh.dtype in (torch.bfloat16, torch.float16)
            and torch.cuda.get_device_capability(xh.device)[0] >= 9)


def gate_matrix(w: torch.Tensor) -> torch.Tensor:
    """The gate weight (4Ch, C + Ch, kh, kw) as the kernel's (kh * kw * (C + Ch), 4Ch) matrix: row
    (dy * kw + dx) * (C + Ch) + input channel, column = output gate channel."""
    return w.permute(2, 3, 1, 0).reshape(-1, w.shape[0]).contiguous()


def _rows(buf: torch.Tensor) -> torch.Tensor:
    """A channels-last (B, K, Hp, Wp) image batch as its (B * Hp * Wp, K) matrix of positions (a view)."""
    B, K, HP, WP = buf.shape
    return buf.permute(0, 2, 3, 1).reshape(B * HP * WP, K)


def _tile() -> tuple[int, int, int, int]:
    """(BLOCK_M, warps, stages, programs per SM: 0 one program a tile) of the step kernel."""
    block_m, warps, stages, per_sm = tile_override(
        "MSCRED_LSTM_CONV_CELL_TILE", (BLOCK_M, NUM_WARPS, NUM_STAGES, PROGRAMS_PER_SM),
        ("BLOCK_M", "warps", "stages", "programs-per-SM"))
    return (32 if interpreting() else block_m), warps, stages, per_sm


def step(xh_t: torch.Tensor, w_rows: torch.Tensor, bias: torch.Tensor, gates: torch.Tensor, c_prev, c_t,
         h_out: torch.Tensor, hp_next, forget_bias: float, cdt, fast: bool) -> None:
    """One step: gates (B, 4Ch, H, W) channels-last <- the convolution of xh_t (B, C + Ch, Hp, Wp) channels-last with
    ``w_rows`` (``gate_matrix``), without the bias; c_t (B, Ch, H, W) and h_out (B, Ch, H, W), both with pixel-major
    channels, from them, the bias and c_prev (None: the first step, c = 0); h_t into hp_next's h channels (the
    next step's xh, (B, C + Ch, Hp, Wp), border included) unless hp_next is None."""
    B, KC, HP, WP = xh_t.shape
    CH = gates.shape[1] // 4
    H, W = gates.shape[2:]
    block_m, warps, stages, per_sm = _tile()
    resident, ws = switched_on("MSCRED_LSTM_CONV_CELL_RESIDENT"), switched_on("MSCRED_LSTM_CONV_CELL_WS")
    rows = _rows(xh_t)
    x_desc = TensorDescriptor.from_tensor(rows, [block_m, KC])
    w_desc = TensorDescriptor.from_tensor(w_rows, [KC, CH])
    hp = rows if hp_next is None else _rows(hp_next)[:, KC - CH:]
    tiles = triton.cdiv(rows.shape[0], block_m)
    if per_sm <= 0:
        programs = tiles
    else:  # (the interpreter has no SMs: per_sm programs, so that the tests run the loop)
        programs = min(tiles, per_sm * (1 if interpreting() else sm_count(xh_t.device)))
    _conv_cell_kernel[(programs,)](
        x_desc, w_desc, bias, gates, c_t if c_prev is None else c_prev, c_t, h_out, h_out.stride(0), hp,
        rows.shape[0], HP * WP, WP, H, W, KC, forget_bias,
        CH=CH, KC=KC, TAPS_W=2, TAPS=4, HAS_CPREV=c_prev is not None, WRITE_HP=hp_next is not None, CDT=cdt,
        FAST_ACT=fast, BLOCK_M=block_m, FLATTEN=per_sm > 0 and not ws, RESIDENT_W=per_sm > 0 and resident,
        WARP_SPECIALIZE=per_sm > 0 and ws, num_warps=warps, num_stages=stages,
    )


if triton is not None:
    from mscred.ops.triton.convlstm_kernels import _act_sigmoid, _act_tanh

    @triton.jit
    def _gate_epilogue(acc, bias_ptr, gate: tl.constexpr, z_ptr, pix, ch, mask, CH: tl.constexpr, CDT: tl.constexpr):
        """One gate's tile: stored rounded (no bias), returned as (stored + bias) rounded, in CDT (the cell
        kernel's function of the stored gates)."""
        z = acc.to(z_ptr.dtype.element_ty)
        tl.store(z_ptr + pix[:, None] * (4 * CH) + gate * CH + ch[None, :], z, mask=mask)
        zb = z.to(CDT) + tl.load(bias_ptr + gate * CH + ch).to(CDT)[None, :]
        return zb.to(z_ptr.dtype.element_ty).to(CDT)

    @triton.jit
    def _tap_weights(w_desc, tap, KC: tl.constexpr, CH: tl.constexpr):
        """The four gates' (KC, CH) weight boxes of one tap."""
        k0 = tap * KC
        return (w_desc.load([k0, 0]), w_desc.load([k0, CH]), w_desc.load([k0, 2 * CH]), w_desc.load([k0, 3 * CH]))

    @triton.jit
    def _tap_dots(a, wi, wg, wf, wo, acc_i, acc_g, acc_f, acc_o):
        return tl.dot(a, wi, acc_i), tl.dot(a, wg, acc_g), tl.dot(a, wf, acc_f), tl.dot(a, wo, acc_o)

    @triton.jit
    def _cell_epilogue(acc_i, acc_g, acc_f, acc_o, q0, bias_ptr, z_ptr, cprev_ptr, c_ptr, h_ptr, h_sb, hp_ptr,
                       M, HPWP, WP, H, W, KC_STRIDE, forget_bias, CH: tl.constexpr, HAS_CPREV: tl.constexpr,
                       WRITE_HP: tl.constexpr, CDT: tl.constexpr, FAST_ACT: tl.constexpr, BLOCK_M: tl.constexpr):
        """The cell update of one tile's gates and its stores (the arithmetic of ``cell_fwd_kernel``)."""
        # bordered position q = b * Hp * Wp + y * Wp + x; its output pixel (y, x) exists where y < H and x < W
        q = q0 + tl.arange(0, BLOCK_M)
        b = q // HPWP
        y = (q % HPWP) // WP
        x = q % WP
        inside = (q < M) & (y < H) & (x < W)
        pix = (b * H + y) * W + x  # unbordered pixel index of (B, H, W)
        ch = tl.arange(0, CH)
        mask = inside[:, None] & (ch < CH)[None, :]
        zi = _gate_epilogue(acc_i, bias_ptr, 0, z_ptr, pix, ch, mask, CH, CDT)
        zg = _gate_epilogue(acc_g, bias_ptr, 1, z_ptr, pix, ch, mask, CH, CDT)
        zf = _gate_epilogue(acc_f, bias_ptr, 2, z_ptr, pix, ch, mask, CH, CDT)
        zo = _gate_epilogue(acc_o, bias_ptr, 3, z_ptr, pix, ch, mask, CH, CDT)
        c = _act_sigmoid(zi, FAST_ACT) * _act_tanh(zg, FAST_ACT)
        cell = pix[:, None] * CH + ch[None, :]
        if HAS_CPREV:
            c += _act_sigmoid(zf + forget_bias, FAST_ACT) * tl.load(cprev_ptr + cell, mask=mask, other=0.0).to(CDT)
        tl.store(c_ptr + cell, c.to(c_ptr.dtype.element_ty), mask=mask)
        h = (_act_sigmoid(zo, FAST_ACT) * _act_tanh(c, FAST_ACT)).to(h_ptr.dtype.element_ty)
        tl.store(h_ptr + b[:, None] * h_sb + ((y * W + x) * CH)[:, None] + ch[None, :], h, mask=mask)
        if WRITE_HP:  # h_t beside x_{t+1}, zeros on the border positions (the same rows of the next xh)
            row = (q < M)[:, None] & (ch < CH)[None, :]
            tl.store(hp_ptr + q[:, None] * KC_STRIDE + ch[None, :], tl.where(mask, h, 0.0).to(h.dtype), mask=row)

    @triton.jit(do_not_specialize=["M", "HPWP", "WP", "H", "W"])
    def _conv_cell_kernel(x_desc, w_desc, bias_ptr, z_ptr, cprev_ptr, c_ptr, h_ptr, h_sb, hp_ptr,
                          M, HPWP, WP, H, W, KC_STRIDE, forget_bias,
                          CH: tl.constexpr, KC: tl.constexpr, TAPS_W: tl.constexpr, TAPS: tl.constexpr,
                          HAS_CPREV: tl.constexpr, WRITE_HP: tl.constexpr, CDT: tl.constexpr,
                          FAST_ACT: tl.constexpr, BLOCK_M: tl.constexpr, FLATTEN: tl.constexpr,
                          RESIDENT_W: tl.constexpr, WARP_SPECIALIZE: tl.constexpr):
        """Tiles of BLOCK_M bordered positions of xh_t's rows (module docstring), tile i, i + programs, ...: one a
        program when the grid covers them all, else persistent: FLATTEN pipelines the tile and tap loops as one
        (the next tile's loads in flight during this one's epilogue), RESIDENT_W loads the weight (4 taps x 4
        gates) into shared memory once a program instead of from L2 with every tile (as much traffic as the
        tile's own four boxes), WARP_SPECIALIZE lets Triton give the loads and the dots warps of their own."""
        tiles = tl.cdiv(M, BLOCK_M)
        if RESIDENT_W:  # the weight loaded once a program (2 x 2 taps only)
            w0i, w0g, w0f, w0o = _tap_weights(w_desc, 0, KC, CH)
            w1i, w1g, w1f, w1o = _tap_weights(w_desc, 1, KC, CH)
            w2i, w2g, w2f, w2o = _tap_weights(w_desc, 2, KC, CH)
            w3i, w3g, w3f, w3o = _tap_weights(w_desc, 3, KC, CH)
        for tile in tl.range(tl.program_id(0), tiles, tl.num_programs(0), flatten=FLATTEN,
                             warp_specialize=WARP_SPECIALIZE):
            q0 = tile * BLOCK_M
            acc_i = tl.zeros([BLOCK_M, CH], dtype=CDT)
            acc_g = tl.zeros([BLOCK_M, CH], dtype=CDT)
            acc_f = tl.zeros([BLOCK_M, CH], dtype=CDT)
            acc_o = tl.zeros([BLOCK_M, CH], dtype=CDT)
            if RESIDENT_W:
                a = x_desc.load([q0, 0])
                acc_i, acc_g, acc_f, acc_o = _tap_dots(a, w0i, w0g, w0f, w0o, acc_i, acc_g, acc_f, acc_o)
                a = x_desc.load([q0 + 1, 0])
                acc_i, acc_g, acc_f, acc_o = _tap_dots(a, w1i, w1g, w1f, w1o, acc_i, acc_g, acc_f, acc_o)
                a = x_desc.load([q0 + WP, 0])
                acc_i, acc_g, acc_f, acc_o = _tap_dots(a, w2i, w2g, w2f, w2o, acc_i, acc_g, acc_f, acc_o)
                a = x_desc.load([q0 + WP + 1, 0])
                acc_i, acc_g, acc_f, acc_o = _tap_dots(a, w3i, w3g, w3f, w3o, acc_i, acc_g, acc_f, acc_o)
            else:
                for tap in range(TAPS):
                    a = x_desc.load([q0 + (tap // TAPS_W) * WP + tap % TAPS_W, 0])  # (BLOCK_M, KC): past M: 0
                    wi, wg, wf, wo = _tap_weights(w_desc, tap, KC, CH)
                    acc_i, acc_g, acc_f, acc_o = _tap_dots(a, wi, wg, wf, wo, acc_i, acc_g, acc_f, acc_o)
            _cell_epilogue(acc_i, acc_g, acc_f, acc_o, q0, bias_ptr, z_ptr, cprev_ptr, c_ptr, h_ptr, h_sb, hp_ptr,
                           M, HPWP, WP, H, W, KC_STRIDE, forget_bias, CH, HAS_CPREV, WRITE_HP, CDT, FAST_ACT,
                           BLOCK_M)
