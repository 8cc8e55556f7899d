"""``pixel_copy.copy`` (``ops/triton/pixel_copy.py``): the Triton copy of channels-last pixels between strided views
equals ``dst.copy_(src)`` bit for bit and writes nothing beside ``dst`` -- into a channel slice of a bordered buffer
(levels 1-2's [x, h]), out of a channel slice, between crops, at awkward sizes and channel counts that are no power
of two. The kernel runs under the Triton interpreter on the CPU (conftest); bf16 and ``copy_pixels``' routing on
CUDA."""
from __future__ import annotations

import pytest
import torch

from mscred.ops import padding
from mscred.ops.triton import pixel_copy

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
DTYPES = [torch.float32, torch.float16] + ([torch.bfloat16] if DEVICE == "cuda" else [])
SENTINEL = -7.0


def _buffer(N, C, H, W, dtype, fill=SENTINEL):
    return torch.full((N, C, H, W), fill, dtype=dtype, device=DEVICE).contiguous(memory_format=torch.channels_last)


def _random(N, C, H, W, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(N, C, H, W, generator=g).to(DEVICE, dtype).contiguous(memory_format=torch.channels_last)


def _views(case, dtype):
    """(dst buffer, the dst view's index into it, src view) of one layout case."""
    if case == "into the x half of [x, h]":  # level 1-2: (T*B, C, Hp, Wp) into (T*B, C + Ch, Hp, Wp)[:, :C]
        buf = _buffer(6, 5 + 3, 9, 7, dtype)
        return buf, (slice(None), slice(0, 5)), _random(6, 5, 9, 7, dtype, 1)
    if case == "into the upper half":  # the decoder's skip concatenation
        buf = _buffer(3, 4 + 33, 5, 6, dtype)
        return buf, (slice(None), slice(4, None)), _random(3, 33, 5, 6, dtype, 2)
    if case == "out of a channel slice":  # level 2's dx_t out of [dx, dh]
        buf = _buffer(4, 17, 6, 6, dtype)
        src = _random(4, 17 + 9, 6, 6, dtype, 3)[:, :17]
        return buf, (), src
    if case == "crop into a bordered interior":  # padding._padded
        buf = _buffer(2, 12, 11, 10, dtype)
        return buf, (slice(None), slice(None), slice(1, 10), slice(2, 9)), _random(2, 12, 9, 7, dtype, 4)
    raise AssertionError(case)


CASES = ["into the x half of [x, h]", "into the upper half", "out of a channel slice", "crop into a bordered interior"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES)
def test_equals_torch_copy_and_writes_nothing_beside(case, dtype):
    buf, index, src = _views(case, dtype)
    dst = buf[index]
    assert pixel_copy.suits(dst, src)
    want = buf.clone()
    want[index].copy_(src)
    pixel_copy.copy(dst, src)
    assert torch.equal(buf, want)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("T, B, C, Ch, Hp, Wp", [(5, 3, 32, 32, 9, 9), (2, 2, 5, 3, 4, 7), (3, 1, 8, 17, 6, 5)])
def test_x_into_xh_with_h_minus_1_zeroed(T, B, C, Ch, Hp, Wp, dtype):
    """Levels 1-2's [x, h]: every x_t into the x half, and h_{-1} (the h half of step 0's B images) zeroed in the
    same pass; the h half of every later step is left as it was (the step kernels write it)."""
    xh = _buffer(T * B, C + Ch, Hp, Wp, dtype)
    images = _random(T * B, C, Hp, Wp, dtype, 7)
    h0 = xh[:B, C:]
    assert pixel_copy.zeros_fit(xh[:, :C], h0)
    pixel_copy.copy(xh[:, :C], images, h0)
    assert torch.equal(xh[:, :C], images)
    assert (xh[:B, C:] == 0).all() and (xh[B:, C:] == SENTINEL).all()


def test_zeros_elsewhere_are_zeroed_apart():
    """A ``zeros`` view that is not the channels right after dst's (here: one channel further on) does not fit the
    kernel's pass: copied, then zeroed on its own, the same result."""
    xh = _buffer(4, 8 + 6, 5, 5, torch.float32)
    images = _random(4, 8, 5, 5, torch.float32, 8)
    zeros = xh[:2, 9:]
    assert not pixel_copy.zeros_fit(xh[:, :8], zeros)
    pixel_copy.copy(xh[:, :8], images, zeros)
    assert torch.equal(xh[:, :8], images) and (xh[:2, 9:] == 0).all()
    assert (xh[:, 8] == SENTINEL).all() and (xh[2:, 9:] == SENTINEL).all()


@pytest.mark.parametrize("block", [64, 4096])  # programs of 2-64 pixels: the last program's partial tile
def test_many_programs_and_a_partial_last_one(block, monkeypatch):
    monkeypatch.setattr(pixel_copy, "BLOCK", block)
    buf = _buffer(5, 48, 7, 9, torch.float32)
    src = _random(5, 40, 7, 9, torch.float32, 5)
    pixel_copy.copy(buf[:, 3:43], src)
    assert torch.equal(buf[:, 3:43], src)
    assert (buf[:, :3] == SENTINEL).all() and (buf[:, 43:] == SENTINEL).all()


def test_what_it_does_not_take_goes_to_torch():
    """NCHW (channels not contiguous), mixed dtypes: not ``suits``, and ``copy`` is then PyTorch's copy."""
    src = torch.randn(2, 3, 4, 5, device=DEVICE)
    dst = torch.empty(2, 3, 4, 5, device=DEVICE)
    assert not pixel_copy.suits(dst, src)
    pixel_copy.copy(dst, src)
    assert torch.equal(dst, src)
    half = _buffer(2, 3, 4, 5, torch.float16)
    assert not pixel_copy.suits(half, src.contiguous(memory_format=torch.channels_last))


@pytest.mark.parametrize("setting, on", [(None, False), ("0", False), ("1", True)])
def test_switch(setting, on, set_env):
    set_env("MSCRED_PIXEL_COPY_KERNEL", setting)
    assert pixel_copy.enabled() is on


@pytest.mark.skipif(not torch.cuda.is_available(), reason="copy_pixels routes only CUDA tensors to the kernel")
@pytest.mark.parametrize("setting", ["0", "1"])
def test_copy_pixels_takes_it_on_cuda(setting, monkeypatch):
    monkeypatch.setenv("MSCRED_PIXEL_COPY_KERNEL", setting)
    calls = []
    real = pixel_copy.copy
    monkeypatch.setattr(pixel_copy, "copy", lambda d, s, z=None: calls.append(d.shape) or real(d, s, z))
    buf = _buffer(640, 64, 31, 31, torch.bfloat16)  # level 1's [x, h] at batch 128
    src = _random(640, 32, 31, 31, torch.bfloat16, 6)
    padding.copy_pixels(buf[:, :32], src, zeros=buf[:128, 32:])
    assert torch.equal(buf[:, :32], src) and (buf[:128, 32:] == 0).all() and (buf[128:, 32:] == SENTINEL).all()
    assert len(calls) == (setting == "1")


@pytest.mark.parametrize("zeros", [False, True])
def test_sm90_code_moves_16_bytes_an_access(zeros):
    """Compiled for the H200 here (tests/sm90_compile.py) at level 1's shape (bf16, 32 channels, strides divisible by
    16 as Triton specialises them), with and without h_{-1}'s zeros: its loads and stores are 128-bit, the point of
    the kernel."""
    pytest.importorskip("triton.backends.nvidia")
    import sm90_compile

    block_c = 32
    config = dict(constants=dict(BLOCK_P=pixel_copy.BLOCK // block_c, BLOCK_C=block_c, HAS_ZEROS=zeros, BLOCK_Z=32),
                  pointers=dict(d_ptr="*bf16", s_ptr="*bf16"),
                  aligned=["d_sn", "d_sy", "d_sx", "s_sn", "s_sy", "s_sx", "C", "PZ", "CZ"],
                  num_warps=pixel_copy.NUM_WARPS)
    listing = sm90_compile.sass("mscred.ops.triton.pixel_copy", "_pixel_copy_kernel", config)
    accesses = [ln.split()[1 + ln.split()[1].startswith("@")] for ln in listing.splitlines() if "G.E" in ln]
    assert accesses and all(a in ("LDG.E.128", "STG.E.128") for a in accesses), accesses
    assert accesses.count("STG.E.128") == (8 if zeros else 4)  # each thread: 4 x 16 bytes of x (and of zeros)
