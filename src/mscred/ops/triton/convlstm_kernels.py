"""The Triton kernels of the fused ConvLSTM (``convlstm.py`` launches them; see its docstring for the whole op).

``cell_fwd_kernel``: one step's gate activations, cell and hidden state from the gate pre-activations (input gates
plus, from the second step, the recurrent convolution's), with the bias added here; it writes h to the output and
to the zero-bordered buffer the next step's convolution reads, and, when autograd needs them, c and the
pre-activations. ``cell_bwd_kernel``: the gradient of the gate pre-activations and of the previous cell state from
dh and dc, with the bias gradient summed per tile (atomic adds).
"""
from __future__ import annotations

from mscred.ops.triton.runtime import tl, triton

# ----------------------------------------------------------------------------------------------------------------
# Triton kernels. One program handles BLOCK elements of one step's logical (B, Ch, H, W) grid: for channels-last
# buffers (PIX_MAJOR) a 2-D tile of BLOCK / BLOCK_C pixels x BLOCK_C channels, channels contiguous in memory (vector
# loads; batch and pixel are computed once per row, not per element); for NCHW, BLOCK consecutive elements walked
# pixel-fastest. Either way the big gate reads coalesce.
# forget_bias is a Python float argument, which a compiled kernel receives as float32: exact for the default 1.0
# (and any value with at most 24 significant bits), so the float64 oracle path stays exact there; the temporal
# attention once lost float64 accuracy this way with 1/T (results/gpu_full_suite/).
# Every tensor is addressed by (batch, channel, pixel) strides, pixel = y * W + x (valid for NCHW and channels-last
# alike), so slices such as gx[:, t] or out[:, t] are read and written in place; the zero-bordered buffers take
# separate row/column strides.
# ----------------------------------------------------------------------------------------------------------------
if triton is not None:

    def _jit(**options):
        """triton.jit with the specialisation options this Triton version knows (older ones lack some)."""
        import inspect

        known = inspect.signature(triton.jit).parameters
        return triton.jit(**{k: v for k, v in options.items() if k in known})

    # Sizes differ per level and batch; specialising on them (== 1, divisible by 16) would compile a new kernel
    # for nearly every shape. CH is the exception: the gate blocks lie CH * channel-stride apart, and knowing that
    # CH is a multiple of 16 (every MSCRED level: 32..256) is what lets the g, f, o gates be read with vector
    # loads too. Strides keep their specialisations (== 1: which accesses are contiguous; divisible by 16: which
    # are aligned), at most two variants each.
    _SIZES = ["N", "HW", "W", "PAD_T", "PAD_L", "H"]

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
    def _tanh_sfu(z):
        """tanh on the special-function unit (PTX tanh.approx.f32, one MUFU.TANH on sm_75 and later), relative error
        about 2^-11: for gates stored in bf16 / fp16, whose rounding (2^-9 / 2^-12 relative) the activations see
        anyway. The exact forms take ~6 instructions per exp and per division (range checks, scaling); the cell
        kernels' five activations per element were ~60 of their ~160 instructions (sm_90 SASS of the backward,
        benchmarks/cell_kernel_sass.py)."""
        return tl.inline_asm_elementwise("tanh.approx.f32 $0, $1;", "=f,f", [z], dtype=tl.float32, is_pure=True,
                                         pack=1)

    @triton.jit
    def _act_sigmoid(z, FAST: tl.constexpr):
        """sigmoid(z); with FAST (float32 compute of bf16 / fp16 gates, CUDA only) as 0.5 tanh(z / 2) + 0.5 on the
        SFU."""
        if FAST:
            s = 0.5 * _tanh_sfu(0.5 * z) + 0.5
        else:
            s = _sigmoid(z)
        return s

    @triton.jit
    def _act_tanh(z, FAST: tl.constexpr):
        """tanh(z); with FAST on the SFU (``_tanh_sfu``)."""
        if FAST:
            s = _tanh_sfu(z)
        else:
            s = _tanh(z)
        return s

    @triton.jit
    def _indices_1d(N, CH, HW, BLOCK: tl.constexpr):
        """NCHW order: BLOCK consecutive elements, pixel fastest. (mask, batch, channel, pixel), each (BLOCK,)."""
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < N
        chw = CH * HW
        b = (offs // chw).to(tl.int64)
        r = offs % chw
        return mask, b, r // HW, r % HW

    @triton.jit
    def _indices_2d(N, CH, HW, BLOCK: tl.constexpr, BLOCK_C: tl.constexpr, tile):
        """Channels-last order: rows = BLOCK // BLOCK_C of the B*HW pixels (row tile ``tile``), columns = BLOCK_C
        channels (grid axis 1). mask (R, BLOCK_C); batch, pixel (R, 1); channel (1, BLOCK_C)."""
        q = tile * (BLOCK // BLOCK_C) + tl.arange(0, BLOCK // BLOCK_C)
        ch = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
        mask = (q < N // CH)[:, None] & (ch < CH)[None, :]
        return mask, (q // HW).to(tl.int64)[:, None], ch[None, :], (q % HW)[:, None]

    @triton.jit
    def _store_gates(ptr, gate_stride, zi, zg, zf, zo, mask):
        """The four gate tiles i, g, f, o into their blocks ``gate_stride`` elements apart (CH times the channel
        stride), each cast to ``ptr``'s element type."""
        ty = ptr.dtype.element_ty
        tl.store(ptr, zi.to(ty), mask=mask)
        tl.store(ptr + gate_stride, zg.to(ty), mask=mask)
        tl.store(ptr + 2 * gate_stride, zf.to(ty), mask=mask)
        tl.store(ptr + 3 * gate_stride, zo.to(ty), mask=mask)

    @triton.jit
    def _zero_border_around(ptr, p, mask, H, W, sy, sx, like, SIDES: tl.constexpr):
        """Zeros into the border cells next to this tile's edge pixels (``ptr`` at each pixel's interior cell of a
        zero-bordered image, row / column strides sy, sx). SIDES: the bordered sides, bits 1 top, 2 bottom, 4 left,
        8 right, each one cell wide: every border cell then has exactly one edge pixel next to it in its
        direction (corner cells diagonally), which writes it -- the border is written with the interior, no fill
        kernels, and only the stores of the sides that exist are compiled (k = 2: bottom, right, their corner)."""
        y = p // W
        x = p % W
        z = tl.zeros_like(like)
        T: tl.constexpr = (SIDES & 1) != 0
        B: tl.constexpr = (SIDES & 2) != 0
        L: tl.constexpr = (SIDES & 4) != 0
        R: tl.constexpr = (SIDES & 8) != 0
        if T:
            tl.store(ptr - sy, z, mask=mask & (y == 0))
        if B:
            tl.store(ptr + sy, z, mask=mask & (y == H - 1))
        if L:
            tl.store(ptr - sx, z, mask=mask & (x == 0))
        if R:
            tl.store(ptr + sx, z, mask=mask & (x == W - 1))
        if T and L:
            tl.store(ptr - sy - sx, z, mask=mask & (y == 0) & (x == 0))
        if T and R:
            tl.store(ptr - sy + sx, z, mask=mask & (y == 0) & (x == W - 1))
        if B and L:
            tl.store(ptr + sy - sx, z, mask=mask & (y == H - 1) & (x == 0))
        if B and R:
            tl.store(ptr + sy + sx, z, mask=mask & (y == H - 1) & (x == W - 1))

    @triton.jit
    def _cell_update(zi, zg, zf, zo, b, ch, p, mask, pre_ptr, pre_sb, pre_sc, pre_sp, cprev_ptr, c_ptr, c_sb, c_sc,
                     c_sp, h_ptr, h_sb, h_sc, h_sp, hp_ptr, hp_sb, hp_sc, hp_sy, hp_sx, CH, W, H, PAD_T, PAD_L,
                     forget_bias,
                     HAS_CPREV: tl.constexpr, WRITE_HP: tl.constexpr, STORE_PRE: tl.constexpr, STORE_C: tl.constexpr,
                     HP_BORDER: tl.constexpr, CDT: tl.constexpr, FAST_ACT: tl.constexpr):
        """The forward cell update from the gate pre-activations zi, zg, zf, zo (compute type, bias included) of
        the elements (batch b, channel ch, pixel p) under ``mask``: the stores of ``cell_fwd_kernel`` and of
        ``convlstm_rec_cell``'s fused step -- pre, c_t, h_t into the output and into the next step's zero-bordered
        buffer (with its border, HP_BORDER)."""
        # The backward recomputes the activations from the *stored* (possibly bf16) pre-activations; use exactly
        # those values here too, so that forward and backward differentiate the same function.
        out_ty = h_ptr.dtype.element_ty
        zi = zi.to(out_ty).to(CDT)
        zg = zg.to(out_ty).to(CDT)
        zf = zf.to(out_ty).to(CDT)
        zo = zo.to(out_ty).to(CDT)
        if STORE_PRE:
            _store_gates(pre_ptr + b * pre_sb + ch * pre_sc + p * pre_sp, CH * pre_sc, zi, zg, zf, zo, mask)
        c = _act_sigmoid(zi, FAST_ACT) * _act_tanh(zg, FAST_ACT)
        cell = b * c_sb + ch * c_sc + p * c_sp
        if HAS_CPREV:
            c += _act_sigmoid(zf + forget_bias, FAST_ACT) * tl.load(cprev_ptr + cell, mask=mask, other=0.0).to(CDT)
        if STORE_C:  # (inference: not at the last step, nothing reads it)
            tl.store(c_ptr + cell, c.to(c_ptr.dtype.element_ty), mask=mask)
        h = (_act_sigmoid(zo, FAST_ACT) * _act_tanh(c, FAST_ACT)).to(out_ty)
        tl.store(h_ptr + b * h_sb + ch * h_sc + p * h_sp, h, mask=mask)
        if WRITE_HP:
            hp = hp_ptr + b * hp_sb + ch * hp_sc + (p // W + PAD_T) * hp_sy + (p % W + PAD_L) * hp_sx
            tl.store(hp, h, mask=mask)
            if HP_BORDER:  # and the zero border around it (HP_BORDER: its sides, see _zero_border_around)
                _zero_border_around(hp, p, mask, H, W, hp_sy, hp_sx, h, HP_BORDER)

    @_jit(do_not_specialize=_SIZES)
    def cell_fwd_kernel(
        gx_ptr, gx_sb, gx_sc, gx_sy, gx_sx,  # input-conv gates of this step (B, 4Ch, H, W); may be a crop
        bias_ptr,                           # (4Ch,) gate bias, added here (not by the input convolution)
        rec_ptr, rec_sb, rec_sc, rec_sp,    # recurrent-conv gates (B, 4Ch, H, W), read if HAS_REC
        pre_ptr, pre_sb, pre_sc, pre_sp,    # out: gate pre-activations, saved for the backward if STORE_PRE
        cprev_ptr, c_ptr, c_sb, c_sc, c_sp, # cell states of the previous / this step (B, Ch, H, W)
        h_ptr, h_sb, h_sc, h_sp,            # out: h_t into the output
        hp_ptr, hp_sb, hp_sc, hp_sy, hp_sx, # out: h_t into the interior of a zero-bordered (B, Ch, Hp, Wp) buffer
        N, CH, HW, W, PAD_T, PAD_L, forget_bias, H,
        HAS_REC: tl.constexpr, HAS_CPREV: tl.constexpr, WRITE_HP: tl.constexpr, STORE_PRE: tl.constexpr,
        STORE_C: tl.constexpr, HP_BORDER: tl.constexpr,
        PIX_MAJOR: tl.constexpr, CDT: tl.constexpr, BLOCK: tl.constexpr, BLOCK_C: tl.constexpr,
        FAST_ACT: tl.constexpr = False,
    ):
        if PIX_MAJOR:
            mask, b, ch, p = _indices_2d(N, CH, HW, BLOCK, BLOCK_C, tl.program_id(0))
        else:
            mask, b, ch, p = _indices_1d(N, CH, HW, BLOCK)
        gx = gx_ptr + b * gx_sb + ch * gx_sc + (p // W) * gx_sy + (p % W) * gx_sx
        gq = CH * gx_sc  # distance between gate blocks
        zi = tl.load(gx, mask=mask, other=0.0).to(CDT)
        zg = tl.load(gx + gq, mask=mask, other=0.0).to(CDT)
        zf = tl.load(gx + 2 * gq, mask=mask, other=0.0).to(CDT)
        zo = tl.load(gx + 3 * gq, mask=mask, other=0.0).to(CDT)
        # The bias: on CUDA a convolution's bias is a separate broadcast add over its whole output (cuDNN
        # convolves without it), one extra HBM round trip of the largest tensor of the level; here it costs
        # four loads of a (4Ch,) vector.
        cmask = ch < CH
        zi += tl.load(bias_ptr + ch, mask=cmask, other=0.0).to(CDT)
        zg += tl.load(bias_ptr + CH + ch, mask=cmask, other=0.0).to(CDT)
        zf += tl.load(bias_ptr + 2 * CH + ch, mask=cmask, other=0.0).to(CDT)
        zo += tl.load(bias_ptr + 3 * CH + ch, mask=cmask, other=0.0).to(CDT)
        if HAS_REC:
            rec = rec_ptr + b * rec_sb + ch * rec_sc + p * rec_sp
            rq = CH * rec_sc
            zi += tl.load(rec, mask=mask, other=0.0).to(CDT)
            zg += tl.load(rec + rq, mask=mask, other=0.0).to(CDT)
            zf += tl.load(rec + 2 * rq, mask=mask, other=0.0).to(CDT)
            zo += tl.load(rec + 3 * rq, mask=mask, other=0.0).to(CDT)
        _cell_update(zi, zg, zf, zo, b, ch, p, mask, pre_ptr, pre_sb, pre_sc, pre_sp, cprev_ptr, c_ptr, c_sb, c_sc,
                     c_sp, h_ptr, h_sb, h_sc, h_sp, hp_ptr, hp_sb, hp_sc, hp_sy, hp_sx, CH, W, H, PAD_T, PAD_L,
                     forget_bias, HAS_CPREV, WRITE_HP, STORE_PRE, STORE_C, HP_BORDER, CDT, FAST_ACT)

    @triton.jit
    def _cell_bwd_tile(
        pre_ptr, pre_sb, pre_sc, pre_sp, bias_ptr, cprev_ptr, c_ptr, c_sb, c_sc, c_sp, dh_ptr, dh_sb, dh_sc, dh_sp,
        dhr_ptr, dhr_sb, dhr_sc, dhr_sy, dhr_sx, dc_ptr, dc_sb, dc_sc, dc_sp, dpre_ptr, dp_sb, dp_sc, dp_sp,
        dpre2_ptr, dp2_sb, dp2_sc, dp2_sy, dp2_sx, mask, b, ch, p, W, PAD_T, PAD_L, forget_bias,
        CH, HAS_CPREV: tl.constexpr, HAS_DHR: tl.constexpr, HAS_DC: tl.constexpr, CDT: tl.constexpr,
        STORE2: tl.constexpr, PRE_BIAS: tl.constexpr, FAST_ACT: tl.constexpr, RECOMPUTE_C: tl.constexpr,
        DHR_TAPS: tl.constexpr,
    ):
        """One tile of ``cell_bwd_kernel``: loads, the gate gradients' arithmetic and their stores (and dc_{t-1});
        returns the four gate gradients in the compute type, for the bias sums."""
        pre = pre_ptr + b * pre_sb + ch * pre_sc + p * pre_sp
        pq = CH * pre_sc
        zi = tl.load(pre, mask=mask, other=0.0).to(CDT)
        zg = tl.load(pre + pq, mask=mask, other=0.0).to(CDT)
        zf = tl.load(pre + 2 * pq, mask=mask, other=0.0).to(CDT)
        zo = tl.load(pre + 3 * pq, mask=mask, other=0.0).to(CDT)
        if PRE_BIAS:  # pre is the gates' convolution without the bias (concatenated gates): add it and round to
            # the stored dtype as the forward did before its activations, so both differentiate the same function
            cmask = ch < CH
            pre_ty = pre_ptr.dtype.element_ty
            zi = (zi + tl.load(bias_ptr + ch, mask=cmask, other=0.0).to(CDT)).to(pre_ty).to(CDT)
            zg = (zg + tl.load(bias_ptr + CH + ch, mask=cmask, other=0.0).to(CDT)).to(pre_ty).to(CDT)
            zf = (zf + tl.load(bias_ptr + 2 * CH + ch, mask=cmask, other=0.0).to(CDT)).to(pre_ty).to(CDT)
            zo = (zo + tl.load(bias_ptr + 3 * CH + ch, mask=cmask, other=0.0).to(CDT)).to(pre_ty).to(CDT)
        i = _act_sigmoid(zi, FAST_ACT)
        g = _act_tanh(zg, FAST_ACT)
        f = _act_sigmoid(zf + forget_bias, FAST_ACT)
        o = _act_sigmoid(zo, FAST_ACT)
        cell = b * c_sb + ch * c_sc + p * c_sp
        if HAS_CPREV:
            cprev = tl.load(cprev_ptr + cell, mask=mask, other=0.0).to(CDT)
        if RECOMPUTE_C:  # c_t as the forward computed it, from values loaded anyway: one tensor read less, and
            # tanh(c_t) of the forward's float32 c_t rather than of its stored (float16 for bf16) copy
            c = i * g
            if HAS_CPREV:
                c += f * cprev
        else:
            c = tl.load(c_ptr + cell, mask=mask, other=0.0).to(CDT)
        tc = _act_tanh(c, FAST_ACT)
        dh = tl.load(dh_ptr + b * dh_sb + ch * dh_sc + p * dh_sp, mask=mask, other=0.0).to(CDT)
        if HAS_DHR:
            if DHR_TAPS:  # the recurrent gradient as a 2 x 2 convolution's d(im2col) (``convlstm_gemm.dgrad_by_gemm``):
                # h at (y, x) fed the output pixel (y - dy, x - dx) through tap (dy, dx), whose block of CH columns
                # holds its share; the four shares summed here in the compute type
                yy = p // W
                xx = p % W
                dhr = dhr_ptr + b * dhr_sb + ch * dhr_sc
                for k in tl.static_range(4):
                    ok = mask & (yy >= k // 2) & (xx >= k % 2)
                    dh += tl.load(dhr + k * CH * dhr_sc + (yy - k // 2) * dhr_sy + (xx - k % 2) * dhr_sx, mask=ok,
                                  other=0.0).to(CDT)
            else:
                dhr = dhr_ptr + b * dhr_sb + ch * dhr_sc + (p // W + PAD_T) * dhr_sy + (p % W + PAD_L) * dhr_sx
                dh += tl.load(dhr, mask=mask, other=0.0).to(CDT)
        # h = o * tanh(c): dc collects the direct path and the path through c_{t+1} = f_{t+1} * c_t + ...
        dc = dh * o * (1.0 - tc * tc)
        dcp = dc_ptr + b * dc_sb + ch * dc_sc + p * dc_sp
        if HAS_DC:
            dc += tl.load(dcp, mask=mask, other=0.0).to(CDT)
        d_o = dh * tc * o * (1.0 - o)
        d_i = dc * g * i * (1.0 - i)
        d_g = dc * i * (1.0 - g * g)
        if HAS_CPREV:
            d_f = dc * cprev * f * (1.0 - f)
        else:
            d_f = tl.zeros_like(dc)  # c_{-1} = 0: the forget gate has no effect at step 0
        tl.store(dcp, (dc * f).to(dc_ptr.dtype.element_ty), mask=mask)
        _store_gates(dpre_ptr + b * dp_sb + ch * dp_sc + p * dp_sp, CH * dp_sc, d_i, d_g, d_f, d_o, mask)
        if STORE2:  # steps stored batch-major: the input convolution's gradient wants them in (B*T) order too
            _store_gates(dpre2_ptr + b * dp2_sb + ch * dp2_sc + (p // W) * dp2_sy + (p % W) * dp2_sx, CH * dp2_sc,
                         d_i, d_g, d_f, d_o, mask)
        return d_i, d_g, d_f, d_o

    @_jit(do_not_specialize=_SIZES)
    def cell_bwd_kernel(
        pre_ptr, pre_sb, pre_sc, pre_sp,        # gate pre-activations of this step (B, 4Ch, H, W)
        bias_ptr,                               # (4Ch,) gate bias, added to pre if PRE_BIAS
        cprev_ptr, c_ptr, c_sb, c_sc, c_sp,     # cell states of the previous / this step (this one unless RECOMPUTE_C)
        dh_ptr, dh_sb, dh_sc, dh_sp,            # gradient of the output h_t
        dhr_ptr, dhr_sb, dhr_sc, dhr_sy, dhr_sx,  # recurrent gradient of h_t, zero-bordered, read if HAS_DHR;
                                                  # with DHR_TAPS its four tap shares (B, 4Ch, H, W) instead
        dc_ptr, dc_sb, dc_sc, dc_sp,            # in: dc_t from step t+1 (if HAS_DC); out: dc_{t-1}
        dpre_ptr, dp_sb, dp_sc, dp_sp,          # out: d(pre-activations) for the recurrent convolution
        dpre2_ptr, dp2_sb, dp2_sc, dp2_sy, dp2_sx,  # out if STORE2: the same into the input conv's (B, T, ...) buffer
        db_ptr,                                 # in/out: (4Ch,) float32/64 bias gradient, accumulated if DBIAS
        N, CH, HW, W, PAD_T, PAD_L, forget_bias,
        HAS_CPREV: tl.constexpr, HAS_DHR: tl.constexpr, HAS_DC: tl.constexpr,
        PIX_MAJOR: tl.constexpr, CDT: tl.constexpr, BLOCK: tl.constexpr, BLOCK_C: tl.constexpr,
        DBIAS: tl.constexpr, STORE2: tl.constexpr, TILES: tl.constexpr, PRE_BIAS: tl.constexpr,
        FAST_ACT: tl.constexpr = False, RECOMPUTE_C: tl.constexpr = False, GRID_STRIDE: tl.constexpr = False,
        DHR_TAPS: tl.constexpr = False,
    ):
        # TILES row tiles per program (channels-last; 1 for NCHW): the bias gradient's column sums (a reduction
        # through shared memory) and atomic adds are made once per program, not once per tile. GRID_STRIDE
        # (channels-last): instead, the grid is one wave of programs (``convlstm.wave_grid``), each walking the
        # row tiles num_programs apart.
        if DBIAS:
            zero = tl.zeros((BLOCK // BLOCK_C, BLOCK_C), dtype=CDT)
            s_i, s_g, s_f, s_o = zero, zero, zero, zero
        if GRID_STRIDE:
            steps = tl.cdiv(tl.cdiv(N // CH, BLOCK // BLOCK_C) - tl.program_id(0), tl.num_programs(0))
        else:
            steps = TILES
        for k in range(steps):
            if GRID_STRIDE:
                tile = tl.program_id(0) + k * tl.num_programs(0)
            else:
                tile = tl.program_id(0) * TILES + k
            if PIX_MAJOR:
                mask, b, ch, p = _indices_2d(N, CH, HW, BLOCK, BLOCK_C, tile)
            else:
                mask, b, ch, p = _indices_1d(N, CH, HW, BLOCK)
            d_i, d_g, d_f, d_o = _cell_bwd_tile(
                pre_ptr, pre_sb, pre_sc, pre_sp, bias_ptr, cprev_ptr, c_ptr, c_sb, c_sc, c_sp,
                dh_ptr, dh_sb, dh_sc, dh_sp,
                dhr_ptr, dhr_sb, dhr_sc, dhr_sy, dhr_sx, dc_ptr, dc_sb, dc_sc, dc_sp, dpre_ptr, dp_sb, dp_sc, dp_sp,
                dpre2_ptr, dp2_sb, dp2_sc, dp2_sy, dp2_sx, mask, b, ch, p, W, PAD_T, PAD_L, forget_bias,
                CH, HAS_CPREV, HAS_DHR, HAS_DC, CDT, STORE2, PRE_BIAS, FAST_ACT, RECOMPUTE_C, DHR_TAPS)
            if DBIAS:
                s_i += tl.where(mask, d_i, 0.0)
                s_g += tl.where(mask, d_g, 0.0)
                s_f += tl.where(mask, d_f, 0.0)
                s_o += tl.where(mask, d_o, 0.0)
        if DBIAS:
            # d bias = the d-gates summed over batch, pixels and steps (channels-last 2-D tiles only): per program
            # a column sum of its tiles (in the compute type, before any bf16 rounding), then one atomic add of
            # BLOCK_C partial sums per gate, instead of a separate reduction over the whole d-gate tensor. Relaxed:
            # nothing in this kernel reads the sums, so the default acq_rel's fence before each add (MEMBAR.ALL.GPU,
            # which waits for this thread's stores) buys nothing.
            cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
            cmask = cols < CH
            tl.atomic_add(db_ptr + cols, tl.sum(s_i, axis=0), mask=cmask, sem="relaxed")
            tl.atomic_add(db_ptr + CH + cols, tl.sum(s_g, axis=0), mask=cmask, sem="relaxed")
            tl.atomic_add(db_ptr + 2 * CH + cols, tl.sum(s_f, axis=0), mask=cmask, sem="relaxed")
            tl.atomic_add(db_ptr + 3 * CH + cols, tl.sum(s_o, axis=0), mask=cmask, sem="relaxed")


    # ------------------------------------------------------------------------------------------------------------
    # Inference: one program per window runs all steps of a level (convlstm_window.py launches it).
    # ------------------------------------------------------------------------------------------------------------
    @triton.jit
    def _split_gates(z, BLOCK_M: tl.constexpr, CH: tl.constexpr):
        """(BLOCK_M, 4CH) pre-activations, gate blocks i, g, f, o along the columns -> four (BLOCK_M, CH).
        tl.split halves the last axis, so gate 2a + b goes to [m, c, a, b] and is split on b, then on a."""
        z = tl.permute(tl.reshape(z, (BLOCK_M, 2, 2, CH)), (0, 3, 1, 2))
        i_f, g_o = tl.split(z)
        zi, zf = tl.split(i_f)
        zg, zo = tl.split(g_o)
        return zi, zg, zf, zo

    @triton.jit
    def _gate_tile(gx_ptr, gx_sc, gx_sy, gx_sx, m0, HW, W, CH: tl.constexpr, BLOCK_M: tl.constexpr):
        """The input gates of pixels m0 .. m0 + BLOCK_M of one step, as stored: (BLOCK_M, 4CH), zero past HW."""
        p = m0 + tl.arange(0, BLOCK_M)
        y = p // W
        x = p - y * W
        g4 = tl.arange(0, 4 * CH)
        return tl.load(gx_ptr + (y * gx_sy + x * gx_sx)[:, None] + g4[None, :] * gx_sc, mask=(p < HW)[:, None],
                       other=0.0)

    @triton.jit
    def _window_tile(gates, bias_ptr, w, c_ptr, c_sp, h_ptr, h_st, h_sy, h_sx,
                     t, m0, HW, H, W, PAD_T, PAD_L, forget_bias,
                     CH: tl.constexpr, KS: tl.constexpr, PREC: tl.constexpr, HAS_REC: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
        """Pixels m0 .. m0 + BLOCK_M of one window's step t, all CH hidden channels: the input ``gates`` (a
        ``_gate_tile``) plus the bias, from the second step plus the recurrent convolution over h_{t-1} as ONE
        GEMM with the weight ``w`` (BLOCK_K, 4CH) the program loaded once (row m of the left operand: the KS*KS
        channel vectors pixel m's taps read, zero outside the image -- TF "same" padding by masks -- and past K),
        then cell_fwd_kernel's update. c_ptr and h_ptr point at this window (h_ptr at its step 0)."""
        p = m0 + tl.arange(0, BLOCK_M)
        ok = p < HW
        y = p // W
        x = p - y * W
        co = tl.arange(0, CH)
        g4 = tl.arange(0, 4 * CH)
        z = gates.to(tl.float32) + tl.load(bias_ptr + g4).to(tl.float32)[None, :]
        if HAS_REC:
            k = tl.arange(0, BLOCK_K)  # column k: tap k // CH = (ky, kx), channel k % CH
            tap = k // CH
            dy = tap // KS - PAD_T
            dx = tap % KS - PAD_L
            sy = y[:, None] + dy[None, :]
            sx = x[:, None] + dx[None, :]
            src_ok = ok[:, None] & (sy >= 0) & (sy < H) & (sx >= 0) & (sx < W) & (k < KS * KS * CH)[None, :]
            rows = h_ptr + (t - 1) * h_st + (y * h_sy + x * h_sx)[:, None]
            a = tl.load(rows + (dy * h_sy + dx * h_sx + k % CH)[None, :], mask=src_ok, other=0.0)
            z = tl.dot(a, w, z, input_precision=PREC)
        zi, zg, zf, zo = _split_gates(z, BLOCK_M, CH)
        out_ty = h_ptr.dtype.element_ty  # the pre-activations rounded as cell_fwd_kernel rounds them
        zi = zi.to(out_ty).to(tl.float32)
        zg = zg.to(out_ty).to(tl.float32)
        zf = zf.to(out_ty).to(tl.float32)
        zo = zo.to(out_ty).to(tl.float32)
        # The cell state of this window, read and written in place: pixel-major, channels contiguous.
        cell = c_ptr + p[:, None] * c_sp + co[None, :]
        mask = ok[:, None]
        c = _sigmoid(zi) * _tanh(zg)  # cell_fwd_kernel's update (kept apart: sharing it reorders that kernel's loads)
        if HAS_REC:
            c += _sigmoid(zf + forget_bias) * tl.load(cell, mask=mask, other=0.0).to(tl.float32)
        tl.store(cell, c.to(c_ptr.dtype.element_ty), mask=mask)  # float32, or float16 for bf16 / fp16
        h = (_sigmoid(zo) * _tanh(c)).to(out_ty)
        tl.store(h_ptr + t * h_st + (y * h_sy + x * h_sx)[:, None] + co[None, :], h, mask=mask)

    @triton.jit
    def _window_step(gx_ptr, gx_sc, gx_sy, gx_sx, bias_ptr, w, c_ptr, c_sp, h_ptr, h_st, h_sy, h_sx,
                     t, HW, H, W, PAD_T, PAD_L, forget_bias,
                     CH: tl.constexpr, KS: tl.constexpr, PREC: tl.constexpr, HAS_REC: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr, PREFETCH: tl.constexpr):
        """Step t of one window, tile after tile (gx_ptr at the window's step t). With PREFETCH the next tile's
        input gates are loaded before this tile's work, so that their HBM latency overlaps it."""
        gates = _gate_tile(gx_ptr, gx_sc, gx_sy, gx_sx, 0, HW, W, CH, BLOCK_M)
        for m0 in range(0, HW, BLOCK_M):
            if PREFETCH:
                now = gates
                gates = _gate_tile(gx_ptr, gx_sc, gx_sy, gx_sx, m0 + BLOCK_M, HW, W, CH, BLOCK_M)
            else:
                now = _gate_tile(gx_ptr, gx_sc, gx_sy, gx_sx, m0, HW, W, CH, BLOCK_M)
            _window_tile(now, bias_ptr, w, c_ptr, c_sp, h_ptr, h_st, h_sy, h_sx, t, m0, HW, H, W, PAD_T, PAD_L,
                         forget_bias, CH, KS, PREC, HAS_REC, BLOCK_M, BLOCK_K)

    @_jit(do_not_specialize=["T", "HW", "H", "W", "PAD_T", "PAD_L"])
    def window_lstm_kernel(
        gx_ptr, gx_sb, gx_st, gx_sc, gx_sy, gx_sx,  # input-conv gates (B, T, 4Ch, H, W); a view (shared steps)
        bias_ptr,                                   # (4Ch,) gate bias
        w_ptr,                                      # (KS*KS*Ch, 4Ch) recurrent weight: row (ky*KS + kx)*Ch + ci
        c_ptr, c_sb, c_sp,                          # (B, H*W, Ch) cell state, one per window (scratch)
        h_ptr, h_sb, h_st, h_sy, h_sx,              # out: every h_t (B, T, Ch, H, W), channels contiguous
        T, HW, H, W, PAD_T, PAD_L, forget_bias,
        CH: tl.constexpr, KS: tl.constexpr, PREC: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr,
        PREFETCH: tl.constexpr,
    ):
        """A whole ConvLSTM level of one window (program), step after step: the recurrent weight is loaded once
        (BLOCK_K = KS*KS*CH rounded up to a power of two), and the window's h_{t-1} and c_{t-1}, written by this
        program a moment before, are read back -- from L2 while the windows in flight fit there; at the full
        scoring batch they do not (33-37% L2 hits, benchmarks/results/window_lstm_ncu/). A barrier between steps
        makes each step's h (written by every thread) visible to the next step's reads."""
        b = tl.program_id(0).to(tl.int64)
        gx_ptr += b * gx_sb
        c_ptr += b * c_sb
        h_ptr += b * h_sb
        k = tl.arange(0, BLOCK_K)
        g4 = tl.arange(0, 4 * CH)
        w = tl.load(w_ptr + k[:, None] * (4 * CH) + g4[None, :], mask=(k < KS * KS * CH)[:, None], other=0.0)
        _window_step(gx_ptr, gx_sc, gx_sy, gx_sx, bias_ptr, w, c_ptr, c_sp, h_ptr, h_st, h_sy, h_sx,
                     0, HW, H, W, PAD_T, PAD_L, forget_bias, CH, KS, PREC, False, BLOCK_M, BLOCK_K, PREFETCH)
        for t in range(1, T):
            tl.debug_barrier()
            _window_step(gx_ptr + t * gx_st, gx_sc, gx_sy, gx_sx, bias_ptr, w, c_ptr, c_sp, h_ptr, h_st, h_sy, h_sx,
                         t, HW, H, W, PAD_T, PAD_L, forget_bias, CH, KS, PREC, True, BLOCK_M, BLOCK_K, PREFETCH)
