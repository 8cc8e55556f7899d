"""The opt-in implicit-GEMM recurrent ConvLSTM (``ops/triton/convlstm_fused_rec.py``) against the float64 reference.

On a CPU machine conftest.py switches on Triton's interpreter, so the kernel (tl.dot included) runs here at small
sizes; on a CUDA machine it compiles for the GPU and the full-size rows run too. The oracle is
``mscred.ops.reference.convlstm`` in float64. The sizes are the product's levels' hidden widths (Ch = 32, 64) at
n = 5, 8 and both TF "same" paddings (k = 2: bottom/right; k = 3: one on every side).
"""
from __future__ import annotations

import pytest
import torch

from mscred.ops import reference as ref
from mscred.ops.triton import convlstm as fused
from mscred.ops.triton import convlstm_fused_rec as rec

CUDA = torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"
pytestmark = [pytest.mark.skipif(not rec.is_available()[0], reason=f"Triton kernels unavailable: "
                                                  f"{rec.is_available()[1]}"),
              pytest.mark.usefixtures("strict_float32")]
needs_cuda = pytest.mark.skipif(not CUDA, reason="full-size rows need a CUDA device (the CPU interpreter would take "
                                                 "minutes per row)")
FB = 1.0  # forget bias of TensorFlow's ConvLSTMCell
T = 5     # MSCRED's window of steps
C = 4     # input channels: only the (cuDNN / oneDNN) input convolution sees them, so a few suffice


def _inputs(B, Ch, n, k, seed, C=C, T=T):
    """float64 inputs with gate pre-activations of order 1 (as in a trained model), on DEVICE."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, T, C, n, n, generator=g, dtype=torch.float64)
    w = torch.randn(4 * Ch, C + Ch, k, k, generator=g, dtype=torch.float64) / (k * (C + Ch) ** 0.5)
    b = torch.randn(4 * Ch, generator=g, dtype=torch.float64) * 0.5
    dout = torch.randn(B, T, Ch, n, n, generator=g, dtype=torch.float64)
    return [t.to(DEVICE) for t in (x, w, b, dout)]


def _rel(a, b):
    a, b = a.double().cpu(), b.double().cpu()
    return ((a - b).norm() / b.norm().clamp_min(1e-300)).item()


@pytest.mark.parametrize("n", [5, 8])
@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("Ch", [32, 64])
@pytest.mark.parametrize("B", [1, 3])
def test_float64_equals_reference(n, k, Ch, B):
    """float64 (tl.dot in float64, float64 cell state): the same function as the reference to rounding, so any
    error in the gather (taps, padding masks, strides) or in the packed weight's indexing shows at 1e-12."""
    x, w, b, _ = _inputs(B, Ch, n, k, seed=1000 * k + 100 * n + Ch + B)
    assert _rel(rec.convlstm(x, w, b, FB), ref.convlstm(x, w, b, FB)) < 1e-12


@pytest.mark.parametrize("n,k,Ch,B", [(5, 2, 32, 3), (8, 3, 64, 1), (8, 2, 64, 3), (5, 3, 32, 1)])
def test_float32_within_twice_reference_error(n, k, Ch, B):
    """float32: the error against the float64 oracle within 2x the reference's own float32 error (plus 1e-6 for
    the case where that error happens to be tiny). Both sum the same K*K*(C+Ch) products in float32, in different
    orders, so their errors are of one size (~1e-7 relative here); an indexing bug would be O(1)."""
    x, w, b, _ = _inputs(B, Ch, n, k, seed=7 + n + k + Ch + B)
    oracle = ref.convlstm(x, w, b, FB)
    lo = [t.float() for t in (x, w, b)]
    ours, theirs = rec.convlstm(*lo, FB), ref.convlstm(*lo, FB)
    assert ours.dtype == torch.float32 and torch.isfinite(ours).all()
    err, ref_err = _rel(ours, oracle), _rel(theirs, oracle)
    assert err <= 2 * ref_err + 1e-6, f"error {err:.3g} vs reference float32 error {ref_err:.3g}"


@pytest.mark.parametrize("n,k,Ch,B", [(5, 2, 32, 3), (8, 3, 64, 3), (8, 2, 32, 1), (5, 3, 64, 1)])
def test_bf16_inputs_not_worse_than_fused_op(n, k, Ch, B):
    """bf16 x and weight with a float32 bias (what autocast gives the op): h stored in bf16, cell state fp32.

    Yardstick: convlstm.py's fused op on the same bf16 inputs. Both round x, W and every h_t to bf16 (2^-9
    relative; ~5e-3 on h after 5 steps here); that op also rounds its recurrent gates to bf16 before adding them,
    where this one keeps them in fp32, so this one must be no worse. Allowed: 1.25x that op's error plus 1e-3 (the
    summation order of the bf16 products differs: the two errors are correlated, not equal)."""
    x, w, b, _ = _inputs(B, Ch, n, k, seed=300 + n + k + Ch + B)
    oracle = ref.convlstm(x, w, b, FB)
    xb, wb, bf = x.bfloat16(), w.bfloat16(), b.float()
    ours = rec.convlstm_fused_rec(xb, wb, bf, FB, "nhwc", False, [])[0]
    theirs = fused.convlstm_fused(xb, wb, bf, FB, "nhwc", False)[0]
    assert ours.dtype == torch.bfloat16 and torch.isfinite(ours.float()).all()
    err, their_err = _rel(ours, oracle), _rel(theirs, oracle)
    assert err <= 1.25 * their_err + 1e-3, f"error {err:.3g} vs fused op's {their_err:.3g}"
    assert err < 2e-2  # and absolutely: a few bf16 roundings, not a wrong gate


@pytest.mark.parametrize("n,k,Ch,B", [(5, 2, 32, 3), (8, 3, 64, 1)])
def test_one_dot_variant(n, k, Ch, B):
    """blocks[4] = 1: the four gates' weights as one (BLOCK_K x 4Ch) tile and one dot, the gates split out of the
    accumulator afterwards (reshape / permute / split): float64 to rounding (a gate mix-up would be O(1)), and the
    same bf16 bound as the four-dot kernel."""
    x, w, b, _ = _inputs(B, Ch, n, k, seed=500 + n + k + Ch + B)
    blocks = [64, Ch, 32, 4, 1]
    oracle = ref.convlstm(x, w, b, FB)
    assert _rel(rec.convlstm(x, w, b, FB, blocks=blocks), oracle) < 1e-12
    xb, wb, bf = x.bfloat16(), w.bfloat16(), b.float()
    ours = rec.convlstm_fused_rec(xb, wb, bf, FB, "nhwc", False, blocks)[0]
    theirs = fused.convlstm_fused(xb, wb, bf, FB, "nhwc", False)[0]
    assert _rel(ours, oracle) <= 1.25 * _rel(theirs, oracle) + 1e-3


def test_one_dot_needs_a_single_channel_block():
    x, w, b, _ = _inputs(1, 32, 5, 2, seed=3)
    with pytest.raises(ValueError, match="BLOCK_C == Ch"):
        rec.convlstm(x, w, b, FB, blocks=[64, 16, 16, 4, 1])


@pytest.mark.parametrize("k", [2, 3])
def test_training_reuses_the_fused_backward(k):
    """With autograd the kernel writes the pre-activations and the zero-bordered h_0..h_{T-2}; convlstm.py's
    backward on them gives the reference's dx, dweight, dbias (float64: to rounding)."""
    x, w, b, dout = _inputs(3, 32, 5, k, seed=40 + k)
    res = []
    for fn in (rec.convlstm, ref.convlstm):
        xs, ws, bs = (t.detach().clone().requires_grad_() for t in (x, w, b))
        y = fn(xs, ws, bs, FB)
        res.append([y.detach(), *torch.autograd.grad(y, (xs, ws, bs), dout)])
    for name, o, r in zip(("h", "dx", "dweight", "dbias"), *res):
        assert _rel(o, r) < 1e-12, name


def test_inference_stores_no_pre_activations_nor_padded_h():
    """save=False: no gate pre-activations, no zero-bordered h copies, the same hidden states as with save=True."""
    x, w, b, _ = _inputs(2, 32, 5, 2, seed=5)
    out0, pre0, cells0, hp0 = rec.convlstm_fused_rec(x, w, b, FB, "nhwc", False, [])
    out1, pre1, cells1, hp1 = rec.convlstm_fused_rec(x, w, b, FB, "nhwc", True, [])
    assert pre0.shape[0] == 0 and hp0.shape[0] == 0
    assert pre1.shape[0] == T and hp1.shape[0] == T - 1
    assert torch.equal(out0, out1) and torch.equal(cells0, cells1)
    # the saved pre-activations are the reference's gates: check the last step's against a direct computation
    h_prev = out1[:, -2]
    xh = torch.nn.functional.pad(torch.cat([x[:, -1], h_prev], dim=1), (0, 1, 0, 1))
    assert _rel(pre1[-1], torch.nn.functional.conv2d(xh, w, b)) < 1e-12


@pytest.mark.parametrize("steps", [1, 2])
def test_short_sequences(steps):
    """T = 1 (no recurrent step: the kernel never runs) and T = 2 (one), float64."""
    x, w, b, _ = _inputs(2, 32, 5, 3, seed=60 + steps, T=steps)
    assert _rel(rec.convlstm(x, w, b, FB), ref.convlstm(x, w, b, FB)) < 1e-12


def test_nchw_layout_and_narrow_hidden(monkeypatch):
    """The kernel addresses h, gates and cells by strides: NCHW buffers work too; Ch = 8 < 16 (the smallest
    tl.dot block) is handled by the K and channel masks."""
    monkeypatch.setenv("MSCRED_FUSED_LAYOUT", "nchw")
    for Ch in (32, 8):
        x, w, b, _ = _inputs(3, Ch, 5, 2, seed=70 + Ch)
        assert _rel(rec.convlstm(x, w, b, FB), ref.convlstm(x, w, b, FB)) < 1e-12, Ch


def test_select_is_opt_in(monkeypatch):
    """``select`` runs the existing fused op unless MSCRED_CONVLSTM_REC=1 (checked through which op is called)."""
    calls = []
    monkeypatch.setattr(rec, "convlstm", lambda *a: calls.append("rec") or ref.convlstm(*a))
    monkeypatch.setattr(fused, "convlstm", lambda *a: calls.append("fused") or ref.convlstm(*a))
    x, w, b, _ = _inputs(1, 32, 5, 2, seed=1, T=1)
    monkeypatch.delenv(rec.ENV, raising=False)
    rec.select(x, w, b, FB)
    monkeypatch.setenv(rec.ENV, "1")
    rec.select(x, w, b, FB)
    assert calls == ["fused", "rec"]


@pytest.mark.parametrize("save", [True, False])
def test_opcheck_schema_fake_and_autograd(save):
    """torch.library.opcheck: schema, fake (meta) kernel (shapes, strides, dtypes of all four outputs, with and
    without the saved tensors), autograd registration."""
    x, w, b, _ = _inputs(2, 16, 4, 2, seed=11, T=3)
    for t in (x, w, b):
        t.requires_grad_()
    torch.library.opcheck(rec.convlstm_fused_rec, (x, w, b, FB, "nhwc", save, []),
                          test_utils=("test_schema", "test_autograd_registration", "test_faketensor"))


# ----------------------------------------------------------------------------------------------------------------
# GPU rows: the product's first two levels at batch 128 (and an awkward batch), kernel 2.
# ----------------------------------------------------------------------------------------------------------------
@needs_cuda
@pytest.mark.parametrize("B,Ch,n", [(128, 32, 30), (128, 64, 15), (7, 32, 30)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_full_size_on_gpu(B, Ch, n, dtype):
    """Forward (inference) against the float64 oracle, yardstick convlstm.py's fused op in the same dtype
    (float32 strict IEEE through the fixture; bf16 with a float32 bias as under autocast); same tolerances as the
    CPU rows."""
    x, w, b, _ = _inputs(B, Ch, n, 2, seed=B + Ch + n, C=Ch)
    oracle = ref.convlstm(x, w, b, FB)
    xl, wl = x.to(dtype), w.to(dtype)
    bl = b.float()
    with torch.no_grad():
        ours = rec.convlstm_fused_rec(xl, wl, bl, FB, "nhwc", False, [])[0]
        theirs = fused.convlstm_fused(xl, wl, bl, FB, "nhwc", False)[0]
    err, their_err = _rel(ours, oracle), _rel(theirs, oracle)
    slack = 1e-6 if dtype == torch.float32 else 1e-3
    assert err <= 2 * their_err + slack, f"error {err:.3g} vs fused op's {their_err:.3g}"


@needs_cuda
def test_training_step_on_gpu_bf16_autocast():
    """Level 1 at batch 128 under bf16 autocast, forward and backward, against the float64 oracle: each of h, dx,
    dweight, dbias within 2x the error of convlstm.py's fused op under the same autocast (same backward; saved
    pre-activations that differ only by the recurrent sum's bf16 rounding) plus 1e-3."""
    x, w, b, dout = _inputs(128, 32, 30, 2, seed=9, C=32)
    xs, ws, bs = (t.detach().clone().requires_grad_() for t in (x, w, b))
    y = ref.convlstm(xs, ws, bs, FB)
    oracle = [y.detach(), *torch.autograd.grad(y, (xs, ws, bs), dout)]
    res = []
    for fn in (rec.convlstm, fused.convlstm):
        xs, ws, bs = (t.float().detach().clone().requires_grad_() for t in (x, w, b))
        with torch.autocast("cuda", dtype=torch.bfloat16):
            y = fn(xs, ws, bs, FB)
        res.append([y.detach(), *torch.autograd.grad(y, (xs, ws, bs), dout.to(y.dtype))])
    for name, o, t, r in zip(("h", "dx", "dweight", "dbias"), *res, oracle):
        err, their_err = _rel(o, r), _rel(t, r)
        assert err <= 2 * their_err + 1e-3, f"{name}: error {err:.3g} vs fused op's {their_err:.3g}"


@needs_cuda
def test_cuda_graph_capture_replays_inference():
    """The op inside a CUDA graph (as the product's GraphedInference runs it): the replay on new inputs copied into
    the static buffer equals an eager call on them (the weight descriptor is a by-value kernel argument)."""
    x, w, b, _ = _inputs(16, 32, 30, 2, seed=13, C=32)
    x, w, b = x.bfloat16(), w.bfloat16(), b.float()
    with torch.no_grad():
        for _ in range(2):  # compile and warm up outside the capture
            rec.convlstm_fused_rec(x, w, b, FB, "nhwc", False, [])
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = rec.convlstm_fused_rec(x, w, b, FB, "nhwc", False, [])[0]
        x2 = torch.randn_like(x)
        x.copy_(x2)
        graph.replay()
        torch.cuda.synchronize()
        # the same kernels on the same data; 1e-6 rather than bit equality in case cuDNN's input convolution picks
        # another algorithm outside the graph
        assert _rel(static_out, rec.convlstm_fused_rec(x2, w, b, FB, "nhwc", False, [])[0]) < 1e-6


@pytest.mark.parametrize("n", [5, 9])
def test_whole_model_with_the_rec_kernel(n, monkeypatch):
    """MSCRED_CONVLSTM_REC=1 through the product dispatch: a whole fused MSCREDNet (every level on this op) against
    the reference network in float64, per-window forward and the shared-segment scoring (forward_windows)."""
    from mscred.config import ModelConfig
    from mscred.model import MSCREDNet

    monkeypatch.setenv(rec.ENV, "1")
    calls = []
    real = rec.convlstm
    monkeypatch.setattr(rec, "convlstm", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    torch.manual_seed(n)
    cfg = dict(n_sensors=n, channels=(8, 8, 16, 8), n_scales=3)  # hidden widths the kernel takes (``suits``)
    reference_net = MSCREDNet(ModelConfig(**cfg, backend="reference")).double().to(DEVICE)
    ours = MSCREDNet(ModelConfig(**cfg, backend="fused")).to(DEVICE)
    ours.load_state_dict({k: v.float() for k, v in reference_net.state_dict().items()})
    segments = torch.rand(7, 3, n, n, dtype=torch.float64, device=DEVICE)
    windows = segments.unfold(0, 5, 1).permute(0, 4, 1, 2, 3)  # (3, 5, 3, n, n): windows 0..2
    with torch.no_grad():
        expected = reference_net(windows)
        assert _rel(ours(windows.float()), expected) < 1e-5
        assert _rel(ours.forward_windows(segments.float(), 5), expected) < 1e-5
    assert len(calls) == 8  # 4 levels x (forward, forward_windows): every level ran this op


def test_select_falls_back_for_unaligned_hidden_widths(monkeypatch):
    """Hidden widths whose gate blocks would start off the TMA's 16-byte alignment take convlstm.py's op."""
    assert rec.suits(32, torch.bfloat16) and rec.suits(256, torch.float32) and rec.suits(2, torch.float64)
    assert not rec.suits(5, torch.float32) and not rec.suits(4, torch.bfloat16)
    monkeypatch.setenv(rec.ENV, "1")
    x = torch.randn(2, 3, 4, 5, 5, device=DEVICE)
    w = torch.randn(4 * 5, 4 + 5, 2, 2, device=DEVICE) * 0.3
    b = torch.zeros(4 * 5, device=DEVICE)
    assert _rel(rec.select(x, w, b, FB).double(), ref.convlstm(x.double(), w.double(), b.double(), FB)) < 1e-5
