"""The training ConvLSTM's two weight gradients from one read of the gate gradients (opt-in, not yet timed).

``convlstm_train_backward`` takes each level's weight gradients from cuDNN: the input half over all T*B images and
the recurrent half over the (T-1)*B images of steps 1..T-1, two weight-gradient calls that each read the gate
gradients dpre (level 1: 147 MB in bf16 at batch 128) and each start with a workspace initialisation (10 of them in
the step, 66 us; the two calls 167 us at level 1, 97 / 100 / 87 us at levels 2-4, benchmarks/results/
step_profile_1201c/train_step_profile.txt). Here one kernel reads each dpre tile once and multiplies it into both:

    dW_x[o, dy, dx, i] = sum_{n, y, x} dpre[n, y, x, o] * xp[n, y + dy, x + dx, i]
    dW_h[o, dy, dx, i] = sum_{n >= B, y, x} dpre[n, y, x, o] * hprev[n - B, y + dy, x + dx, i]

(the images time-major, n = t*B + b; xp and hprev zero-bordered, so the "valid" convolution over them is TF's
"same" one). Split over the pixels (split-K): program (s, o-block, column block) sums its pixel range with
``tl.dot`` of the transposed dpre tile and the taps' gathered input tile (columns j = tap * C + i, the weights'
channels-last order) and writes a float32 partial; a second kernel sums the partials in split order
(deterministic) into each gradient in the weights' dtype. ``MSCRED_LSTM_WGRAD=1`` switches it on in the training
backward (channels-last, time-major buffers); ``benchmarks/bench_lstm_wgrad.py`` times it against the two cuDNN
calls. Float32 inputs are multiplied in IEEE float32 (no TF32), float64 is refused (the tests' oracle stays on
PyTorch's convolutions).
"""
from __future__ import annotations

import torch

from mscred.ops.triton.runtime import interpreting, runs_fused, sm_count, switched_on, tile_override, tl, triton

# Pixels per iteration, output channels and columns per program, warps, programs per SM (the pixel split): a first
# guess, not swept (MSCRED_LSTM_WGRAD_TILE = the five numbers, "/"-separated, overrides them).
TILE = (64, 64, 64, 4, 2)
INTERPRETER_SPLITS = 3


def tile() -> tuple[int, int, int, int, int]:
    """(BLOCK_P, BLOCK_O, BLOCK_N, warps, programs per SM): ``TILE`` or MSCRED_LSTM_WGRAD_TILE."""
    values = tile_override("MSCRED_LSTM_WGRAD_TILE", TILE,
                           ("BLOCK_P", "BLOCK_O", "BLOCK_N", "warps", "programs-per-SM"))
    if min(values[:3]) < 16:  # tl.dot's smallest tile
        raise ValueError(f"MSCRED_LSTM_WGRAD_TILE's blocks must be >= 16, got {values}")
    return values


def enabled() -> bool:
    """MSCRED_LSTM_WGRAD=1 (opt-in until timed on the GPU)."""
    return switched_on("MSCRED_LSTM_WGRAD")


def suits(dpre: torch.Tensor, images: torch.Tensor, hprev: torch.Tensor | None) -> bool:
    """Whether the kernel takes these buffers: Triton runs here, 16-bit or float32 values, one dtype."""
    tensors = [dpre, images] + ([] if hprev is None else [hprev])
    return (all(runs_fused(t) for t in tensors) and dpre.dtype in (torch.bfloat16, torch.float16, torch.float32)
            and all(t.dtype == dpre.dtype for t in tensors))


def lstm_weight_grads(dpre: torch.Tensor, images: torch.Tensor, hprev: torch.Tensor | None, batch: int, k: int,
                      dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(dW_x, dW_h) as (O, C, k, k) channels-last tensors of ``dtype``: dpre (N, O, H, W) the gate gradients of N
    = T*B time-major images, images (N, C, H + k - 1, W + k - 1) the zero-bordered inputs, hprev ((T-1)*B, C, same)
    the zero-bordered h_{t-1} of steps 1.. (None: T = 1, no dW_h). Any strides with contiguous channels."""
    N, O, H, W = dpre.shape
    C = images.shape[1]
    if images.shape[0] != N or images.shape[2:] != (H + k - 1, W + k - 1):
        raise ValueError(f"images {tuple(images.shape)} do not border the gate gradients {tuple(dpre.shape)}")
    has_h = hprev is not None and hprev.shape[0] > 0
    if has_h and (hprev.shape[0] != N - batch or hprev.shape[1:] != images.shape[1:]):
        raise ValueError(f"hprev {tuple(hprev.shape)} is not the {N - batch} h images of {tuple(images.shape)}")
    for t in (dpre, images) + ((hprev,) if has_h else ()):
        if t.stride(1) != 1:
            raise ValueError("lstm_weight_grads reads channels-last buffers (channel stride 1)")
    KC = k * k * C
    pixels = N * H * W
    block_p, block_o, block_n, warps, per_sm = tile()
    grid_o, grid_n = triton.cdiv(O, block_o), triton.cdiv(KC, block_n)
    if interpreting():
        splits = INTERPRETER_SPLITS
    else:
        splits = max(1, per_sm * sm_count(dpre.device) // (grid_o * grid_n))
    splits = max(1, min(splits, (2 ** 31 - 1) // (O * KC)))  # the partials stay int32-addressable per gradient
    chunk = triton.cdiv(triton.cdiv(pixels, splits), block_p) * block_p
    splits = triton.cdiv(pixels, chunk)
    parts = torch.empty(2 if has_h else 1, splits, O, KC, device=dpre.device, dtype=torch.float32)
    h = hprev if has_h else images
    _wgrad_partial_kernel[(splits, grid_o, grid_n)](
        dpre, dpre.stride(0), dpre.stride(2), dpre.stride(3), images, images.stride(0), images.stride(2),
        images.stride(3), h, h.stride(0), h.stride(2), h.stride(3), parts, pixels, chunk, H * W, W, O, C, KC, k,
        batch, HAS_H=has_h, IEEE=dpre.dtype == torch.float32, UPCAST=interpreting(), BLOCK_P=block_p,
        BLOCK_O=block_o, BLOCK_N=block_n, num_warps=warps)
    to_bf16 = dtype == torch.bfloat16  # rounded by bit arithmetic (ops/triton/bits.py): the same bits on the CPU
    grads = []
    for part in parts:  # each gradient its own tensor (a custom op's outputs may not alias each other)
        out = torch.empty(O, k, k, C, device=dpre.device, dtype=dtype)
        _sum_splits_kernel[(triton.cdiv(O * KC, 1024),)](
            part, out.view(torch.int16) if to_bf16 else out, splits, O * KC, TO_BF16=to_bf16, BLOCK=1024)
        grads.append(out.permute(0, 3, 1, 2))  # (O, C, k, k), channels-last memory
    return grads[0], (grads[1] if has_h else None)


if triton is not None:
    from mscred.ops.triton.bits import bf16_bits  # (jit helpers: defined only with Triton)

    @triton.jit
    def _taps(ptr, n, y, x, s_n, s_y, s_x, dy, dx, i, valid):
        """The (BLOCK_P, BLOCK_N) tile of input elements (n, y + dy, x + dx, i) of a channels-last buffer."""
        offs = n[:, None] * s_n + (y[:, None] + dy[None, :]) * s_y + (x[:, None] + dx[None, :]) * s_x + i[None, :]
        return tl.load(ptr + offs, mask=valid, other=0.0)

    @triton.jit
    def _product(at, b, IEEE: tl.constexpr, UPCAST: tl.constexpr):
        """at @ b in float32: IEEE products for float32 inputs (no TF32), and under UPCAST b in float32 too."""
        if UPCAST:
            b = b.to(tl.float32)
        if IEEE or UPCAST:
            prod = tl.dot(at, b, input_precision="ieee")
        else:
            prod = tl.dot(at, b)
        return prod

    @triton.jit
    def _wgrad_partial_kernel(d_ptr, d_sn, d_sy, d_sx, x_ptr, x_sn, x_sy, x_sx, h_ptr, h_sn, h_sy, h_sx, part_ptr,
                              P, CHUNK, HW, W, O, C, KC, K, B, HAS_H: tl.constexpr, IEEE: tl.constexpr,
                              UPCAST: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_O: tl.constexpr,
                              BLOCK_N: tl.constexpr):
        """Split-K partials, program (s, o-block, column block). UPCAST (the CPU interpreter only, whose tl.dot
        mishandles bf16 operands): the tiles multiplied in float32 -- the same products, exact either way."""
        s = tl.program_id(0)
        o = tl.program_id(1) * BLOCK_O + tl.arange(0, BLOCK_O)
        j = tl.program_id(2) * BLOCK_N + tl.arange(0, BLOCK_N)
        omask = o < O
        jmask = j < KC
        tap = j // C
        dy = tap // K
        dx = tap % K
        i = j % C
        acc_x = tl.zeros([BLOCK_O, BLOCK_N], dtype=tl.float32)
        acc_h = tl.zeros([BLOCK_O, BLOCK_N], dtype=tl.float32)
        start = s * CHUNK
        for p0 in range(0, CHUNK, BLOCK_P):
            p = start + p0 + tl.arange(0, BLOCK_P)
            pmask = p < P
            n = (p // HW).to(tl.int64)
            yx = p % HW
            y = yx // W
            x = yx % W
            a = tl.load(d_ptr + n[:, None] * d_sn + y[:, None] * d_sy + x[:, None] * d_sx + o[None, :],
                        mask=pmask[:, None] & omask[None, :], other=0.0)
            if UPCAST:
                a = a.to(tl.float32)
            at = tl.trans(a)
            bx = _taps(x_ptr, n, y, x, x_sn, x_sy, x_sx, dy, dx, i, pmask[:, None] & jmask[None, :])
            acc_x += _product(at, bx, IEEE, UPCAST)
            if HAS_H:
                hmask = pmask & (n >= B)
                bh = _taps(h_ptr, n - B, y, x, h_sn, h_sy, h_sx, dy, dx, i, hmask[:, None] & jmask[None, :])
                acc_h += _product(at, bh, IEEE, UPCAST)
        splits = tl.num_programs(0)
        dst = (s * O + o[:, None]).to(tl.int64) * KC + j[None, :]
        m2 = omask[:, None] & jmask[None, :]
        tl.store(part_ptr + dst, acc_x, mask=m2)
        if HAS_H:
            tl.store(part_ptr + splits.to(tl.int64) * O * KC + dst, acc_h, mask=m2)

    @triton.jit
    def _sum_splits_kernel(part_ptr, out_ptr, SPLITS, TOTAL, TO_BF16: tl.constexpr, BLOCK: tl.constexpr):
        """out[e] = sum over s of part[s, e], in split order; TO_BF16: out holds bf16 bits."""
        e = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = e < TOTAL
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for s in range(0, SPLITS):
            acc += tl.load(part_ptr + s * TOTAL + e, mask=m, other=0.0)  # < 2^31 elements: levels of <= 1024 gates
        if TO_BF16:
            tl.store(out_ptr + e, bf16_bits(acc), mask=m)
        else:
            tl.store(out_ptr + e, acc.to(out_ptr.dtype.element_ty), mask=m)
