"""The weight gradients' side stream on a green context (``ops/green_stream.py``, MSCRED_WGRAD_STREAM_SMS=N).

CPU: the setting's parsing and the fallback (None, one warning per reason). CUDA: a green stream of N SMs computes
what an ordinary stream computes, and ``wgrad_stream``'s side stream is it when the setting asks (the graphed step
with it: tests/test_wgrad_stream.py under MSCRED_WGRAD_STREAM_SMS, ``benchmarks/gpu_green_wgrad.sh``).
"""
from __future__ import annotations

import warnings

import pytest
import torch

from mscred.ops import green_stream, wgrad_stream


@pytest.mark.parametrize("text, sms", [(None, None), ("", None), ("0", None), ("66", 66), (" 100 ", 100)])
def test_setting(text, sms, set_env):
    set_env("MSCRED_WGRAD_STREAM_SMS", text)
    assert green_stream.sms_setting() == sms


@pytest.mark.parametrize("text", ["many", "-4", "6.5"])
def test_bad_setting_names_the_variable(text, monkeypatch):
    monkeypatch.setenv("MSCRED_WGRAD_STREAM_SMS", text)
    with pytest.raises(ValueError, match="MSCRED_WGRAD_STREAM_SMS must be a count of SMs"):
        green_stream.sms_setting()


def test_no_green_context_falls_back_with_one_warning(monkeypatch):
    def refused(index, sms, key):
        raise RuntimeError("PyTorch was not built with Green Context support!")
    monkeypatch.setattr(green_stream, "_make", refused)
    monkeypatch.setattr(green_stream, "_WARNED", set())
    device = torch.device("cuda", 0)
    with pytest.warns(RuntimeWarning, match="no green-context stream of 7 SMs .*Green Context support"):
        assert green_stream.stream(device, 7) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert green_stream.stream(device, 7) is None


@pytest.mark.skipif(not torch.cuda.is_available(), reason="green contexts are a CUDA feature (needs a GPU)")
def test_green_stream_computes_the_same_and_is_the_side_stream(monkeypatch):
    device = torch.device("cuda", torch.cuda.current_device())
    sms = torch.cuda.get_device_properties(device).multi_processor_count // 2
    green = green_stream.stream(device, sms)
    if green is None:
        pytest.skip("no green context here (see the warning)")
    a = torch.randn(512, 768, device=device)
    b = torch.randn(768, 256, device=device)
    with torch.cuda.stream(green):
        c = a @ b
    torch.cuda.synchronize()
    assert torch.equal(c, a @ b)
    monkeypatch.setenv("MSCRED_WGRAD_STREAM_SMS", str(sms))
    assert wgrad_stream._side(device) is green
    monkeypatch.delenv("MSCRED_WGRAD_STREAM_SMS")
    assert wgrad_stream._side(device) is not green
