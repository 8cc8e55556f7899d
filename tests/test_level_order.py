"""The order in which the one-stream training forward calls the four levels' ConvLSTMs (``level_streams.level_order``,
MSCRED_LEVEL_ORDER, an A/B lever): the same ops on the same values in another order, so the loss and every gradient
are those of any other order bit for bit on the CPU, and the backward runs the levels' ConvLSTMs in the reverse of the
forward's order (autograd: latest-created first). The kernels run under the Triton interpreter on the CPU
(conftest)."""
from __future__ import annotations

import contextlib

import pytest
import torch
import torch.nn.functional as F
from model_runs import assert_same_step, fused_training_step

from mscred.config import ModelConfig
from mscred.level_streams import level_order
from mscred.model import MSCREDNet
from mscred.ops.triton.runtime import runs_fused

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
needs_fused = pytest.mark.skipif(not runs_fused(torch.empty(0, device=DEVICE)),
                                 reason="the fused training layout needs the Triton kernels (CUDA, or the CPU "
                                        "interpreter)")


@pytest.mark.parametrize("setting, want", [(None, [3, 2, 1, 0]), ("", [3, 2, 1, 0]), ("1234", [0, 1, 2, 3]),
                                           ("2,3,4,1", [1, 2, 3, 0])])
def test_the_setting(setting, want, set_env):
    set_env("MSCRED_LEVEL_ORDER", setting)
    assert level_order(4) == want


@pytest.mark.parametrize("setting", ["432", "4421", "43210", "abcd", "4 3 2 1 5"])
def test_a_setting_that_is_not_a_permutation_is_refused(setting, monkeypatch):
    monkeypatch.setenv("MSCRED_LEVEL_ORDER", setting)
    with pytest.raises(ValueError, match="permutation of the levels 1..4"):
        level_order(4)


def _orders(order: str | None, monkeypatch) -> tuple[list[int], list[int]]:
    """(the levels in the order the forward called them, in the order their backward finished), numbered from 1,
    for one fused training step under MSCRED_LEVEL_ORDER=``order``."""
    if order is None:
        monkeypatch.delenv("MSCRED_LEVEL_ORDER", raising=False)
    else:
        monkeypatch.setenv("MSCRED_LEVEL_ORDER", order)
    torch.manual_seed(0)
    net = MSCREDNet(ModelConfig(n_sensors=12, backend="fused", channels=(4, 8, 8, 16))).to(DEVICE)
    forward, backward = [], []
    for number, lstm in enumerate(net.lstms, start=1):
        lstm.register_forward_pre_hook(lambda module, args, number=number: forward.append(number))
        lstm.register_full_backward_hook(lambda module, gin, gout, number=number: backward.append(number))
    x = torch.rand(2, 5, 3, 12, 12, device=DEVICE)
    F.mse_loss(net(x), x[:, -1]).backward()
    return forward, backward


@needs_fused
@pytest.mark.parametrize("order, want", [(None, [4, 3, 2, 1]), ("1234", [1, 2, 3, 4]), ("2341", [2, 3, 4, 1])])
def test_the_backward_runs_the_levels_in_the_reverse_of_the_forwards_order(order, want, monkeypatch):
    forward, backward = _orders(order, monkeypatch)
    assert forward == want
    assert backward == want[::-1]


@needs_fused
@pytest.mark.parametrize("autocast", ["float32", "bf16"])
@pytest.mark.filterwarnings("ignore:overflow encountered in exp:RuntimeWarning")
def test_the_fused_model_trains_the_same_in_any_order(autocast, monkeypatch, strict_float32):
    """The loss and every gradient bit for bit on the CPU (to rounding on CUDA, ``assert_same_step``), in float32
    and under bf16 autocast with the weight cache, every level on the concatenated path on the CPU."""
    bf16 = autocast == "bf16"
    if DEVICE == "cpu":
        monkeypatch.setenv("MSCRED_LSTM_CONCAT_MIN_PIXELS", "0")
    context = (lambda: torch.autocast(DEVICE, dtype=torch.bfloat16)) if bf16 else contextlib.nullcontext
    channels = None if DEVICE == "cuda" else (4, 8, 8, 16)
    run = fused_training_step(30 if DEVICE == "cuda" else 12, 4 if DEVICE == "cuda" else 2, context, DEVICE,
                              channels=channels)
    monkeypatch.setenv("MSCRED_LEVEL_ORDER", "1234")
    ref = run()
    monkeypatch.delenv("MSCRED_LEVEL_ORDER", raising=False)  # the default, 4321
    assert_same_step(run(), ref, bf16=bf16)
