"""`mscred watch MODEL_DIR DATA --out SCORES.csv`: a CSV file scored as rows are appended to it. The command runs in a
thread while the test appends to DATA a piece at a time, waiting for each piece's rows in SCORES.csv, so that the
chunks it scores are known: SCORES.csv must then equal a ``Monitor`` fed the same chunks."""
from __future__ import annotations

import threading
import time

import numpy as np
import pandas as pd
import pytest

from cli_helpers import bad_input, main, replace_waits, sensor_frame, tiny_model
from mscred.data.io import float_read_options
from mscred.detector import MSCRED
from mscred.events import events_table
from mscred.metrics import events as runs

N_SENSORS = 4
TRAIN_ROWS = 600
WAIT_S = 60   # the longest a piece may take to appear in SCORES.csv (a loaded CI machine)


@pytest.fixture(scope="module")
def series() -> pd.DataFrame:
    return sensor_frame(TRAIN_ROWS + 400, N_SENSORS, seed=5)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, series):
    return tiny_model(tmp_path_factory.mktemp("watch") / "model", series.iloc[:TRAIN_ROWS])


class Watch:
    """``mscred watch`` in a thread: ``code`` once it has returned."""

    def __init__(self, *argv):
        self.code = None
        self.thread = threading.Thread(target=self._run, args=([str(a) for a in argv],), daemon=True)
        self.thread.start()

    def _run(self, argv):
        self.code = main(["watch", *argv])

    def join(self) -> int:
        self.thread.join(WAIT_S)
        assert not self.thread.is_alive(), "watch did not stop"
        return self.code


def _lines(frame: pd.DataFrame, header: bool = False) -> bytes:
    return frame.to_csv(index=False, header=header).encode()


def _scores(out) -> pd.DataFrame:
    """SCORES.csv as the floats written (before pandas 3.1 read_csv's default can be a unit in the last place off)."""
    return pd.read_csv(out, **float_read_options())


def _as_monitor_fed(out, model_dir, feed: pd.DataFrame, cuts: list) -> None:
    """SCORES.csv holds feed's rows up to the last cut, scored as a Monitor fed the chunks between the cuts."""
    monitor = MSCRED.load(model_dir, device="cpu").monitor()
    want = pd.concat([monitor.update(feed.iloc[a:b]) for a, b in zip(cuts, cuts[1:])], ignore_index=True)
    got = _scores(out)
    assert list(got["timestamp"]) == list(feed["timestamp"][:cuts[-1]])
    np.testing.assert_allclose(got["score"], want["score"], rtol=1e-15, atol=0)


def _wait_for_rows(path, rows: int, watch: Watch) -> None:
    """Until SCORES.csv holds ``rows`` rows (its header aside), or the watch has stopped."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline and watch.thread.is_alive():
        if path.exists() and path.read_bytes().count(b"\n") - 1 >= rows:
            return
        time.sleep(0.02)
    state = "stopped" if watch.code is not None else "hung"
    raise AssertionError(f"{path}: {rows} rows did not come (the watch {state})")


def _start(tmp_path, model_dir, first: pd.DataFrame, *options):
    data, out = tmp_path / "feed.csv", tmp_path / "scores.csv"
    data.write_bytes(_lines(first, header=True))
    watch = Watch(model_dir, data, "--out", out, "--device", "cpu", "--interval", "0.02", "--idle-exit", "3",
                  *options)
    _wait_for_rows(out, len(first), watch)
    return data, out, watch


def test_scores_each_piece_as_it_comes(tmp_path, model_dir, series, capsys):
    """Pieces of 130 (the file at the start), 1, 7, 39, 1, 50 and 172 rows, the piece of one row written in two
    halves (the first half with the 39 rows before it): SCORES.csv is what a Monitor gives for those chunks, an
    alarm line per run of anomalous rows, and a summary."""
    feed = series.iloc[TRAIN_ROWS:].reset_index(drop=True)
    cuts = [0, 130, 131, 138, 177, 178, 228, 400]
    events = tmp_path / "events.csv"
    data, out, watch = _start(tmp_path, model_dir, feed.iloc[:130], "--sensor-scores", "--events", events)
    for a, b in zip(cuts[1:], cuts[2:]):
        piece = _lines(feed.iloc[a:b])
        if b == 177:   # the next line's first half too: it waits for its newline
            piece += _lines(feed.iloc[177:178])[:-20]
        elif b == 178:
            time.sleep(0.2)
            piece = _lines(feed.iloc[177:178])[-20:]
        with open(data, "ab") as handle:
            handle.write(piece)
        _wait_for_rows(out, b, watch)
    assert watch.join() == 0
    got = _scores(out)
    monitor = MSCRED.load(model_dir, device="cpu").monitor(sensor_scores=True)
    want = pd.concat([monitor.update(feed.iloc[a:b]) for a, b in zip(cuts, cuts[1:])], ignore_index=True)
    assert list(got.columns) == list(want.columns) and len(got) == len(feed)
    np.testing.assert_allclose(got["score"], want["score"], rtol=1e-15, atol=0)
    np.testing.assert_array_equal(got["is_anomaly"], want["is_anomaly"])
    assert list(got["root_causes"].fillna("")) == list(want["root_causes"])
    np.testing.assert_allclose(got.filter(like="score_"), want.filter(like="score_"), rtol=1e-15, atol=0)
    stdout = capsys.readouterr().out.splitlines()
    alarms = [line for line in stdout if line.startswith("alarm: ")]
    found = runs(want["is_anomaly"].to_numpy())
    starts = [a for a, _ in found]
    assert len(starts) > 1 and [line.split()[2] for line in alarms] == [f"{feed['timestamp'][a]}:" for a in starts]
    ts, score = feed["timestamp"], want["score"]
    assert [line for line in stdout if line.startswith("clear: ")] == [   # where each run ends, across chunks too
        f"clear: timestamp {ts[b]}: the anomaly from {ts[a]} over {b - a} row(s), peak score {score[a:b].max():.4g}, "
        "ended" for a, b in found if b < len(feed)]
    assert any(a < c <= b - 1 for a, b in found for c in cuts[1:-1]), "no run across a chunk's edge: pick other cuts"
    ended = events_table(want)[[b < len(feed) for _, b in found]]   # a run still open at the stop is not there
    got_events = pd.read_csv(events, keep_default_na=False)
    assert list(got_events.columns) == list(ended.columns) and len(got_events) == len(ended) > 1
    for column in ["start", "end", "rows", "peak_at", "root_causes", "scales"]:
        assert list(got_events[column].astype(str)) == list(ended[column].astype(str)), column
    np.testing.assert_allclose(got_events["peak_score"], ended["peak_score"], rtol=1e-15, atol=0)
    assert stdout[-1] == (f"watched 400 rows in 7 chunk(s): {int(want['is_anomaly'].sum())} anomalous in "
                          f"{len(starts)} alarm(s) (threshold {monitor.model.threshold_:.4g}); wrote {out} and "
                          f"{events}")


def test_a_bad_row_stops_it_with_the_rows_before_written(tmp_path, model_dir, series, capsys):
    feed = series.iloc[TRAIN_ROWS:].reset_index(drop=True)
    data, out, watch = _start(tmp_path, model_dir, feed.iloc[:120])
    before = out.read_bytes()
    bad = feed.iloc[120:125].astype(object)
    bad.iloc[3, 2] = "n/a"
    _append(data, bad)
    assert watch.join() == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"mscred: error: {data} lines 122-126: column 's1' row 4")
    assert out.read_bytes() == before


def _append(data, frame: pd.DataFrame) -> None:
    with open(data, "ab") as handle:
        handle.write(_lines(frame))


@pytest.mark.parametrize("change,message", [
    (lambda data, feed: _append(data, feed.iloc[100:110]), "does not follow the feed's last"),   # times go back
    (lambda data, feed: data.write_bytes(_lines(feed.iloc[:50], header=True)),   # rewritten: followed from its
     "does not follow the feed's last"),                                         # start, times that go back
    (lambda data, feed: _append(data, feed.iloc[120:130].drop(columns=["s2"])),   # a short line's last fields
     "lines 122-131: column 's3' row 1: missing value"),                           # read as missing
])
def test_a_feed_that_stops_making_sense_is_refused(tmp_path, model_dir, series, capsys, change, message):
    feed = series.iloc[TRAIN_ROWS:].reset_index(drop=True)
    data, out, watch = _start(tmp_path, model_dir, feed.iloc[:120])
    change(data, feed)
    assert watch.join() == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and message in err[0], err


def test_refused_before_it_starts(tmp_path, model_dir, series, capsys):
    feed = series.iloc[TRAIN_ROWS:].reset_index(drop=True)
    csv = tmp_path / "feed.csv"
    feed.to_csv(csv, index=False)
    out = tmp_path / "scores.csv"
    for data, names in [(tmp_path / "feed.csv.gz", ["watch follows a plain text table"]),
                        (tmp_path / "feed.parquet", ["watch follows a plain text table"]),
                        (tmp_path / "none.csv", ["file not found"])]:
        if data.name != "none.csv":
            data.write_bytes(b"x")
        bad_input(capsys, "watch", model_dir, data, "--out", out, names=[str(data), *names])
    bad_input(capsys, "watch", model_dir, csv, "--out", tmp_path / "s.parquet", names=["give a .csv or .tsv file"])
    bad_input(capsys, "watch", model_dir, csv, "--out", out, "--encoding", "utf-16",
              names=[str(csv), "a newline is one byte", "utf-16"])
    bad_input(capsys, "watch", model_dir, csv, "--out", csv, names=[str(csv)])
    bad_input(capsys, "watch", model_dir, csv, "--out", out, "--events", out, names=["--events is --out"])
    bad_input(capsys, "watch", model_dir, csv, "--out", out, "--events", tmp_path / "e.parquet",
              names=["give a .csv or .tsv file"])
    assert not out.exists() and not (tmp_path / "s.parquet").exists()


def test_no_rows_yet_writes_nothing(tmp_path, model_dir, series, capsys):
    """A file of its header alone, watched until idle: no rows, no SCORES.csv, said so."""
    data = tmp_path / "feed.csv"
    data.write_bytes(b"timestamp,s0,s1,s2,s3\n")
    watch = Watch(model_dir, data, "--out", tmp_path / "s.csv", "--device", "cpu", "--interval", "0.02",
                  "--idle-exit", "0.5")
    assert watch.join() == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"watched {data}: no rows came; nothing written"
    assert not (tmp_path / "s.csv").exists()


@pytest.mark.parametrize("signal", ["ctrl-c", "sigterm"])
def test_ctrl_c_stops_it_with_the_summary(tmp_path, model_dir, series, capsys, monkeypatch, signal):
    """Ctrl-C while it waits for more lines: exit 0 and the summary, as a watch is meant to be stopped. SIGTERM
    (`systemctl stop`): the same summary, then exit 143 and `mscred: terminated`, as every command ends on it."""
    from mscred.cli import watch as command
    from mscred.cli.main import Terminated

    replace_waits(monkeypatch, command, stop=KeyboardInterrupt if signal == "ctrl-c" else Terminated)
    data, out = tmp_path / "feed.csv", tmp_path / "s.csv"
    data.write_bytes(_lines(series.iloc[TRAIN_ROWS:TRAIN_ROWS + 150], header=True))
    code = main(["watch", str(model_dir), str(data), "--out", str(out), "--device", "cpu"])
    captured = capsys.readouterr()
    assert code == (0 if signal == "ctrl-c" else 143)
    assert captured.out.splitlines()[-1].startswith("watched 150 rows in 1 chunk(s): ")
    assert captured.err == ("" if signal == "ctrl-c" else "mscred: terminated\n")
    assert len(pd.read_csv(out)) == 150


def test_resume_continues_where_the_last_watch_stopped(tmp_path, model_dir, series, capsys):
    """A watch of 150 rows stops; 100 rows come while none runs; ``--resume`` appends those 100 as the chunk after
    the 150 (SCORES.csv as one watch of the two pieces gives it); without SCORES.csv it starts over, with a note."""
    feed = series.iloc[TRAIN_ROWS:].reset_index(drop=True)
    data, out = tmp_path / "feed.csv", tmp_path / "s.csv"
    data.write_bytes(_lines(feed.iloc[:150], header=True))
    argv = ["watch", str(model_dir), str(data), "--out", str(out), "--device", "cpu", "--idle-exit", "0",
            "--sensor-scores"]
    assert main(argv) == 0
    _append(data, feed.iloc[150:250])
    capsys.readouterr()
    assert main(argv + ["--resume"]) == 0
    monitor = MSCRED.load(model_dir, device="cpu").monitor(sensor_scores=True)
    want = pd.concat([monitor.update(feed.iloc[:150]), monitor.update(feed.iloc[150:250])], ignore_index=True)
    got = _scores(out)
    assert list(got.columns) == list(want.columns) and len(got) == 250
    np.testing.assert_allclose(got.filter(like="score"), want.filter(like="score"), rtol=1e-15, atol=0)
    assert capsys.readouterr().out.splitlines()[-1].endswith(f"wrote {out} after the 150 it held already")
    assert main(argv + ["--resume"]) == 0   # nothing new: the file as it was
    assert capsys.readouterr().out.splitlines()[-1] == f"watched {data}: no rows came after the 250 it held " \
                                                       f"already; {out} as it was"
    assert len(pd.read_csv(out)) == 250
    out.unlink()
    assert main(argv + ["--resume"]) == 0
    captured = capsys.readouterr()
    assert "nothing to resume" in captured.err and len(pd.read_csv(out)) == 250


def test_resume_refuses_another_files_scores(tmp_path, model_dir, series, capsys):
    feed = series.iloc[TRAIN_ROWS:].reset_index(drop=True)
    data, out = tmp_path / "feed.csv", tmp_path / "s.csv"
    data.write_bytes(_lines(feed.iloc[:150], header=True))
    argv = ["watch", model_dir, data, "--out", out, "--device", "cpu", "--idle-exit", "0"]
    assert main([str(a) for a in argv]) == 0
    scores = out.read_bytes()
    capsys.readouterr()
    other = tmp_path / "other.csv"
    other.write_bytes(_lines(feed.iloc[1:200], header=True))
    bad_input(capsys, *argv[:2], other, *argv[3:], "--resume",
              names=["its last row is timestamp 749, but row 150", "is 750"])
    other.write_bytes(_lines(feed.iloc[:120], header=True))
    bad_input(capsys, *argv[:2], other, *argv[3:], "--resume", names=["150 rows scored already", "has 120"])
    bad_input(capsys, *argv, "--resume", "--sensor-scores", names=["its columns are not those this watch writes"])
    assert out.read_bytes() == scores
    for damaged in (b"", b"\xff\xfe\x00garbage", b'a,"b\n1,2\n'):
        out.write_bytes(damaged)
        bad_input(capsys, *argv, "--resume", names=[str(out)])
        assert out.read_bytes() == damaged
    bad = feed.iloc[:130].astype(object)   # nothing to resume, and a bad row: its error alone on stderr
    bad.iloc[3, 2] = "n/a"
    broken = tmp_path / "broken.csv"
    broken.write_bytes(_lines(bad, header=True))
    bad_input(capsys, *argv[:2], broken, "--out", tmp_path / "new.csv", *argv[5:], "--resume",
              names=[f"{broken} lines 2-131: column 's1' row 4"])


def test_rows_without_timestamps_are_numbered_across_restarts(tmp_path, model_dir, series, capsys):
    feed = series.iloc[TRAIN_ROWS:].drop(columns=["timestamp"]).reset_index(drop=True)
    data, out = tmp_path / "feed.csv", tmp_path / "s.csv"
    data.write_bytes(_lines(feed.iloc[:130], header=True))
    argv = ["watch", str(model_dir), str(data), "--out", str(out), "--device", "cpu", "--idle-exit", "0"]
    assert main(argv) == 0
    _append(data, feed.iloc[130:150])
    assert main(argv + ["--resume"]) == 0
    got = _scores(out)
    assert list(got["row"]) == list(range(150))
    monitor = MSCRED.load(model_dir, device="cpu").monitor()
    want = pd.concat([monitor.update(feed.iloc[:130]), monitor.update(feed.iloc[130:150])], ignore_index=True)
    np.testing.assert_allclose(got["score"], want["score"], rtol=1e-15, atol=0)


def test_filled_values_are_counted_as_detect_counts_them(tmp_path, model_dir, series, capsys):
    """``--missing interpolate``: a ``filled`` column on every chunk (0 where none was), also after a resume; the
    scores are the Monitor's."""
    feed = series.iloc[TRAIN_ROWS:].reset_index(drop=True).copy()
    feed.loc[[5, 140, 141], "s1"] = np.nan
    feed.loc[141, "s3"] = np.nan
    data, out = tmp_path / "feed.csv", tmp_path / "s.csv"
    data.write_bytes(_lines(feed.iloc[:130], header=True))
    argv = ["watch", str(model_dir), str(data), "--out", str(out), "--device", "cpu", "--idle-exit", "0",
            "--missing", "interpolate"]
    assert main(argv) == 0
    _append(data, feed.iloc[130:150])
    assert main(argv + ["--resume"]) == 0
    got = _scores(out)
    assert list(got.columns)[-1] == "filled" and list(np.flatnonzero(got["filled"])) == [5, 140, 141]
    assert list(got["filled"][[5, 140, 141]]) == [1, 1, 2]
    monitor = MSCRED.load(model_dir, device="cpu").monitor(missing="interpolate")
    want = pd.concat([monitor.update(feed.iloc[:130]), monitor.update(feed.iloc[130:150])], ignore_index=True)
    np.testing.assert_allclose(got["score"], want["score"], rtol=1e-15, atol=0)
    capsys.readouterr()
    bad_input(capsys, *argv[:7], "--idle-exit", "0", "--resume", names=["its columns are not those"])


def test_a_file_rotated_in_place_is_followed(tmp_path, model_dir, series, capsys):
    """logrotate's ``create``: feed.csv gains 10 rows, is renamed feed.csv.1 (its writer adds 5 more to it), and a
    new feed.csv with a header gets 30. SCORES.csv is a Monitor fed the same chunks, a note on stderr says so."""
    import os

    feed = series.iloc[TRAIN_ROWS:].reset_index(drop=True)
    data, out, watch = _start(tmp_path, model_dir, feed.iloc[:130])
    _append(data, feed.iloc[130:140])
    _wait_for_rows(out, 140, watch)
    with open(data, "ab") as writer:
        os.rename(data, tmp_path / "feed.csv.1")
        writer.write(_lines(feed.iloc[140:145]))
    _wait_for_rows(out, 145, watch)
    data.write_bytes(_lines(feed.iloc[145:175], header=True))
    _wait_for_rows(out, 175, watch)
    assert watch.join() == 0
    _as_monitor_fed(out, model_dir, feed, [0, 130, 140, 145, 175])
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [f"note: {data} was renamed and created again (rotated): following it "
                                         "from its first line"]
    assert captured.out.splitlines()[-1].startswith("watched 175 rows in 4 chunk(s): ")


def test_a_folder_of_rolled_files_is_one_feed(tmp_path, model_dir, series, capsys):
    """A logger's folder: day1.csv grows, its last line is written without a newline, then day2.csv appears and
    grows. SCORES.csv is a Monitor fed the same chunks: day1's last line is taken whole once day2 exists, and the
    files' rows are one feed (the windows run across the files)."""
    feed = series.iloc[TRAIN_ROWS:].reset_index(drop=True)
    folder, out = tmp_path / "logs", tmp_path / "s.csv"
    folder.mkdir()
    (folder / "day1.csv").write_bytes(_lines(feed.iloc[:130], header=True))
    (folder / "notes.txt.gz").write_bytes(b"not the feed's")
    watch = Watch(model_dir, folder, "--out", out, "--device", "cpu", "--interval", "0.02", "--idle-exit", "3")
    _wait_for_rows(out, 130, watch)
    _append(folder / "day1.csv", feed.iloc[130:140])
    _wait_for_rows(out, 140, watch)
    with open(folder / "day1.csv", "ab") as handle:
        handle.write(_lines(feed.iloc[140:142])[:-1])   # the last line without its newline
    _wait_for_rows(out, 141, watch)
    (folder / "day2.csv").write_bytes(_lines(feed.iloc[142:162], header=True))
    _wait_for_rows(out, 162, watch)
    _append(folder / "day2.csv", feed.iloc[162:177])
    _wait_for_rows(out, 177, watch)
    assert watch.join() == 0
    _as_monitor_fed(out, model_dir, feed, [0, 130, 140, 141, 142, 162, 177])
    assert capsys.readouterr().out.splitlines()[-1].startswith("watched 177 rows in 6 chunk(s): ")
    bad_input(capsys, "watch", model_dir, folder, "--out", folder / "s.csv", names=["is in the watched folder"])
    bad_input(capsys, "watch", model_dir, folder, "--out", out, "--events", folder / "e.csv",
              names=["is in the watched folder"])


def test_resume_of_a_folder_runs_across_its_files(tmp_path, model_dir, series, capsys):
    """A watch of a folder stops inside day2.csv; day2 grows and day3.csv appears while none runs. ``--resume``
    primes the held rows of day1 and day2 (each file's rows under its own name) and scores the rest of day2, then
    day3: SCORES.csv is a Monitor fed the same chunks. A held row count beyond the folder's rows is refused."""
    feed = series.iloc[TRAIN_ROWS:].reset_index(drop=True)
    folder, out = tmp_path / "logs", tmp_path / "s.csv"
    folder.mkdir()
    (folder / "day1.csv").write_bytes(_lines(feed.iloc[:120], header=True))
    (folder / "day2.csv").write_bytes(_lines(feed.iloc[120:150], header=True))
    argv = ["watch", str(model_dir), str(folder), "--out", str(out), "--device", "cpu", "--idle-exit", "0"]
    assert main(argv) == 0
    _append(folder / "day2.csv", feed.iloc[150:170])
    (folder / "day3.csv").write_bytes(_lines(feed.iloc[170:200], header=True))
    capsys.readouterr()
    assert main(argv + ["--resume"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("watched 50 rows in 2 chunk(s): ")
    _as_monitor_fed(out, model_dir, feed, [0, 120, 150, 170, 200])
    scores = out.read_bytes()
    (folder / "day3.csv").unlink()
    (folder / "day2.csv").write_bytes(_lines(feed.iloc[120:130], header=True))
    bad_input(capsys, *argv, "--resume", names=["200 rows scored already", "has 130"])
    assert out.read_bytes() == scores


def test_alarm_and_clear_lines_follow_runs_across_chunks_and_restarts(tmp_path, capsys):
    """Scores alone, on made-up chunks: one alarm where a run starts, one clear where it ends, with the rows and
    peak of the whole run, whether it spans chunks or an earlier watch's SCORES.csv (``--resume``)."""
    from mscred.cli.watch_output import OpenRun, Scores

    def chunk(first: int, flags: str, scores) -> pd.DataFrame:
        return pd.DataFrame({"row": range(first, first + len(flags)), "score": scores,
                             "is_anomaly": [int(f) for f in flags], "root_causes": ["s1;s0"] * len(flags),
                             "scales": ["10;30"] * len(flags)})

    out, events = tmp_path / "s.csv", tmp_path / "e.tsv"
    scores = Scores(out, threshold=5.0, events=events)
    scores.add(chunk(0, "0110", [1, 6, 9, 2]))
    scores.add(chunk(4, "011", [1, 7, 8]))
    scores.add(chunk(7, "1", [12]))
    scores.close()
    assert capsys.readouterr().out.splitlines() == [
        "alarm: row 1: score 6 (threshold 5), root causes s1;s0",
        "clear: row 3: the anomaly from 1 over 2 row(s), peak score 9, ended",
        "alarm: row 5: score 7 (threshold 5), root causes s1;s0"]
    written = pd.read_csv(out, dtype=str, keep_default_na=False)
    run = OpenRun.at_end_of(written)
    assert list(run.table()["row"]) == ["5", "6", "7"] and list(run.table()["score"]) == [7.0, 8.0, 12.0]
    assert OpenRun.at_end_of(written.iloc[:4]) is None and len(OpenRun.at_end_of(written.iloc[5:]).table()) == 3
    assert pd.read_csv(events, sep="\t").values.tolist() == [[1, 2, 2, 9.0, 2, "s1;s0", "10;30"]]
    again = Scores(out, threshold=5.0, events=events)
    again.resume(len(written), run)
    again.add(chunk(8, "10", [3, 1]))
    again.close()
    assert capsys.readouterr().out.splitlines() == ["clear: row 9: the anomaly from 5 over 4 row(s), peak score 12, "
                                                    "ended"]
    assert again.alarms == 0 and len(pd.read_csv(out)) == 10
    assert pd.read_csv(events, sep="\t").values.tolist() == [[1, 2, 2, 9.0, 2, "s1;s0", "10;30"],
                                                             [5, 8, 4, 12.0, 7, "s1;s0", "10;30"]]


def test_json_lines_for_scripts(tmp_path, model_dir, series, capsys):
    """``--json``: every stdout line one JSON object, an alarm and a clear per run and the summary last; the same
    run in text has the same runs."""
    import json

    feed = series.iloc[TRAIN_ROWS:].reset_index(drop=True)
    data, out = tmp_path / "feed.csv", tmp_path / "s.csv"
    data.write_bytes(_lines(feed, header=True))
    argv = ["watch", str(model_dir), str(data), "--out", str(out), "--device", "cpu", "--idle-exit", "0"]
    assert main(argv + ["--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    found = runs(pd.read_csv(out)["is_anomaly"].to_numpy())
    assert len(found) > 1 and [line["event"] for line in lines] == \
        ["alarm", "clear"] * (len(found) - 1) + ["alarm"] + (["clear"] if found[-1][1] < len(feed) else []) + \
        ["summary"]
    alarm, clear, summary = lines[0], lines[1], lines[-1]
    (a, b) = found[0]
    assert alarm["timestamp"] == feed["timestamp"][a] and alarm["root_causes"] and alarm["score"] > 0
    assert (clear["timestamp"], clear["start"], clear["rows"]) == (feed["timestamp"][b], alarm["timestamp"], b - a)
    assert summary == {"event": "summary", "rows": 400, "chunks": 1, "anomalous": int(sum(b - a for a, b in found)),
                       "alarms": len(found), "threshold": summary["threshold"], "held": 0, "history": 0,
                       "out": str(out),
                       "events": None}
    assert main(argv) == 0
    text = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in text[:-1]] == [line["event"] for line in lines[:-1]]


def test_json_times_are_their_text(tmp_path, capsys):
    import json

    from mscred.cli.watch_output import Scores

    times = pd.date_range("2026-12-05 13:00", periods=3, freq="s")
    chunk = pd.DataFrame({"timestamp": times, "score": np.float32([1, 9, 2]), "is_anomaly": [0, 1, 0],
                          "root_causes": ["", "s2;s0", ""], "scales": ["", "10", ""]})
    scores = Scores(tmp_path / "s.csv", threshold=5.0, as_json=True)
    scores.add(chunk)
    scores.close()
    alarm, clear = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert alarm == {"event": "alarm", "timestamp": "2026-12-05 13:00:01", "score": 9.0, "threshold": 5.0,
                     "root_causes": ["s2", "s0"]}
    assert clear == {"event": "clear", "timestamp": "2026-12-05 13:00:02", "start": "2026-12-05 13:00:01", "rows": 1,
                     "peak_score": 9.0}


def test_resume_after_a_rotation_while_stopped(tmp_path, model_dir, series, capsys):
    """A watch of 150 rows stops; feed.csv is rotated (renamed, created again with the next 100 rows) before the
    restart. ``--resume`` scores those 100 as the feed's next rows, after a note, as a fresh Monitor does (no
    history: the rows no window covers yet score 0); SCORES.csv holds the 250."""
    import os

    feed = series.iloc[TRAIN_ROWS:].reset_index(drop=True)
    data, out = tmp_path / "feed.csv", tmp_path / "s.csv"
    data.write_bytes(_lines(feed.iloc[:150], header=True))
    argv = ["watch", str(model_dir), str(data), "--out", str(out), "--device", "cpu", "--idle-exit", "0"]
    assert main(argv) == 0
    os.rename(data, tmp_path / "feed.csv.1")
    data.write_bytes(_lines(feed.iloc[150:250], header=True))
    capsys.readouterr()
    assert main(argv + ["--resume"]) == 0
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [f"note: {data} lines 2-101 start after {out}'s last row (timestamp 749): "
                                         "rotated since the last watch? Scored as the feed's next rows; they have no "
                                         "history before them, and those no window covers yet score 0"]
    got = _scores(out)
    assert list(got["timestamp"]) == list(feed["timestamp"][:250])
    want = MSCRED.load(model_dir, device="cpu").monitor().update(feed.iloc[150:250])
    np.testing.assert_allclose(got["score"][150:], want["score"], rtol=1e-15, atol=0)
    assert got["score"][150] == 0 and got["score"][249] > 0


def test_new_only_takes_the_rows_there_as_history(tmp_path, model_dir, series, capsys, monkeypatch):
    """``--new-only``: DATA's 150 rows at the start are history (not scored, not written); the 30 and 20 rows
    appended at the first two waits are scored after them, as a Monitor primed with the 150 scores them; Ctrl-C at
    the third wait."""
    from mscred.cli import watch as command

    feed = series.iloc[TRAIN_ROWS:].reset_index(drop=True)
    data, out = tmp_path / "feed.csv", tmp_path / "s.csv"
    data.write_bytes(_lines(feed.iloc[:150], header=True))
    replace_waits(monkeypatch, command, lambda: _append(data, feed.iloc[150:180]),
                  lambda: _append(data, feed.iloc[180:200]))
    code = main(["watch", str(model_dir), str(data), "--out", str(out), "--device", "cpu", "--new-only"])
    assert code == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("watched 50 rows in 2 chunk(s): ") and last.endswith(f"{out} after 150 rows of history")
    monitor = MSCRED.load(model_dir, device="cpu").monitor()
    monitor.prime(feed.iloc[:150])
    want = pd.concat([monitor.update(feed.iloc[150:180]), monitor.update(feed.iloc[180:200])], ignore_index=True)
    got = _scores(out)
    assert list(got["timestamp"]) == list(feed["timestamp"][150:200]) and (got["score"] != 0).all()   # all covered
    np.testing.assert_allclose(got["score"], want["score"], rtol=1e-15, atol=0)
    bad_input(capsys, "watch", model_dir, data, "--out", out, "--new-only", "--resume", names=["give one"])
