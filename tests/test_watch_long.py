"""`watch` and `fleet-watch` of a long table (a model trained with ``--long``): the feed's lines made wide a time at
a time, each time's lines held until a later time shows them complete (``mscred.data.long_feed``). The watch runs
with its waits replaced (``replace_waits``), so that the pieces it reads are known; SCORES.csv must then be what a
``Monitor`` gives for the wide rows of the times complete at each look."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cli_helpers import ON_THE_CPU, main, replace_waits, run_cli, sensor_frame
from mscred.cli import watch as watch_module
from mscred.data.io import TIMESTAMP, float_read_options
from mscred.data.long_feed import LongFeed
from mscred.data.reading import Reading
from mscred.detector import MSCRED

SENSORS = 4
TRAIN = ("--epochs", "1", "--set", "channels=[4,8,8,8]", *ON_THE_CPU, "--quiet")


def _wide(rows: int, seed: int) -> pd.DataFrame:
    frame = sensor_frame(rows, SENSORS, seed=seed)
    frame[TIMESTAMP] = pd.date_range("2026-01-01", periods=rows, freq="min").strftime("%Y-%m-%d %H:%M:%S")
    return frame


def _long(wide: pd.DataFrame) -> pd.DataFrame:
    """A feed's lines: a time's values together, the times in order (as a historian writes them)."""
    long = wide.melt(id_vars=TIMESTAMP, var_name="Tag", value_name="Value")
    return long.sort_values(TIMESTAMP, kind="stable").reset_index(drop=True).rename(columns={TIMESTAMP: "Time"})


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("watch_long")
    _long(_wide(600, seed=3)).to_csv(folder / "train.csv", index=False)
    assert main(["train", str(folder / "train.csv"), "--out", str(folder / "model"), "--time-column", "Time",
                 "--long", "Tag,Value", "--missing", "interpolate", *TRAIN]) == 0
    return folder / "model"


def _scores(path) -> pd.DataFrame:
    return pd.read_csv(path, **float_read_options())


def _as_monitor_fed(model_dir, wide: pd.DataFrame, times: list) -> pd.DataFrame:
    """What a Monitor gives for ``wide``'s rows in chunks between the counts of complete times ``times``."""
    monitor = MSCRED.load(model_dir, device="cpu").monitor()
    return pd.concat([monitor.update(wide.iloc[a:b]) for a, b in zip(times, times[1:]) if b > a],
                     ignore_index=True)


def test_a_times_lines_wait_until_a_later_time_comes(tmp_path, model_dir, capsys, monkeypatch):
    """Pieces cut inside a time's lines: each look scores the times before the last line's; the lines of the last
    time wait (two looks without a new time score nothing). A sensor without a line at a time, and one whose value
    is a historian's failed state, are missing values (interpolated, as the model's setting says). Ctrl-C leaves
    the last time's lines unscored: nothing has shown them complete."""
    wide = _wide(300, seed=7)
    lines = _long(wide).astype({"Value": object})
    lines.loc[4 * 120 + 2, "Value"] = "Bad"            # s2 at 120: a failed value
    dropped = 4 * 200 + 1                               # s1 at 200: no line at all
    wide.loc[120, "s2"] = wide.loc[200, "s1"] = np.nan
    lines = lines.drop(index=dropped).reset_index(drop=True)
    cuts = [402, 403, 405, 406, 750, 1000, len(lines)]   # lines; 402: time 100's first two
    data, out = tmp_path / "feed.csv", tmp_path / "scores.csv"
    lines.iloc[:cuts[0]].to_csv(data, index=False)

    def append(a, b):
        return lambda: lines.iloc[a:b].to_csv(data, mode="a", header=False, index=False)

    replace_waits(monkeypatch, watch_module, *[append(a, b) for a, b in zip(cuts, cuts[1:])])
    code, _, err = run_cli(capsys, "watch", model_dir, data, "--out", out, "--interval", "0.01",
                           "--na-value", "Bad", *ON_THE_CPU)
    assert code == 0, err
    assert err.splitlines()[-1] == (f"note: {data}: the last 4 lines (time '2026-01-01 04:59:00') not scored: no "
                                    "later time came to show them complete (watch --resume goes on from them)")
    # the times complete at each look: those before the last line's
    complete = [0] + [int(np.flatnonzero(wide[TIMESTAMP] == lines["Time"][c - 1])[0]) for c in cuts]
    want = _as_monitor_fed(model_dir, wide, complete)
    got = _scores(out)
    assert len(got) == 299 and list(got[TIMESTAMP]) == list(wide[TIMESTAMP][:299])
    np.testing.assert_allclose(got["score"], want["score"], rtol=1e-15, atol=0)
    assert list(got["filled"]) == [int(t in (120, 200)) for t in range(299)]


def test_idle_exit_scores_the_last_time_and_resume_goes_on(tmp_path, model_dir, capsys):
    """--idle-exit takes the writer as stopped: the last time's lines are scored too. --resume after more lines came
    scores them after those, as one watch would have; with nothing new it leaves SCORES.csv as it was (the last
    time, held back again, is the one the last watch scored at its end)."""
    wide = _wide(250, seed=8)
    lines = _long(wide)
    data, out = tmp_path / "feed.csv", tmp_path / "scores.csv"
    lines.iloc[:4 * 150].to_csv(data, index=False)
    argv = ["watch", str(model_dir), str(data), "--out", str(out), "--idle-exit", "0", *ON_THE_CPU]
    assert main(argv) == 0
    assert len(_scores(out)) == 150
    lines.iloc[4 * 150:].to_csv(data, mode="a", header=False, index=False)
    capsys.readouterr()
    assert main(argv + ["--resume"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith(f"wrote {out} after the 150 it held already")
    want = _as_monitor_fed(model_dir, wide, [0, 149, 150, 249, 250])   # (the last time at the end)
    got = _scores(out)
    assert list(got[TIMESTAMP]) == list(wide[TIMESTAMP])
    np.testing.assert_allclose(got["score"], want["score"], rtol=1e-15, atol=0)
    assert main(argv + ["--resume"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (f"watched {data}: no rows came after the 250 it held "
                                                        f"already; {out} as it was")


def test_new_only_scores_from_the_last_time_there(tmp_path, model_dir, capsys, monkeypatch):
    """--new-only: the times complete at the start are history; the last time there, not shown complete yet, is
    the first row scored, with the lines that come after it."""
    wide = _wide(260, seed=10)
    lines = _long(wide)
    data, out = tmp_path / "feed.csv", tmp_path / "scores.csv"
    lines.iloc[:4 * 200].to_csv(data, index=False)
    replace_waits(monkeypatch, watch_module,
                  lambda: lines.iloc[4 * 200:].to_csv(data, mode="a", header=False, index=False))
    code, _, err = run_cli(capsys, "watch", model_dir, data, "--out", out, "--interval", "0.01", "--new-only",
                           *ON_THE_CPU)
    assert code == 0, err
    monitor = MSCRED.load(model_dir, device="cpu").monitor()
    monitor.prime(wide.iloc[:199])
    want = monitor.update(wide.iloc[199:259])
    got = _scores(out)
    assert list(got[TIMESTAMP]) == list(wide[TIMESTAMP][199:259])
    np.testing.assert_allclose(got["score"], want["score"], rtol=1e-15, atol=0)


def test_a_folder_of_rolled_long_tables_is_one_feed(tmp_path, model_dir, capsys):
    """A folder of a logger's long files (CSV, then a Parquet part): one feed, each time once, in the files' order;
    a refusal names the file it is in."""
    pytest.importorskip("pyarrow", reason="Parquet needs pyarrow (the parquet extra)")
    wide = _wide(240, seed=11)
    lines = _long(wide)
    feed = tmp_path / "feed"
    feed.mkdir()
    lines.iloc[:4 * 100].to_csv(feed / "part-1.csv", index=False)
    lines.iloc[4 * 100:4 * 180].to_parquet(feed / "part-2.parquet", index=False)
    lines.iloc[4 * 180:].to_csv(feed / "part-3.csv", index=False)
    out = tmp_path / "scores.csv"
    code, _, err = run_cli(capsys, "watch", model_dir, feed, "--out", out, "--idle-exit", "0", *ON_THE_CPU)
    assert code == 0, err
    assert list(_scores(out)[TIMESTAMP]) == list(wide[TIMESTAMP])
    bad = lines.iloc[4 * 180:].copy()
    bad.iloc[9, bad.columns.get_loc("Tag")] = ""     # (with time 179's lines of part-2, held)
    bad.to_csv(feed / "part-3.csv", index=False)
    _refused(capsys, "watch", model_dir, feed, "--out", tmp_path / "s2.csv", "--idle-exit", "0", *ON_THE_CPU,
             fragments=[f"{feed / 'part-3.csv'}: column 'Tag' line 11: no sensor name"])


def test_fleet_watch_follows_long_tables(tmp_path, capsys):
    """Each entity's long table as watch follows it: its times but the last at the first look, the last at the
    end (where the chunk before it ends is where a first chunk's last rows, no window ending there, score 0)."""
    tables, live = tmp_path / "tables", tmp_path / "live"
    tables.mkdir()
    live.mkdir()
    for name, seed in (("pump", 1), ("fan", 2)):
        _long(_wide(300, seed=seed)).to_csv(tables / f"{name}.csv", index=False)
    code, _, err = run_cli(capsys, "fleet", tables, "--out", tmp_path / "fleet", "--time-column", "Time",
                           "--long", "Tag,Value", *TRAIN)
    assert code == 0, err
    code, _, err = run_cli(capsys, "fleet-detect", tmp_path / "fleet", tables, "--out", tmp_path / "scores",
                           "--quiet", *ON_THE_CPU)
    assert code == 0, err
    (live / "pump.csv").write_bytes((tables / "pump.csv").read_bytes())
    code, _, err = run_cli(capsys, "fleet-watch", tmp_path / "fleet", live, "--out", tmp_path / "watched",
                           "--idle-exit", "0", *ON_THE_CPU)
    assert code == 0, err
    detected = pd.read_csv(tmp_path / "scores" / "scores" / "pump.csv")
    watched = _scores(tmp_path / "watched" / "scores" / "pump.csv")
    assert list(watched[TIMESTAMP]) == list(detected[TIMESTAMP])
    want = _as_monitor_fed(tmp_path / "fleet" / "models" / "pump", _wide(300, seed=1), [0, 299, 300])
    np.testing.assert_allclose(watched["score"], want["score"], rtol=1e-15, atol=0)


def test_a_late_value_is_refused_naming_its_line_or_time(tmp_path, model_dir, capsys, monkeypatch):
    """A value for a time already read (it came late): in the lines read with that time's, refused naming its line
    in the file; after that time was scored, refused as a time that goes back, naming it. The rows before it are
    scored and written."""
    lines = _long(_wide(200, seed=9))
    late = lines.iloc[[4 * 150 + 1]]                 # s1 at time 150 (02:30) again, after time 160's lines
    feed = pd.concat([lines.iloc[:4 * 161], late, lines.iloc[4 * 161:]], ignore_index=True)
    data, out = tmp_path / "feed.csv", tmp_path / "s.csv"
    feed.iloc[:4 * 120].to_csv(data, index=False)
    replace_waits(monkeypatch, watch_module,
                  lambda: feed.iloc[4 * 120:].to_csv(data, mode="a", header=False, index=False))
    _refused(capsys, "watch", model_dir, data, "--out", out, "--interval", "0.01", *ON_THE_CPU,
             fragments=[f"{data}: line {4 * 161 + 2}: sensor 's1' at '2026-01-01 02:30:00' a second time"])
    assert len(_scores(out)) == 119
    feed.iloc[:4 * 161].to_csv(data, index=False)
    replace_waits(monkeypatch, watch_module,
                  lambda: feed.iloc[4 * 161:].to_csv(data, mode="a", header=False, index=False))
    _refused(capsys, "watch", model_dir, data, "--out", out, "--interval", "0.01", *ON_THE_CPU,
             fragments=[f"{data} (times '2026-01-01 02:30:00' to '2026-01-01 03:18:00')",
                        "its first timestamp '2026-01-01 02:30:00' does not follow the feed's last"])
    assert len(_scores(out)) == 160


def _refused(capsys, *argv, fragments) -> None:
    """A watch stopped by a bad row: exit 2, its one error line (after any alarm lines on stdout) holding each of
    ``fragments``."""
    code, _, err = run_cli(capsys, *argv)
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert all(fragment in err for fragment in fragments), err


class _Pieces:
    """A follower whose polls give the pieces of a long table's lines in turn."""

    def __init__(self, pieces):
        self.pieces, self.notes, self.path, self.reading = list(pieces), [], "feed.csv", None

    def poll(self, final=False):
        return self.pieces.pop(0) if self.pieces else None

    def close(self):
        pass


def test_the_wide_rows_are_those_of_the_whole_table():
    """Whatever the cuts, the wide rows polled are the whole table's made wide, every time once; a sensor of the
    model without a line in a piece is a column of missing values."""
    rng = np.random.default_rng(0)
    wide = _wide(40, seed=4)
    lines = _long(wide).rename(columns={"Time": TIMESTAMP})
    reading = Reading(long_columns=("Tag", "Value"))
    for _ in range(20):
        cuts = np.sort(rng.choice(np.arange(1, len(lines)), size=rng.integers(1, 12), replace=False))
        edges = [0, *cuts, len(lines)]
        feed = LongFeed(_Pieces(lines.iloc[a:b] for a, b in zip(edges, edges[1:])), reading,
                        [*wide.columns[1:], "extra"])
        polled = [feed.poll() for _ in edges[1:]] + [feed.poll(final=True)]
        got = pd.concat([p for p in polled if p is not None], ignore_index=True)
        assert list(got[TIMESTAMP]) == list(wide[TIMESTAMP])
        np.testing.assert_array_equal(got[wide.columns[1:]].to_numpy(float), wide[wide.columns[1:]].to_numpy())
        assert got["extra"].isna().all() and feed.held == 0
