"""One training forward step of a large ConvLSTM level as one CUDA kernel: ``step`` (gate convolution + cell update).

The concatenated-gates path (``ops/triton/convlstm_concat.py``) otherwise runs, per step, cuDNN's convolution of the
zero-bordered [x_t, h_{t-1}] with the whole gate weight and then the Triton cell kernel, the gates passing through
HBM between them. ``conv_cell.cu`` (its header comment has the design) computes both in one kernel on Hopper's
warpgroup MMAs, with the weight resident in shared memory and the cell update in the epilogue, and writes what the
backward reads (the pre-activations without the bias, c_t, h_t, and h_t with its zero border into the next step's
rows). It is written for the default model's levels 1-2 (C = Ch = 32 and C = Ch = 64, 2 x 2 kernels with TF "same"
padding), bf16 operands and float16 cells (``MSCRED_LSTM_HALF_CELL_TRAIN``), on sm_90a (H100 / H200).

The default at level 1 since 2026-12-02 (the graphed bf16 training step 2.728-2.736 -> 2.661-2.680 ms in
alternation, results/conv_cell_final/); ``MSCRED_LSTM_CONV_CELL=0`` keeps the split path, ``=all`` runs level 2's
build too (slower there, results/conv_cell_cuda/). Built on first use for the present GPU
(``ops/cuda_extension.py``); if the build fails mscred warns once and the split path runs.

``step_backward`` (``conv_cell_bwd.cu``) is the backward's counterpart at level 1: step t + 1's transposed
convolution and step t's cell backward in one kernel, the default there since 2026-12-02 (its first GPU run: the
oracle tests passed, the graphed bf16 step 2.689 / 2.696 -> 2.662 / 2.657 ms in alternation,
results/conv_cell_bwd/; as the default 2.652 / 2.634 against the split backward's 2.679 / 2.683 ms,
results/conv_cell_bwd_hoist/; the whole GPU suite passed on it, results/gpu_suite_1202b/);
Its staging rows are stepped by additions since the same day's evening (4 steps' kernels 230 -> 201 us, the
step 2.652 / 2.647 -> 2.629 / 2.628 ms, results/conv_cell_rows_default/; the GPU suite, results/gpu_suite_1202c/),
and both kernels' rows walked from tile to tile, no division left, since its night (202.7 -> 194.5 us,
results/conv_cell_next/; the GPU suite, results/gpu_suite_1202d/).
``MSCRED_LSTM_CONV_CELL_BWD=0`` keeps the Triton cell backward and cuDNN's transposed convolution apart. Its A/B
builds (MSCRED_CONV_CELL_FLAGS) are named in ``conv_cell_bwd.cu`` and ``conv_cell.h``.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import torch

from mscred.ops.cuda_extension import LazyExtension
from mscred.ops.triton.convlstm_window import shared_limit
from mscred.ops.triton.runtime import switched_off

CHANNELS = ((32, 32), (64, 64))  # (C, Ch) with a build: levels 1 and 2 of the default model
# (C, Ch) it runs for by default: level 1 only. Level 2's build measured slower than the split path (27 against 24 us
# a step, results/conv_cell_cuda/: one block an SM of two warpgroups, the 128 KB weight); MSCRED_LSTM_CONV_CELL=all
# runs it too (A/B runs, its tests), =0 never.
DEFAULT_CHANNELS = ((32, 32),)
PADS = (0, 1, 0, 1)  # TF "same" padding of a 2 x 2 kernel: the border is the last row and column
_SRC = Path(__file__).resolve().parent

_builds: dict[tuple[str, bool], LazyExtension] = {}  # per (MSCRED_CONV_CELL_FLAGS, backward)


def _build_flags() -> tuple[list[str], str]:
    """A/B builds of the kernels' compile-time switches (benchmarks): -D flags from MSCRED_CONV_CELL_FLAGS
    (``-DMSCRED_CONV_CELL_SMEM_A=1``, ``-DMSCRED_CONV_CELL_PRE_WITH_BIAS=1`` ...), in a module of their own name."""
    flags = os.environ.get("MSCRED_CONV_CELL_FLAGS", "").split()
    return flags, f"_{hashlib.sha256(' '.join(flags).encode()).hexdigest()[:8]}" if flags else ""


def _extension() -> object:
    """The forward's module built with the present MSCRED_CONV_CELL_FLAGS (each flag set once per process)."""
    return _lazy()()


def _backward() -> object:
    """The backward step kernel's module, likewise."""
    return _lazy(backward=True)()


def _lazy(backward: bool = False) -> LazyExtension:
    """The forward's extension, or the backward's: an extension of its own, so that if its build fails the forward
    kernel still runs."""
    key = (os.environ.get("MSCRED_CONV_CELL_FLAGS", "").strip(), backward)
    if key not in _builds:
        _builds[key] = (LazyExtension("conv + cell backward step extension", "mscred_conv_cell_bwd", _SRC,
                                      ["binding_bwd.cpp", "conv_cell_bwd.cu"], _build_flags) if backward else
                        LazyExtension("conv + cell step extension", "mscred_conv_cell", _SRC,
                                      ["binding.cpp", "conv_cell.cu"], _build_flags))
    return _builds[key]


def takes(dtype: torch.dtype, cell_dtype: torch.dtype, C: int, Ch: int, kernel: tuple[int, int], pads) -> bool:
    """Whether the kernel is written for this level: bf16 operands, float16 cells, (C, Ch) in DEFAULT_CHANNELS
    (CHANNELS with MSCRED_LSTM_CONV_CELL=all, none with =0), a 2 x 2 kernel with ``PADS``."""
    if switched_off("MSCRED_LSTM_CONV_CELL"):
        return False
    channels = CHANNELS if os.environ.get("MSCRED_LSTM_CONV_CELL", "").strip().lower() == "all" else DEFAULT_CHANNELS
    return (dtype == torch.bfloat16 and cell_dtype == torch.float16 and (C, Ch) in channels
            and tuple(kernel) == (2, 2) and tuple(pads) == PADS)


def runs(xh: torch.Tensor, cell_dtype: torch.dtype, C: int, Ch: int, kernel, pads) -> bool:
    """``takes`` for the bordered rows ``xh`` (T, B, C + Ch, Hp, Wp) on a Hopper GPU (compute capability 9.0: the
    kernel's wgmma) where the extension builds and one block's shared memory for maps this wide fits."""
    if xh.device.type != "cuda" or not takes(xh.dtype, cell_dtype, C, Ch, kernel, pads):
        return False
    if torch.cuda.get_device_capability(xh.device) != (9, 0):
        return False
    if not _lazy().usable("the convolution and the cell kernel run apart"):
        return False
    return 0 < _extension().shared_bytes(C, Ch, xh.shape[-1] - 1) <= shared_limit(xh.device)


def packed_weight(w: torch.Tensor) -> torch.Tensor:
    """The whole gate weight (4Ch, C + Ch, 2, 2) as the kernel's (4Ch, 4 (C + Ch)): row n (gate column), column
    (ky * 2 + kx) * (C + Ch) + ci (a view where ``w`` is channels-last)."""
    return w.permute(0, 2, 3, 1).reshape(w.shape[0], -1).contiguous()


def step(xh_t: torch.Tensor, w_rows: torch.Tensor, bias: torch.Tensor, c_prev, c: torch.Tensor, pre: torch.Tensor,
         out_t: torch.Tensor, hp, C: int, forget_bias: float) -> None:
    """Step t: pre (B, 4Ch, H, W) = the convolution of xh_t (B, C + Ch, Hp, Wp) with ``w_rows`` (``packed_weight``)
    rounded to bf16, without the bias (with it in MSCRED_CONV_CELL_PRE_WITH_BIAS builds, ``stores_pre_with_bias``);
    c = sigmoid(f + forget_bias) c_prev + sigmoid(i) tanh(g) (c_prev None at the first step); out_t = sigmoid(o)
    tanh(c), also written into hp's channels C.. (the next step's xh, None at the last step) with zeros on its
    border; the gates' pre-activations with the float32 bias, rounded to bf16."""
    _extension().step(xh_t, w_rows, bias.float().contiguous(), c_prev, c, pre, out_t, hp, C, float(forget_bias))


def stores_pre_with_bias(xh: torch.Tensor, cell_dtype: torch.dtype, C: int, Ch: int, kernel, pads) -> bool:
    """Whether ``convlstm_concat.forward``'s gates for this level hold the bias: the forward kernel runs it
    (``runs``) and was built with MSCRED_CONV_CELL_PRE_WITH_BIAS (an A/B build, ``conv_cell.h``). The Triton cell
    backward then reads them without adding it (PRE_BIAS off)."""
    return runs(xh, cell_dtype, C, Ch, kernel, pads) and _pre_with_bias(_extension())


def _pre_with_bias(module) -> bool:
    """A built module's ``pre_with_bias`` (false for one built before the switch existed: it stored them without)."""
    return bool(getattr(module, "pre_with_bias", False))


def transposed_weight(w: torch.Tensor) -> torch.Tensor:
    """The whole gate weight (4Ch, C + Ch, 2, 2) as the backward kernel's (4 taps, C + Ch, 4Ch): [ky * 2 + kx][ci]
    [gate column]."""
    return w.permute(2, 3, 1, 0).reshape(4, w.shape[1], w.shape[0]).contiguous()


def runs_backward(xh: torch.Tensor, dout: torch.Tensor, cell_dtype: torch.dtype, dc_dtype: torch.dtype,
                  recompute_c: bool, bias_grad_dtype: torch.dtype, C: int, Ch: int, kernel, pads) -> bool:
    """Whether the backward step kernel (``conv_cell_bwd.cu``) runs this level's backward: not switched off
    (MSCRED_LSTM_CONV_CELL_BWD=0), level 1's sizes (C = Ch = 32) where the forward kernel runs, the cell backward's
    defaults (c_t recomputed, float32 dc and bias gradient), dout's steps with contiguous (H, W, Ch) maps, and one
    block's shared memory fitting."""
    if switched_off("MSCRED_LSTM_CONV_CELL_BWD") or (C, Ch) != (32, 32):
        return False
    if not (recompute_c and dc_dtype == torch.float32 and bias_grad_dtype == torch.float32):
        return False
    if not runs(xh, cell_dtype, C, Ch, kernel, pads):
        return False
    B, T, _, H, W = dout.shape
    maps_ok = (dout.dtype == torch.bfloat16 and dout.stride(2) == 1 and dout.stride(4) == Ch
               and dout.stride(3) == W * Ch and (B == 1 or dout.stride(0) % 8 == 0)
               and (T == 1 or dout.stride(1) % 8 == 0) and dout.data_ptr() % 16 == 0)
    if not maps_ok or not _lazy(backward=True).usable("the cell kernel and cuDNN's transposed convolution run apart"):
        return False
    if _pre_with_bias(_backward()) != _pre_with_bias(_extension()):  # (one MSCRED_CONV_CELL_FLAGS builds both)
        return False
    return 0 < _backward().shared_bytes_backward(C, Ch, W) <= shared_limit(xh.device)


def runs_backward_on_check_level(xh: torch.Tensor, dout: torch.Tensor) -> bool:
    """``runs_backward`` for a small level in the check's and the benchmark's settings: C = Ch (dout's channels), a
    2 x 2 kernel with TF's padding, float16 cells, c_t recomputed, float32 dc and bias gradient."""
    C = dout.shape[2]
    return runs_backward(xh, dout, torch.float16, torch.float32, True, torch.float32, C, C, (2, 2), PADS)


def step_backward(dpre_next: torch.Tensor, w_t: torch.Tensor, bias: torch.Tensor, pre: torch.Tensor, c_prev,
                  dout_t: torch.Tensor, dc: torch.Tensor, dpre: torch.Tensor, dx_next: torch.Tensor,
                  dbias: torch.Tensor, forget_bias: float, attention=None) -> None:
    """Backward step t (T - 2 .. 0): dx_next (B, C, Hp, Wp) = step t + 1's input gradient, [dx_{t+1}, dh_t] being
    the transposed convolution of dpre_next with the weight (``transposed_weight``); then step t's cell backward
    with dh_t + dout_t: dpre (B, 4Ch, H, W) bf16, dc (float32) updated in place from dc_t to dc_{t-1}, dbias
    (float32) added to. pre is step t's convolution without the bias, c_prev c_{t-1} (None at step 0).
    ``attention`` = (g, h_last, coef_t): dout_t made in the kernel as the level's attention's backward would have
    written it, bf16(a_t g + ds_t h_last) with coef_t (B, 2) float32 = (a_t, ds_t) per image
    (``triton.attention_last``); dout_t is then not read."""
    g, h_last, coef = attention if attention is not None else (None, None, None)
    _backward().step_backward(dpre_next, w_t, bias.float().contiguous(), pre, c_prev, dout_t, dc, dpre, dx_next,
                              dbias, float(forget_bias), g, h_last, coef)


def _small_level(device: torch.device, dtype: torch.dtype = torch.bfloat16, cell_dtype: torch.dtype = torch.float16):
    """The checks' level: two windows of 3 steps, 32 channels, 5 x 5 -- the float64 input, weight and bias, and the
    time-major zero-bordered inputs (T*B, C, 6, 6) channels-last as the encoder hands them over, the weight (both in
    ``dtype``) and the level's buffers (convlstm_concat.buffers, ``cell_dtype`` cells)."""
    from mscred.ops.triton import convlstm_concat
    B, T, C, n = 2, 3, 32, 5
    g = torch.Generator().manual_seed(0)
    x = torch.randn(B, T, C, n, n, generator=g, dtype=torch.float64)
    w = torch.randn(4 * C, 2 * C, 2, 2, generator=g, dtype=torch.float64) / 16
    b = torch.randn(4 * C, generator=g, dtype=torch.float64) * 0.5
    bordered = torch.zeros(T, B, n + 1, n + 1, C, dtype=torch.float64)
    bordered[:, :, :n, :n] = x.permute(1, 0, 3, 4, 2)
    images = bordered.reshape(T * B, n + 1, n + 1, C).to(device, dtype).permute(0, 3, 1, 2)
    low_w = w.to(device, dtype).contiguous(memory_format=torch.channels_last)
    bufs = convlstm_concat.buffers(B, T, C, C, n, n, PADS, images, cell_dtype)
    return x, w, b, images, low_w, bufs


def _level_backward_errors(device: torch.device, dtype: torch.dtype = torch.bfloat16,
                           cell_dtype: torch.dtype = torch.float16, kernel_check=None,
                           attention: bool = False) -> dict[str, float]:
    """``convlstm_concat``'s training forward and backward of the small level (``_small_level``) against the float64
    reference's gradients: the relative error of the input, weight and bias gradients. ``kernel_check(xh, dout)``,
    if given, runs before them and may raise (is_backward_available: the kernel must take this level).
    ``attention``: dL/dh as the level's attention folds it in (``triton.attention_last.FoldedGrad``: steps t < T - 1
    made from g, h_{T-1} and per-image coefficients where they are read), the reference given the same maps."""
    from mscred.ops import reference
    from mscred.ops.triton import convlstm_concat
    from mscred.ops.triton.runtime import tl
    x, w, b, images, low_w, bufs = _small_level(device, dtype, cell_dtype)
    B, T, C, n = x.shape[0], x.shape[1], x.shape[2], x.shape[-1]
    gen = torch.Generator().manual_seed(1)
    dout = torch.randn(B, T, C, n, n, generator=gen, dtype=torch.float64)

    def maps(t: torch.Tensor) -> torch.Tensor:  # (B, [T,] C, H, W) with contiguous (H, W, C) maps, as kernels read
        order = (0, 2, 3, 1) if t.dim() == 4 else (0, 1, 3, 4, 2)
        back = (0, 3, 1, 2) if t.dim() == 4 else (0, 1, 4, 2, 3)
        return t.to(device, dtype).permute(*order).contiguous().permute(*back)
    if attention:
        from mscred.ops.triton.attention_last import FoldedGrad
        g, h_last = maps(dout[:, 0]), maps(dout[:, 1])
        coef = torch.randn(B, T, 2, generator=gen, dtype=torch.float64).to(
            device, torch.float64 if dtype == torch.float64 else torch.float32)
        folded = FoldedGrad(g, h_last, coef, maps(dout[:, T - 1]))
        dout = torch.stack([folded.step(t).double().cpu() for t in range(T)], 1)  # as the kernels round them
        dout_cl = folded
    else:
        dout_cl = maps(dout)
    _, cells, xh = bufs
    if kernel_check is not None:
        kernel_check(xh, dout_cl)
    bias = b.to(device, dtype)
    with torch.no_grad():
        gates = convlstm_concat.forward(images, low_w[:, :C], low_w[:, C:], bias, *bufs, PADS, 1.0, tl.float32)
        dimages, dw_x, dw_h, db = convlstm_concat.backward(dout_cl, low_w[:, :C], low_w[:, C:], bias, gates, cells,
                                                            xh, PADS, 1.0, tl.float32, torch.float32, True,
                                                            torch.float32)
    xr, wr, br = (t.clone().requires_grad_() for t in (x, w, b))
    want = torch.autograd.grad(reference.convlstm(xr, wr, br, 1.0), (xr, wr, br), dout)
    # dimages is time-major (T*B, C, Hp, Wp), bordered: x's gradient is its (B, T) maps without the border
    got = (dimages.view(T, B, C, n + 1, n + 1)[..., :n, :n].transpose(0, 1), torch.cat([dw_x, dw_h], 1), db)
    return {name: ((g.double().cpu() - e).norm() / e.norm()).item()
            for name, g, e in zip(("input", "weight", "bias"), got, want)}


def is_available() -> tuple[bool, str]:
    """Whether the kernel works here: builds the extension if needed and runs a small level's training forward (two
    windows of 3 steps, 32 channels, 5 x 5) through ``convlstm_concat.forward`` against the float64 reference."""
    if not torch.cuda.is_available():
        return False, "no CUDA device (training takes cuDNN's convolution and the cell kernel)"
    if not takes(torch.bfloat16, torch.float16, 32, 32, (2, 2), PADS):
        return False, "switched off (MSCRED_LSTM_CONV_CELL=0)"
    device = torch.device("cuda", torch.cuda.current_device())
    capability = torch.cuda.get_device_capability(device)
    if capability != (9, 0):
        return False, f"written for Hopper (sm_90a warpgroup MMAs), this device has compute capability {capability}"
    try:
        _extension()
        from mscred.ops import reference
        from mscred.ops.triton import convlstm_concat
        from mscred.ops.triton.runtime import tl
        x, w, b, images, low_w, bufs = _small_level(device)
        C = x.shape[2]
        with torch.no_grad():
            convlstm_concat.forward(images, low_w[:, :C], low_w[:, C:], b.to(device, torch.bfloat16), *bufs, PADS,
                                    1.0, tl.float32)
        want = reference.convlstm(x, w, b, 1.0)
        err = ((bufs[0].double().cpu() - want).norm() / want.norm()).item()
        if not err < 2e-2:
            return False, f"built, but a test level is off by {err:.3g} (relative)"
    except Exception as err:  # noqa: BLE001
        return False, str(err)
    return True, "CUDA kernel built (wgmma), training level 1 of the default model"


def is_backward_available() -> tuple[bool, str]:
    """Whether the backward step kernel works here: the forward's check first, then the backward extension built and
    the small level's training backward (``convlstm_concat.backward``, the kernel taking steps T - 2 .. 0) against
    the float64 reference's gradients of x, the weight and the bias."""
    if not torch.cuda.is_available():  # (said once, not wrapped in the forward's reason)
        return False, "no CUDA device (training takes the cell kernel and cuDNN's transposed convolution)"
    ok, why = is_available()
    if not ok:
        return False, f"needs the forward kernel, which is unavailable: {why}"
    if switched_off("MSCRED_LSTM_CONV_CELL_BWD"):
        return False, "switched off (MSCRED_LSTM_CONV_CELL_BWD=0)"
    try:
        _backward()

        from mscred.ops.triton.attention_last import FoldedGrad

        def takes_it(xh, dout):
            for maps in dout.maps() if isinstance(dout, FoldedGrad) else (dout,):
                if not runs_backward_on_check_level(xh, maps):
                    raise RuntimeError("built, but it does not take the test level")
        device = torch.device("cuda", torch.cuda.current_device())
        for attention in (False, True):  # dL/dh read, and made from the level's attention (FoldedGrad)
            errors = _level_backward_errors(device, kernel_check=takes_it, attention=attention)
            name = max(errors, key=errors.get)
            if not errors[name] < 5e-2:
                how = " with the attention folded in" if attention else ""
                return False, f"built, but a test level's {name} gradient{how} is off by {errors[name]:.3g} (relative)"
    except Exception as err:  # noqa: BLE001
        return False, str(err)
    return True, "CUDA kernel built (wgmma), training level 1's backward steps"
