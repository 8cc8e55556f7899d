"""`mscred evaluate`: metrics on a hand-built SCORES.csv, both ground-truth formats, thresholds, bad input."""
import json

import numpy as np
import pandas as pd
import pytest

from mscred import metrics as M
from mscred.cli.main import main

T = 20
TS = np.arange(100, 100 + T)
LABELS = np.zeros(T, dtype=int)
LABELS[4:7] = 1  # event 1: timestamps 104..106, causes a, b, c
LABELS[12:15] = 1  # event 2: timestamps 112..114, causes d, e, f
FLAGS = np.zeros(T, dtype=int)
FLAGS[[5, 6, 10]] = 1
SCORE = np.round(0.05 * (np.arange(T) % 7) + 0.5 * FLAGS + 0.2 * LABELS, 3)
CAUSES = [""] * T
CAUSES[5], CAUSES[6], CAUSES[10] = "a;x;b", "a;b;y", "q;r;s"


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(0)
    data = pd.DataFrame(rng.random((T, 6)), columns=list("abcdef"))
    data.insert(0, "timestamp", TS)
    data["label"] = LABELS
    data.to_csv(tmp_path / "test.csv", index=False)
    pd.DataFrame({"start": [104, 112], "end": [107, 115], "root_causes": ["a;b;c", "d;e;f"],
                  "duration": [3, 3]}).to_csv(tmp_path / "anomalies.csv", index=False)
    pd.DataFrame({"timestamp": TS, "score": SCORE, "is_anomaly": FLAGS, "root_causes": CAUSES}).to_csv(
        tmp_path / "scores.csv", index=False)
    return tmp_path


def run_json(capsys, *args):
    code = main(["evaluate", *map(str, args), "--json"])
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out)


def test_json_hand_computed(files, capsys):
    r = run_json(capsys, files / "scores.csv", "--labels", files / "test.csv")
    for key in ("precision", "recall", "f1", "event_recall", "pa_f1", "auc_roc", "auc_pr", "vus_roc", "vus_pr",
                "root_cause_recall_at_3", "best_f1_uses_labels", "random_baseline"):
        assert key in r
    # tp = 2 (rows 5, 6) of 3 flagged and 6 true: P = 2/3, R = 1/3, F1 = 4/9
    assert (r["precision"], r["recall"], r["f1"]) == pytest.approx((2 / 3, 1 / 3, 4 / 9))
    assert (r["events_found"], r["events_total"], r["event_recall"]) == (1, 2, 0.5)
    # point adjustment marks row 4 too: tp 3 of 4 flagged: P 3/4, R 1/2, F1 0.6
    assert r["pa_f1"] == pytest.approx(0.6)
    # event 1 ranking a (2 votes), b (2 votes, later), x: 2 of {a, b, c}; event 2 missed: 0
    assert r["root_cause_recall_at_3"] == pytest.approx(1 / 3)
    assert r["auc_roc"] == pytest.approx(M.auc_roc(LABELS, SCORE))
    assert r["auc_pr"] == pytest.approx(M.auc_pr(LABELS, SCORE))
    assert (r["vus_roc"], r["vus_pr"]) == pytest.approx(M.vus(LABELS, SCORE, sliding_window=100))
    base = r["random_baseline"]
    assert base["seed"] == 0 and 0.0 <= base["auc_roc"] <= 1.0 and "root_cause_recall_at_3" in base
    # the baseline flags as many rows as the detector
    assert base["precision"] * 3 == pytest.approx(round(base["precision"] * 3))


def test_anomalies_csv_gives_the_same_figures(files, capsys):
    a = run_json(capsys, files / "scores.csv", "--labels", files / "test.csv")
    b = run_json(capsys, files / "scores.csv", "--labels", files / "anomalies.csv")
    for key in ("precision", "recall", "f1", "event_recall", "auc_pr", "vus_pr", "root_cause_recall_at_3"):
        assert a[key] == pytest.approx(b[key])


def test_labels_only_table_without_root_causes(files, capsys, tmp_path):
    pd.DataFrame({"label": LABELS}).to_csv(tmp_path / "l.csv", index=False)
    (files / "anomalies.csv").rename(files / "moved.csv")  # else it is picked up beside l.csv (same directory)
    r = run_json(capsys, files / "scores.csv", "--labels", tmp_path / "l.csv")
    assert r["f1"] == pytest.approx(4 / 9)
    assert "root_cause_recall_at_3" not in r


def test_random_baseline_is_seeded(files, capsys):
    a = run_json(capsys, files / "scores.csv", "--labels", files / "test.csv", "--seed", 3)
    b = run_json(capsys, files / "scores.csv", "--labels", files / "test.csv", "--seed", 3)
    assert a["random_baseline"] == b["random_baseline"]


def test_threshold_refit_on_validation_scores(files, capsys):
    val = files / "val.csv"
    pd.DataFrame({"timestamp": np.arange(10), "score": np.linspace(0, 0.4, 10), "is_anomaly": 0,
                  "root_causes": ""}).to_csv(val, index=False)
    r = run_json(capsys, files / "scores.csv", "--labels", files / "test.csv", "--threshold", "beta_max",
                 "--val-scores", val, "--beta", 1.5)
    assert r["threshold"] == pytest.approx(0.6)  # 1.5 x 0.4
    pred = (SCORE > 0.6).astype(int)
    assert r["f1"] == pytest.approx(M.point_prf(LABELS, pred).f1)
    r = run_json(capsys, files / "scores.csv", "--labels", files / "test.csv", "--threshold", "percentile",
                 "--val-scores", val, "--percentile", 50)
    assert r["threshold"] == pytest.approx(0.2)
    r = run_json(capsys, files / "scores.csv", "--labels", files / "test.csv", "--threshold", "spot",
                 "--val-scores", val)
    assert r["threshold_method"] == "spot"


REFIT_SEED = 1   # (a seed whose baseline draw for event 2 hits one of its causes: the old code differed there)


def test_root_causes_under_a_refit_threshold_count_the_rows_that_carry_them(files, capsys):
    """A refit threshold that flags event 2 (rows 12-14, no causes written: the detector did not flag them) once
    gave the detector 0 for it while the baseline drew sensors for it; both now rank on the SCORES file's flagged
    rows, so the figures equal the detector threshold's."""
    val = files / "val.csv"
    pd.DataFrame({"timestamp": np.arange(10), "score": np.linspace(0, 0.1, 10), "is_anomaly": 0,
                  "root_causes": ""}).to_csv(val, index=False)
    seed = ["--seed", REFIT_SEED]
    own = run_json(capsys, files / "scores.csv", "--labels", files / "test.csv", *seed)
    refit = run_json(capsys, files / "scores.csv", "--labels", files / "test.csv", "--threshold", "beta_max",
                     "--val-scores", val, "--beta", 1.0, *seed)
    assert refit["events_found"] == 2 and own["events_found"] == 1   # the refit finds event 2 as well
    assert refit["root_cause_recall_at_3"] == own["root_cause_recall_at_3"]
    assert (refit["random_baseline"]["root_cause_recall_at_3"] == own["random_baseline"]["root_cause_recall_at_3"])


def test_table_output(files, capsys):
    assert main(["evaluate", str(files / "scores.csv"), "--labels", str(files / "test.csv")]) == 0
    out = capsys.readouterr().out
    assert "random (seed 0)" in out and "events found (1/2)" in out and "0.444" in out


def _bad(capsys, args):
    code = main(["evaluate", *map(str, args)])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1, err
    return err


def test_bad_inputs_exit_2_with_one_line(files, capsys, tmp_path):
    s, l = files / "scores.csv", files / "test.csv"
    assert "file not found" in _bad(capsys, [tmp_path / "nope.csv", "--labels", l])
    assert "file not found" in _bad(capsys, [s, "--labels", tmp_path / "nope.csv"])
    (tmp_path / "empty.csv").write_text("")
    assert "empty" in _bad(capsys, [tmp_path / "empty.csv", "--labels", l])
    pd.DataFrame({"timestamp": TS, "value": SCORE}).to_csv(tmp_path / "noscore.csv", index=False)
    assert "missing column 'score'" in _bad(capsys, [tmp_path / "noscore.csv", "--labels", l])
    bad = pd.read_csv(s)
    bad["score"] = bad["score"].astype(object)
    bad.loc[3, "score"] = "abc"
    bad.to_csv(tmp_path / "text.csv", index=False)
    assert "column 'score' row 4" in _bad(capsys, [tmp_path / "text.csv", "--labels", l])
    bad = pd.read_csv(s)
    bad.loc[2, "is_anomaly"] = 2
    bad.to_csv(tmp_path / "flag.csv", index=False)
    assert "column 'is_anomaly' row 3" in _bad(capsys, [tmp_path / "flag.csv", "--labels", l])
    pd.read_csv(s).iloc[:-1].to_csv(tmp_path / "short.csv", index=False)
    assert "rows" in _bad(capsys, [tmp_path / "short.csv", "--labels", l])
    pd.DataFrame({"x": [1, 2]}).to_csv(tmp_path / "nolabel.csv", index=False)
    assert "no 'label' column" in _bad(capsys, [s, "--labels", tmp_path / "nolabel.csv"])
    pd.DataFrame({"start": [110], "end": [105]}).to_csv(tmp_path / "anom.csv", index=False)
    assert "not after start" in _bad(capsys, [s, "--labels", tmp_path / "anom.csv"])
    assert "--val-scores" in _bad(capsys, [s, "--labels", l, "--threshold", "pot"])
    shifted = pd.read_csv(l)
    shifted["timestamp"] += 1
    shifted.to_csv(tmp_path / "shifted.csv", index=False)
    assert "timestamp" in _bad(capsys, [s, "--labels", tmp_path / "shifted.csv"])
    # Events on another scale (row numbers against timestamps 100..119): no event on a scored row gave metrics of
    # zero anomalies with exit 0; one event partly inside is clipped.
    pd.DataFrame({"start": [0, 150], "end": [5, 160]}).to_csv(tmp_path / "rows.csv", index=False)
    assert "overlaps the SCORES file's timestamps (100 .. 119)" in _bad(capsys, [s, "--labels", tmp_path / "rows.csv"])
    pd.DataFrame({"start": [95, 300], "end": [103, 310]}).to_csv(tmp_path / "part.csv", index=False)
    part = run_json(capsys, s, "--labels", tmp_path / "part.csv")
    assert (part["n_anomalous_rows"], part["events_total"], part["events_outside"]) == (3, 1, 1)
    assert part["events_clipped"] == 1  # 95 .. 103 began before the first scored timestamp, 100
    assert main(["evaluate", str(s), "--labels", str(tmp_path / "part.csv")]) == 0
    said = capsys.readouterr().out
    assert "1 event(s) of the anomalies table lie outside" in said and "1 event(s) of the anomalies table reach" in said
    # An end one step past the last row (exclusive) is inside; one further is cut; an event inside is neither.
    pd.DataFrame({"start": [118, 110, 104], "end": [120, 125, 106]}).to_csv(tmp_path / "ends.csv", index=False)
    ends = run_json(capsys, s, "--labels", tmp_path / "ends.csv")
    assert (ends["events_total"], ends["events_outside"], ends["events_clipped"]) == (3, 0, 1)
    # Thresholds from non-finite or non-positive settings: once a NaN threshold (invalid JSON) or an internal error.
    val = tmp_path / "val.csv"
    pd.DataFrame({"timestamp": np.arange(10), "score": np.linspace(0, 0.4, 10)}).to_csv(val, index=False)
    for beta in ("nan", "inf", "0", "-1"):
        assert "--beta" in _bad(capsys, [s, "--labels", l, "--threshold", "beta_max", "--val-scores", val,
                                         "--beta", beta])
    assert "--percentile" in _bad(capsys, [s, "--labels", l, "--threshold", "percentile", "--val-scores", val,
                                           "--percentile", "nan"])
    assert "--seed" in _bad(capsys, [s, "--labels", l, "--seed", str(2 ** 64)])


def test_evaluate_files_matches_the_cli(files, capsys):
    from mscred.evaluation import evaluate_files

    cli = run_json(capsys, files / "scores.csv", "--labels", files / "test.csv")
    lib = evaluate_files(files / "scores.csv", files / "test.csv")
    cli.pop("threshold_method")
    assert lib == cli


def test_parquet_labels(files, capsys):
    pytest.importorskip("pyarrow", reason="Parquet needs pyarrow (extra 'parquet')")
    pd.read_csv(files / "test.csv").to_parquet(files / "test.parquet")
    a = run_json(capsys, files / "scores.csv", "--labels", files / "test.csv")
    b = run_json(capsys, files / "scores.csv", "--labels", files / "test.parquet")
    assert a == b


def test_counts_of_an_anomalies_table_beside_the_labels(tmp_path):
    """The generate/demo layout (--labels test.csv, anomalies.csv beside it): the events outside or reaching past
    the scored timestamps are counted there too (they were dropped with the labels table's)."""
    from mscred.evaluation import read_ground_truth, read_scores

    stamps = np.arange(100, 120)
    pd.DataFrame({"timestamp": stamps, "score": np.linspace(0, 1, 20), "is_anomaly": 0}).to_csv(
        tmp_path / "scores.csv", index=False)
    pd.DataFrame({"timestamp": stamps, "s0": 0.0, "s1": 1.0, "s2": 2.0, "s3": 3.0, "label": 0}).to_csv(
        tmp_path / "test.csv", index=False)
    pd.DataFrame({"start": [95, 110, 300], "end": [103, 112, 310]}).to_csv(tmp_path / "anomalies.csv", index=False)
    from mscred.errors import NoteWarning

    with pytest.warns(NoteWarning, match="covers no row that .*test.csv labels anomalous"):   # label 0 throughout
        truth = read_ground_truth(tmp_path / "test.csv", read_scores(tmp_path / "scores.csv"))
    assert len(truth.events) == 2 and (truth.events_outside, truth.events_clipped) == (1, 1)
