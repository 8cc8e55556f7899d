"""The fused temporal attention (one Triton kernel per direction) against the float64 reference."""
from __future__ import annotations

import pytest
import torch

from mscred import ops
from mscred.ops import reference as ref
from mscred.ops.triton import attention as fused

CUDA = torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"
pytestmark = [pytest.mark.skipif(not fused.is_available()[0], reason=f"fused attention unavailable: "
                                                  f"{fused.is_available()[1]}"),
              pytest.mark.usefixtures("strict_float32")]
needs_cuda = pytest.mark.skipif(not CUDA, reason="full-size and bf16 rows need a CUDA device")


def _inputs(B, T, C, n, seed, dtype=torch.float64, device=DEVICE, scale=0.3):
    # scale: hidden states lie in (-1, 1); scores of order 1 make the softmax neither flat nor one-hot.
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(B, T, C, n, n, generator=g, dtype=torch.float64) * scale / (C * n * n / T) ** 0.25
    dout = torch.randn(B, C, n, n, generator=g, dtype=torch.float64)
    return h.to(device=device, dtype=dtype), dout.to(device=device, dtype=dtype)


def _fwd_bwd(fn, h, dout):
    h = h.detach().clone().requires_grad_()
    y = fn(h)
    (dh,) = torch.autograd.grad(y, h, dout.to(y.dtype))
    return y.detach(), dh.detach()


def _rel(a, b):
    a, b = a.double().cpu(), b.double().cpu()
    return ((a - b).norm() / b.norm()).item()


@pytest.mark.parametrize("n", [5, 16, 30])
@pytest.mark.parametrize("B", [1, 3, 7])
@pytest.mark.parametrize("T", [5, 3])
def test_float64_equals_reference(n, B, T):
    h, dout = _inputs(B, T, 4, n, seed=n * B + T)
    for name, o, r in zip(("out", "dh"), _fwd_bwd(fused.temporal_attention, h, dout),
                          _fwd_bwd(ref.temporal_attention, h, dout)):
        assert _rel(o, r) < 1e-12, name


@pytest.mark.parametrize("n", [5, 16, 30])
@pytest.mark.parametrize("B", [1, 3, 7])
def test_float32_within_twice_reference_error(n, B):
    h, dout = _inputs(B, 5, 4, n, seed=3 * n + B)
    oracle = _fwd_bwd(ref.temporal_attention, h, dout)
    ours = _fwd_bwd(fused.temporal_attention, h.float(), dout.float())
    theirs = _fwd_bwd(ref.temporal_attention, h.float(), dout.float())
    for name, o, t, r in zip(("out", "dh"), ours, theirs, oracle):
        assert o.dtype == torch.float32
        assert _rel(o, r) <= 2 * _rel(t, r) + 1e-6, name


def test_sharp_scores_stay_finite_and_exact():
    """Large scores (a nearly one-hot softmax) must not overflow: the kernel subtracts the max first."""
    h, dout = _inputs(2, 5, 4, 6, seed=1, scale=8.0)
    for name, o, r in zip(("out", "dh"), _fwd_bwd(fused.temporal_attention, h, dout),
                          _fwd_bwd(ref.temporal_attention, h, dout)):
        assert torch.isfinite(o).all() and _rel(o, r) < 1e-10, name


def test_single_step_is_identity():
    h, dout = _inputs(3, 1, 2, 5, seed=2)
    out, dh = _fwd_bwd(fused.temporal_attention, h, dout)
    torch.testing.assert_close(out, h[:, 0])
    torch.testing.assert_close(dh, dout[:, None])


def test_non_contiguous_input():
    h, dout = _inputs(3, 5, 4, 5, seed=4)
    h_nc = h.transpose(3, 4)  # a view: the op must read it by its logical layout
    torch.testing.assert_close(fused.temporal_attention(h_nc), ref.temporal_attention(h_nc), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("n, B", [(5, 3), (16, 1)])
def test_channels_last_input_runs_in_place_and_equals_reference(n, B):
    # The fused ConvLSTM's channels-last output: (B, T, C, H, W) stored as (B, T, H, W, C). Out and dh come back
    # in that order (channels-last (B, C, H, W), (B, T, H, W, C)) and equal the reference in float64.
    h, dout = _inputs(B, 5, 4, n, seed=11 * n + B)
    h_cl = h.permute(0, 1, 3, 4, 2).contiguous().permute(0, 1, 4, 2, 3)
    dout_cl = dout.contiguous(memory_format=torch.channels_last)
    out, dh = _fwd_bwd(fused.temporal_attention, h_cl, dout_cl)
    assert out.is_contiguous(memory_format=torch.channels_last) and not out.is_contiguous()
    assert dh.permute(0, 1, 3, 4, 2).is_contiguous()
    for name, o, r in zip(("out", "dh"), (out, dh), _fwd_bwd(ref.temporal_attention, h, dout)):
        assert _rel(o, r) < 1e-12, name


@pytest.mark.parametrize("half", ["upper", "lower"])
@pytest.mark.parametrize("C", [4, 3])  # 3: not whole 8-byte words in bf16-sized steps, the plain copy
def test_gradient_from_a_channel_slice(half, C):
    # The decoder concatenates the attention output with a deconvolution's along channels, so the output gradient
    # arrives as a channel half of a channels-last (B, 2C, H, W) tensor (copied to channels-last in words).
    h, dout = _inputs(3, 5, C, 6, seed=17 + C)
    h_cl = h.permute(0, 1, 3, 4, 2).contiguous().permute(0, 1, 4, 2, 3)
    wide = torch.randn(3, 2 * C, 6, 6, dtype=h.dtype, device=h.device).contiguous(memory_format=torch.channels_last)
    part = wide[:, C:] if half == "upper" else wide[:, :C]
    part.copy_(dout)
    _, dh = _fwd_bwd(fused.temporal_attention, h_cl, part)
    torch.testing.assert_close(dh, _fwd_bwd(ref.temporal_attention, h, dout)[1], rtol=1e-12, atol=1e-12)


def test_dispatcher_and_opcheck():
    assert ops.get_impl("temporal_attention", "fused") is fused.temporal_attention
    h, _ = _inputs(2, 5, 2, 4, seed=6)
    torch.library.opcheck(fused.temporal_attention_fused, (h.requires_grad_(), False),
                          test_utils=("test_schema", "test_autograd_registration", "test_faketensor"))
    # channels-last storage: the fake must give the real op's strides (with ``cat``: a half of a wider buffer)
    h_cl = h.detach().permute(0, 1, 3, 4, 2).contiguous().permute(0, 1, 4, 2, 3).requires_grad_()
    for cat in (False, True):
        torch.library.opcheck(fused.temporal_attention_fused, (h_cl, cat),
                              test_utils=("test_schema", "test_autograd_registration", "test_faketensor"))


@needs_cuda
@pytest.mark.parametrize("B, C, n", [(128, 32, 30), (128, 64, 15), (128, 128, 8), (128, 256, 4), (7, 32, 30),
                                     (1, 256, 4), (3, 32, 55)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_full_size_on_gpu(B, C, n, dtype):
    h, dout = _inputs(B, 5, C, n, seed=B + C + n)
    oracle = _fwd_bwd(ref.temporal_attention, h, dout)
    ours = _fwd_bwd(fused.temporal_attention, h.to(dtype), dout.to(dtype))
    theirs = _fwd_bwd(ref.temporal_attention, h.to(dtype), dout.to(dtype))
    floor = 1e-6 if dtype == torch.float32 else 1e-3
    for name, o, t, r in zip(("out", "dh"), ours, theirs, oracle):
        assert o.dtype == dtype and torch.isfinite(o).all(), name
        assert _rel(o, r) <= 2 * _rel(t, r) + floor, f"{name}: {_rel(o, r):.3g} vs reference {_rel(t, r):.3g}"


@pytest.mark.parametrize("n, C, W1", [(5, 4, False), (8, 16, False), (6, 3, True)])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_attention_into_a_channel_slice(n, C, W1, dtype):
    """temporal_attention_into writes a channels-last h's attention into the upper channel half of a wider
    channels-last buffer (the decoder's concatenation), equal to the reference, the other half untouched; also for
    a 1-column image (pixels indexed by rows) and for an NCHW h (computed, then copied in)."""
    B, T = 3, 5
    h, _ = _inputs(B, T, C, n, seed=n + C, dtype=dtype)
    if W1:
        h = h[..., :1].contiguous()
    H, W = h.shape[-2:]
    oracle = ref.temporal_attention(h.double())
    for stored in (h.permute(0, 1, 3, 4, 2).contiguous().permute(0, 1, 4, 2, 3), h.contiguous()):
        buf = torch.full((B, 2 * C, H, W), 7.0, device=DEVICE, dtype=dtype).contiguous(
            memory_format=torch.channels_last)
        got = fused.temporal_attention_into(stored, buf[:, C:])
        assert got.data_ptr() == buf[:, C:].data_ptr()
        tol = 1e-12 if dtype == torch.float64 else 1e-5
        torch.testing.assert_close(buf[:, C:].double(), oracle, rtol=tol, atol=tol)
        assert (buf[:, :C] == 7.0).all()


def test_attention_into_checks_the_shape():
    h, _ = _inputs(2, 5, 4, 5, seed=1)
    with pytest.raises(ValueError, match="attention of a"):
        fused.temporal_attention_into(h, torch.empty(2, 4, 5, 4, device=DEVICE, dtype=h.dtype))


def test_forward_tile_override(monkeypatch):
    """MSCRED_ATTN_FWD_TILE="BLOCK/warps" (A/B runs) replaces the forward's (FWD_BLOCK, FWD_WARPS); the result
    stays the reference's."""
    assert fused._fwd_tile() == (fused.FWD_BLOCK, fused.FWD_WARPS)
    monkeypatch.setenv("MSCRED_ATTN_FWD_TILE", "2048/16")
    assert fused._fwd_tile() == (2048, 16)
    h, _ = _inputs(3, 5, 4, 6, seed=5)
    assert _rel(fused.temporal_attention(h), ref.temporal_attention(h)) < 1e-12


@pytest.mark.parametrize("B, C, n", [(1, 3, 16), (2, 3, 30), (3, 4, 16), (1, 4, 30)])
@pytest.mark.parametrize("T", [5, 2])
@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
@pytest.mark.parametrize("partial_tile, last_apart", [("", "0"), ("64/2", "0"), ("", "1"), ("", "bwd")])
def test_split_over_d_equals_reference(B, C, n, T, layout, partial_tile, last_apart, monkeypatch):
    """Few samples: each sample's D = C*H*W is cut into chunks (the partial scores in a small buffer, summed in
    order by the second kernel), forward and backward; D not a multiple of the chunk or of 16 (C = 3), the last
    chunk short. The split ran (counted), and MSCRED_ATTN_SPLIT with 0 programs runs one program per sample, both
    equal to the float64 reference; so does the first kernel with a tile of its own (MSCRED_ATTN_PARTIAL_TILE, here
    half the split's BLOCK: each chunk summed in twice the pieces), and with the last step apart
    (MSCRED_ATTN_LAST_APART=1: T = 5 a 4-row tile, T = 2 a 1-row one; "bwd": the backward's only). The partials
    buffer starts as NaN. The backward recomputes the scores' partials here (MSCRED_ATTN_SAVED_SCORES=0), so that its
    first kernel takes these tiles too; the default's, with the forward's partials:
    test_saved_scores_give_the_same_gradients."""
    monkeypatch.setenv("MSCRED_ATTN_SAVED_SCORES", "0")
    monkeypatch.setenv("MSCRED_ATTN_PARTIAL_TILE", partial_tile)
    monkeypatch.setenv("MSCRED_ATTN_LAST_APART", last_apart)
    real_partials = fused._partials  # NaN-filled: every entry the second kernel reads must be written first
    monkeypatch.setattr(fused, "_partials", lambda *a: real_partials(*a).fill_(float("nan")))
    h, dout = _inputs(B, T, C, n, seed=B * 31 + C * n + T)
    if layout == "channels_last":
        h = h.permute(0, 1, 3, 4, 2).contiguous().permute(0, 1, 4, 2, 3)
        dout = dout.contiguous(memory_format=torch.channels_last)
    oracle = _fwd_bwd(ref.temporal_attention, h, dout)
    splits = []
    real = fused._split
    monkeypatch.setattr(fused, "_split", lambda *a: splits.append(real(*a)) or splits[-1])
    tiles = []
    real_tile = fused._partial_tile
    monkeypatch.setattr(fused, "_partial_tile", lambda *a: tiles.append(real_tile(*a)) or tiles[-1])
    for switch in ("8/128/4", "0/1024/4"):
        monkeypatch.setenv("MSCRED_ATTN_SPLIT", switch)
        splits.clear()
        for name, o, r in zip(("out", "dh"), _fwd_bwd(fused.temporal_attention, h, dout), oracle):
            assert _rel(o, r) < 1e-12, (switch, name)
        assert len(splits) == 2 and all((s is None) == switch.startswith("0/") for s in splits), (switch, splits)
        if not switch.startswith("0/"):
            nchunk, chunk = splits[0][:2]
            assert nchunk > 1 and chunk % 64 == 0 and (nchunk - 1) * chunk < C * n * n <= nchunk * chunk
    # the first kernel launched with its own tile where set, else the split's (the "8/128/4" runs: 2 launches)
    assert [(t["BLOCK"], t["num_warps"]) for t in tiles] == [(64, 2) if partial_tile else (128, 4)] * 2
    rows = {5: 4, 2: 1}[T]
    apart = {"0": (False, False), "1": (True, True), "bwd": (False, True)}[last_apart]  # (forward, backward)
    assert [(t["LAST_APART"], t["ROWS"]) for t in tiles] == [(a, rows if a else 1) for a in apart]


@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
@pytest.mark.parametrize("T", [5, 2])
def test_saved_scores_give_the_same_gradients(layout, T, monkeypatch, set_env):
    """MSCRED_ATTN_SAVED_SCORES unset or 1: the split backward takes the forward's score partials (the op's second output)
    and its first kernel forms <H_k, dout> alone, into a buffer of its own; the gradient is the recomputing path's
    bit for bit (the same partials) and the float64 reference's. Every partials buffer starts as NaN."""
    monkeypatch.setenv("MSCRED_ATTN_SPLIT", "8/128/4")
    real_partials = fused._partials
    monkeypatch.setattr(fused, "_partials", lambda *a: real_partials(*a).fill_(float("nan")))
    h, dout = _inputs(3, T, 4, 16, seed=40 + T)
    if layout == "channels_last":
        h = h.permute(0, 1, 3, 4, 2).contiguous().permute(0, 1, 4, 2, 3)
    passes = []
    real = fused.backward_partials
    monkeypatch.setattr(fused, "backward_partials", lambda *a: passes.append(real(*a)) or passes[-1])
    grads = []
    for setting in ("0", "1", None):  # None: the default, saved
        set_env("MSCRED_ATTN_SAVED_SCORES", setting)
        grads.append(_fwd_bwd(fused.temporal_attention, h, dout)[1])
    (part0, dpart0, _), (part1, dpart1, _), (part2, dpart2, _) = passes
    assert part0 is dpart0  # recomputed in one buffer
    assert part1 is not dpart1 and part2 is not dpart2  # the forward's and the backward's own
    assert torch.equal(grads[0], grads[1]) and torch.equal(grads[1], grads[2])
    assert _rel(grads[1], _fwd_bwd(ref.temporal_attention, h, dout)[1]) < 1e-12


def test_split_choice():
    """One program per sample once the samples give half the programs wanted (the scoring batch); otherwise chunks
    of 64-element multiples covering D, at most one per BLOCK-sized piece of D and about the programs wanted."""
    if fused._interpreting():
        programs, block = fused.INTERPRETER_SPLIT_PROGRAMS, 128
    else:
        sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
        programs, block = fused.SPLIT_PER_SM * sms, fused.SPLIT_BLOCK
    assert fused._split(programs // 2, 10 ** 6) is None
    assert fused._split(1, block) is None  # one piece: nothing to split
    for B, D in ((1, 10 ** 6), (3, 3600), (programs // 2 - 1, 50 * block + 7)):
        nchunk, chunk = fused._split(B, D)[:2]
        assert chunk % 64 == 0 and (nchunk - 1) * chunk < D <= nchunk * chunk, (B, D)
        assert 1 < nchunk <= min(-(-programs // B), -(-D // block)), (B, D)
