"""A ConvLSTM over consecutive (sliding) windows for scoring, in PyTorch ops: inference only.

``MSCREDNet.forward_windows`` hands each level's ConvLSTM its windows as sliding views of the per-segment
features: window b + 1 is window b shifted by one step (``sliding``). The gate convolution over
concat([x_t, h_{t-1}]) is linear, so it splits into conv(x_t, W_x) + conv(h_{t-1}, W_h) with the same zero padding:
the first depends on the segment alone and runs once per distinct segment (B + T - 1 images instead of B * T), the
second is zero at the first step (h = 0). The cell update is the reference's (``cell_update``), so this is the
function of ``ops.reference.convlstm`` (tests/test_forward_windows.py) at about half its convolution work per
window. It serves where the fused kernels do not run (the reference backend, or no Triton/CUDA); the fused op
shares its input convolutions itself (``ops/triton/convlstm.py``, ``step_gates``).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from mscred.ops.reference import cell_update, same_padding


def sliding(x: torch.Tensor) -> bool:
    """Whether x (B, T, C, H, W) holds overlapping sliding windows: window b + 1 is window b shifted by one step
    (stride(0) == stride(1)), as ``MSCREDNet.forward_windows`` passes consecutive windows."""
    return x.shape[0] > 1 and x.shape[1] > 1 and x.stride(0) == x.stride(1)


def distinct_steps(x: torch.Tensor) -> torch.Tensor:
    """The B + T - 1 distinct (C, H, W) steps of sliding windows x (B, T, C, H, W), as one view."""
    B, T = x.shape[:2]
    return x.as_strided((B + T - 1, *x.shape[2:]), x.stride()[1:], x.storage_offset())


def convlstm_sliding(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, forget_bias: float) -> torch.Tensor:
    """``ops.reference.convlstm`` with the input convolution hoisted out of the step loop (once per distinct step
    when x holds sliding windows) and no recurrent convolution at the first step.

    Parameters
    ----------
    x : (B, T, C, H, W) tensor, sliding windows (see ``sliding``) or any other
    weight : (4*Ch, C + Ch, k, k) tensor, gate blocks i, g, f, o
    bias : (4*Ch,) tensor
    forget_bias : float

    Returns
    -------
    (B, T, Ch, H, W) tensor, every hidden state. No autograd use intended (scoring).
    """
    B, T, C, H, W = x.shape
    top, bottom, left, right = same_padding(H, weight.shape[-1], 1)  # stride 1: H and W are kept
    pad = (left, right, top, bottom)
    w_x, w_h = weight[:, :C], weight[:, C:]
    if sliding(x):
        gates = F.conv2d(F.pad(distinct_steps(x), pad), w_x, bias)  # (B + T - 1, 4Ch, H, W)

        def input_gates(t: int) -> torch.Tensor:
            return gates[t:t + B]
    else:
        gates = F.conv2d(F.pad(x.reshape(B * T, C, H, W), pad), w_x, bias).view(B, T, -1, H, W)

        def input_gates(t: int) -> torch.Tensor:
            return gates[:, t]
    h = c = None  # the first step: no recurrent term, zero cell state
    outputs = []
    for t in range(T):
        z = input_gates(t)
        if h is not None:
            z = z + F.conv2d(F.pad(h, pad), w_h)
        h, c = cell_update(z, c, forget_bias)
        outputs.append(h)
    return torch.stack(outputs, dim=1)  # (B, T, Ch, H, W)
