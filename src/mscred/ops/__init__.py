"""Fast ops behind one dispatch point.

The model calls only the three functions below; each takes a ``backend`` name and routes to an implementation:

* ``conv2d``             encoder convolution (+ bias, + optional SELU), TF "same" padding given explicitly.
                          backends: "torch" (reference, cuDNN on GPU), "im2col-global", "im2col-shared",
                          "implicit" (pipelined implicit GEMM), "implicit-basic" (the first implicit GEMM): the
                          CUDA C++ extension in ``ops/im2col``; on CPU the same op runs im2col + matmul.
* ``convlstm``           a whole ConvLSTM sequence of one level.
                          backends: "reference" (plain per-step PyTorch), "fused" (hoisted input convolution +
                          Triton gate/state kernel, ``ops/triton/convlstm.py``).
* ``temporal_attention`` MSCRED's attention over the steps of one level.
                          backends: "reference", "fused" (``ops/triton/attention.py``).

Every fast implementation has a pure-PyTorch twin in ``reference.py`` with the same signature: it is the test
oracle and the CPU path. Implementations load lazily; if one cannot load (no GPU, no Triton, no compiler, a failed
build) the dispatcher warns once and uses the reference, so importing mscred never fails. ``backend_status()``
tells which backends really work here (``mscred env`` prints it).
"""
from __future__ import annotations

import importlib
import logging
import warnings
from typing import Callable, Optional

import torch

log = logging.getLogger(__name__)

# op -> backend -> "module:function". Every function of one op has the same signature as the reference's.
_IMPLEMENTATIONS: dict[str, dict[str, str]] = {
    "conv2d": {
        "torch": "mscred.ops.reference:conv2d",
        "im2col-global": "mscred.ops.im2col:conv2d_im2col_global",
        "im2col-shared": "mscred.ops.im2col:conv2d_im2col_shared",
        # "implicit" is our fastest: the pipelined implicit GEMM (table-driven gather, cp.async stages), measured
        # 2.0x faster than the first implicit kernel on the H200's encoder (benchmarks/results/conv.md);
        # "implicit-basic" keeps that first kernel selectable for comparison.
        "implicit": "mscred.ops.im2col:conv2d_implicit_pipelined",
        "implicit-basic": "mscred.ops.im2col:conv2d_implicit",
    },
    "convlstm": {
        "reference": "mscred.ops.reference:convlstm",
        # cuDNN's recurrent convolution + one Triton cell kernel per step. A Triton implicit-GEMM recurrent conv with
        # the cell in its epilogue was measured slower in the whole model and removed (docs/kernel-experiments.md).
        "fused": "mscred.ops.triton.convlstm:convlstm",
    },
    "temporal_attention": {
        "reference": "mscred.ops.reference:temporal_attention",
        "fused": "mscred.ops.triton.attention:temporal_attention",
    },
}
_REFERENCE = {"conv2d": "torch", "convlstm": "reference", "temporal_attention": "reference"}

CONV_BACKENDS = tuple(_IMPLEMENTATIONS["conv2d"])
MODEL_BACKENDS = tuple(_IMPLEMENTATIONS["convlstm"])
AUTO = "auto"  # a model backend chosen by the device (resolve_model_backend)
AUTO_MIN_CAPABILITY = (8, 0)  # "auto" picks the fused kernels from Ampere on

_resolved: dict[tuple[str, str], Callable] = {}
_warned: set[tuple[str, str]] = set()


def _load(op: str, backend: str) -> Callable:
    module, attr = _IMPLEMENTATIONS[op][backend].split(":")
    return getattr(importlib.import_module(module), attr)


def get_impl(op: str, backend: str) -> Callable:
    """The function that runs ``op`` on ``backend``; the reference (with one warning) if that cannot load."""
    if op not in _IMPLEMENTATIONS:
        raise ValueError(f"unknown op {op!r}")
    if backend not in _IMPLEMENTATIONS[op]:
        choices = ", ".join(_IMPLEMENTATIONS[op])
        raise ValueError(f"unknown backend {backend!r} for {op}; choose one of: {choices}")
    key = (op, backend)
    if key not in _resolved:
        try:
            _resolved[key] = _load(op, backend)
        except Exception as err:  # noqa: BLE001 - any load failure means "fall back", said once
            if key not in _warned:
                _warned.add(key)
                warnings.warn(f"mscred: {op} backend {backend!r} unavailable ({type(err).__name__}: {err}); "
                              f"using the reference", RuntimeWarning, stacklevel=3)
            _resolved[key] = _load(op, _REFERENCE[op])
    return _resolved[key]


def conv2d(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], stride: int,
           padding: tuple[int, int, int, int], selu: bool, backend: str = "torch") -> torch.Tensor:
    """2-D convolution with explicit (top, bottom, left, right) zero padding, plus bias, then SELU if ``selu``.

    x (N, C, H, W), weight (O, C, kh, kw), bias (O,) or None -> (N, O, Ho, Wo).
    """
    return get_impl("conv2d", backend)(x, weight, bias, stride, padding, selu)


def convlstm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, forget_bias: float,
             backend: str = "reference") -> torch.Tensor:
    """Run a ConvLSTM over all steps of one level, starting from h = c = 0; returns every hidden state.

    x (B, T, C, H, W); weight (4*C, 2*C, k, k) acting on concat([x_t, h_{t-1}]) along channels, with TF "same"
    padding (k = 2: pad bottom/right by 1; k = 3: 1 on every side); bias (4*C,). Gate order along the output
    channels is TensorFlow's: i, g (candidate), f, o.
        c_t = sigmoid(f + forget_bias) * c_{t-1} + sigmoid(i) * tanh(g);  h_t = sigmoid(o) * tanh(c_t)
    Returns H (B, T, C, H, W).
    """
    return get_impl("convlstm", backend)(x, weight, bias, forget_bias)


def temporal_attention(h: torch.Tensor, backend: str = "reference") -> torch.Tensor:
    """MSCRED's attention: a_k = softmax_k(<H_k, H_T> / T), out = sum_k a_k H_k (no learned weights).

    h (B, T, C, H, W) -> (B, C, H, W); the inner product is over C, H, W of each sample.
    """
    return get_impl("temporal_attention", backend)(h)


def resolve_model_backend(name: str, device: str | torch.device) -> str:
    """``name`` with "auto" made concrete for ``device``: "fused" on a CUDA device where Triton runs (with CUDA
    graphs its training step was 3.6x (float32) to 5.9x (bf16) faster than the reference's eager step on the H200,
    benchmarks/results/ablations/), else "reference" (on a CPU the fused ops would run PyTorch ops anyway, in a
    layout slower there). Other names are returned as they are."""
    if name != AUTO:
        if name == "fused" and torch.device(device).type != "cuda":
            from mscred.ops.triton.runtime import interpreting

            if not interpreting():   # (the fused ops take their reference path there: a silent no-op once)
                from mscred.errors import IgnoredSettingWarning

                warnings.warn(IgnoredSettingWarning(
                    f"--backend fused (backend='fused') ignored: its Triton kernels run on CUDA devices (or under "
                    f"Triton's CPU interpreter, TRITON_INTERPRET=1); the reference ops run on "
                    f"{torch.device(device).type}"), stacklevel=2)
        return name
    device = torch.device(device)
    if device.type != "cuda":
        return "reference"
    from mscred.ops.triton.runtime import is_available

    ok, why = is_available("the fused backend")
    if ok and torch.cuda.get_device_capability(device) < AUTO_MIN_CAPABILITY:
        # The kernels were written and measured for Ampere and later (bf16 tensor cores, cp.async); an older GPU
        # keeps the reference ops unless asked for --backend fused.
        ok, why = False, f"compute capability {torch.cuda.get_device_capability(device)} < {AUTO_MIN_CAPABILITY}"
    if not ok:
        log.info("backend auto: reference (%s)", why)
    return "fused" if ok else "reference"


def backend_status() -> dict[str, dict[str, str]]:
    """For each op and backend: "ok", or why it is not usable here (tries to load and, on GPU, to run it)."""
    status: dict[str, dict[str, str]] = {}
    for op, backends in _IMPLEMENTATIONS.items():
        status[op] = {}
        for backend in backends:
            try:
                fn = _load(op, backend)
                check = getattr(importlib.import_module(fn.__module__), "is_available", None)
                ok, why = check() if check is not None else (True, "")
                status[op][backend] = "ok" if ok else f"unavailable: {why}"
            except Exception as err:  # noqa: BLE001
                status[op][backend] = f"unavailable: {type(err).__name__}: {err}"
    return status
