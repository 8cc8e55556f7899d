"""The training encoder writing a large ConvLSTM level's input straight into the level's [x, h] buffer.

On the large levels the training ConvLSTM convolves x_t and h_{t-1} side by side in one zero-bordered, time-major
buffer xh (T, B, C + Ch, Hp, Wp) (``triton/convlstm_concat.py``). Without this, its forward first copies the level's
input -- the encoder's zero-bordered activation, which the next strided convolution reads as well -- into xh's x
half and zeroes h_{-1}: at levels 1-2 of the bf16 training step on the H200, 43 us of copies and fills by the time
line (``benchmarks/results/next_1206/``). With this on, the epilogue that makes the activation (conv1's small
convolution, conv2's bias + SELU) stores it twice -- into the bordered buffer the next convolution reads, and into
xh's x half, border included -- and zeroes h_{-1} in the same pass; the ConvLSTM then fills xh's h half in place
(``triton/convlstm_in_xh.py``). By our arithmetic (not measured) that is ~72 MB of extra stores at batch 128 (x's
second copy and h_{-1}'s zeros at levels 1-2), 20-26 us if nothing hides them, for the 43 us of copies and fills.

The two gradients of the activation (the ConvLSTM's and the next convolution's) still reach the epilogue's backward
apart and are summed in its kernel (``shared_output``): the same values as without, only stored by another kernel.

The default since 2026-12-05 (``MSCRED_ENCODER_XH=0`` turns it off): the graphed bf16 step 2.405 -> 2.389 ms
on the H200, 3 rounds in one alternation (benchmarks/results/levers_together/). MSCRED's ConvLSTMs keep their
input's channel count (Ch = C), so xh has 2C channels and h_{-1} sits at the same channels' offset C, which is what
the epilogues write.
"""
from __future__ import annotations

from typing import Optional

import torch

from mscred.ops.triton.runtime import switched_off


def enabled() -> bool:
    """Whether the training encoder writes the large levels' inputs into their [x, h] buffers (MSCRED_ENCODER_XH=0
    turns it off)."""
    return not switched_off("MSCRED_ENCODER_XH")


def new_buffer(out: torch.Tensor) -> torch.Tensor:
    """xh for the zero-bordered activation ``out`` (T*B, C, Hp, Wp) (time-major images): (T*B, 2C, Hp, Wp),
    channels-last, unfilled (the epilogue writes its x half and h_{-1}, the ConvLSTM the rest)."""
    N, C, HP, WP = out.shape
    return torch.empty(N, 2 * C, HP, WP, device=out.device, dtype=out.dtype, memory_format=torch.channels_last)


def recover(xp: torch.Tensor, hidden: int) -> Optional[torch.Tensor]:
    """The buffer xh (T, B, 2C, Hp, Wp) whose x half is the level input ``xp`` (B, T, C, Hp, Wp), as a view of
    xp's storage; None when xp is not laid out as one (a ConvLSTM of ``hidden`` != C channels, or an input copied on
    its way, e.g. cast by autocast): the level then takes the path that copies x into a buffer of its own."""
    B, T, C, HP, WP = xp.shape
    if hidden != C:
        return None
    ct = 2 * C
    # (B, T, C, Hp, Wp) strides of the x half of a channels-last, time-major (T * B images) buffer of 2C channels
    if not strides_match(xp, (HP * WP * ct, B * HP * WP * ct, 1, WP * ct, ct)):
        return None
    if xp.untyped_storage().nbytes() < (xp.storage_offset() + T * B * HP * WP * ct) * xp.element_size():
        return None
    return xp.as_strided((T, B, ct, HP, WP), (B * HP * WP * ct, HP * WP * ct, 1, WP * ct, ct))


def strides_match(t: torch.Tensor, strides: tuple[int, ...]) -> bool:
    """Whether ``t`` has ``strides`` in every dimension of more than one element (a dimension of size 1 may have any
    stride: views give it whatever their arithmetic gives, e.g. a batch of 1)."""
    return all(size == 1 or have == want for size, have, want in zip(t.shape, t.stride(), strides))
