"""`mscred evaluate` on the inputs an audit found mishandled: each case once gave a wrong answer, a false message,
an ignored option, invalid JSON or a run of hours; now exit 2 with one line, or the right figures."""
import time

import numpy as np
import pandas as pd
import pytest

from cli_helpers import evaluate_bad, evaluate_json

T = 10
LABELS = np.array([0, 0, 1, 1, 0, 0, 0, 1, 0, 0])
SCORE = np.array([0.1, 0.2, 0.9, 0.4, 0.3, 0.5, 0.1, 0.8, 0.2, 0.0])
FLAGS = (SCORE >= 0.5).astype(int)  # rows 2, 5, 7: tp 2 of 3 flagged, 3 true -> P = R = F1 = 2/3


@pytest.fixture
def files(tmp_path):
    pd.DataFrame({"timestamp": np.arange(T), "score": SCORE, "is_anomaly": FLAGS,
                  "root_causes": ["a;b;c" if f else "" for f in FLAGS]}).to_csv(tmp_path / "scores.csv", index=False)
    pd.DataFrame({"timestamp": np.arange(T), "label": LABELS}).to_csv(tmp_path / "labels.csv", index=False)
    pd.DataFrame({"start": [2, 7], "end": [4, 8], "root_causes": ["a;b;d", "x;y;z"]}).to_csv(
        tmp_path / "events.csv", index=False)
    return tmp_path


def test_hand_computed_figures(files, capsys):
    """The audit's hand check: AUC-ROC 20/21 (.4 loses to the normal .5 only), AP (1 + 1 + 3/4) / 3, point
    adjustment adds row 3 (P 3/4, R 1), root causes 2 of {a, b, d} for event 1 and none of event 2."""
    r, _ = evaluate_json(capsys, files / "scores.csv", "--labels", files / "events.csv")
    assert (r["precision"], r["recall"], r["f1"]) == pytest.approx((2 / 3, 2 / 3, 2 / 3))
    assert (r["auc_roc"], r["auc_pr"]) == pytest.approx((20 / 21, 11 / 12))
    assert (r["pa_f1"], r["best_f1_uses_labels"]) == pytest.approx((6 / 7, 6 / 7))
    assert r["root_cause_recall_at_3"] == pytest.approx(1 / 3)


# ------------------------------------------------------------------------------------------ anomalies tables
def test_anomalies_same_as_labels_is_not_file_not_found(files, capsys):
    """--anomalies naming the --labels table itself said "file not found" about a file that exists."""
    line = evaluate_bad(capsys, files / "scores.csv", "--labels", files / "labels.csv", "--anomalies", files / "labels.csv",
                names=("labels.csv", "no 'start' and no 'end' column"))
    assert "file not found" not in line


def test_header_only_anomalies_table_means_no_events(files, capsys):
    """A dataset without anomalies writes a header-only anomalies.csv (datasets.py, generate_synthetic with
    n_anomalies=0): beside the labels it made evaluate (and the demo, after training) fail with "no data rows"."""
    (files / "anomalies.csv").write_text("start,end,root_causes,duration\n")
    r, _ = evaluate_json(capsys, files / "scores.csv", "--labels", files / "labels.csv")
    assert (r["events_total"], r["n_anomalous_rows"], r["f1"]) == (2, 3, pytest.approx(2 / 3))  # the labels' events
    r, _ = evaluate_json(capsys, files / "scores.csv", "--labels", files / "labels.csv", "--anomalies",
                 files / "anomalies.csv")
    assert r["events_total"] == 2
    r, _ = evaluate_json(capsys, files / "scores.csv", "--labels", files / "anomalies.csv")  # no anomaly at all
    assert (r["n_anomalous_rows"], r["events_total"], r["auc_roc"]) == (0, 0, None)


def test_header_only_anomalies_through_evaluate_files(files):
    from mscred.evaluation import evaluate_files

    (files / "anomalies.csv").write_text("start,end,root_causes,duration\n")
    result = evaluate_files(files / "scores.csv", files / "labels.csv", anomalies=files / "anomalies.csv")
    assert result["events_total"] == 2 and "root_cause_recall_at_3" not in result


def test_a_table_without_rows_that_is_no_anomalies_table_is_still_refused(files, capsys):
    (files / "empty.csv").write_text("timestamp,label\n")
    evaluate_bad(capsys, files / "scores.csv", "--labels", files / "empty.csv", names=("empty.csv", "no data rows"))
    (files / "anomalies.csv").write_text("begin,finish\n")
    evaluate_bad(capsys, files / "scores.csv", "--labels", files / "labels.csv", names=("anomalies.csv", "no data rows"))


def test_anomalies_beside_that_disagree_with_the_labels_are_said(files, capsys):
    """Another run's anomalies.csv beside the labels: its events (on rows labelled normal) were counted for the
    event figures beside the label column's point figures, without a word."""
    pd.DataFrame({"start": [5], "end": [6], "root_causes": ["a;b;c"]}).to_csv(files / "anomalies.csv", index=False)
    r, err = evaluate_json(capsys, files / "scores.csv", "--labels", files / "labels.csv")
    notes = [line for line in err.splitlines() if line]
    assert len(notes) == 1 and notes[0].startswith("note: "), err
    assert "anomalies.csv: row 1: interval 5..6" in notes[0] and "disagree" in notes[0]
    # matching files say nothing
    pd.DataFrame({"start": [2, 7], "end": [4, 8]}).to_csv(files / "anomalies.csv", index=False)
    r, err = evaluate_json(capsys, files / "scores.csv", "--labels", files / "labels.csv")
    assert err == "" and r["events_total"] == 2


def test_anomalies_option_beside_an_anomalies_table_is_refused(files, capsys):
    """--labels already an anomalies table: --anomalies was ignored, even naming a missing file."""
    for other in (files / "nope.csv", files / "labels.csv"):
        evaluate_bad(capsys, files / "scores.csv", "--labels", files / "events.csv", "--anomalies", other,
             names=(other.name, "itself an anomalies table"))
    r, _ = evaluate_json(capsys, files / "scores.csv", "--labels", files / "events.csv", "--anomalies", files / "events.csv")
    assert r["events_total"] == 2


# ---------------------------------------------------------------------------------------- SCORES timestamps
def test_scores_missing_timestamp_names_the_scores_file(files, capsys):
    """An empty timestamp cell: blamed on the labels file ("timestamp 3 differs from ... nan"), and against an
    anomalies table the event over that row silently lost it (2 anomalous rows instead of 3)."""
    scores = pd.read_csv(files / "scores.csv", keep_default_na=False)
    scores["timestamp"] = scores["timestamp"].astype(object)
    scores.loc[3, "timestamp"] = ""
    scores.to_csv(files / "gap.csv", index=False)
    for labels in ("labels.csv", "events.csv"):
        evaluate_bad(capsys, files / "gap.csv", "--labels", files / labels,
             names=("gap.csv", "column 'timestamp' row 4", "missing timestamp"))


def test_scores_timestamps_events_cannot_be_placed_on(files, capsys):
    """A repeated timestamp took both rows into an event; a "NaN" text timestamp was searched over."""
    scores = pd.read_csv(files / "scores.csv", keep_default_na=False)
    scores.loc[4, "timestamp"] = 3
    scores.to_csv(files / "repeat.csv", index=False)
    evaluate_bad(capsys, files / "repeat.csv", "--labels", files / "events.csv", names=("not increasing", "row 5"))
    scores = pd.read_csv(files / "scores.csv", keep_default_na=False)
    scores["timestamp"] = scores["timestamp"].astype(object)
    scores.loc[3, "timestamp"] = "NaN"
    scores.to_csv(files / "nan.csv", index=False)
    evaluate_bad(capsys, files / "nan.csv", "--labels", files / "events.csv", names=("row 4", "'NaN'", "not a finite number"))


# ------------------------------------------------------------------------------------------------- options
def test_huge_vus_window_is_refused_at_once(files, capsys):
    """--vus-window 10000000 on 10 rows ran 2 x 10^7 buffers (hours; 10^5 took 17 s); the default 100 on short
    data still runs."""
    start = time.perf_counter()
    evaluate_bad(capsys, files / "scores.csv", "--labels", files / "labels.csv", "--vus-window", 10 ** 5,
         names=("--vus-window 100000", "10 rows"))
    assert time.perf_counter() - start < 5
    r, _ = evaluate_json(capsys, files / "scores.csv", "--labels", files / "labels.csv", "--vus-window", 100)
    assert r["vus_sliding_window"] == 100


@pytest.mark.parametrize("argv, flag", [
    (["--val-scores", "{d}/nope.csv"], "--val-scores"),
    (["--beta", "2"], "--beta"),
    (["--threshold", "pot", "--val-scores", "{d}/val.csv", "--beta", "2"], "--beta"),
    (["--threshold", "beta_max", "--val-scores", "{d}/val.csv", "--percentile", "50"], "--percentile"),
    (["--threshold", "percentile", "--val-scores", "{d}/val.csv", "--pot-risk", "0.01"], "--pot-risk"),
    (["--pot-level", "0.5"], "--pot-level"),
])
def test_options_the_threshold_does_not_read_are_refused(files, capsys, argv, flag):
    """They did nothing: --val-scores beside the default --threshold detector looked like a refit (a missing file
    passed too), --beta under --threshold pot left the threshold as it was."""
    pd.DataFrame({"timestamp": range(20), "score": np.linspace(0, 1, 20), "is_anomaly": 0}).to_csv(
        files / "val.csv", index=False)
    argv = [a.format(d=files) for a in argv]
    evaluate_bad(capsys, files / "scores.csv", "--labels", files / "labels.csv", *argv, names=(flag, "--threshold"))


def test_options_of_the_threshold_in_use_still_apply(files, capsys):
    pd.DataFrame({"timestamp": range(20), "score": np.linspace(0, 0.4, 20), "is_anomaly": 0}).to_csv(
        files / "val.csv", index=False)
    r, _ = evaluate_json(capsys, files / "scores.csv", "--labels", files / "labels.csv", "--threshold", "beta_max",
                 "--val-scores", files / "val.csv", "--beta", 2)
    assert r["threshold"] == pytest.approx(0.8)
    r, _ = evaluate_json(capsys, files / "scores.csv", "--labels", files / "labels.csv", "--threshold", "spot",
                 "--val-scores", files / "val.csv", "--pot-risk", 0.01, "--pot-level", 0.5)
    assert r["threshold_method"] == "spot"


@pytest.mark.parametrize("rule, val, extra", [
    ("beta_max", [10.0, 5.0], ["--beta", "1e308"]),
    ("percentile", [1e308, -1e308], []),
])
def test_a_threshold_that_overflows_is_refused(files, capsys, rule, val, extra):
    """beta x max past float64 (inf) and a percentile of +-1e308 (-inf) were printed as Infinity: --json was no
    longer JSON, with numpy's overflow warnings on stderr."""
    pd.DataFrame({"timestamp": range(2), "score": val, "is_anomaly": 0}).to_csv(files / "val.csv", index=False)
    evaluate_bad(capsys, files / "scores.csv", "--labels", files / "labels.csv", "--threshold", rule, "--val-scores",
         files / "val.csv", *extra, "--json", names=("val.csv", f"--threshold {rule}", "not a finite number"))


@pytest.mark.parametrize("option", ["SCORES.csv", "--labels", "--anomalies", "--val-scores", "--data", "--report",
                                    "--model"])
def test_empty_paths_are_refused(files, capsys, option):
    """"" read as "." (an unset shell variable): the messages then named "." (".: is a directory")."""
    scores, labels = str(files / "scores.csv"), ["--labels", str(files / "labels.csv")]
    if option == "SCORES.csv":
        argv = ["", *labels]
    elif option == "--labels":
        argv = [scores, "--labels", ""]
    else:
        argv = [scores, *labels, option, ""]
        if option == "--val-scores":
            argv += ["--threshold", "beta_max"]
    evaluate_bad(capsys, *argv, names=(option, "empty path"))


# ------------------------------------------------------------------------------------------------- alignment
def test_parquet_datetimes_align_with_the_scores_text(tmp_path, capsys):
    """`detect model test.parquet --out s.csv` writes the datetime column as text ('2024-01-02 00:00:00'); `evaluate
    s.csv --labels test.parquet` compared it as text with the Parquet datetimes and refused detect's own output
    ("timestamp datetime.datetime(2024, 1, 2, 0, 0) differs"), and the other way round for --out s.parquet."""
    pytest.importorskip("pyarrow", reason="Parquet needs pyarrow (extra 'parquet')")
    times = pd.date_range("2024-01-02", periods=T, freq="min")
    scores = pd.DataFrame({"timestamp": times.strftime("%Y-%m-%d %H:%M:%S"), "score": SCORE, "is_anomaly": FLAGS})
    scores.to_csv(tmp_path / "scores.csv", index=False)
    scores.assign(timestamp=times).to_parquet(tmp_path / "scores.parquet", index=False)
    labels = pd.DataFrame({"timestamp": times, "s0": np.arange(T) * 0.1, "label": LABELS})
    labels.to_parquet(tmp_path / "test.parquet", index=False)
    labels.assign(timestamp=scores["timestamp"]).to_csv(tmp_path / "test.csv", index=False)
    for s, l in (("scores.csv", "test.parquet"), ("scores.parquet", "test.csv"), ("scores.csv", "test.csv")):
        r, _ = evaluate_json(capsys, tmp_path / s, "--labels", tmp_path / l)
        assert r["f1"] == pytest.approx(2 / 3), (s, l)
    labels.assign(timestamp=times + pd.Timedelta("1s")).to_parquet(tmp_path / "shifted.parquet", index=False)
    evaluate_bad(capsys, tmp_path / "scores.csv", "--labels", tmp_path / "shifted.parquet", names=("shifted.parquet",
                                                                                            "row 1", "differs"))
    pd.DataFrame({"timestamp": [f"run-{i}" for i in range(T)], "score": SCORE, "is_anomaly": FLAGS}).to_csv(
        tmp_path / "ids.csv", index=False)   # ids that are no dates still compare as text
    pd.DataFrame({"timestamp": [f"run-{i}" for i in range(T)], "label": LABELS}).to_csv(tmp_path / "ids_l.csv",
                                                                                         index=False)
    r, _ = evaluate_json(capsys, tmp_path / "ids.csv", "--labels", tmp_path / "ids_l.csv")
    assert r["f1"] == pytest.approx(2 / 3)
