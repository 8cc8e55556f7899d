"""The fused ConvLSTM (Triton cell kernels + hoisted convolutions) against the float64 reference, forward and backward.

On a CPU machine conftest.py switches on Triton's interpreter, so the same kernels run here at small sizes; on a
CUDA machine they compile for the GPU and the full-size rows run too. The oracle is ``mscred.ops.reference.convlstm``
in float64; the fused op's error in a given dtype must stay within 2x the reference's own error in that dtype.
"""
from __future__ import annotations

import pytest
import torch

from mscred import ops
from mscred.ops import reference as ref
from mscred.ops.triton import convlstm as fused

CUDA = torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"
pytestmark = [pytest.mark.skipif(not fused.is_available()[0], reason=f"fused ConvLSTM unavailable: "
                                                  f"{fused.is_available()[1]}"),
              pytest.mark.usefixtures("strict_float32")]
needs_cuda = pytest.mark.skipif(not CUDA, reason="full-size and bf16 rows need a CUDA device")
FB = 1.0  # forget bias of TensorFlow's ConvLSTMCell


def _inputs(B, T, C, Ch, n, k, seed, dtype=torch.float64, device=DEVICE):
    """Random (never zero) inputs with gate pre-activations of order 1, as in a trained model."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, T, C, n, n, generator=g, dtype=torch.float64)
    w = torch.randn(4 * Ch, C + Ch, k, k, generator=g, dtype=torch.float64) / (k * (C + Ch) ** 0.5)
    b = torch.randn(4 * Ch, generator=g, dtype=torch.float64) * 0.5
    dout = torch.randn(B, T, Ch, n, n, generator=g, dtype=torch.float64)
    return [t.to(device=device, dtype=dtype) for t in (x, w, b, dout)]


def _fwd_bwd(fn, x, w, b, dout):
    x, w, b = (t.detach().clone().requires_grad_() for t in (x, w, b))
    y = fn(x, w, b, FB)
    grads = torch.autograd.grad(y, (x, w, b), dout.to(y.dtype))
    return [y.detach()] + [g_.detach() for g_ in grads]


def _rel(a, b):
    a, b = a.double().cpu(), b.double().cpu()
    return ((a - b).norm() / b.norm().clamp_min(1e-300)).item()


def _check_against_oracle(B, T, C, Ch, n, k, dtype, seed, floor):
    """Fused in ``dtype`` vs the float64 oracle, with the reference in ``dtype`` as the yardstick."""
    x, w, b, dout = _inputs(B, T, C, Ch, n, k, seed)
    oracle = _fwd_bwd(ref.convlstm, x, w, b, dout)
    low = [t.to(dtype) for t in (x, w, b, dout)]
    ours = _fwd_bwd(fused.convlstm, *low)
    theirs = _fwd_bwd(ref.convlstm, *low)
    for name, o, t, r in zip(("h", "dx", "dweight", "dbias"), ours, theirs, oracle):
        assert o.shape == r.shape and o.dtype == dtype, name
        assert torch.isfinite(o).all(), name
        err, ref_err = _rel(o, r), _rel(t, r)
        assert err <= 2 * ref_err + floor, f"{name}: fused error {err:.3g} vs reference error {ref_err:.3g}"


@pytest.fixture(params=["nhwc", "nchw"])
def layout(request, monkeypatch):
    """Both buffer orders of the fused op (channels-last is the default)."""
    monkeypatch.setenv("MSCRED_FUSED_LAYOUT", request.param)
    return request.param


@pytest.mark.parametrize("n", [5, 16, 30])
@pytest.mark.parametrize("B", [1, 3, 7])
@pytest.mark.parametrize("k", [2, 3])
def test_float64_equals_reference(n, B, k, layout):
    """In float64 the fused op computes the same function as the reference to rounding: catches any index error."""
    if k == 3 and layout == "nchw" and B != 3:
        pytest.skip("kernel 3 in NCHW order: one batch size is enough (the kernel code is layout-independent)")
    if CUDA and n != 30:
        pytest.skip("on CUDA the small grid runs at n = 30 only (CI covers it on the interpreter; full size below)")
    x, w, b, dout = _inputs(B, 5, 3, 3, n, k, seed=100 * n + 10 * B + k)
    for name, o, r in zip(("h", "dx", "dweight", "dbias"), _fwd_bwd(fused.convlstm, x, w, b, dout),
                          _fwd_bwd(ref.convlstm, x, w, b, dout)):
        assert _rel(o, r) < 1e-12, name


@pytest.mark.parametrize("n", [5, 16, 30])
@pytest.mark.parametrize("B", [1, 3, 7])
def test_float32_within_twice_reference_error(n, B):
    _check_against_oracle(B, 5, 4, 4, n, 2, torch.float32, seed=7 * n + B, floor=1e-6)


@pytest.mark.parametrize("T", [1, 2])
def test_short_sequences(T, layout):
    """T = 1 has no recurrent convolution at all, T = 2 exactly one: the edge cases of the step loop."""
    x, w, b, dout = _inputs(2, T, 3, 3, 5, 2, seed=T)
    for name, o, r in zip(("h", "dx", "dweight", "dbias"), _fwd_bwd(fused.convlstm, x, w, b, dout),
                          _fwd_bwd(ref.convlstm, x, w, b, dout)):
        assert _rel(o, r) < 1e-12, name


def _stored_channels_last(t):
    """(B, T, C, H, W) with the storage order (B, T, H, W, C): what the channels-last encoder hands the op."""
    return t.permute(0, 1, 3, 4, 2).contiguous().permute(0, 1, 4, 2, 3)


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("Ch", [8, 16, 96])
def test_channels_last_input_and_in_kernel_bias_gradient(k, Ch, layout):
    """The bias gradient inside the cell kernel (nhwc; Ch = 96 > MAX_BLOCK_C: two column programs, the second half
    masked); a channels-last input and output gradient are read in place; h and dx come back in the op's storage
    order. float64 vs the reference."""
    x, w, b, dout = _inputs(3, 5, 8, Ch, 6, k, seed=40 + Ch + k)
    x_cl, dout_cl = _stored_channels_last(x), _stored_channels_last(dout)
    got = _fwd_bwd(fused.convlstm, x_cl, w, b, dout_cl)
    for name, o, r in zip(("h", "dx", "dweight", "dbias"), got, _fwd_bwd(ref.convlstm, x, w, b, dout)):
        assert _rel(o, r) < 1e-12, name
    if layout == "nhwc":
        assert got[0].permute(0, 1, 3, 4, 2).is_contiguous() and got[1].permute(0, 1, 3, 4, 2).is_contiguous()


def test_broadcast_output_gradient(layout):
    """y.sum().backward() hands the op an expanded (all-stride-0) gradient: it must be read as ones."""
    x, w, b, _ = _inputs(2, 3, 4, 4, 5, 2, seed=21)
    grads = []
    for fn in (fused.convlstm, ref.convlstm):
        xx, ww, bb = (t.detach().clone().requires_grad_() for t in (x, w, b))
        fn(xx, ww, bb, FB).sum().backward()
        grads.append((xx.grad, ww.grad, bb.grad))
    for name, o, r in zip(("dx", "dweight", "dbias"), *grads):
        assert _rel(o, r) < 1e-12, name


def test_hidden_size_differs_from_input_channels(layout):
    x, w, b, dout = _inputs(3, 4, 2, 5, 6, 3, seed=11)
    for name, o, r in zip(("h", "dx", "dweight", "dbias"), _fwd_bwd(fused.convlstm, x, w, b, dout),
                          _fwd_bwd(ref.convlstm, x, w, b, dout)):
        assert _rel(o, r) < 1e-12, name


def test_inference_without_autograd_gives_the_same_states(layout):
    """Under no_grad the op skips storing the gate pre-activations; the hidden states must not change."""
    x, w, b, _ = _inputs(3, 5, 3, 3, 7, 2, seed=12)
    with torch.no_grad():
        got = fused.convlstm(x, w, b, FB)
    torch.testing.assert_close(got, ref.convlstm(x, w, b, FB), rtol=1e-12, atol=1e-12)


def test_forget_bias_is_used():
    x, w, b, _ = _inputs(2, 3, 3, 3, 5, 2, seed=3)
    torch.testing.assert_close(fused.convlstm(x, w, b, 0.25), ref.convlstm(x, w, b, 0.25), rtol=1e-12, atol=1e-12)
    assert not torch.allclose(fused.convlstm(x, w, b, 0.25), fused.convlstm(x, w, b, 1.0))


def test_dispatcher_routes_fused_here(monkeypatch):
    """backend "fused" -> this module's convlstm (checked through which function is called)."""
    assert ops.get_impl("convlstm", "fused") is fused.convlstm
    calls, real = [], fused.run_cast
    monkeypatch.setattr(fused, "run_cast", lambda *a: calls.append(1) or real(*a))
    x, w, b, _ = _inputs(1, 2, 2, 2, 4, 2, seed=5)
    torch.testing.assert_close(ops.convlstm(x, w, b, FB, backend="fused"), ref.convlstm(x, w, b, FB))
    assert calls == [1]


@pytest.mark.parametrize("layout", ["nhwc", "nchw"])
def test_opcheck_schema_fake_and_autograd(layout):
    """torch.library.opcheck: schema, fake (meta) kernel, autograd registration, dispatch consistency."""
    x, w, b, _ = _inputs(2, 3, 2, 2, 4, 2, seed=9)
    x.requires_grad_()
    w.requires_grad_()
    b.requires_grad_()
    torch.library.opcheck(fused.convlstm_fused, (x, w, b, FB, layout, True),
                          test_utils=("test_schema", "test_autograd_registration", "test_faketensor"))


@needs_cuda
@pytest.mark.parametrize("B, C, n", [(128, 32, 30), (128, 64, 15), (128, 128, 8), (128, 256, 4), (7, 32, 30),
                                     (3, 256, 4), (1, 64, 55)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_full_size_on_gpu(B, C, n, dtype):
    """The MSCRED levels at batch 128 (and awkward batches), float32 and bf16, kernel 2."""
    _check_against_oracle(B, 5, C, C, n, 2, dtype, seed=B + C + n, floor=1e-5 if dtype == torch.float32 else 1e-3)


@needs_cuda
def test_autocast_casts_inputs_and_keeps_fp32_master_grads():
    x, w, b, dout = _inputs(16, 5, 32, 32, 30, 2, seed=1, dtype=torch.float32)
    w.requires_grad_()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        y = fused.convlstm(x, w, b, FB)
    assert y.dtype == torch.bfloat16
    (y.float() * dout).sum().backward()
    assert w.grad.dtype == torch.float32 and torch.isfinite(w.grad).all()
    oracle = _fwd_bwd(ref.convlstm, *(t.double() for t in (x, w.detach(), b, dout)))
    assert _rel(y, oracle[0]) < 2e-2
    assert _rel(w.grad, oracle[2]) < 5e-2


@needs_cuda
def test_cuda_graph_capture_replays_forward_and_backward():
    x, w, b, dout = _inputs(8, 5, 16, 16, 12, 2, seed=2, dtype=torch.float32)
    w.requires_grad_()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm-up outside the graph (Triton compiles, cuDNN picks algorithms)
        for _ in range(2):
            w.grad = None
            (fused.convlstm(x, w, b, FB) * dout).sum().backward()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    w.grad = None
    with torch.cuda.graph(graph):
        y = fused.convlstm(x, w, b, FB)
        (y * dout).sum().backward()
    x.copy_(torch.randn_like(x))  # replay on new data: the graph must read the static input
    graph.replay()
    torch.cuda.synchronize()
    expect = _fwd_bwd(fused.convlstm, x, w.detach(), b, dout)
    torch.testing.assert_close(y, expect[0])
    torch.testing.assert_close(w.grad, expect[2], rtol=1e-4, atol=1e-4)
