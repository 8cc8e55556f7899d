"""`mscred demo` is all or nothing: a run that fails at any stage (bad input, an error, Ctrl-C, SIGTERM) leaves every
output as it was, an earlier run's files and folders back byte for byte and the new ones gone; a run that succeeds
leaves no copy of the earlier ones behind. (A failed demo once put back nothing it had rewritten: an earlier run's
data beside a half-new model and scores.)"""
from __future__ import annotations

import errno
import io
import json
import os

import pandas as pd
import pytest

import mscred.cli.demo as demo_cli
import mscred.data.synthetic as synthetic
import mscred.evaluation as evaluation
from cli_helpers import run_cli, sensor_frame
from mscred.atomic import all_or_nothing, atomic_path
from mscred.cli.main import Terminated
from mscred.detector import MSCRED
from mscred.errors import InputError
from mscred.report import REPORT_FILES

# An earlier run's outputs (hand-made, with known bytes), and a file of the user's that is no output.
EARLIER = {
    "data/train.csv": b"timestamp,s0\n0,0.5\n",
    "data/test.csv": b"timestamp,s0,label\n0,0.5,0\n",
    "data/anomalies.csv": b"start,end,root_causes\n",
    "model/config.json": b'{"earlier": "model"}\n',
    "model/model.safetensors": b"\x00earlier weights\xff",
    "scores.csv": b"timestamp,score,is_anomaly,root_causes\n0,1.0,0,\n",
    "metrics.json": b'{"earlier": "metrics"}\n',
    "report/index.html": b"<html>earlier report</html>\n",
    "report/metrics.json": b'{"earlier": "report"}\n',
    "data/README.txt": b"mine\n",
}


@pytest.fixture
def tiny_demo(monkeypatch):
    """The CLI's demo at test_demo.py's tiny size (8 sensors, 3000 steps, small channels, one epoch), and its
    evaluation without the slow figures: the real figures, and a report of two small files written as the real one
    is (atomically, as a whole folder)."""
    real_demo, real_evaluate = demo_cli.run_demo, evaluation.evaluate_files

    def run_tiny(out, **kwargs):
        kwargs.update(n_sensors=8, length=3000, epochs=1, channels=(8, 16, 16, 16), device="cpu")
        return real_demo(out, **kwargs)

    def evaluate_fast(*args, report_dir=None, **kwargs):
        figures = real_evaluate(*args, report_dir=None, **kwargs)
        if report_dir is not None:
            with atomic_path(report_dir, owned=REPORT_FILES, what="an mscred report") as tmp:
                tmp.mkdir()
                (tmp / "index.html").write_text("<html>new report</html>\n")
                (tmp / "metrics.json").write_text(json.dumps(figures))
        return figures

    monkeypatch.setattr(demo_cli, "run_demo", run_tiny)
    monkeypatch.setattr(evaluation, "evaluate_files", evaluate_fast)


def _write_earlier(out):
    for name, content in EARLIER.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_bytes(content)


def _snapshot(folder) -> dict:
    """Every entry under ``folder``, hidden ones included: a file's bytes, None for a folder."""
    return {p.relative_to(folder).as_posix(): (None if p.is_dir() else p.read_bytes()) for p in folder.rglob("*")}


def _hidden(folder) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob(".*"))


def _after_writing(real, error):
    """``real``, then ``error`` raised: a stage that fails after it has written its output."""
    def stage(*args, **kwargs):
        real(*args, **kwargs)
        raise error(*args) if callable(error) else error   # (an exception, or one made of the arguments)
    return stage


def _fail_data(monkeypatch):   # after the three data files are written
    monkeypatch.setattr(synthetic, "write_synthetic",
                        _after_writing(synthetic.write_synthetic, InputError("data stage failed")))


def _fail_train(monkeypatch):   # Ctrl-C in training, after the data
    def interrupted(self, *args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(MSCRED, "fit", interrupted)


def _fail_model(monkeypatch):   # a full disk, found after the model folder is written
    monkeypatch.setattr(MSCRED, "save", _after_writing(
        MSCRED.save, lambda self, directory: OSError(errno.ENOSPC, "No space left on device", str(directory))))


def _fail_detect(monkeypatch):   # SIGTERM while scoring, after the model
    def terminated(self, *args, **kwargs):
        raise Terminated()
    monkeypatch.setattr(MSCRED, "detect", terminated)


def _fail_evaluate(monkeypatch):   # after scores.csv and the report are written
    monkeypatch.setattr(evaluation, "evaluate_files",
                        _after_writing(evaluation.evaluate_files, InputError("evaluate stage failed")))


def _fail_metrics(monkeypatch):   # the last write: figures that JSON cannot hold, after everything else is written
    real = evaluation.evaluate_files
    monkeypatch.setattr(evaluation, "evaluate_files", lambda *a, **k: {**real(*a, **k), "bad": object()})


# stage -> (make it fail, exit code, the start of the one line on stderr)
STAGES = {
    "data": (_fail_data, 2, "mscred: error: data stage failed"),
    "train": (_fail_train, 130, "mscred: aborted"),
    "model": (_fail_model, 2, "mscred: error: "),
    "detect": (_fail_detect, 143, "mscred: terminated"),
    "evaluate": (_fail_evaluate, 2, "mscred: error: evaluate stage failed"),
    "metrics": (_fail_metrics, 1, "mscred: internal error: TypeError"),
}


def _failed_run(capsys, out, stage, *options):
    code, stdout, err = run_cli(capsys, "demo", "--quiet", "--out", out, *options)
    lines = [line for line in err.splitlines() if line]   # (Ctrl-C: click ends the ^C line with a blank one)
    assert code == STAGES[stage][1] and len(lines) == 1 and lines[0].startswith(STAGES[stage][2]), (code, err)
    assert "Traceback" not in err and stdout == ""
    return lines[0]


@pytest.mark.parametrize("stage", STAGES)
def test_a_failed_demo_puts_back_an_earlier_runs_outputs(tmp_path, capsys, monkeypatch, tiny_demo, stage):
    pytest.importorskip("matplotlib")   # (--report asks for it; the report itself is tiny_demo's)
    out = tmp_path / "demo"
    _write_earlier(out)
    before = _snapshot(out)
    STAGES[stage][0](monkeypatch)
    line = _failed_run(capsys, out, stage, "--report")
    if stage == "model":
        assert line == f"mscred: error: {out / 'model'}: No space left on device"
    assert _snapshot(out) == before   # byte for byte, and no moved-aside copy left


@pytest.mark.parametrize("stage", ["data", "train", "evaluate", "metrics"])
def test_a_failed_demo_into_a_new_folder_leaves_nothing(tmp_path, capsys, monkeypatch, tiny_demo, stage):
    out = tmp_path / "new" / "demo"   # neither folder exists yet
    STAGES[stage][0](monkeypatch)
    _failed_run(capsys, out, stage, "--no-report")
    assert not (tmp_path / "new").exists()


def test_a_failed_demo_puts_back_only_what_it_rewrote(tmp_path, capsys, monkeypatch, tiny_demo):
    """Some earlier outputs, not all: those put back, the others (written by the failed run) gone; an earlier
    report stays where this run writes none (--no-report)."""
    out = tmp_path / "demo"
    _write_earlier(out)
    for name in ("data/anomalies.csv", "model/config.json", "model/model.safetensors", "metrics.json"):
        (out / name).unlink()
    (out / "model").rmdir()
    before = _snapshot(out)
    _fail_metrics(monkeypatch)
    _failed_run(capsys, out, "metrics", "--no-report")
    assert _snapshot(out) == before


def test_a_dataset_demo_that_fails_puts_back_an_earlier_runs_outputs(tmp_path, capsys, tiny_demo):
    """--dataset: the data are read first, then written over the earlier run's; a table too short to train on
    (110 rows are needed) is found after that, at training."""
    data = tmp_path / "short"
    data.mkdir()
    sensor_frame(40, 5).to_csv(data / "train.csv", index=False)
    sensor_frame(40, 5, seed=1).assign(label=0).to_csv(data / "test.csv", index=False)
    out = tmp_path / "demo"
    _write_earlier(out)
    before = _snapshot(out)
    code, _, err = run_cli(capsys, "demo", "--dataset", "table", "--data-root", data, "--out", out, "--quiet",
                           "--no-report")
    assert code == 2 and len(err.splitlines()) == 1 and "too few to train" in err, err
    assert _snapshot(out) == before


def test_a_demo_that_succeeds_keeps_no_copy_of_the_earlier_outputs(tmp_path, capsys, tiny_demo):
    pytest.importorskip("matplotlib")
    out = tmp_path / "demo"
    _write_earlier(out)
    for run in range(2):   # over hand-made earlier outputs, then over a real run's
        code, stdout, err = run_cli(capsys, "demo", "--quiet", "--out", out, "--report")
        assert code == 0 and f"wrote {out}/" in stdout, err
        assert _hidden(out) == [], run
        assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == sorted(EARLIER)
        assert (out / "data" / "README.txt").read_bytes() == b"mine\n"
        for name, content in EARLIER.items():
            assert name == "data/README.txt" or (out / name).read_bytes() != content, name
        assert (out / "report" / "index.html").read_text() == "<html>new report</html>\n"
        assert json.loads((out / "metrics.json").read_text())["epochs"] == 1


def test_a_demo_on_an_earlier_runs_data_in_the_same_folder(tmp_path, capsys, tiny_demo):
    """--dataset table --data-root OUT/data --out OUT: the data are read before the earlier outputs are moved aside
    (and their copy deleted at the end)."""
    out = tmp_path / "demo"
    code, _, err = run_cli(capsys, "demo", "--quiet", "--out", out, "--no-report")
    assert code == 0, err
    data = {name: (out / "data" / name).read_bytes() for name in ("train.csv", "test.csv", "anomalies.csv")}
    code, _, err = run_cli(capsys, "demo", "--dataset", "table", "--data-root", out / "data", "--out", out,
                           "--quiet", "--no-report")
    assert code == 0, err
    assert _hidden(out) == [] and json.loads((out / "metrics.json").read_text())["events_total"] == 5
    assert pd.read_csv(out / "data" / "test.csv").equals(pd.read_csv(io.BytesIO(data["test.csv"])))


def test_all_or_nothing_stopped_while_moving_aside_leaves_every_target_as_it_was(tmp_path, monkeypatch):
    """The mechanism itself: a failure while moving the earlier outputs aside (here the second one's rename) puts
    back the first and leaves the rest untouched, before the block has run."""
    targets = [tmp_path / "a.csv", tmp_path / "model", tmp_path / "c.csv", tmp_path / "new" / "d.csv"]
    targets[0].write_text("a\n")
    targets[1].mkdir()
    (targets[1] / "config.json").write_text("{}\n")
    targets[2].write_text("c\n")
    before = _snapshot(tmp_path)
    real, calls = os.replace, []

    def replace(src, dst):
        calls.append(src)
        if len(calls) == 2:
            raise OSError(errno.EACCES, "Permission denied", str(src))
        real(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(OSError, match="Permission denied") as raised:
        with all_or_nothing(targets):
            pytest.fail("the block ran")
    assert raised.value.filename == str(targets[1])
    assert _snapshot(tmp_path) == before
