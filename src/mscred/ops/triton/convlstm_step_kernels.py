"""The Triton kernels of the training ConvLSTM's per-step GEMM path (``convlstm_step.py`` launches them).

``step_fwd_kernel``: one step of the whole batch, a tile of pixels x a block of hidden channels per program: the
recurrent convolution over the zero-bordered h_{t-1} as a GEMM (one dot per kernel tap, the taps' h rows gathered
by pointer), added to the input gates and the bias in the accumulator, then ``cell_fwd_kernel``'s update; it
stores what that kernel stores for training (pre-activations, c_t, h_t into the output and into the next step's
zero-bordered buffer). ``step_bwd_kernel``: the recurrent data gradient of step t + 1 (the transposed convolution
of its gate gradients, one dot per tap) added to dh_t, then ``cell_bwd_kernel``'s gradient.

The per-step path they replace runs a cuDNN convolution and a cell kernel per step each way; the recurrent gates
(forward) and the recurrent gradient of h (backward) then go through HBM between the two. Here they stay in
registers: per level-1 step the 128-channel gate tensor is neither written nor read back (about 59 MB each way).
"""
from __future__ import annotations

from mscred.ops.triton.runtime import tl, triton

if triton is not None:
    from mscred.ops.triton.convlstm_kernels import _jit, _sigmoid, _tanh

    # M (= B*H*W pixels), HW and W change with every level and batch: no specialisation on them (see
    # convlstm_kernels._SIZES); CH, BC and KS are constexprs, strides keep Triton's (== 1, % 16) variants.
    _SIZES = ["M", "HW", "H", "W", "PAD_T", "PAD_L"]

    @triton.jit
    def _pixels(M, HW, W, BLOCK_M: tl.constexpr):
        """This program's BLOCK_M pixels of the B*H*W grid: (ok, batch (int64), pixel, row, column), each (BLOCK_M,)."""
        m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
        p = m % HW
        y = p // W
        return m < M, (m // HW).to(tl.int64), p, y, p - y * W

    @_jit(do_not_specialize=_SIZES)
    def step_fwd_kernel(
        gx_ptr, gx_sb, gx_sc, gx_sy, gx_sx,    # input-conv gates of this step (B, 4Ch, H, W)
        bias_ptr,                              # (4Ch,) gate bias
        hp_ptr, hp_sb, hp_sc, hp_sy, hp_sx,    # h_{t-1} zero-bordered (B, Ch, Hp, Wp); read if HAS_REC
        w_ptr, w_sq, w_sc, w_sy, w_sx,         # recurrent weight (4Ch, Ch, KS, KS)
        pre_ptr, pre_sb, pre_sc, pre_sp,       # out: gate pre-activations (B, 4Ch, H, W)
        cprev_ptr, c_ptr, c_sb, c_sc, c_sp,    # cell states of the previous (read if HAS_REC) / this step
        h_ptr, h_sb, h_sc, h_sp,               # out: h_t into the output
        hn_ptr, hn_sb, hn_sc, hn_sy, hn_sx,    # out if WRITE_HP: h_t into the next step's zero-bordered buffer
        M, HW, W, PAD_T, PAD_L, forget_bias,
        CH: tl.constexpr, BC: tl.constexpr, KS: tl.constexpr, HAS_REC: tl.constexpr, WRITE_HP: tl.constexpr,
        PREC: tl.constexpr, BLOCK_M: tl.constexpr,
    ):
        ok, b, p, y, x = _pixels(M, HW, W, BLOCK_M)
        mask = ok[:, None]
        # One accumulator per gate (i, g, f, o), each (BLOCK_M, BC): the cell update then needs no split of a
        # (BLOCK_M, 4BC) tile (a layout change through shared memory), and every tile shares one layout.
        co = (tl.program_id(1) * BC + tl.arange(0, BC))[None, :]
        gx = gx_ptr + (b * gx_sb + y * gx_sy + x * gx_sx)[:, None] + co * gx_sc
        gq = CH * gx_sc
        zi = tl.load(gx, mask=mask, other=0.0).to(tl.float32) + tl.load(bias_ptr + co).to(tl.float32)
        zg = tl.load(gx + gq, mask=mask, other=0.0).to(tl.float32) + tl.load(bias_ptr + CH + co).to(tl.float32)
        zf = tl.load(gx + 2 * gq, mask=mask, other=0.0).to(tl.float32) + tl.load(bias_ptr + 2 * CH + co).to(
            tl.float32)
        zo = tl.load(gx + 3 * gq, mask=mask, other=0.0).to(tl.float32) + tl.load(bias_ptr + 3 * CH + co).to(
            tl.float32)
        if HAS_REC:
            # Padded coordinates: tap (ky, kx) of output pixel (y, x) reads h_{t-1} at (y + ky, x + kx) of the
            # zero-bordered buffer, so no tap needs a mask beyond the tile's tail.
            ci = tl.arange(0, CH)
            rows = hp_ptr + (b * hp_sb + y * hp_sy + x * hp_sx)[:, None] + ci[None, :] * hp_sc
            wq = CH * w_sq
            for tap in range(KS * KS):
                a = tl.load(rows + (tap // KS) * hp_sy + (tap % KS) * hp_sx, mask=mask, other=0.0)
                wt = w_ptr + ci[:, None] * w_sc + co * w_sq + (tap // KS) * w_sy + (tap % KS) * w_sx
                zi = tl.dot(a, tl.load(wt), zi, input_precision=PREC)
                zg = tl.dot(a, tl.load(wt + wq), zg, input_precision=PREC)
                zf = tl.dot(a, tl.load(wt + 2 * wq), zf, input_precision=PREC)
                zo = tl.dot(a, tl.load(wt + 3 * wq), zo, input_precision=PREC)
        # The backward recomputes the activations from the stored (bf16) pre-activations: use those values here.
        out_ty = h_ptr.dtype.element_ty
        zi = zi.to(out_ty)
        zg = zg.to(out_ty)
        zf = zf.to(out_ty)
        zo = zo.to(out_ty)
        pre = pre_ptr + (b * pre_sb + p * pre_sp)[:, None] + co * pre_sc
        pq = CH * pre_sc
        tl.store(pre, zi, mask=mask)
        tl.store(pre + pq, zg, mask=mask)
        tl.store(pre + 2 * pq, zf, mask=mask)
        tl.store(pre + 3 * pq, zo, mask=mask)
        zi = zi.to(tl.float32)
        zg = zg.to(tl.float32)
        zf = zf.to(tl.float32)
        zo = zo.to(tl.float32)
        cell = (b * c_sb + p * c_sp)[:, None] + co * c_sc
        c = _sigmoid(zi) * _tanh(zg)
        if HAS_REC:  # from the second step on (c_{-1} = 0 and h_{-1} = 0 together)
            c += _sigmoid(zf + forget_bias) * tl.load(cprev_ptr + cell, mask=mask, other=0.0).to(tl.float32)
        tl.store(c_ptr + cell, c.to(c_ptr.dtype.element_ty), mask=mask)
        h = (_sigmoid(zo) * _tanh(c)).to(out_ty)
        tl.store(h_ptr + (b * h_sb + p * h_sp)[:, None] + co * h_sc, h, mask=mask)
        if WRITE_HP:
            tl.store(hn_ptr + (b * hn_sb + (y + PAD_T) * hn_sy + (x + PAD_L) * hn_sx)[:, None] + co * hn_sc, h,
                     mask=mask)

    @_jit(do_not_specialize=_SIZES)
    def step_bwd_kernel(
        pre_ptr, pre_sb, pre_sc, pre_sp,       # gate pre-activations of this step (B, 4Ch, H, W)
        cprev_ptr, c_ptr, c_sb, c_sc, c_sp,    # cell states of the previous (read if HAS_CPREV) / this step
        dh_ptr, dh_sb, dh_sc, dh_sp,           # gradient of the output h_t
        dn_ptr, dn_sb, dn_sc, dn_sy, dn_sx,    # gate gradients of step t + 1 (B, 4Ch, H, W); read if HAS_NEXT
        w_ptr, w_sq, w_sc, w_sy, w_sx,         # recurrent weight (4Ch, Ch, KS, KS)
        dc_ptr, dc_sb, dc_sc, dc_sp,           # in: dc_t from step t + 1 (if HAS_NEXT); out: dc_{t-1}
        dpre_ptr, dp_sb, dp_sc, dp_sp,         # out: gate gradients of this step
        db_ptr,                                # in/out: (4Ch,) float32 bias gradient, accumulated
        M, HW, H, W, PAD_T, PAD_L, forget_bias,
        CH: tl.constexpr, BC: tl.constexpr, KS: tl.constexpr, HAS_CPREV: tl.constexpr, HAS_NEXT: tl.constexpr,
        PREC: tl.constexpr, BLOCK_M: tl.constexpr, BK: tl.constexpr,
    ):
        ok, b, p, y, x = _pixels(M, HW, W, BLOCK_M)
        mask = ok[:, None]
        cols = tl.program_id(1) * BC + tl.arange(0, BC)
        co = cols[None, :]
        dh = tl.load(dh_ptr + (b * dh_sb + p * dh_sp)[:, None] + co * dh_sc, mask=mask, other=0.0).to(tl.float32)
        if HAS_NEXT:
            # h_t (unpadded (y, x)) fed step t + 1's gates at (y + PAD_T - ky, x + PAD_L - kx) through tap
            # (ky, kx): the adjoint gathers those gate gradients, zero outside the map.
            # One GEMM, K = KS*KS taps x 4Ch gate channels, walked in BK-channel chunks (small live tiles).
            kc = tl.arange(0, BK)
            for it in range(KS * KS * (4 * CH // BK)):
                tap = it // (4 * CH // BK)
                k0 = (it % (4 * CH // BK)) * BK
                sy = y + PAD_T - tap // KS
                sx = x + PAD_L - tap % KS
                inside = ok & (sy >= 0) & (sy < H) & (sx >= 0) & (sx < W)
                a = tl.load(dn_ptr + (b * dn_sb + sy * dn_sy + sx * dn_sx)[:, None] + (k0 + kc)[None, :] * dn_sc,
                            mask=inside[:, None], other=0.0)
                wt = tl.load(w_ptr + (k0 + kc)[:, None] * w_sq + co * w_sc + (tap // KS) * w_sy + (tap % KS) * w_sx)
                dh = tl.dot(a, wt, dh, input_precision=PREC)
        pre = pre_ptr + (b * pre_sb + p * pre_sp)[:, None] + co * pre_sc
        pq = CH * pre_sc
        i = _sigmoid(tl.load(pre, mask=mask, other=0.0).to(tl.float32))
        g = _tanh(tl.load(pre + pq, mask=mask, other=0.0).to(tl.float32))
        f = _sigmoid(tl.load(pre + 2 * pq, mask=mask, other=0.0).to(tl.float32) + forget_bias)
        o = _sigmoid(tl.load(pre + 3 * pq, mask=mask, other=0.0).to(tl.float32))
        cell = (b * c_sb + p * c_sp)[:, None] + co * c_sc
        tc = _tanh(tl.load(c_ptr + cell, mask=mask, other=0.0).to(tl.float32))
        # cell_bwd_kernel's arithmetic: dc collects the direct path and the one through c_{t+1}.
        dc = dh * o * (1.0 - tc * tc)
        dcp = dc_ptr + (b * dc_sb + p * dc_sp)[:, None] + co * dc_sc
        if HAS_NEXT:
            dc += tl.load(dcp, mask=mask, other=0.0).to(tl.float32)
        d_o = dh * tc * o * (1.0 - o)
        d_i = dc * g * i * (1.0 - i)
        d_g = dc * i * (1.0 - g * g)
        if HAS_CPREV:
            d_f = dc * tl.load(cprev_ptr + cell, mask=mask, other=0.0).to(tl.float32) * f * (1.0 - f)
        else:
            d_f = tl.zeros_like(dc)  # c_{-1} = 0: the forget gate has no effect at step 0
        tl.store(dcp, (dc * f).to(dc_ptr.dtype.element_ty), mask=mask)
        # The bias gradient: per program a column sum of the tile, then one atomic add per gate and channel.
        zero = tl.zeros_like(dc)
        tl.atomic_add(db_ptr + cols, tl.sum(tl.where(mask, d_i, zero), axis=0))
        tl.atomic_add(db_ptr + CH + cols, tl.sum(tl.where(mask, d_g, zero), axis=0))
        tl.atomic_add(db_ptr + 2 * CH + cols, tl.sum(tl.where(mask, d_f, zero), axis=0))
        tl.atomic_add(db_ptr + 3 * CH + cols, tl.sum(tl.where(mask, d_o, zero), axis=0))
        ty = dpre_ptr.dtype.element_ty
        dp = dpre_ptr + (b * dp_sb + p * dp_sp)[:, None] + co * dp_sc
        dq = CH * dp_sc
        tl.store(dp, d_i.to(ty), mask=mask)
        tl.store(dp + dq, d_g.to(ty), mask=mask)
        tl.store(dp + 2 * dq, d_f.to(ty), mask=mask)
        tl.store(dp + 3 * dq, d_o.to(ty), mask=mask)
