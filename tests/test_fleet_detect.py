"""`mscred fleet-detect FLEET DATA --out DIR` (``mscred.fleet_detect``): each entity's new table scored with the model
of its name, in one process; the summary says what happened to each."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cli_helpers import bad_input, run_cli, sensor_frame, tiny_model
from mscred.detector import MSCRED
from mscred.fleet_detect import COLUMNS

N = 4


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> Path:
    """A fleet folder as `mscred fleet` writes it (models/<entity>/) of three entities, and their frames."""
    root = tmp_path_factory.mktemp("fleet_detect")
    for k in range(3):
        tiny_model(root / "fleet" / "models" / f"pump_{k}", sensor_frame(900, N, seed=k).iloc[:500])
    return root / "fleet"


def frames(k: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(entity k's previous table, its new one)."""
    frame = sensor_frame(900, N, seed=k)
    return frame.iloc[500:700], frame.iloc[700:]


@pytest.fixture()
def folders(tmp_path) -> tuple[Path, Path]:
    """The new tables of pump_0 and pump_1 (pump_2 has none today), and all three previous ones."""
    new, old = tmp_path / "new", tmp_path / "old"
    new.mkdir()
    old.mkdir()
    for k in range(3):
        before, after = frames(k)
        before.to_csv(old / f"pump_{k}.csv", index=False)
        if k < 2:
            after.to_parquet(new / f"pump_{k}.parquet") if k == 1 else after.to_csv(new / f"pump_{k}.csv", index=False)
    return new, old


def test_each_entity_is_scored_by_its_own_model(fleet, folders, tmp_path, capsys):
    pytest.importorskip("pyarrow", reason="one entity's table is Parquet (extra 'parquet')")
    new, old = folders
    code, out, err = run_cli(capsys, "fleet-detect", fleet, new, "--out", tmp_path / "s", "--context", old,
                             "--sensor-scores", "--device", "cpu")
    assert code == 0, err
    assert out.startswith("scored 2 of 2 entities with new data (1 without):")
    summary = pd.read_csv(tmp_path / "s" / "summary.csv")
    assert list(summary.columns) == COLUMNS
    assert summary["entity"].tolist() == ["pump_0", "pump_1", "pump_2"]
    assert summary["status"].tolist() == ["ok", "ok", "no new data"]
    for k in range(2):
        before, after = frames(k)
        expect = MSCRED.load(fleet / "models" / f"pump_{k}", device="cpu").detect(after, context=before,
                                                                                   sensor_scores=True)
        written = pd.read_csv(tmp_path / "s" / "scores" / f"pump_{k}.csv", keep_default_na=False)
        assert list(written.columns) == list(expect.columns)
        np.testing.assert_allclose(written["score"], expect["score"], rtol=1e-12)
        np.testing.assert_array_equal(written["is_anomaly"], expect["is_anomaly"])
        assert summary.loc[k, "rows"] == summary.loc[k, "scored"] == 200 and summary.loc[k, "context_rows"] == 90
        assert summary.loc[k, "anomalous"] == expect["is_anomaly"].sum()
    alarms = pd.read_csv(tmp_path / "s" / "events.csv", keep_default_na=False)
    assert list(alarms.columns)[:3] == ["entity", "start", "end"]
    for k in range(2):
        before, after = frames(k)
        own = MSCRED.load(fleet / "models" / f"pump_{k}", device="cpu").events(after, context=before)
        mine = alarms[alarms["entity"] == f"pump_{k}"]
        assert mine["start"].tolist() == own["start"].tolist() and mine["rows"].tolist() == own["rows"].tolist()
    # a second run replaces the folder this command wrote
    code, out, err = run_cli(capsys, "fleet-detect", fleet, new, "--out", tmp_path / "s", "--device", "cpu",
                             "--quiet")
    assert code == 0 and not err
    assert pd.read_csv(tmp_path / "s" / "summary.csv")["scored"].tolist()[:2] == [110, 110]   # no context now


@pytest.mark.parametrize("timed", [True, False])
def test_an_entity_folder_is_one_feed(fleet, tmp_path, capsys, timed):
    """pump_0/ holds a logger's rolled files: scored one after the other, each after the one before as context, the
    scores are those of the feed as one table (``detect`` of the 400 rows after the context, untimed rows numbered
    through the files); OLD's folder gives its last file as context; pump_0.csv beside the folder is refused."""
    new, old = tmp_path / "new", tmp_path / "old"
    (new / "pump_0").mkdir(parents=True)
    (old / "pump_0").mkdir(parents=True)
    whole = sensor_frame(900, N, seed=0)
    if not timed:
        whole = whole.drop(columns="timestamp")
    whole.iloc[300:400].to_csv(old / "pump_0" / "a.csv", index=False)
    whole.iloc[400:500].to_csv(old / "pump_0" / "b.csv", index=False)
    for name, (start, stop) in {"1.csv": (500, 650), "2.csv": (650, 660), "3.csv": (660, 900)}.items():
        whole.iloc[start:stop].to_csv(new / "pump_0" / name, index=False)
    code, out, err = run_cli(capsys, "fleet-detect", fleet, new, "--out", tmp_path / "s", "--context", old,
                             "--device", "cpu", "--quiet")
    assert code == 0, err
    model = MSCRED.load(fleet / "models" / "pump_0", device="cpu")
    expect = model.detect(whole.iloc[500:].reset_index(drop=True), context=whole.iloc[400:500].reset_index(drop=True))
    written = pd.read_csv(tmp_path / "s" / "scores" / "pump_0.csv", keep_default_na=False)
    assert list(written.columns) == list(expect.columns)
    # (float32 networks: the files' windows go through in other batches than the whole table's, ~3e-9 apart)
    np.testing.assert_allclose(written["score"], expect["score"], rtol=1e-6, atol=1e-12)
    np.testing.assert_array_equal(written.iloc[:, 0], expect.iloc[:, 0] if timed else np.arange(400))
    summary = pd.read_csv(tmp_path / "s" / "summary.csv").set_index("entity")
    assert (summary.loc["pump_0", "rows"], summary.loc["pump_0", "scored"]) == (400, 400)
    assert summary.loc["pump_0", "context_rows"] == 90
    whole.iloc[500:].to_csv(new / "pump_0.csv", index=False)
    bad_input(capsys, "fleet-detect", fleet, new, "--out", tmp_path / "s2", "--device", "cpu",
              names=["pump_0", "pump_0.csv", "both entity 'pump_0'"])


def test_bad_entities_are_listed_and_the_others_scored(fleet, folders, tmp_path, capsys):
    new, _ = folders
    sensor_frame(300, N).to_csv(new / "ghost.csv", index=False)
    frames(0)[1].rename(columns={"s1": "x"}).to_csv(new / "pump_0.csv", index=False)
    code, out, err = run_cli(capsys, "fleet-detect", fleet, new, "--out", tmp_path / "s", "--device", "cpu")
    assert code == 1, err
    summary = pd.read_csv(tmp_path / "s" / "summary.csv").set_index("entity")
    assert summary.loc["ghost", "status"] == f"bad input: {new / 'ghost.csv'}: no model named 'ghost' in {fleet}"
    assert summary.loc["pump_0", "status"].startswith("bad input: ") and "other sensors" in summary.loc["pump_0",
                                                                                                        "status"]
    assert summary.loc["pump_1", "status"] == "ok"
    assert sorted(p.name for p in (tmp_path / "s" / "scores").iterdir()) == ["pump_1.csv"]


def test_refusals(fleet, tmp_path, capsys):
    only_bad = tmp_path / "bad"
    only_bad.mkdir()
    (only_bad / "pump_0.csv").write_text("timestamp,s0\n1,abc\n")
    bad_input(capsys, "fleet-detect", fleet, only_bad, "--out", tmp_path / "s", "--quiet",
              names=["no entity scored", "pump_0: bad input"])
    assert (tmp_path / "s" / "summary.csv").exists()   # the summary says why, as fleet's does
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    bad_input(capsys, "fleet-detect", fleet, only_bad, "--out", tmp_path / "mine", names=["notes.txt"])
    twice = tmp_path / "twice"
    twice.mkdir()
    frames(0)[1].to_csv(twice / "pump_0.csv", index=False)
    np.save(twice / "pump_0.npy", frames(0)[1].drop(columns="timestamp").to_numpy())
    bad_input(capsys, "fleet-detect", fleet, twice, "--out", tmp_path / "s2", names=["pump_0.csv and pump_0.npy"])
    bad_input(capsys, "fleet-detect", tmp_path / "mine", twice, "--out", tmp_path / "s3", names=["no model folder"])
    empty = tmp_path / "empty"
    empty.mkdir()
    bad_input(capsys, "fleet-detect", fleet, empty, "--out", tmp_path / "s4", names=["no table found"])
    assert not (tmp_path / "s2").exists() and not (tmp_path / "s4").exists()


def test_report_page(fleet, folders, tmp_path, capsys):
    """--report: report.html with the entities (most anomalous rows first), the fleet's alarms (each events.csv
    row) and the scores of the alarming entities, offline."""
    pytest.importorskip("matplotlib", reason="the report needs matplotlib (extra 'report')")
    pytest.importorskip("pyarrow", reason="one entity's table is Parquet (extra 'parquet')")
    new, old = folders
    code, out, err = run_cli(capsys, "fleet-detect", fleet, new, "--out", tmp_path / "s", "--context", old,
                             "--report", "--quiet", "--device", "cpu")
    assert code == 0, err
    page = (tmp_path / "s" / "report.html").read_text()
    assert "<script" not in page.lower() and "<link" not in page.lower()
    for section in ("sec-entities", "sec-alarms", "sec-scores"):
        assert f'id="{section}"' in page
    summary = pd.read_csv(tmp_path / "s" / "summary.csv")
    entities = page[page.index('<table id="entities"'):page.index("</table>")]
    shown = [line.split("</td>")[0] for line in entities.split("<tr><td>")[1:]]
    expect = summary.assign(a=summary["anomalous"].fillna(-1)).sort_values(["a", "entity"], ascending=[False, True])
    assert shown == expect["entity"].tolist()
    alarms = pd.read_csv(tmp_path / "s" / "events.csv")
    listed = page[page.index('<table id="alarms"'):]
    assert listed[:listed.index("</table>")].count("<tr>") == len(alarms) + 1
    assert page.count("<img") == 1 and 'alt="scores"' in page
    assert not (tmp_path / "plain").exists()
    code, out, err = run_cli(capsys, "fleet-detect", fleet, new, "--out", tmp_path / "plain", "--quiet")
    assert code == 0 and not (tmp_path / "plain" / "report.html").exists()


def test_most_anomalous_keeps_the_entities_with_the_most_flagged_rows():
    from mscred.fleet_report import MostAnomalous

    kept = MostAnomalous(keep=2)
    for name, flagged in (("a", 3), ("b", 0), ("c", 7), ("d", 5), ("e", 5)):
        frame = pd.DataFrame({"row": range(10), "score": np.arange(10.0), "is_anomaly": [1] * flagged
                              + [0] * (10 - flagged)})
        kept.offer(name, frame, 1.0)
    assert [name for name, _, _ in kept.ranked()] == ["c", "d"]   # (ties: by name, as ranked)


def test_entity_reports_a_page_per_entity_that_alarmed(fleet, tmp_path, capsys):
    """--entity-reports: reports/<entity>/ for each entity with an alarm (detect --report's page of its table), none
    for the others, linked from report.html; the scores the same bytes as without it."""
    pytest.importorskip("matplotlib", reason="the pages need matplotlib (the report extra)")
    new = tmp_path / "new"
    new.mkdir()
    for k in range(2):
        _, after = frames(k)
        after = after.copy()
        if k == 0:   # an anomaly in pump_0's table only
            after.iloc[80:120, 1 + 2] += 8.0
        after.to_csv(new / f"pump_{k}.csv", index=False)
    plain, paged = tmp_path / "plain", tmp_path / "paged"
    assert run_cli(capsys, "fleet-detect", fleet, new, "--out", plain, "--device", "cpu")[0] == 0
    code, out, err = run_cli(capsys, "fleet-detect", fleet, new, "--out", paged, "--device", "cpu", "--report",
                             "--entity-reports")
    assert code == 0, err
    for k in range(2):
        assert (paged / "scores" / f"pump_{k}.csv").read_bytes() == (plain / "scores" / f"pump_{k}.csv").read_bytes()
    summary = pd.read_csv(paged / "summary.csv").set_index("entity")
    alarmed = sorted(summary.index[summary["intervals"].fillna(0) > 0])
    assert "pump_0" in alarmed
    assert sorted(p.name for p in (paged / "reports").iterdir()) == alarmed
    page = paged / "reports" / "pump_0"
    assert sorted(p.name for p in page.iterdir()) == ["events.csv", "index.html", "summary.json"]
    events = pd.read_csv(page / "events.csv")
    fleet_events = pd.read_csv(paged / "events.csv")
    assert len(events) == int((fleet_events["entity"] == "pump_0").sum()) == summary.loc["pump_0", "intervals"]
    assert 'href="reports/pump_0/index.html"' in (paged / "report.html").read_text()
    # a second run over the same folder replaces it, pages included
    code, _, err = run_cli(capsys, "fleet-detect", fleet, new, "--out", paged, "--device", "cpu")
    assert code == 0 and not (paged / "reports").exists(), err
