"""`mscred generate` and `mscred env` on what an audit found: the data has the properties --help and the README
claim, an empty OUT_DIR is refused, a too-short --length names one that works, and `env` reports what changes its
answers."""
import json
import os
import re

import numpy as np
import pandas as pd
import pytest

from cli_helpers import run_cli


def _bad(capsys, *argv, names=()) -> str:
    code, out, err = run_cli(capsys, *argv)
    lines = err.splitlines()
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("mscred: error:"), err
    assert "Traceback" not in err
    for fragment in names:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


# ---------------------------------------------------------------------------------------------------- generate
def test_generated_data_has_what_the_help_says(tmp_path, capsys):
    """Train the first 40%, test the last 50%; 5 anomalies of 10, 30, 90, 10, 30 steps on 3 root causes each,
    inside the test part, apart, labelled exactly; the same seed the same bytes, another seed other data."""
    length, n = 1500, 5
    for name, seed in (("a", 3), ("b", 3), ("c", 4)):
        code, out, err = run_cli(capsys, "generate", tmp_path / name, "--sensors", n, "--length", length, "--seed",
                                 seed)
        assert code == 0, err
    assert "train.csv (600 rows), test.csv (750 rows, 170 anomalous), anomalies.csv (5 anomalies)" in out
    train, test, events = (pd.read_csv(tmp_path / "a" / f"{part}.csv") for part in ("train", "test", "anomalies"))
    assert list(train["timestamp"]) == list(range(600)) and "label" not in train.columns
    assert list(test["timestamp"]) == list(range(750, 1500))
    assert list(events["end"] - events["start"]) == list(events["duration"]) == [10, 30, 90, 10, 30]
    assert (events["start"].to_numpy()[1:] >= events["end"].to_numpy()[:-1]).all()
    sensors = {c for c in train.columns if c != "timestamp"}
    assert len(sensors) == n
    for cell in events["root_causes"]:
        assert len(set(cell.split(";"))) == 3 and set(cell.split(";")) <= sensors
    expected = np.zeros(len(test), dtype=int)
    for start, end in zip(events["start"], events["end"]):
        expected[(test["timestamp"] >= start) & (test["timestamp"] < end)] = 1
    assert (test["label"].to_numpy() == expected).all()
    for part in ("train", "test", "anomalies"):
        same = (tmp_path / "a" / f"{part}.csv").read_bytes() == (tmp_path / "b" / f"{part}.csv").read_bytes()
        assert same, part
    assert (tmp_path / "a" / "test.csv").read_bytes() != (tmp_path / "c" / "test.csv").read_bytes()


def test_empty_out_dir_is_refused(tmp_path, capsys, monkeypatch):
    """OUT_DIR "" (an unset shell variable) read as "." and replaced the current folder's train.csv, test.csv and
    anomalies.csv."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.csv").write_text("mine\n")
    _bad(capsys, "generate", "", "--length", 1200, names=("OUT_DIR", "empty path"))
    assert (tmp_path / "train.csv").read_text() == "mine\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.csv"]


def test_too_short_length_names_one_that_works(tmp_path, capsys):
    """--help said x>=1 and the message said "a slot of about 114 test steps": the length was left to work out.
    Now --help and the refusal name the shortest --length, and it and the lengths after it generate."""
    from mscred.data.synthetic import SHORTEST_LENGTH

    line = _bad(capsys, "generate", tmp_path / "g", "--length", 1000, names=("--length", "1000"))
    assert f"x>={SHORTEST_LENGTH}" in line
    code, out, _ = run_cli(capsys, "generate", "--help")
    assert code == 0 and f"x>={SHORTEST_LENGTH}" in out
    for length in (SHORTEST_LENGTH, SHORTEST_LENGTH + 1, SHORTEST_LENGTH + 7):
        code, _, err = run_cli(capsys, "generate", tmp_path / f"g{length}", "--sensors", 4, "--length", length)
        assert code == 0, err


def test_generate_help_does_not_import_pandas():
    """--help reads SHORTEST_LENGTH from the synthetic module, which had imported pandas (~0.3 s) at its top."""
    import subprocess
    import sys

    code = "import sys, mscred.cli.generate; print('pandas' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_long_enough_for_other_sizes():
    from mscred.data.synthetic import generate_synthetic, long_enough

    for n_anomalies, durations in ((3, (5,)), (7, (10, 30, 90)), (1, (200,))):
        enough = long_enough(n_anomalies, max(durations))
        for length in range(enough, enough + 25):
            generate_synthetic(n_sensors=4, length=length, n_anomalies=n_anomalies, durations=durations)


# --------------------------------------------------------------------------------------------------------- env
def test_env_names_the_variables_that_change_its_answers():
    """TRITON_INTERPRET=1 made "fused ok" on a machine without CUDA, OMP_NUM_THREADS set the torch threads: the
    report showed the effect and not the cause (only MSCRED_* variables were listed). In fresh processes: `env`
    imports the Triton kernels, and under a TRITON_INTERPRET set in this process they stayed interpreted for the
    tests after it (on the GPU machine a later `train` failed, "Cannot call @triton.jit'd outside of the scope of
    a kernel")."""
    import os
    import subprocess
    import sys

    def env(*args, **variables):
        clean = {k: v for k, v in os.environ.items()
                 if k not in ("TRITON_INTERPRET", "OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES")}
        run = subprocess.run([sys.executable, "-m", "mscred", "env", *args], capture_output=True, text=True,
                             env={**clean, **variables}, timeout=600)
        assert run.returncode == 0, run.stderr
        return run.stdout

    out = env("--json", TRITON_INTERPRET="1", OMP_NUM_THREADS="1")
    assert json.loads(out)["other_variables"] == {"TRITON_INTERPRET": "1", "OMP_NUM_THREADS": "1"}
    assert "other variables: TRITON_INTERPRET=1, OMP_NUM_THREADS=1" in env(TRITON_INTERPRET="1", OMP_NUM_THREADS="1")
    assert "other variables" not in env()


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="no CPU affinity on this OS")
def test_env_says_how_many_cores_this_process_may_use(capsys, monkeypatch):
    """Under `taskset -c 0` (or a container's cpuset) it said "2 cores": the machine's, not this process's."""
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    code, out, _ = run_cli(capsys, "env")
    assert code == 0 and "cpu: 2 cores (1 usable here)" in out
    code, out, _ = run_cli(capsys, "env", "--json")
    info = json.loads(out)
    assert (info["cpu_cores"], info["cpu_cores_usable"]) == (2, 1)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    code, out, _ = run_cli(capsys, "env")
    assert "cpu: 2 cores, torch threads" in out
