"""`mscred watch DIR` (and fleet-watch's entity folders) of Parquet files dropped one by one (a data lake's hourly
parts): each part read whole once complete, waited for while its footer is not written yet, the parts one feed.
The waits between looks are replaced by a test double (``replace_waits``), so the chunks are known: SCORES.csv
must equal a ``Monitor`` fed the same chunks."""
from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest

from cli_helpers import main, replace_waits, run_cli, sensor_frame, tiny_model
from mscred.data.io import float_read_options
from mscred.detector import MSCRED

pytest.importorskip("pyarrow", reason="Parquet parts need pyarrow (the parquet extra)")

TRAIN_ROWS = 600


@pytest.fixture(scope="module")
def series() -> pd.DataFrame:
    return sensor_frame(TRAIN_ROWS + 400, 4, seed=5)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, series):
    return tiny_model(tmp_path_factory.mktemp("parquet_watch") / "model", series.iloc[:TRAIN_ROWS])


def _monitor_fed(model_dir, feed: pd.DataFrame, cuts: list) -> pd.DataFrame:
    monitor = MSCRED.load(model_dir, device="cpu").monitor()
    return pd.concat([monitor.update(feed.iloc[a:b]) for a, b in zip(cuts, cuts[1:])], ignore_index=True)


def _stopped(capsys, *argv, names) -> None:
    """Exit 2 with one error line holding each of ``names`` (stdout may hold the alarms of the rows before)."""
    code, _, err = run_cli(capsys, *argv)
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith("mscred: error:"), err
    for name in names:
        assert name in err, (name, err)


def test_parts_read_whole_once_complete(tmp_path, model_dir, series, capsys, monkeypatch):
    """part-1 and part-2 are there at the start, part-3 half written (no footer yet: waited for, not refused); at
    the first wait part-3 is complete and a CSV day file follows it; Ctrl-C at the second. SCORES.csv is a Monitor
    fed the four chunks."""
    from mscred.cli import watch as command

    feed = series.iloc[TRAIN_ROWS:].reset_index(drop=True)
    folder, out = tmp_path / "lake", tmp_path / "s.csv"
    folder.mkdir()
    feed.iloc[:120].to_parquet(folder / "part-1.parquet")
    feed.iloc[120:150].to_parquet(folder / "part-2.parquet")
    feed.iloc[150:190].to_parquet(tmp_path / "whole.parquet")
    whole = (tmp_path / "whole.parquet").read_bytes()
    (folder / "part-3.parquet").write_bytes(whole[:len(whole) // 2])
    (folder / "old.csv.gz").write_bytes(b"an archive: not the feed's")

    def first():
        (folder / "part-3.parquet").write_bytes(whole)
        feed.iloc[190:230].to_csv(folder / "part-4.csv", index=False)

    replace_waits(monkeypatch, command, first)
    assert main(["watch", str(model_dir), str(folder), "--out", str(out), "--device", "cpu"]) == 0
    got = pd.read_csv(out, **float_read_options())
    want = _monitor_fed(model_dir, feed, [0, 120, 150, 190, 230])
    assert list(got["timestamp"]) == list(feed["timestamp"][:230])
    np.testing.assert_allclose(got["score"], want["score"], rtol=1e-15, atol=0)
    assert capsys.readouterr().out.splitlines()[-1].startswith("watched 230 rows in 4 chunk(s): ")


def test_resume_across_parts(tmp_path, model_dir, series, capsys):
    """A watch stops after two parts; two more are dropped while none runs; ``--resume`` takes the first two as
    history and scores the others after them."""
    feed = series.iloc[TRAIN_ROWS:].reset_index(drop=True)
    folder, out = tmp_path / "lake", tmp_path / "s.csv"
    folder.mkdir()
    feed.iloc[:110].to_parquet(folder / "p1.parquet")
    feed.iloc[110:140].to_parquet(folder / "p2.pq")
    argv = ["watch", str(model_dir), str(folder), "--out", str(out), "--device", "cpu", "--idle-exit", "0"]
    assert main(argv) == 0
    feed.iloc[140:170].to_parquet(folder / "p3.parquet")
    feed.iloc[170:200].to_parquet(folder / "p4.parquet")
    capsys.readouterr()
    assert main(argv + ["--resume"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("watched 60 rows in 2 chunk(s): ")
    got = pd.read_csv(out, **float_read_options())
    np.testing.assert_allclose(got["score"], _monitor_fed(model_dir, feed, [0, 110, 140, 170, 200])["score"],
                               rtol=1e-15, atol=0)


def test_a_part_that_never_completes_is_refused(tmp_path, model_dir, series, capsys):
    """A damaged part (cut short, never completed) with a later part after it: one line naming it, exit 2, the
    parts before it scored and written."""
    feed = series.iloc[TRAIN_ROWS:].reset_index(drop=True)
    folder, out = tmp_path / "lake", tmp_path / "s.csv"
    folder.mkdir()
    feed.iloc[:120].to_parquet(folder / "p1.parquet")
    feed.iloc[120:150].to_parquet(tmp_path / "p2.parquet")
    (folder / "p2.parquet").write_bytes((tmp_path / "p2.parquet").read_bytes()[:300])
    feed.iloc[150:170].to_parquet(folder / "p3.parquet")
    _stopped(capsys, "watch", model_dir, folder, "--out", out, "--device", "cpu", "--idle-exit", "0",
             names=[str(folder / "p2.parquet")])
    assert len(pd.read_csv(out)) == 120


def test_a_bad_row_of_a_part_names_its_row(tmp_path, model_dir, series, capsys):
    feed = series.iloc[TRAIN_ROWS:].reset_index(drop=True)
    folder = tmp_path / "lake"
    folder.mkdir()
    feed.iloc[:120].to_parquet(folder / "p1.parquet")
    feed.iloc[120:150].assign(s1=lambda f: f["s1"].where(f.index != 127)).to_parquet(folder / "p2.parquet")
    _stopped(capsys, "watch", model_dir, folder, "--out", tmp_path / "s.csv", "--device", "cpu", "--idle-exit",
             "0", names=[f"{folder / 'p2.parquet'} rows 1-30", "column 's1' row 8", "missing value"])


def test_fleet_watch_entity_folder_of_parts(tmp_path, model_dir, series, capsys):
    fleet, live = tmp_path / "fleet", tmp_path / "live"
    shutil.copytree(model_dir, fleet / "pump")
    (live / "pump").mkdir(parents=True)
    feed = series.iloc[TRAIN_ROWS:].reset_index(drop=True)
    feed.iloc[:120].to_parquet(live / "pump" / "h00.parquet")
    feed.iloc[120:160].to_parquet(live / "pump" / "h01.parquet")
    assert main(["fleet-watch", str(fleet), str(live), "--out", str(tmp_path / "out"), "--device", "cpu",
                 "--idle-exit", "0"]) == 0
    got = pd.read_csv(tmp_path / "out" / "scores" / "pump.csv", **float_read_options())
    np.testing.assert_allclose(got["score"], _monitor_fed(model_dir, feed, [0, 120, 160])["score"], rtol=1e-15,
                               atol=0)
