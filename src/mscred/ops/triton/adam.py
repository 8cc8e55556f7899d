"""Adam's update of parameters stored back to back, in one kernel over the whole run (``packed_adam.PackedAdam``).

PyTorch's fused Adam gives each 65,536-element chunk of each tensor one block: the default model's 3.2 M parameters
were 65 blocks on the H200's 132 SMs, 42.3 us at the end of the graphed training step with nothing beside it
(``results/graph_timeline_shapes/``), about twice its bytes at the copy rate (28 bytes an element: the parameter,
its gradient and the two moments read, three of them written). The fused bf16 step's weights are views of one
float32 buffer (``ops/weight_cache.py`` packs them) and their gradients views of one buffer too (the cast cache's
backward writes them so), so one kernel can cover them in blocks of ``BLOCK`` elements, as many as the run needs.

Blocks never straddle two tensors: a table lists each block's tensor (its ``step`` may differ from a neighbour's,
when a parameter had no gradient in some step) and first element. The update is torch's fused Adam's, in float32
(L2 weight decay, no amsgrad or maximize: ``PackedAdam`` leaves those to torch); the bias corrections are computed
in float64 from ``log(beta)``, which torch's kernel computes as float32 ``pow`` (so this one is the closer of the
two to a float64 reference, by about 1e-4 relative in the first steps' ``1 - beta2 ** step``).

``adam_run(param, grad, exp_avg, exp_avg_sq, steps, table, lr, beta1, beta2, eps, weight_decay, tile)`` on 1-D
float32 views, ``steps`` the run's tensors' step counts already incremented; ``block_table(sizes, device, block)``
the table, ``launch_tile()`` the tile.
"""
from __future__ import annotations

import math

import torch

from mscred.ops.triton.runtime import tile_override, tl, triton

# Elements a program and its warps: 3.2 M parameters are ~3,100 programs; 8 elements a thread, 106 registers
# (sm_90 compile; 16 a thread took 218). On the H200 the step took 32.1 us at 1024/4, 32.5 at 1024/8, 36.2 at
# 2048/8, 46.0 at 4096/8 (results/packed_adam/). MSCRED_ADAM_TILE="BLOCK/warps" overrides (A/B runs).
BLOCK, WARPS = 1024, 4


def launch_tile() -> tuple[int, int]:
    """(elements a program, warps): the defaults above or ``MSCRED_ADAM_TILE``'s."""
    return tile_override("MSCRED_ADAM_TILE", (BLOCK, WARPS))


def block_table(sizes: list[int], device: torch.device, block: int) -> torch.Tensor:
    """(n_blocks, 3) int64: each block's tensor index, first element and the end of its tensor, in the run's
    flat numbering, for tensors of ``sizes`` elements laid back to back, ``block`` elements a block at most."""
    rows, start = [], 0
    for index, size in enumerate(sizes):
        end = start + size
        rows.extend((index, first, end) for first in range(start, end, block))
        start = end
    return torch.tensor(rows, dtype=torch.int64).reshape(-1, 3).to(device)


def adam_run(param: torch.Tensor, grad: torch.Tensor, exp_avg: torch.Tensor, exp_avg_sq: torch.Tensor,
             steps: torch.Tensor, table: torch.Tensor, lr: float, beta1: float, beta2: float, eps: float,
             weight_decay: float, tile: tuple[int, int]) -> None:
    """One Adam step in place on the run's 1-D float32 views (``param``, ``exp_avg``, ``exp_avg_sq`` written);
    ``steps`` holds each tensor's step count after this step's increment, ``table`` is ``block_table``'s for
    ``tile``'s block (``launch_tile``)."""
    for name, t in (("grad", grad), ("exp_avg", exp_avg), ("exp_avg_sq", exp_avg_sq)):
        if t.shape != param.shape or t.dtype != torch.float32 or not t.is_contiguous():
            raise ValueError(f"adam_run: {name} must be a contiguous float32 tensor shaped as param")
    if param.dtype != torch.float32 or param.dim() != 1 or not param.is_contiguous():
        raise ValueError("adam_run: param must be a 1-D contiguous float32 tensor")
    if not 0.0 < beta1 < 1.0 or not 0.0 < beta2 < 1.0:
        raise ValueError(f"adam_run: betas must lie in (0, 1), got ({beta1}, {beta2})")
    _adam_kernel[(table.shape[0],)](param, grad, exp_avg, exp_avg_sq, steps, table, lr, beta1, beta2,
                                    math.log(beta1), math.log(beta2), eps, weight_decay,
                                    HAS_WEIGHT_DECAY=weight_decay != 0.0, BLOCK=tile[0], num_warps=tile[1])


if triton is not None:
    @triton.jit
    def _adam_kernel(param_ptr, grad_ptr, exp_avg_ptr, exp_avg_sq_ptr, steps_ptr, table_ptr, lr, beta1, beta2,
                     log_beta1, log_beta2, eps, weight_decay, HAS_WEIGHT_DECAY: tl.constexpr, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        index = tl.load(table_ptr + row * 3)
        first = tl.load(table_ptr + row * 3 + 1)
        end = tl.load(table_ptr + row * 3 + 2)
        # The bias corrections once a program, in float64: 1 - beta2 ** step is ~1e-3 at the first step, where a
        # float32 pow's rounding is ~1e-4 of it.
        step = tl.load(steps_ptr + index).to(tl.float64)
        correction1 = 1.0 - tl.exp(step * log_beta1)
        correction2 = 1.0 - tl.exp(step * log_beta2)
        step_size = (lr / correction1).to(tl.float32)
        correction2_sqrt = tl.sqrt(correction2).to(tl.float32)

        offs = first + tl.arange(0, BLOCK)
        mask = offs < end
        p = tl.load(param_ptr + offs, mask=mask, other=0.0)
        g = tl.load(grad_ptr + offs, mask=mask, other=0.0)
        m = tl.load(exp_avg_ptr + offs, mask=mask, other=0.0)
        v = tl.load(exp_avg_sq_ptr + offs, mask=mask, other=0.0)
        if HAS_WEIGHT_DECAY:  # Adam's L2 penalty, added to the gradient as torch does (not AdamW's decay)
            g = g + weight_decay * p
        m = beta1 * m + (1.0 - beta1) * g
        v = beta2 * v + (1.0 - beta2) * g * g
        # IEEE square root and division, as torch's kernel (Triton's defaults are the approximate ones).
        denom = tl.div_rn(tl.sqrt_rn(v), correction2_sqrt) + eps
        p = p - tl.div_rn(step_size * m, denom)
        tl.store(param_ptr + offs, p, mask=mask)
        tl.store(exp_avg_ptr + offs, m, mask=mask)
        tl.store(exp_avg_sq_ptr + offs, v, mask=mask)
