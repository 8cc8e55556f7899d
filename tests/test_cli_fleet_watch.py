"""`mscred fleet-watch FLEET LIVE --out DIR`: every entity's growing CSV scored with its own model in one process.
The waits between looks are replaced by a test double that appends to the files (and adds one later), so the
chunks are known: each entity's scores file must equal a ``Monitor`` of its model fed the same chunks."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest

from cli_helpers import bad_input, main, replace_waits, sensor_frame, tiny_model
from mscred.detector import MSCRED

TRAIN_ROWS = 600


@pytest.fixture(scope="module")
def series() -> pd.DataFrame:
    return sensor_frame(TRAIN_ROWS + 400, 4, seed=5)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory, series):
    """A fleet folder of entities a, b and d (one tiny model, copied: the test is about the plumbing)."""
    root = tmp_path_factory.mktemp("fleet")
    tiny_model(root / "models" / "a", series.iloc[:TRAIN_ROWS])
    for name in ("b", "d"):
        shutil.copytree(root / "models" / "a", root / "models" / name)
    return root


def _lines(frame: pd.DataFrame, header: bool = False) -> bytes:
    return frame.to_csv(index=False, header=header).encode()


def _append(path, frame: pd.DataFrame) -> None:
    with open(path, "ab") as handle:
        handle.write(_lines(frame))


def _monitored(fleet, feed: pd.DataFrame, cuts: list) -> pd.DataFrame:
    monitor = MSCRED.load(fleet / "models" / "a", device="cpu").monitor()
    return pd.concat([monitor.update(feed.iloc[a:b]) for a, b in zip(cuts, cuts[1:])], ignore_index=True)


def test_each_entity_as_watch_scores_it(tmp_path, fleet, series, capsys, monkeypatch):
    """a grows twice; b gets a bad row at the first wait and stops (the others go on); d's file appears at the
    second wait and is taken up; c has no model (a note); Ctrl-C at the third wait. Exit 1 (an entity stopped)."""
    from mscred.cli import watch as command   # (whose loop fleet-watch runs)

    feed = series.iloc[TRAIN_ROWS:].reset_index(drop=True)
    live, out = tmp_path / "live", tmp_path / "out"
    live.mkdir()
    (live / "a.csv").write_bytes(_lines(feed.iloc[:130], header=True))
    (live / "b.csv").write_bytes(_lines(feed.iloc[:120], header=True))
    (live / "c.csv").write_bytes(_lines(feed.iloc[:120], header=True))
    (live / ".d.csv").write_bytes(b"hidden")
    (live / "a.tsv").write_bytes(b"x\ty\n")   # a's too: the first by name is watched
    bad = feed.iloc[120:122].astype(object)
    bad.iloc[1, 2] = "n/a"

    def first():
        _append(live / "a.csv", feed.iloc[130:160])
        _append(live / "b.csv", bad)

    def second():
        _append(live / "a.csv", feed.iloc[160:170])
        (live / "d.csv").write_bytes(_lines(feed.iloc[:110], header=True))

    replace_waits(monkeypatch, command, first, second)
    code = main(["fleet-watch", str(fleet), str(live), "--out", str(out), "--device", "cpu"])
    captured = capsys.readouterr()
    assert code == 1
    err = captured.err.splitlines()
    assert err[:2] == [f"note: {live / 'a.tsv'}: entity 'a' is watched in a.csv already: not watched",
                       f"note: {live / 'c.csv'}: no model of entity 'c' in the fleet: not watched"]
    assert len(err) == 3 and err[2].startswith(f"b: stopped: {live / 'b.csv'} lines 122-123: column 's1' row 2: ")
    for entity, rows, cuts in [("a", 170, [0, 130, 160, 170]), ("b", 120, [0, 120]), ("d", 110, [0, 110])]:
        got = pd.read_csv(out / "scores" / f"{entity}.csv")
        want = _monitored(fleet, feed, cuts)
        assert list(got["timestamp"]) == list(feed["timestamp"][:rows]), entity
        np.testing.assert_allclose(got["score"], want["score"], rtol=1e-15, atol=0, err_msg=entity)
    stdout = captured.out.splitlines()
    assert [line.split(":")[0] for line in stdout[-4:-1]] == ["a", "b", "d"]
    assert stdout[-4].startswith("a: watched 170 rows in 3 chunk(s): ")
    assert stdout[-1] == f"fleet-watch: 3 entities watched, 400 rows scored, " \
        f"{sum(int(line.startswith('alarm: ')) for line in stdout)} alarm(s), 1 stopped; wrote {out}"
    assert all(line.split()[1] in ("a:", "b:", "d:") for line in stdout if line.startswith(("alarm:", "clear:")))
    summary = pd.read_csv(out / "summary.csv")
    assert list(summary["entity"]) == ["a", "b", "d"] and list(summary["rows"]) == [170, 120, 110]
    assert list(summary["status"].str[:8]) == ["ok", "stopped:", "ok"]


def test_an_entity_of_rolled_files(tmp_path, fleet, series, capsys, monkeypatch):
    """LIVE/a/ holds the files a logger rolls: followed in name order as `watch DIR` follows them (the rest of the
    first file read once the second appears), scored as one feed; a.csv beside the folder gets a note."""
    from mscred.cli import watch as command

    feed = series.iloc[TRAIN_ROWS:].reset_index(drop=True)
    live, out = tmp_path / "live", tmp_path / "out"
    (live / "a").mkdir(parents=True)
    (live / "a" / "feed-1.csv").write_bytes(_lines(feed.iloc[:120], header=True))
    (live / "a.csv").write_bytes(_lines(feed.iloc[:10], header=True))

    def roll():
        _append(live / "a" / "feed-1.csv", feed.iloc[120:140])
        (live / "a" / "feed-2.csv").write_bytes(_lines(feed.iloc[140:170], header=True))

    replace_waits(monkeypatch, command, roll)
    code = main(["fleet-watch", str(fleet), str(live), "--out", str(out), "--device", "cpu"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.err == f"note: {live / 'a.csv'}: entity 'a' is watched in a already: not watched\n"
    got = pd.read_csv(out / "scores" / "a.csv")
    assert list(got["timestamp"]) == list(feed["timestamp"][:170])
    np.testing.assert_allclose(got["score"], _monitored(fleet, feed, [0, 120, 140, 170])["score"], rtol=1e-15,
                               atol=0)
    summary = pd.read_csv(out / "summary.csv")
    assert list(summary["file"]) == [str(live / "a")] and list(summary["rows"]) == [170]


def test_sigterm_ends_it_with_the_summary(tmp_path, fleet, series, capsys, monkeypatch):
    """SIGTERM (`systemctl stop`) at a wait: each entity's summary line, the fleet's, and summary.csv, then exit 143
    with `mscred: terminated`, as every command ends on it."""
    from mscred.cli import watch as command
    from mscred.cli.main import Terminated

    feed = series.iloc[TRAIN_ROWS:].reset_index(drop=True)
    live, out = tmp_path / "live", tmp_path / "out"
    live.mkdir()
    (live / "a.csv").write_bytes(_lines(feed.iloc[:130], header=True))
    replace_waits(monkeypatch, command, lambda: _append(live / "a.csv", feed.iloc[130:150]), stop=Terminated)
    code = main(["fleet-watch", str(fleet), str(live), "--out", str(out), "--device", "cpu"])
    captured = capsys.readouterr()
    assert code == 143 and captured.err == "mscred: terminated\n"
    stdout = captured.out.splitlines()
    assert stdout[-2].startswith("a: watched 150 rows in 2 chunk(s): ")
    assert stdout[-1].startswith("fleet-watch: 1 entities watched, 150 rows scored, ")
    summary = pd.read_csv(out / "summary.csv")
    assert list(summary["entity"]) == ["a"] and list(summary["rows"]) == [150] and list(summary["status"]) == ["ok"]
    assert len(pd.read_csv(out / "scores" / "a.csv")) == 150


def test_json_and_events(tmp_path, fleet, series, capsys):
    """--json: every stdout line an object, alarms with their entity, the fleet's summary last; --events writes
    events/<entity>.csv."""
    feed = series.iloc[TRAIN_ROWS:].reset_index(drop=True)
    live, out = tmp_path / "live", tmp_path / "out"
    live.mkdir()
    (live / "a.csv").write_bytes(_lines(feed, header=True))
    code = main(["fleet-watch", str(fleet), str(live), "--out", str(out), "--device", "cpu", "--idle-exit", "0",
                 "--json", "--events"])
    assert code == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines[-1] == {"event": "fleet_summary", "entities": 1, "rows": 400, "alarms": lines[-2]["alarms"],
                         "stopped": 0, "out": str(out)}
    assert lines[-2]["event"] == "summary" and lines[-2]["entity"] == "a" and lines[-2]["alarms"] > 0
    alarms = [line for line in lines if line["event"] == "alarm"]
    assert len(alarms) == lines[-2]["alarms"] and all(line["entity"] == "a" for line in alarms)
    events = pd.read_csv(out / "events" / "a.csv")
    assert len(events) == sum(line["event"] == "clear" for line in lines)


def test_refused_before_it_starts(tmp_path, fleet, series, capsys):
    live = tmp_path / "live"
    live.mkdir()
    bad_input(capsys, "fleet-watch", tmp_path, live, "--out", tmp_path / "o", names=["no model folder found"])
    bad_input(capsys, "fleet-watch", fleet, tmp_path / "none", "--out", tmp_path / "o", names=["not found"])
    bad_input(capsys, "fleet-watch", fleet, live, "--out", live / "o", names=["inside the watched folder"])
    bad_input(capsys, "fleet-watch", fleet, live, "--out", tmp_path / "o", "--resume", "--new-only",
              names=["give one"])


def test_resume_of_an_entity_folder(tmp_path, fleet, series, capsys):
    """--resume of an entity folder that gained a file while no watch ran: the rows its scores file holds are primed
    a file at a time, the new file's scored after them (as one watch of the two pieces scores them)."""
    feed = series.iloc[TRAIN_ROWS:].reset_index(drop=True)
    live, out = tmp_path / "live", tmp_path / "out"
    (live / "b").mkdir(parents=True)
    (live / "b" / "1.csv").write_bytes(_lines(feed.iloc[:150], header=True))
    argv = ["fleet-watch", str(fleet), str(live), "--out", str(out), "--device", "cpu", "--idle-exit", "0"]
    assert main(argv) == 0
    (live / "b" / "2.csv").write_bytes(_lines(feed.iloc[150:250], header=True))
    assert main(argv + ["--resume"]) == 0
    got = pd.read_csv(out / "scores" / "b.csv")
    assert list(got["timestamp"]) == list(feed["timestamp"][:250])
    np.testing.assert_allclose(got["score"], _monitored(fleet, feed, [0, 150, 250])["score"], rtol=1e-15, atol=0)
    assert "b: watched 100 rows in 1 chunk(s)" in capsys.readouterr().out


def test_resume_and_new_only(tmp_path, fleet, series, capsys):
    """--resume continues each entity's scores file (as watch --resume); --new-only scores only what comes after."""
    feed = series.iloc[TRAIN_ROWS:].reset_index(drop=True)
    live, out = tmp_path / "live", tmp_path / "out"
    live.mkdir()
    (live / "a.csv").write_bytes(_lines(feed.iloc[:150], header=True))
    argv = ["fleet-watch", str(fleet), str(live), "--out", str(out), "--device", "cpu", "--idle-exit", "0"]
    assert main(argv) == 0
    _append(live / "a.csv", feed.iloc[150:250])
    assert main(argv + ["--resume"]) == 0
    got = pd.read_csv(out / "scores" / "a.csv")
    assert list(got["timestamp"]) == list(feed["timestamp"][:250])
    np.testing.assert_allclose(got["score"], _monitored(fleet, feed, [0, 150, 250])["score"], rtol=1e-15, atol=0)
    assert "a: watched 100 rows in 1 chunk(s)" in capsys.readouterr().out
    assert main(argv + ["--new-only"]) == 0   # nothing after the file's rows: nothing scored, the file left
    assert capsys.readouterr().out.splitlines()[-2] == f"a: watched {live / 'a.csv'}: no rows came after 250 rows " \
                                                       "of history; nothing written"
    assert len(pd.read_csv(out / "scores" / "a.csv")) == 250
