"""The training step's attention outputs written straight into the decoder's skip concatenations.

The decoder concatenates each of levels 1-3's attention outputs after its own level's result along channels. Since
2026-12-04 the decoder's bias + SELU writes its half of the concatenation itself (``triton/bias_act_cat.py``), and the
attention output is copied into the other half: three copy kernels a training step (8-12 us on the H200 by the time
line, ``benchmarks/results/next_1206/``). With this on, the attention kernel writes its output into the upper
channel half of a new (B, 2C, H, W) channels-last buffer (its output is that half, a view), and the decoder's
bias + SELU writes the lower half of the same buffer, so nothing is copied (``bias_act_cat``'s ``skip_in_cat``).
The gradients are as before: the concatenation's gradient split in two halves. The backward of that bias + SELU
also copies the upper half out compact in the same pass (``bias_act_fused_backward_cat``), so that the attention's
backward, which reads its gradient channels-last, copies nothing either (3.9 + 3.9 + 6.4 us of copies there).

Which attention outputs are such halves is said explicitly (the model asks the levels for them and tells the
decoder): the lower half of a buffer is written only by the decoder of the level that asked. ``recover`` then finds
the buffer from the half's strides, and an output that is not laid out as one takes the copying path.

The default since 2026-12-05 (``MSCRED_ATTENTION_CAT=0`` turns it off): the graphed bf16 step 2.405 -> 2.390
ms on the H200, 3 rounds in one alternation (benchmarks/results/levers_together/).
"""
from __future__ import annotations

from typing import Optional

import torch

from mscred.ops.encoder_xh import strides_match
from mscred.ops.triton.runtime import switched_off


def enabled() -> bool:
    """Whether the training step's attention outputs of levels 1-3 go into the decoder's concatenations
    (MSCRED_ATTENTION_CAT=0 turns it off)."""
    return not switched_off("MSCRED_ATTENTION_CAT")


def recover(skip: torch.Tensor, lower: int) -> Optional[torch.Tensor]:
    """The (B, lower + S, H, W) channels-last buffer whose upper channels are ``skip`` (B, S, H, W), as a view of
    skip's storage; None when skip is not laid out as the upper half of one with ``lower`` == S channels below."""
    if skip.dim() != 4:
        return None
    B, S, H, W = skip.shape
    ct = lower + S
    if lower != S or not strides_match(skip, (H * W * ct, 1, W * ct, ct)) or skip.storage_offset() < lower:
        return None
    start = skip.storage_offset() - lower
    if skip.untyped_storage().nbytes() < (start + B * H * W * ct) * skip.element_size():
        return None
    return skip.as_strided((B, ct, H, W), (H * W * ct, 1, W * ct, ct), start)
