"""The thesis's convolution kernels as a PyTorch op: im2col + GEMM (global / shared memory) and implicit GEMM.

One custom op, ``mscred::im2col_conv2d(x, weight, bias, stride, padding, selu, variant)``, computes
``act(conv2d(pad(x), weight) + bias)`` with explicit (top, bottom, left, right) zero padding (so TF "same",
asymmetric padding is exact) and act = SELU when ``selu``. ``variant`` picks the algorithm:

* ``"global"``   im2col kernel writes the column matrix (C*kh*kw, N*Ho*Wo); a GEMM kernel that reads its operands
                 straight from global memory multiplies it by the weights (the thesis's first GPU version);
* ``"shared"``   the same column matrix, multiplied by a tiled GEMM that stages 64x128 tiles in shared memory
                 (the thesis's optimised version);
* ``"implicit"`` no column matrix: tiles of it are gathered from x into shared memory inside the GEMM (padding by
                 bounds checks), multiplied on the tensor cores in TF32 (as cuDNN's default for float32
                 convolutions), bias + SELU applied in the epilogue;
* ``"implicit-pipe"`` the same GEMM with a table-driven gather (per-block k -> input offset table, per-pixel
                 padding bit mask) and a multi-stage cp.async pipeline, ldmatrix fragment loads, a tile shape per
                 layer (128 x 64 for >= 128 filters) and, where taps pair up (even kernel width, stride,
                 left padding and image width), two taps per 8-byte copy into a pixel-major tile; shapes
                 it does not take (more than 32 taps per window) run ``"implicit"``. Non-overlapping 2 x 2
                 patches of 8 x 8 images (conv4 at n = 30, conv3 at n = 16; channels a multiple of 8) go to a
                 kernel of their own that copies whole channel planes of whole images (16-byte cp.async, no
                 gather table) and does the im2col rearrangement in its fragment loads.

The backward op (``mscred::im2col_conv2d_backward``) runs col2im for the input gradient and GEMMs for the weight
gradient (the shared-memory GEMM for "shared" and both implicit variants, the global one for "global"), in exact
float32.
On CUDA the kernels come from ``im2col.cu`` / ``binding.cpp``, compiled on first use with
``torch.utils.cpp_extension.load`` (ninja, cached under the torch extensions directory, built for the present
device's architecture, e.g. ``sm_90`` on an H200). On the CPU, and for dtypes other than float32, the same op runs
im2col + matmul in plain PyTorch (``F.unfold`` / ``F.fold``).

The three public functions have the ``conv2d`` contract of ``mscred.ops``. If the CUDA build fails they warn once and
use the reference convolution; ``is_available()`` says whether the CUDA kernels really work here.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Optional

import torch
import torch.nn.functional as F

from mscred.ops.cuda_extension import LazyExtension, cuda_target  # noqa: F401 - cuda_target re-exported

__all__ = ["conv2d_im2col_global", "conv2d_im2col_shared", "conv2d_implicit", "conv2d_implicit_pipelined",
           "is_available", "output_size"]

_VARIANTS = {"global": 0, "shared": 1, "implicit": 2, "implicit-pipe": 3}
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946
_SRC = Path(__file__).resolve().parent


# --------------------------------------------------------------------------------------------------------------
# Shapes
# --------------------------------------------------------------------------------------------------------------
def output_size(height: int, width: int, kernel: tuple[int, int], stride: int,
                padding: tuple[int, int, int, int]) -> tuple[int, int]:
    """(Ho, Wo) of a convolution of an (height, width) input with explicit (top, bottom, left, right) padding."""
    top, bottom, left, right = padding
    return ((height + top + bottom - kernel[0]) // stride + 1, (width + left + right - kernel[1]) // stride + 1)


def _check(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], stride: int,
           padding) -> None:
    if x.dim() != 4 or weight.dim() != 4:
        raise ValueError(f"im2col conv2d: x and weight must be 4-D, got {tuple(x.shape)} and {tuple(weight.shape)}")
    if x.shape[1] != weight.shape[1]:
        raise ValueError(f"im2col conv2d: x has {x.shape[1]} channels but weight expects {weight.shape[1]}")
    if bias is not None and tuple(bias.shape) != (weight.shape[0],):
        raise ValueError(f"im2col conv2d: bias shape {tuple(bias.shape)} != ({weight.shape[0]},)")
    if stride < 1 or len(padding) != 4 or min(padding) < 0:
        raise ValueError(f"im2col conv2d: need stride >= 1 and 4 non-negative paddings, got {stride}, {padding}")
    ho, wo = output_size(x.shape[2], x.shape[3], (weight.shape[2], weight.shape[3]), stride, tuple(padding))
    if ho < 1 or wo < 1:
        raise ValueError(f"im2col conv2d: input {tuple(x.shape[2:])} too small for kernel {tuple(weight.shape[2:])}")


# --------------------------------------------------------------------------------------------------------------
# Plain PyTorch im2col + matmul: the CPU kernel of the op (and the path for dtypes the CUDA kernels don't take)
# --------------------------------------------------------------------------------------------------------------
def _torch_forward(x, weight, bias, stride, padding, selu):
    top, bottom, left, right = padding
    n, o = x.shape[0], weight.shape[0]
    kernel = (weight.shape[2], weight.shape[3])
    ho, wo = output_size(x.shape[2], x.shape[3], kernel, stride, tuple(padding))
    col = F.unfold(F.pad(x, (left, right, top, bottom)), kernel, stride=stride)  # (N, C*kh*kw, Ho*Wo)
    out = weight.reshape(o, -1) @ col                                              # (N, O, Ho*Wo)
    if bias is not None:
        out = out + bias[:, None]
    out = out.reshape(n, o, ho, wo)
    return F.selu(out) if selu else out


def _selu_grad(gy, y):
    # y = scale*alpha*(exp(z)-1) for z <= 0, so dy/dz = y + scale*alpha there (PyTorch's elu_backward on the result).
    return gy * torch.where(y > 0, torch.full_like(y, _SELU_SCALE), y + _SELU_SCALE * _SELU_ALPHA)


def _torch_backward(gy, x, weight, y, stride, padding, selu, needs):
    top, bottom, left, right = padding
    n, c, h, w = x.shape
    o = weight.shape[0]
    kernel = (weight.shape[2], weight.shape[3])
    gz = (_selu_grad(gy, y) if selu else gy).reshape(n, o, -1)                    # (N, O, Ho*Wo)
    gx, gw, gb = x.new_empty(0), x.new_empty(0), x.new_empty(0)  # distinct: outputs may not alias
    if needs[0]:
        gcol = weight.reshape(o, -1).t() @ gz                                       # (N, C*kh*kw, Ho*Wo)
        gxp = F.fold(gcol, (h + top + bottom, w + left + right), kernel, stride=stride)   # col2im
        gx = gxp[:, :, top:top + h, left:left + w].contiguous()
    if needs[1]:
        col = F.unfold(F.pad(x, (left, right, top, bottom)), kernel, stride=stride)
        gw = (gz @ col.transpose(1, 2)).sum(0).reshape(weight.shape)
    if needs[2]:
        gb = gz.sum((0, 2)).to(weight.dtype)
    return gx, gw, gb


def _cuda_path(*tensors: Optional[torch.Tensor]) -> bool:
    return all(t is None or (t.is_cuda and t.dtype == torch.float32) for t in tensors)


# --------------------------------------------------------------------------------------------------------------
# The CUDA extension: built once per process on first use (and cached on disk by torch between processes)
# --------------------------------------------------------------------------------------------------------------
def sources_digest() -> str:
    """A short digest of the extension's sources and headers (every .cu, .cuh, .cpp and .h here)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in _SRC.iterdir() if p.suffix in (".cu", ".cuh", ".cpp", ".h")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


# The extension: built for the present GPU on first use, the digest of every source and header a build flag (torch
# rebuilds a cached extension only when its listed sources or flags change, and the kernels live in headers that
# im2col.cu includes).
_extension = LazyExtension("im2col CUDA extension", "mscred_im2col", _SRC, ["binding.cpp", "im2col.cu"],
                           lambda: ([f"-DMSCRED_IM2COL_SOURCES={sources_digest()}"], ""))


# --------------------------------------------------------------------------------------------------------------
# The ops
# --------------------------------------------------------------------------------------------------------------
@torch.library.custom_op("mscred::im2col_conv2d", mutates_args=())
def im2col_conv2d(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], stride: int,
                  padding: list[int], selu: bool, variant: str) -> torch.Tensor:
    """act(conv2d(pad(x), weight) + bias): x (N, C, H, W), weight (O, C, kh, kw), bias (O,) -> (N, O, Ho, Wo)."""
    return _torch_forward(x, weight, bias, stride, padding, selu)


@im2col_conv2d.register_kernel("cuda")
def _im2col_conv2d_cuda(x, weight, bias, stride, padding, selu, variant):
    if variant not in _VARIANTS:
        raise ValueError(f"im2col conv2d: unknown variant {variant!r}")
    if not _cuda_path(x, weight, bias):
        return _torch_forward(x, weight, bias, stride, padding, selu)
    ho, wo = output_size(x.shape[2], x.shape[3], (weight.shape[2], weight.shape[3]), stride, tuple(padding))
    return _extension().forward(x.contiguous(), weight.contiguous(), None if bias is None else bias.contiguous(),
                                stride, padding[0], padding[2], ho, wo, selu, _VARIANTS[variant])


@im2col_conv2d.register_fake
def _im2col_conv2d_fake(x, weight, bias, stride, padding, selu, variant):
    ho, wo = output_size(x.shape[2], x.shape[3], (weight.shape[2], weight.shape[3]), stride, tuple(padding))
    return x.new_empty((x.shape[0], weight.shape[0], ho, wo))


@torch.library.custom_op("mscred::im2col_conv2d_backward", mutates_args=())
def im2col_conv2d_backward(grad: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, y: torch.Tensor, stride: int,
                           padding: list[int], selu: bool, variant: str,
                           needs: list[bool]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(grad_x, grad_weight, grad_bias) of im2col_conv2d given its output y; an output not in ``needs`` is empty."""
    return _torch_backward(grad, x, weight, y, stride, padding, selu, needs)


@im2col_conv2d_backward.register_kernel("cuda")
def _im2col_conv2d_backward_cuda(grad, x, weight, y, stride, padding, selu, variant, needs):
    if not _cuda_path(grad, x, weight, y):
        return _torch_backward(grad, x, weight, y, stride, padding, selu, needs)
    gx, gw, gb = _extension().backward(grad.contiguous(), x.contiguous(), weight.contiguous(), y.contiguous(), stride,
                                       padding[0], padding[2], selu, _VARIANTS[variant], *needs)
    return gx, gw, gb


@im2col_conv2d_backward.register_fake
def _im2col_conv2d_backward_fake(grad, x, weight, y, stride, padding, selu, variant, needs):
    return (x.new_empty(x.shape if needs[0] else (0,)), weight.new_empty(weight.shape if needs[1] else (0,)),
            weight.new_empty((weight.shape[0],) if needs[2] else (0,)))


def _setup_context(ctx, inputs, output):
    x, weight, bias, stride, padding, selu, variant = inputs
    ctx.save_for_backward(x, weight, output)
    ctx.conv = (stride, list(padding), selu, variant, bias is not None)


def _backward(ctx, grad):
    x, weight, y = ctx.saved_tensors
    stride, padding, selu, variant, has_bias = ctx.conv
    needs = [bool(ctx.needs_input_grad[0]), bool(ctx.needs_input_grad[1]),
             bool(has_bias and ctx.needs_input_grad[2])]
    gx, gw, gb = torch.ops.mscred.im2col_conv2d_backward(grad, x, weight, y, stride, padding, selu, variant, needs)
    return (gx if needs[0] else None, gw if needs[1] else None, gb if needs[2] else None, None, None, None, None)


im2col_conv2d.register_autograd(_backward, setup_context=_setup_context)


# --------------------------------------------------------------------------------------------------------------
# Public functions (the conv2d contract of mscred.ops)
# --------------------------------------------------------------------------------------------------------------
def _conv(x, weight, bias, stride, padding, selu, variant):
    stride, padding, selu = int(stride), [int(p) for p in padding], bool(selu)
    _check(x, weight, bias, stride, padding)
    if x.is_cuda and _cuda_path(x, weight, bias) and not _extension.usable("conv2d uses the reference convolution"):
        from mscred.ops.reference import conv2d as reference_conv2d
        return reference_conv2d(x, weight, bias, stride, tuple(padding), selu)
    return torch.ops.mscred.im2col_conv2d(x, weight, bias, stride, padding, selu, variant)


def conv2d_im2col_global(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], stride: int,
                         padding: tuple[int, int, int, int], selu: bool) -> torch.Tensor:
    """im2col kernel + GEMM reading global memory. x (N, C, H, W), weight (O, C, kh, kw) -> (N, O, Ho, Wo)."""
    return _conv(x, weight, bias, stride, padding, selu, "global")


def conv2d_im2col_shared(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], stride: int,
                         padding: tuple[int, int, int, int], selu: bool) -> torch.Tensor:
    """im2col kernel + shared-memory tiled GEMM. x (N, C, H, W), weight (O, C, kh, kw) -> (N, O, Ho, Wo)."""
    return _conv(x, weight, bias, stride, padding, selu, "shared")


def conv2d_implicit(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], stride: int,
                    padding: tuple[int, int, int, int], selu: bool) -> torch.Tensor:
    """Implicit GEMM (TF32 tensor cores), bias + SELU fused. x (N, C, H, W), weight (O, C, kh, kw) -> (N, O, Ho, Wo)."""
    return _conv(x, weight, bias, stride, padding, selu, "implicit")


def conv2d_implicit_pipelined(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], stride: int,
                              padding: tuple[int, int, int, int], selu: bool) -> torch.Tensor:
    """Pipelined implicit GEMM (table-driven gather, cp.async stages, TF32), bias + SELU fused; same contract."""
    return _conv(x, weight, bias, stride, padding, selu, "implicit-pipe")


def is_available() -> tuple[bool, str]:
    """Whether the CUDA kernels work here: builds the extension if needed and runs one small convolution."""
    if not torch.cuda.is_available():
        return False, "no CUDA device (the op still runs on CPU through its im2col + matmul path)"
    try:
        ext = _extension()
        x = torch.randn(2, 3, 7, 7, device="cuda")
        w = torch.randn(4, 3, 3, 3, device="cuda")
        y = ext.forward(x, w, None, 1, 1, 1, 7, 7, False, 2)
        torch.cuda.synchronize()
        err = (y - F.conv2d(x, w, padding=1)).abs().max().item()
        if not err < 1e-1:
            return False, f"CUDA kernels built but a test convolution is off by {err:.3g}"
    except Exception as err:  # noqa: BLE001
        return False, str(err)
    return True, f"CUDA kernels built for {cuda_target(*torch.cuda.get_device_capability())[0]}"
