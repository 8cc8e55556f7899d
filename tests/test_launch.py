"""mscred.launch: what the parent of spawned ranks reports and leaves when a rank fails or it is interrupted."""
from __future__ import annotations

import time

import pytest

from mscred.errors import InputError
from mscred.launch import _stop, launch


def _raise_runtime_error(rank):
    raise ValueError(f"rank {rank.rank} cannot go on")


def _raise_input_error(rank):
    raise InputError(f"data.csv: bad on rank {rank.rank}")


def test_a_rank_error_is_one_line():
    """A rank's own exception came back as torch's ProcessRaisedException holding the child's ~30-line traceback;
    now one line with its last line (and InputError stays InputError, for exit code 2)."""
    with pytest.raises(RuntimeError) as caught:
        launch(_raise_runtime_error, 2, device="cpu", timeout=120)
    text = str(caught.value)
    assert "\n" not in text and "failed: ValueError: rank" in text and "cannot go on" in text
    with pytest.raises(InputError, match="data.csv: bad on rank"):
        launch(_raise_input_error, 2, device="cpu", timeout=120)


def test_stop_terminates_then_kills():
    """``_stop`` (on Ctrl-C or a time-out the parent stops its ranks instead of waiting for the run to finish)."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=time.sleep, args=(60,)) for _ in range(2)]
    for p in procs:
        p.start()
    start = time.monotonic()
    _stop(procs, grace=5.0)
    assert not any(p.is_alive() for p in procs) and time.monotonic() - start < 10
