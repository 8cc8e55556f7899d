"""ops/triton/weight_transpose.py: the weight cache's per-output-channel transposes with their casts, bit for bit
against the plan's own index maps (built independently, by meshgrid) and PyTorch's casts (float32 -> bf16 rounded
to nearest even, on the interpreter too), at awkward channel counts and both tap counts."""
from __future__ import annotations

import pytest
import torch

from mscred.ops import weight_cache
from mscred.ops.triton import weight_transpose as wt
from mscred.ops.triton.runtime import runs_fused

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
pytestmark = pytest.mark.skipif(not runs_fused(torch.empty(0, device=DEVICE)),
                                reason="the kernel needs CUDA or Triton's CPU interpreter (TRITON_INTERPRET=1)")


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


def _same(got: torch.Tensor, want: torch.Tensor) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    nan = want.isnan()
    assert torch.equal(got.isnan(), nan)
    assert torch.equal(_bits(got)[~nan], _bits(want)[~nan])


def _plan(with_3x3: bool = True):
    """Targets of every kind the model has: whole 3 x 3 and 2 x 2 weights, ConvLSTM weights' two halves with more
    than one iteration of the kernel's 64 (9 taps) and 256 (4 taps) channels, and channel counts that are not
    powers of two. Without the 3 x 3 weight every block has 4 taps (the kernel's other tap padding)."""
    ws = [torch.empty(6, 7, 2, 2), torch.empty(12, 2 * 70, 2, 2), torch.empty(3, 2 * 300, 2, 2)]
    targets = [(ws[0], "all", 0), (ws[1], "x", 70), (ws[1], "h", 70), (ws[2], "x", 300), (ws[2], "h", 300)]
    if with_3x3:
        ws.append(torch.empty(5, 130, 3, 3))
        targets.append((ws[-1], "all", 0))
    return weight_cache.plan_for(targets), sum(w.numel() for w in ws)


# Values up to 3.3e38 cast to float16 overflow to inf on purpose (the cast's edge cases); the interpreter's numpy cast
# warns about it.
@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
@pytest.mark.parametrize("with_3x3", [True, False], ids=["4-and-9-taps", "4-taps"])
@pytest.mark.parametrize("src_dtype,dtype", [(torch.float32, torch.bfloat16), (torch.bfloat16, torch.float32),
                                             (torch.float32, torch.float16), (torch.float32, torch.float32)])
def test_transposes_are_the_plans_gather_and_scatter(src_dtype, dtype, with_3x3):
    plan, n = _plan(with_3x3)
    assert plan.blocks.shape == (6 + 2 * 12 + 2 * 3 + 5 * with_3x3, 4) and plan.taps == (9 if with_3x3 else 4)
    g = torch.Generator().manual_seed(n)
    src = (torch.randn(n, generator=g) * torch.logspace(-30, 30, n)).to(src_dtype)
    specials = torch.tensor([float("nan"), float("inf"), -float("inf"), 3.3e38, -0.0, 1e-40, 1.00390625 + 2 ** -16])
    src[:len(specials)] = specials.to(src_dtype)
    src = src.to(DEVICE)
    blocks = plan.blocks.to(DEVICE)
    _same(wt.transpose_blocks(src, blocks, n, dtype, plan.taps), src.index_select(0, plan.gather.to(DEVICE)).to(dtype))
    _same(wt.transpose_blocks(src, blocks, n, dtype, plan.taps, inverse=True),
          src.index_select(0, plan.scatter.to(DEVICE)).to(dtype))


def test_ties_round_to_even_and_nan_stays_nan():
    """float32 values halfway between two bf16 neighbours round to the even one, as PyTorch's cast (the
    interpreter's own conversion truncates, which the kernel's bit arithmetic replaces); a NaN whose mantissa is
    all ones, which the rounding add would carry into the sign bit (-0.0), stays NaN."""
    lo = torch.tensor([1.0, 1.0078125, -3.0, 1.0], dtype=torch.float32)  # bf16 has 7 mantissa bits: ulp 2^-7 at 1
    halfway = lo + torch.tensor([2 ** -8, 2 ** -8, -2 ** -7, 2 ** -8 + 2 ** -20])
    nans = torch.tensor([0x7FFFFFFF, -1, 0x7F800001, 0x7FBFFFFF], dtype=torch.int32).view(torch.float32)
    src = torch.cat([halfway, nans]).to(DEVICE)
    one_block = torch.tensor([[0, 0, 1, 8]], dtype=torch.int32, device=DEVICE)  # 1 channel x 8 taps: a copy
    got = wt.transpose_blocks(src, one_block, 8, torch.bfloat16, 8).cpu()
    assert torch.equal(got[:4], halfway.to(torch.bfloat16)) and got[4:].isnan().all()
    assert got[0].item() == 1.0 and got[1].item() == 1.015625 and got[3].item() == 1.0078125


def test_refuses_what_it_cannot_read():
    with pytest.raises(ValueError, match="1-D contiguous"):
        wt.transpose_blocks(torch.zeros(4, 4, device=DEVICE), torch.zeros(1, 4, dtype=torch.int32, device=DEVICE),
                            16, torch.bfloat16, 4)


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
@pytest.mark.parametrize("with_3x3", [True, False], ids=["4-and-9-taps", "4-taps"])
@pytest.mark.parametrize("src_dtype,dtype", [(torch.bfloat16, torch.float32), (torch.float32, torch.float32),
                                             (torch.float32, torch.bfloat16)])
def test_parts_read_in_place_are_the_concatenations_inverse(src_dtype, dtype, with_3x3):
    """The weight cache's backward without the concatenation: each target's gradient read where it lies (one
    pointer argument a target), bit for bit the inverse transpose of their concatenation."""
    plan, n = _plan(with_3x3)
    g = torch.Generator().manual_seed(n + 1)
    src = (torch.randn(n, generator=g) * torch.logspace(-20, 20, n)).to(src_dtype).to(DEVICE)
    ends = plan.offsets[1:] + [n]
    parts = [src[a:b].clone() for a, b in zip(plan.offsets, ends)]  # tensors of their own, as the gradients are
    table = wt.part_table(plan.blocks.to(DEVICE), plan.offsets)
    assert table.shape == (plan.blocks.shape[0], 5) and table[:, 4].max().item() == len(parts) - 1
    got = wt.transpose_parts(parts, table, n, dtype, plan.taps)
    _same(got, wt.transpose_blocks(src, plan.blocks.to(DEVICE), n, dtype, plan.taps, inverse=True))


def test_parts_refused_beyond_the_kernels_arguments():
    table = torch.zeros(1, 5, dtype=torch.int32, device=DEVICE)
    with pytest.raises(ValueError, match="1 to 16"):
        wt.transpose_parts([torch.zeros(4, device=DEVICE)] * 17, table, 4, torch.float32, 4)
    with pytest.raises(ValueError, match="one dtype"):
        wt.transpose_parts([torch.zeros(4, device=DEVICE), torch.zeros(4, device=DEVICE, dtype=torch.bfloat16)],
                           table, 4, torch.float32, 4)


def test_parts_kernel_compiles_for_sm90():
    """``transpose_parts``' kernel with all 16 pointer arguments compiled for the H200 here (tests/sm90_compile.py):
    the selects cost no local memory and its shared memory stays the transposes'."""
    pytest.importorskip("triton.backends.nvidia")
    import sm90_compile

    pointers = {f"p{k}": "*i16" for k in range(wt.MAX_PARTS)}
    config = dict(constants=dict(NPARTS=wt.MAX_PARTS, ROUND_BF16=False, WIDEN_BF16=True, I_BLOCK=wt.I_BLOCK,
                                 I_BLOCK_FEW_TAPS=wt.I_BLOCK_FEW_TAPS, K_PAD=16),
                  pointers={**pointers, "out_ptr": "*fp32", "table_ptr": "*i32"}, num_warps=4)
    code = sm90_compile.compiled_code("mscred.ops.triton.weight_transpose", "_transpose_parts_kernel", config)
    assert code["shared"] <= sm90_compile.HOPPER_SHARED_MEMORY
    assert "STL" not in code["listing"] and "LDL" not in code["listing"]
