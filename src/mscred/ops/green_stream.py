"""A CUDA stream whose kernels run on a subset of the GPU's SMs (a CUDA green context), for the weight gradients
queued beside the training step's chain (``ops/wgrad_stream.py``).

Why: cuDNN's weight-gradient kernels on the side stream take whole SMs for tens of microseconds (level 1's 110
blocks of 384 threads for 82 us, level 3's 128 blocks for 39 us), and the chain's latency-bound kernels beside them
slow down or wait: level 3's attention backward took 46 + 34 us beside two of them (its forward 5 + 3.5 us), and a
data gradient of the chain started 75 us after it could have, beside level 1's (``results/graph_timeline_fold/``,
``docs/training-kernel-plan.md``). A side stream of a green context of N SMs leaves the other SMs to the chain
(whose stream keeps the whole GPU).

``MSCRED_WGRAD_STREAM_SMS=N`` (opt-in; written 2026-12-04 without device time, not yet measured: whether a CUDA
graph capture takes a green context's stream, forked from and joined to the capture stream by events, is the first
question, ``benchmarks/green_ctx_probe.py``). Where torch has no green contexts (before 2.10, or a build without
them) or the driver refuses, the side stream is an ordinary one (a warning says so once).
"""
from __future__ import annotations

import os
import warnings
from typing import Optional

import torch

_CONTEXTS: dict[tuple[int, int], object] = {}  # kept alive as long as their streams
_STREAMS: dict[tuple[int, int], "torch.cuda.Stream"] = {}
_WARNED: set[str] = set()


def sms_setting() -> Optional[int]:
    """MSCRED_WGRAD_STREAM_SMS as a count of SMs (None when unset or 0); ValueError naming it if not a count."""
    text = os.environ.get("MSCRED_WGRAD_STREAM_SMS", "").strip()
    if not text:
        return None
    try:
        sms = int(text)
    except ValueError:
        raise ValueError(f"MSCRED_WGRAD_STREAM_SMS must be a count of SMs, got {text!r}") from None
    if sms < 0:
        raise ValueError(f"MSCRED_WGRAD_STREAM_SMS must be a count of SMs, got {text!r}")
    return sms or None


def stream(device: torch.device, sms: int) -> Optional["torch.cuda.Stream"]:
    """A stream of a green context of ``sms`` SMs on ``device`` (made once per device and count), or None where one
    cannot be made here (warned once per reason)."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    key = (index, sms)
    if key not in _STREAMS:
        try:
            _STREAMS[key] = _make(index, sms, key)
        except (ImportError, AttributeError, RuntimeError, TypeError) as err:
            why = f"{type(err).__name__}: {str(err).strip().splitlines()[0] if str(err).strip() else ''}"
            if why not in _WARNED:
                _WARNED.add(why)
                warnings.warn(f"mscred: no green-context stream of {sms} SMs ({why}); the weight gradients' side "
                              "stream is an ordinary one", RuntimeWarning, stacklevel=3)
            return None
    return _STREAMS[key]


def _make(index: int, sms: int, key: tuple[int, int]) -> "torch.cuda.Stream":
    from torch.cuda.green_contexts import GreenContext

    total = torch.cuda.get_device_properties(index).multi_processor_count
    if sms >= total:
        raise RuntimeError(f"{sms} SMs asked, the device has {total}")
    try:
        context = GreenContext.create(num_sms=sms, device_id=index)
    except TypeError:  # torch 2.10's signature: create(num_sms, device_id=0)
        context = GreenContext.create(sms, index)
    _CONTEXTS[key] = context
    if hasattr(context, "Stream"):  # torch 2.12 and later
        return context.Stream()
    context.set_context()  # torch 2.10: a stream made while the green context is current belongs to it
    try:
        return torch.cuda.Stream(device=index)
    finally:
        context.pop_context()
