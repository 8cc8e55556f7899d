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


def test_the_first_failure_is_named(tmp_path):
    """A peer's consequent failure (rank 0's gloo connection to a rank that already raised) is not what the parent
    reports: the rank that failed first is, by the records the ranks leave; none left, None."""
    import json

    from mscred.launch import first_failure

    assert first_failure(tmp_path, 2) is None
    (tmp_path / "failed.0.json").write_text(json.dumps({"time": 20.5, "error": "RuntimeError: Gloo connectFullMesh"}))
    (tmp_path / "failed.1.json").write_text(json.dumps({"time": 20.1, "error": "ValueError: rank 1 cannot go on"}))
    assert first_failure(tmp_path, 2) == (1, "ValueError: rank 1 cannot go on")
    assert first_failure(tmp_path, 1) == (0, "RuntimeError: Gloo connectFullMesh")


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
