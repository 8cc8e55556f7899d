"""ops/triton/gather_cast.py: the weight cache's gather fused with its cast, bit for bit against PyTorch's
``index_select(...).to(...)`` (float32 -> bf16 rounded to nearest even, on the interpreter too), at awkward sizes."""
from __future__ import annotations

import pytest
import torch

from mscred.ops.triton import gather_cast as gc
from mscred.ops.triton.runtime import runs_fused

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
pytestmark = pytest.mark.skipif(not runs_fused(torch.empty(0, device=DEVICE)),
                                reason="the kernel needs CUDA or Triton's CPU interpreter (TRITON_INTERPRET=1)")


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


@pytest.mark.parametrize("n", [1, 4095, 4097, 70001])
@pytest.mark.parametrize("src_dtype,dtype", [(torch.float32, torch.bfloat16), (torch.bfloat16, torch.float32),
                                             (torch.float32, torch.float16), (torch.float32, torch.float32)])
def test_gather_cast_is_index_select_then_cast(n, src_dtype, dtype):
    g = torch.Generator().manual_seed(n)
    src = (torch.randn(n, generator=g) * torch.logspace(-30, 30, n)).to(src_dtype)
    specials = torch.tensor([float("nan"), float("inf"), -float("inf"), 3.3e38, -0.0, 1e-40, 1.00390625 + 2 ** -16])
    src[:min(n, len(specials))] = specials[:n].to(src_dtype)
    index = torch.randperm(n, generator=g).to(torch.int32)
    src, index = src.to(DEVICE), index.to(DEVICE)
    got, want = gc.gather_cast(src, index, dtype), src.index_select(0, index).to(dtype)
    assert got.dtype == dtype and got.shape == (n,)
    nan = want.isnan()
    assert torch.equal(got.isnan(), nan)
    assert torch.equal(_bits(got)[~nan], _bits(want)[~nan])


def test_gather_cast_rounds_ties_to_even():
    """float32 values exactly halfway between two bf16 neighbours round to the even one, as PyTorch's cast (the
    interpreter's own conversion truncates, which the kernel's bit arithmetic replaces)."""
    lo = torch.tensor([1.0, 1.0078125, -3.0, 1.0], dtype=torch.float32)  # bf16 has 7 mantissa bits: ulp 2^-7 at 1
    halfway = lo + torch.tensor([2 ** -8, 2 ** -8, -2 ** -7, 2 ** -8 + 2 ** -20])
    src = halfway.to(DEVICE)
    got = gc.gather_cast(src, torch.arange(4, dtype=torch.int32, device=DEVICE), torch.bfloat16)
    assert torch.equal(got.cpu(), halfway.to(torch.bfloat16))
    assert got[0].item() == 1.0 and got[1].item() == 1.015625 and got[3].item() == 1.0078125


def test_gather_cast_refuses_what_it_cannot_read():
    with pytest.raises(ValueError, match="1-D contiguous"):
        gc.gather_cast(torch.zeros(4, 4, device=DEVICE), torch.zeros(2, dtype=torch.int32, device=DEVICE),
                       torch.bfloat16)


def test_gather_cast_keeps_nan_payloads_nan():
    """A float32 NaN whose mantissa is all ones would round into the sign bit (-0.0) by the plain rounding add:
    a NaN gradient must stay NaN (the trainer stops on non-finite losses, not on silently zeroed weights)."""
    src = torch.tensor([0x7FFFFFFF, -1, 0x7F800001, 0x7FBFFFFF], dtype=torch.int32).view(torch.float32)
    got = gc.gather_cast(src.to(DEVICE), torch.arange(4, dtype=torch.int32, device=DEVICE), torch.bfloat16)
    assert got.isnan().all()
