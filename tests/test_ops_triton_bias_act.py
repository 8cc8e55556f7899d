"""The fused bias + SELU (+ crop) op against the float64 PyTorch oracle, forward and backward (dy and dbias).

On a CPU machine conftest.py switches on Triton's interpreter, so the kernels run here in float32 at small sizes; on
a CUDA machine they compile for the GPU and the full-size rows (the MSCRED encoder/decoder shapes, float32 and bf16)
run too. The fused op's error in a dtype must stay within 2x PyTorch's own error in that dtype (plus a small floor).
"""
from __future__ import annotations

import pytest
import torch

from mscred.ops.triton import bias_act as ba

CUDA = torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"
pytestmark = [pytest.mark.skipif(not ba.is_available()[0], reason=f"fused bias_act unavailable: "
                                                                  f"{ba.is_available()[1]}"),
              pytest.mark.usefixtures("strict_float32")]
needs_cuda = pytest.mark.skipif(not CUDA, reason="full-size and bf16 rows need a CUDA device")


def _rel(a, b):
    a, b = a.double().cpu(), b.double().cpu()
    return ((a - b).norm() / b.norm().clamp_min(1e-300)).item()


def _run(fn, y, b, dout, selu, crop):
    y, b = y.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
    out = fn(y, b, selu, *crop)
    dy, db = torch.autograd.grad(out, (y, b), dout.to(out.dtype))
    return out.detach(), dy, db


def _check(B, C, H, W, crop, selu, channels_last, dtype, seed, strided_dout=True, floor=1e-6):
    g = torch.Generator().manual_seed(seed)
    y = torch.randn(B, C, H, W, generator=g, dtype=torch.float64)
    b = torch.randn(C, generator=g, dtype=torch.float64) * 0.5
    h = H - crop[0] if crop[2] is None else crop[2]
    w = W - crop[1] if crop[3] is None else crop[3]
    # A channel slice of a wider tensor, as the decoder's concatenation hands its gradient down.
    dout = torch.randn(B, 2 * C + 1, h, w, generator=g, dtype=torch.float64)
    dout = dout[:, 1:C + 1] if strided_dout else dout[:, :C].contiguous()
    y, b, dout = (t.to(DEVICE) for t in (y, b, dout))
    if channels_last:
        y = y.contiguous(memory_format=torch.channels_last)
    oracle = _run(ba.reference, y, b, dout, selu, crop)
    # bf16 as under autocast: y and dout in bf16, the master bias in float32 (its gradient must come back float32).
    bias_dtype = torch.float32 if dtype == torch.bfloat16 else dtype
    ours = _run(ba.bias_act, y.to(dtype), b.to(bias_dtype), dout.to(dtype), selu, crop)
    theirs = _run(ba.reference, y.to(dtype), b.to(dtype), dout.to(dtype), selu, crop)
    assert ours[0].is_contiguous(memory_format=torch.channels_last) == channels_last or min(h, w) == 1
    assert ours[1].shape == y.shape and ours[2].dtype == bias_dtype
    for name, o, t, r in zip(("out", "dy", "dbias"), ours, theirs, oracle):
        assert o.shape == r.shape and torch.isfinite(o).all(), name
        err, ref_err = _rel(o, r), _rel(t, r)
        assert err <= 2 * ref_err + floor, f"{name}: fused error {err:.3g} vs PyTorch's {ref_err:.3g}"


@pytest.mark.parametrize("channels_last", [True, False])
@pytest.mark.parametrize("selu", [True, False])
@pytest.mark.parametrize("crop", [(0, 0, None, None), (1, 1, 5, 5), (0, 0, 6, 5)])
def test_float32_matches_oracle(crop, selu, channels_last):
    _check(3, 5, 7, 7, crop, selu, channels_last, torch.float32, seed=1)


@pytest.mark.parametrize("C", [3, 64, 96])
def test_channel_counts_beyond_one_tile(C):
    # 96 channels need two column tiles (64 per tile); 3 is the decoder's last layer.
    _check(2, C, 5, 6, (0, 0, None, None), True, True, torch.float32, seed=C, strided_dout=False)


def test_float64_runs_the_pytorch_ops_exactly():
    y = torch.randn(2, 4, 5, 5, dtype=torch.float64, device=DEVICE)
    b = torch.randn(4, dtype=torch.float64, device=DEVICE)
    torch.testing.assert_close(ba.bias_act(y, b, True, 1, 0, 4, 5), ba.reference(y, b, True, 1, 0, 4, 5),
                               rtol=0, atol=0)


def test_crop_outside_is_rejected():
    with pytest.raises(ValueError, match="outside"):
        ba.bias_act(torch.zeros(1, 2, 4, 4, device=DEVICE), torch.zeros(2, device=DEVICE), True, 1, 0, 4, 4)


def test_opcheck_schema_fake_and_autograd():
    y = torch.randn(2, 4, 5, 5, device=DEVICE).contiguous(memory_format=torch.channels_last).requires_grad_()
    b = torch.randn(4, device=DEVICE, requires_grad=True)
    torch.library.opcheck(torch.ops.mscred.bias_act_fused.default, (y, b, True, 1, 0, 4, 5, [0, 0, 0, 0]))
    torch.library.opcheck(torch.ops.mscred.bias_act_fused.default, (y, b, True, 1, 0, 4, 5, [0, 1, 0, 1]))


@pytest.mark.parametrize("out_pads", [(0, 1, 0, 1), (1, 1, 1, 1)])
@pytest.mark.parametrize("selu", [True, False])
def test_bordered_output_is_the_padded_result(out_pads, selu):
    """out_pads: the result inside a zero border, equal to padding the plain result (the border exactly zero);
    the gradients of y and the bias come from the interior only (a gradient on the border is discarded)."""
    g = torch.Generator().manual_seed(21)
    y = torch.randn(2, 6, 7, 7, generator=g).to(DEVICE).contiguous(memory_format=torch.channels_last)
    b = torch.randn(6, generator=g).to(DEVICE)
    top, bottom, left, right = out_pads
    dout = torch.randn(2, 6, 5 + top + bottom, 6 + left + right, generator=g).to(DEVICE)
    plain = _run(lambda *a: ba.bias_act(*a, 5, 6), y, b, interior_of(dout, out_pads), selu, (1, 0))
    ours = _run(lambda *a: ba.bias_act(*a, 5, 6, out_pads=out_pads), y, b, dout, selu, (1, 0))
    assert ours[0].shape == dout.shape and ours[0].is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(ours[0], torch.nn.functional.pad(plain[0], (left, right, top, bottom)),
                               rtol=0, atol=0)
    torch.testing.assert_close(ours[1], plain[1], rtol=0, atol=0)
    torch.testing.assert_close(ours[2], plain[2], rtol=1e-6, atol=1e-6)


def interior_of(t, pads):
    top, bottom, left, right = pads
    return t[..., top:t.shape[-2] - bottom, left:t.shape[-1] - right]


@needs_cuda
@pytest.mark.parametrize("B, C, H, crop", [(640, 32, 30, (0, 0, None, None)), (640, 64, 15, (0, 0, None, None)),
                                           (128, 32, 31, (0, 0, 30, 30)), (128, 64, 16, (0, 0, 15, 15)),
                                           (128, 3, 32, (1, 1, 30, 30))])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_full_size_on_gpu(B, C, H, crop, dtype):
    # The bias gradient sums up to 576,000 terms through atomic adds of per-program partial sums: its float32
    # rounding is a few 1e-6 relative, above PyTorch's tree reduction; hence the floor.
    _check(B, C, H, H, crop, C != 3, True, dtype, seed=B + C, floor=1e-5 if dtype == torch.float32 else 1e-3)


@needs_cuda
def test_cuda_graph_capture_replays_forward_and_backward():
    y = torch.randn(64, 32, 31, 31, device="cuda").contiguous(memory_format=torch.channels_last).requires_grad_()
    b = torch.randn(32, device="cuda", requires_grad=True)
    dout = torch.randn(64, 32, 30, 30, device="cuda")
    expected = _run(ba.reference, y, b, dout, True, (0, 0, 30, 30))
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            ba.bias_act(y, b, True, 0, 0, 30, 30).backward(dout)
    torch.cuda.current_stream().wait_stream(s)
    y.grad = b.grad = None
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = ba.bias_act(y, b, True, 0, 0, 30, 30)
        out.backward(dout)
    for _ in range(2):
        graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, expected[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(y.grad, expected[1], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(b.grad, expected[2], rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("selu", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_bias_act_into_a_channel_slice(selu, dtype):
    """bias_act_into writes the cropped bias + activation into the lower channel half of a wider channels-last
    buffer (the decoder's concatenation), equal to bias_act, the other half untouched."""
    g = torch.Generator().manual_seed(3)
    y = torch.randn(3, 6, 9, 9, generator=g, dtype=dtype).to(DEVICE).contiguous(memory_format=torch.channels_last)
    bias = torch.randn(6, generator=g, dtype=dtype).to(DEVICE)
    buf = torch.full((3, 12, 7, 7), 5.0, device=DEVICE, dtype=dtype).contiguous(memory_format=torch.channels_last)
    got = ba.bias_act_into(y, bias, selu, 1, 1, buf[:, :6])
    assert got.data_ptr() == buf.data_ptr()
    torch.testing.assert_close(buf[:, :6], ba.bias_act(y, bias, selu, 1, 1, 7, 7), rtol=1e-6, atol=1e-6)
    assert (buf[:, 6:] == 5.0).all()
    with pytest.raises(ValueError, match="crop"):
        ba.bias_act_into(y, bias, selu, 3, 3, buf[:, :6])


def test_forward_tile_override(monkeypatch):
    """MSCRED_BIAS_ACT_FWD_TILE="BLOCK/warps" (A/B runs) replaces the forward's tile; the output is the same, and a
    malformed value is refused."""
    from mscred.ops.triton.runtime import tile_override

    g = torch.Generator().manual_seed(7)
    y = torch.randn(3, 6, 9, 9, generator=g).to(DEVICE).contiguous(memory_format=torch.channels_last)
    bias = torch.randn(6, generator=g).to(DEVICE)
    default = ba.bias_act(y, bias, True, 1, 1, 7, 7)
    monkeypatch.setenv("MSCRED_BIAS_ACT_FWD_TILE", "2048/4")
    assert tile_override("MSCRED_BIAS_ACT_FWD_TILE", (1, 1)) == (2048, 4)
    torch.testing.assert_close(ba.bias_act(y, bias, True, 1, 1, 7, 7), default, rtol=0, atol=0)
    monkeypatch.setenv("MSCRED_BIAS_ACT_FWD_TILE", "2048")
    with pytest.raises(ValueError, match="BLOCK/warps"):
        tile_override("MSCRED_BIAS_ACT_FWD_TILE", (1, 1))


def test_constant_sizes_kernels_give_the_runtime_sizes_results(monkeypatch):
    """The kernels with the map's sizes as constants (the default) and at run time (MSCRED_BIAS_ACT_CONST_SIZES=0):
    bit for bit the same output on a crop, a bordered output and a sub-pixel phase read, and the same dy (and bias
    gradient) on a crop and a bordered output, at several map sizes (one compilation each)."""
    g = torch.Generator().manual_seed(8)
    y = torch.randn(3, 6, 9, 9, generator=g).to(DEVICE).contiguous(memory_format=torch.channels_last)
    sub = torch.randn(2, 4 * 5, 4, 4, generator=g).to(DEVICE).contiguous(memory_format=torch.channels_last)
    bias = torch.randn(6, generator=g).to(DEVICE)
    dcrop, dbordered = torch.randn(3, 6, 7, 7, generator=g).to(DEVICE), torch.randn(3, 6, 9, 10, generator=g).to(DEVICE)

    def results():
        out = torch.empty(2, 5, 7, 7, device=DEVICE).contiguous(memory_format=torch.channels_last)
        return (ba.bias_act(y, bias, True, 1, 1, 7, 7), ba.bias_act(y, bias, False, 0, 0, 8, 9, out_pads=(0, 1, 0, 1)),
                ba.bias_act_subpixel_into(sub, bias[:5], True, 2, 0, 1, out),
                *_run(lambda *a: ba.bias_act(*a, 7, 7), y, bias, dcrop, True, (1, 1))[1:],
                *_run(lambda *a: ba.bias_act(*a, 8, 9, out_pads=(0, 1, 0, 1)), y, bias, dbordered, True, (0, 0))[1:])
    monkeypatch.delenv("MSCRED_BIAS_ACT_CONST_SIZES", raising=False)
    assert ba.const_sizes()
    constant = results()
    monkeypatch.setenv("MSCRED_BIAS_ACT_CONST_SIZES", "0")
    assert not ba.const_sizes()
    names = ("crop", "bordered", "sub-pixel", "dy crop", "dbias crop", "dy bordered", "dbias bordered")
    for name, got, want in zip(names, results(), constant):
        torch.testing.assert_close(got, want, rtol=0, atol=0, msg=name)


@pytest.mark.parametrize("tile", ["64/4/3", "128/4/1", "32/2/5"])
def test_backward_tile_override_sums_bias_over_many_tiles(monkeypatch, tile):
    """MSCRED_BIAS_ACT_BWD_TILE="BLOCK/warps/tiles" (A/B runs) sets the backward's tile, warps and tiles per program:
    with small tiles many programs each sum several tiles (the last one ragged) into the bias gradient, with 96
    channels over two column tiles; dy and dbias stay the oracle's. A value without its three numbers is refused."""
    from mscred.ops.triton.runtime import tile_override

    monkeypatch.setenv("MSCRED_BIAS_ACT_BWD_TILE", tile)
    _check(3, 96, 7, 6, (1, 1, 5, 4), True, True, torch.float32, seed=11)
    _check(2, 5, 9, 9, (0, 0, None, None), False, False, torch.float32, seed=12)
    monkeypatch.setenv("MSCRED_BIAS_ACT_BWD_TILE", "2048/4")
    with pytest.raises(ValueError, match="BLOCK/warps/tiles"):
        tile_override("MSCRED_BIAS_ACT_BWD_TILE", (1, 1, 1))


@pytest.mark.parametrize("selu", [True, False])
def test_shared_output_sums_both_gradients_in_the_kernel(selu):
    """bias_act_shared: (out, a view of out) for two consumers; the kernel sums their two gradients (dout2), and y's
    and the bias's gradients equal those of one output read by both consumers (autograd's sum)."""
    g = torch.Generator().manual_seed(31)
    y = torch.randn(3, 6, 7, 7, generator=g).to(DEVICE).contiguous(memory_format=torch.channels_last)
    b = torch.randn(6, generator=g).to(DEVICE)
    pads = (0, 1, 0, 1)
    d1, d2 = (torch.randn(3, 6, 8, 8, generator=g).to(DEVICE) for _ in range(2))
    grads = []
    for shared in (False, True):
        yy, bb = y.clone().requires_grad_(), b.clone().requires_grad_()
        if shared:
            out, other = ba.bias_act_shared(yy, bb, selu, pads)
            assert other.data_ptr() == out.data_ptr() and other is not out
        else:
            out = other = ba.bias_act(yy, bb, selu, out_pads=pads)
        ((out * d1).sum() + (other * d2).sum()).backward()
        grads.append((out.detach(), yy.grad, bb.grad))
    for name, s, o in zip(("out", "dy", "dbias"), grads[1], grads[0]):
        torch.testing.assert_close(s, o, rtol=1e-6, atol=1e-6, msg=name)
