"""conv1's weight gradient in CUDA C++ (``ops/small_conv_wgrad``) against float64, through the op that routes to it
(``small_conv.small_conv_fused_backward``), beside the Triton kernel it replaces there.

On a CUDA device: the training step's call (640 images of 30 x 30, 32 channels, the gradients and the output as
interiors of zero-bordered channels-last buffers, a second gradient, SELU) and awkward ones (3 x 5 x 7, one pixel,
16 / 8 / 24 channels, without the second gradient or SELU, NCHW input). Each weight and bias gradient's error
(relative, norm) against float64 arithmetic on the same bf16 inputs must be within 1.5x the Triton kernel's plus a
small floor: both round dz to bf16 for the tensor cores, and sum in float32. On a CPU machine the CUDA tests skip;
the routing's refusals (what the kernel does not take) are checked everywhere.
"""
from __future__ import annotations

import pytest
import torch

from mscred.ops import small_conv_wgrad as cuda_wgrad
from mscred.ops.triton import small_conv as sc
from mscred.ops.triton.bias_act import SELU_ALPHA, SELU_SCALE

CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="the CUDA kernel needs a CUDA device (GPU runs: "
                                                 "benchmarks/results/conv1_wgrad_cuda/)")


def _bordered(n, co, h, w, gen, border=True):
    """(n, co, h, w) bf16 channels-last; with ``border``, the interior of a buffer one row and column larger on
    each side (as the training encoder's conv1 output), so its strides are the buffer's."""
    if not border:
        return torch.randn(n, co, h, w, generator=gen).to("cuda", torch.bfloat16).contiguous(
            memory_format=torch.channels_last)
    full = torch.randn(n, co, h + 2, w + 2, generator=gen).to("cuda", torch.bfloat16).contiguous(
        memory_format=torch.channels_last)
    return full[:, :, 1:h + 1, 1:w + 1]


def _oracle(x, dout, dout2, out, selu):
    """float64 (dweight, dbias) with dz as the kernels form it: the two gradients summed in bf16."""
    g = dout if dout2 is None else (dout + dout2)
    dz = g.double()
    if selu:
        o = out.double()
        dz = dz * torch.where(o > 0, SELU_SCALE, o + SELU_SCALE * SELU_ALPHA)
    dw = torch.nn.grad.conv2d_weight(x.double(), (dout.shape[1], 3, 3, 3), dz, padding=1)
    return dw, dz.sum((0, 2, 3))


def _rel(a, b):
    return ((a.double() - b).norm() / b.norm().clamp_min(1e-300)).item()


@needs_cuda
@pytest.mark.parametrize("n,h,w,co,second,selu,border,nchw", [
    (640, 30, 30, 32, True, True, True, False),  # the training step's call
    (3, 5, 7, 32, True, True, True, False),
    (2, 17, 13, 16, False, True, True, False),
    (1, 1, 1, 8, False, False, False, False),
    (5, 9, 31, 24, True, False, True, True),
])
def test_against_float64_and_the_triton_kernel(n, h, w, co, second, selu, border, nchw, monkeypatch):
    gen = torch.Generator().manual_seed(n * 1000 + h * 10 + co)
    x = torch.randn(n, 3, h, w, generator=gen).to("cuda", torch.bfloat16)
    if not nchw:
        x = x.contiguous(memory_format=torch.channels_last)
    dout = _bordered(n, co, h, w, gen, border)
    dout2 = _bordered(n, co, h, w, gen, border) if second else None
    out = _bordered(n, co, h, w, gen, border)
    weight = torch.empty(co, 3, 3, 3, device="cuda", dtype=torch.bfloat16)
    assert cuda_wgrad.runs(x, tuple(weight.shape), dout, dout2, out if selu else None)
    want_dw, want_db = _oracle(x, dout, dout2, out, selu)
    _, dw, db = sc.small_conv_fused_backward(dout, x, weight, out, selu, False, dout2)
    monkeypatch.setenv("MSCRED_SMALL_CONV_WGRAD_CUDA", "0")
    assert not cuda_wgrad.runs(x, tuple(weight.shape), dout, dout2, out if selu else None)
    _, dw_triton, db_triton = sc.small_conv_fused_backward(dout, x, weight, out, selu, False, dout2)
    torch.cuda.synchronize()
    assert dw.shape == weight.shape and dw.dtype == weight.dtype and db.dtype == torch.float32
    for name, got, triton, want in (("dweight", dw, dw_triton, want_dw), ("dbias", db, db_triton, want_db)):
        assert torch.isfinite(got).all(), name
        err, ref = _rel(got.cpu(), want.cpu()), _rel(triton.cpu(), want.cpu())
        assert err <= 1.5 * ref + 1e-4, f"{name}: CUDA {err:.3g} against Triton {ref:.3g}"


@needs_cuda
def test_graph_replay_matches_the_eager_call():
    """Captured in a CUDA graph (as the training step runs it), replays give the eager call's gradients."""
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(64, 3, 30, 30, generator=gen).to("cuda", torch.bfloat16).contiguous(
        memory_format=torch.channels_last)
    dout, dout2, out = (_bordered(64, 32, 30, 30, gen) for _ in range(3))
    eager = cuda_wgrad.weight_grad(x, dout, dout2, out)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = cuda_wgrad.weight_grad(x, dout, dout2, out)
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    for a, b in zip(captured, eager):
        assert _rel(a.cpu(), b.double().cpu()) < 1e-5  # float32 atomics: the order of the sums may differ


def test_refuses_what_it_is_not_written_for(monkeypatch):
    """The routing's refusals, on any machine (CPU tensors are refused first; the rest on meta-free checks)."""
    x = torch.zeros(2, 3, 5, 5, dtype=torch.bfloat16)
    g = torch.zeros(2, 32, 5, 5, dtype=torch.bfloat16).contiguous(memory_format=torch.channels_last)
    assert not cuda_wgrad.takes(x, (32, 3, 3, 3), g, None, None)  # not CUDA
    assert cuda_wgrad.vector_rows(g) and cuda_wgrad.vector_rows(None)
    assert not cuda_wgrad.vector_rows(g.contiguous())  # NCHW: channels not contiguous
    assert not cuda_wgrad.vector_rows(g.float().contiguous(memory_format=torch.channels_last))  # not bf16
    odd = torch.zeros(2, 36, 5, 5, dtype=torch.bfloat16).contiguous(memory_format=torch.channels_last)[:, :30]
    assert not cuda_wgrad.vector_rows(odd)  # pixel stride 36: not a multiple of 8
    if CUDA:
        xc, gc = x.cuda(), g.cuda()
        assert cuda_wgrad.takes(xc, (32, 3, 3, 3), gc, None, None)
        assert not cuda_wgrad.takes(xc, (20, 3, 3, 3), gc[:, :20], None, None)  # channels not a multiple of 8
        assert not cuda_wgrad.takes(xc, (32, 3, 5, 5), gc, None, None)  # 5 x 5
        monkeypatch.setenv("MSCRED_SMALL_CONV_WGRAD_CUDA", "0")
        assert not cuda_wgrad.takes(xc, (32, 3, 3, 3), gc, None, None)
