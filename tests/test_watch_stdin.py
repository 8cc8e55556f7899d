"""`mscred watch MODEL - --out SCORES.csv` (and ``--out -``): a CSV piped into standard input, followed as it arrives
(``data.follow.StdinLines``). Standard input is a real pipe here; the watch's waits are replaced
(``replace_waits``) by writes into it, so that each poll reads what was written before it and the chunks scored
are known: SCORES.csv must be what a ``Monitor`` gives for them. Closing the pipe ends the watch by itself."""
from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

from cli_helpers import ON_THE_CPU, bad_input, replace_waits, run_cli, sensor_frame, tiny_model
from mscred.cli import watch as watch_module
from mscred.data import follow
from mscred.data.io import float_read_options
from mscred.detector import MSCRED

pytestmark = pytest.mark.skipif(os.name == "nt", reason="a POSIX pipe stands for standard input here")


@pytest.fixture(scope="module")
def series() -> pd.DataFrame:
    return sensor_frame(900, 4, seed=6)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, series):
    return tiny_model(tmp_path_factory.mktemp("watch_stdin") / "model", series.iloc[:600])


@pytest.fixture
def pipe(monkeypatch):
    """(write end's fd) of a pipe made standard input; its read end closed and checked blocking again after."""
    read, write = os.pipe()
    stdin = open(read, "r")   # noqa: SIM115 - standard input for the test's length
    monkeypatch.setattr("sys.stdin", stdin)
    yield write
    assert os.get_blocking(read), "the watch left standard input non-blocking"
    stdin.close()
    try:
        os.close(write)
    except OSError:   # (closed by the test: the end of the feed)
        pass


def _text(frame: pd.DataFrame, header: bool = False) -> bytes:
    return frame.to_csv(index=False, header=header).encode()


def _piped_watch(capsys, model, out) -> str:
    """``mscred watch MODEL - --out OUT`` (exit 0 asserted); its stdout."""
    code, stdout, err = run_cli(capsys, "watch", model, "-", "--out", out, "--interval", "0.01", *ON_THE_CPU)
    assert code == 0, err
    return stdout


def _as_monitor_fed(out, model, frame: pd.DataFrame, chunks: list) -> None:
    """SCORES.csv ``out`` holds the rows of ``frame``'s ``chunks`` (row ranges), scored as a Monitor fed them."""
    monitor = MSCRED.load(model, device="cpu").monitor()
    want = pd.concat([monitor.update(frame.iloc[a:b]) for a, b in chunks], ignore_index=True)
    got = pd.read_csv(out, **float_read_options())
    assert list(got["timestamp"]) == list(frame["timestamp"][:chunks[-1][1]])
    np.testing.assert_allclose(got["score"], want["score"], rtol=1e-15, atol=0)


def test_a_pipe_is_scored_as_it_arrives_and_ends_with_it(tmp_path, model_dir, series, pipe, monkeypatch, capsys):
    """Pieces of 140 rows (there at the start), 1 row written in two halves, 60 rows, then the writer closes the
    pipe: SCORES.csv is a Monitor fed those chunks; the watch stops by itself, exit 0, the summary naming <stdin>."""
    feed = series.iloc[600:].reset_index(drop=True)
    line = _text(feed.iloc[140:141])
    os.write(pipe, _text(feed.iloc[:140], header=True))
    replace_waits(monkeypatch, watch_module, lambda: os.write(pipe, line[:9]), lambda: os.write(pipe, line[9:]),
                  lambda: os.write(pipe, _text(feed.iloc[141:201])), lambda: os.close(pipe))
    stdout = _piped_watch(capsys, model_dir, tmp_path / "scores.csv")
    _as_monitor_fed(tmp_path / "scores.csv", model_dir, feed, [(0, 140), (140, 141), (141, 201)])
    assert stdout.splitlines()[-1].startswith("watched 201 rows in 3 chunk(s)")


def test_the_last_line_without_its_newline_counts_once_the_pipe_closes(tmp_path, model_dir, series, pipe,
                                                                       monkeypatch, capsys):
    feed = series.iloc[600:750]
    os.write(pipe, _text(feed, header=True)[:-1])   # (no newline after the last row)
    os.close(pipe)
    out = tmp_path / "scores.csv"
    code, _, err = run_cli(capsys, "watch", model_dir, "-", "--out", out, *ON_THE_CPU)
    assert code == 0, err
    assert len(pd.read_csv(out)) == 150


def test_a_bad_line_names_stdin_and_its_line(tmp_path, model_dir, series, pipe, monkeypatch, capsys):
    feed = series.iloc[600:760].astype({"s2": object})
    feed.iloc[150, feed.columns.get_loc("s2")] = "offline"
    os.write(pipe, _text(feed.iloc[:120], header=True))
    replace_waits(monkeypatch, watch_module, lambda: os.write(pipe, _text(feed.iloc[120:])))
    code, _, err = run_cli(capsys, "watch", model_dir, "-", "--out", tmp_path / "s.csv", "--interval", "0.01",
                           *ON_THE_CPU)
    assert code == 2 and "Traceback" not in err
    assert err.splitlines()[-1].startswith("mscred: error: <stdin> lines 122-161: column 's2' row 31: value "
                                           "'offline' is not a number")
    assert len(pd.read_csv(tmp_path / "s.csv")) == 120   # (the rows before it, scored and written)


def test_a_long_table_through_a_pipe(tmp_path, series, pipe, monkeypatch, capsys):
    """A long feed piped in: each time's lines held until a later time (data.long_feed), the last at the end."""
    wide = series.iloc[:300].copy()
    wide["timestamp"] = pd.date_range("2026-01-01", periods=300, freq="min").strftime("%Y-%m-%d %H:%M:%S")
    lines = wide.melt(id_vars="timestamp", var_name="Tag", value_name="Value").sort_values("timestamp",
                                                                                          kind="stable")
    model = tmp_path / "model"
    MSCRED(epochs=1, channels=(4, 8, 8, 8), device="cpu", long_columns=("Tag", "Value")).fit(lines).save(model)
    os.write(pipe, _text(lines.iloc[:402], header=True))   # (time 100's first two lines)
    replace_waits(monkeypatch, watch_module, lambda: os.write(pipe, _text(lines.iloc[402:])), lambda: os.close(pipe))
    _piped_watch(capsys, model, tmp_path / "scores.csv")
    _as_monitor_fed(tmp_path / "scores.csv", model, wide, [(0, 100), (100, 299), (299, 300)])


def test_without_nonblocking_reads_a_thread_reads_the_pipe(tmp_path, model_dir, series, pipe, monkeypatch,
                                                           capsys):
    """Where a pipe cannot be read without blocking (Windows), a thread reads it: every row comes, in chunks the
    thread's timing decides."""
    monkeypatch.setattr(follow, "NONBLOCKING_PIPES", False)
    os.write(pipe, _text(series.iloc[600:800], header=True))
    os.close(pipe)
    out = tmp_path / "scores.csv"
    code, _, err = run_cli(capsys, "watch", model_dir, "-", "--out", out, "--interval", "0.01", *ON_THE_CPU)
    assert code == 0, err
    assert list(pd.read_csv(out)["timestamp"]) == list(series["timestamp"][600:800])


def test_scores_to_standard_output(tmp_path, model_dir, series, pipe, monkeypatch, capsys):
    """``--out -``: the scores on stdout, a chunk at a time (what a Monitor gives for the chunks), the alarm, clear
    and summary lines on stderr; ``--events -`` and ``--resume`` with it refused."""
    feed = series.iloc[600:].reset_index(drop=True)
    os.write(pipe, _text(feed.iloc[:150], header=True))
    replace_waits(monkeypatch, watch_module, lambda: os.write(pipe, _text(feed.iloc[150:])), lambda: os.close(pipe))
    code, stdout, err = run_cli(capsys, "watch", model_dir, "-", "--out", "-", "--interval", "0.01", *ON_THE_CPU)
    assert code == 0, err
    (tmp_path / "stdout.csv").write_text(stdout)
    _as_monitor_fed(tmp_path / "stdout.csv", model_dir, feed, [(0, 150), (150, 300)])
    assert err.splitlines()[-1].endswith("wrote standard output") and "alarm: " in err
    data = tmp_path / "feed.csv"
    data.write_bytes(_text(feed, header=True))
    bad_input(capsys, "watch", model_dir, data, "--out", "-", "--events", "-", *ON_THE_CPU,
              names=["--events '-': only --out may be standard output"])
    bad_input(capsys, "watch", model_dir, data, "--out", "-", "--resume", *ON_THE_CPU,
              names=["--resume with --out '-': standard output holds no scores to continue"])


def test_refused_where_a_pipe_cannot_serve(tmp_path, model_dir, pipe, monkeypatch, capsys):
    for option in ("--resume", "--new-only"):
        bad_input(capsys, "watch", model_dir, "-", "--out", tmp_path / "s.csv", option, *ON_THE_CPU,
                  names=[f"{option} with DATA '-'", "standard input holds no rows from before the watch"])

    class Terminal:
        def isatty(self):
            return True

    monkeypatch.setattr("sys.stdin", Terminal())
    bad_input(capsys, "watch", model_dir, "-", "--out", tmp_path / "s.csv", *ON_THE_CPU,
              names=["<stdin>: DATA '-' follows a table piped into standard input, which is a terminal here"])
    assert not (tmp_path / "s.csv").exists()
