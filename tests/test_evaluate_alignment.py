"""`mscred evaluate`: the files beside SCORES.csv hold its rows, on its scale, or are refused; and the anomalies table
beside --labels can be left out. Each case once gave figures or a report from misaligned files without a word, or
refused a file it should read (date-time start/end), or one the user never passed (an unrelated anomalies.csv)."""

import numpy as np
import pandas as pd
import pytest

from cli_helpers import evaluate_bad, evaluate_json, run_cli

T = 10
LABELS = np.array([0, 0, 1, 1, 0, 0, 0, 1, 0, 0])           # events: rows 2-3 and row 7
SCORE = np.array([0.1, 0.2, 0.9, 0.4, 0.3, 0.5, 0.1, 0.8, 0.2, 0.0])
FLAGS = (SCORE >= 0.5).astype(int)                           # rows 2, 5, 7: P = R = F1 = 2/3
TIMES = pd.date_range("2024-01-01 10:00:00", periods=T, freq="min")
STAMPS = list(TIMES.strftime("%Y-%m-%d %H:%M:%S"))           # as detect writes a datetime column


def _scores(path, stamps):
    pd.DataFrame({"timestamp": stamps, "score": SCORE, "is_anomaly": FLAGS,
                  "root_causes": ["a;b;c" if f else "" for f in FLAGS]}).to_csv(path, index=False)


def _data(path, stamps, label=True):
    frame = pd.DataFrame({"timestamp": stamps, "a": np.arange(T) * 0.1, "b": 1.0, "c": np.sin(np.arange(T)),
                          "d": np.cos(np.arange(T))})
    if label:
        frame["label"] = LABELS
    frame.to_csv(path, index=False)


@pytest.fixture
def numbered(tmp_path):
    """Timestamps 100..109: scores.csv, labels.csv (label column only), data.csv (sensors, no label)."""
    folder = tmp_path / "numbered"
    folder.mkdir()
    _scores(folder / "scores.csv", np.arange(100, 100 + T))
    pd.DataFrame({"timestamp": np.arange(100, 100 + T), "label": LABELS}).to_csv(folder / "labels.csv", index=False)
    _data(folder / "data.csv", np.arange(100, 100 + T), label=False)
    return folder


@pytest.fixture
def dated(tmp_path):
    """Date-time timestamps, one a minute from 2024-01-01 10:00: scores.csv and labels.csv."""
    folder = tmp_path / "dated"
    folder.mkdir()
    _scores(folder / "scores.csv", STAMPS)
    pd.DataFrame({"timestamp": STAMPS, "label": LABELS}).to_csv(folder / "labels.csv", index=False)
    return folder


# --------------------------------------------------------------------------------------------- --data alignment
def test_data_shifted_by_100_is_refused_naming_row_and_both_timestamps(numbered, capsys):
    """--data with the right row count but timestamps 200..209 against the scores' 100..109: the report drew it
    under the scores without a word. Refused before anything is written."""
    _data(numbered / "shifted.csv", np.arange(200, 200 + T), label=False)
    evaluate_bad(capsys, numbered / "scores.csv", "--labels", numbered / "labels.csv", "--data", numbered / "shifted.csv",
         "--report", numbered / "report", names=("shifted.csv", "row 1", "timestamp 200", "scores.csv's 100"))
    assert not (numbered / "report").exists()


def test_data_with_another_row_count_is_refused(numbered, capsys):
    pd.read_csv(numbered / "data.csv").iloc[:-1].to_csv(numbered / "short.csv", index=False)
    evaluate_bad(capsys, numbered / "scores.csv", "--labels", numbered / "labels.csv", "--data", numbered / "short.csv",
         "--report", numbered / "report", names=("short.csv", "9 rows", "scores.csv has 10"))
    assert not (numbered / "report").exists()


def test_misaligned_data_is_refused_without_a_report_too(numbered, capsys):
    """Without --report the data still chose the random baseline's sensors: a wrong file is bad input either way."""
    _data(numbered / "shifted.csv", np.arange(200, 200 + T), label=False)
    evaluate_bad(capsys, numbered / "scores.csv", "--labels", numbered / "labels.csv", "--data", numbered / "shifted.csv",
         names=("shifted.csv", "row 1", "differs"))


def test_misaligned_data_beside_a_model_is_refused(numbered, capsys):
    """--model with --data: the residuals of the worst windows were computed on the wrong rows."""
    pytest.importorskip("matplotlib", reason="the report needs matplotlib (extra 'report')")
    from cli_helpers import sensor_frame
    from mscred.detector import MSCRED

    train = sensor_frame(200, 4, names=["a", "b", "c", "d"]).drop(columns=["timestamp"])
    MSCRED(epochs=1, channels=(4, 8, 8, 8), device="cpu", progress=False).fit(train).save(numbered / "model")
    frame = pd.read_csv(numbered / "data.csv")
    frame.loc[5:, "timestamp"] += 100            # the last five rows from another stretch of time
    frame.to_csv(numbered / "spliced.csv", index=False)
    evaluate_bad(capsys, numbered / "scores.csv", "--labels", numbered / "labels.csv", "--model", numbered / "model",
         "--data", numbered / "spliced.csv", "--report", numbered / "report",
         names=("spliced.csv", "row 6", "timestamp 205", "scores.csv's 105"))
    assert not (numbered / "report").exists()


def test_aligned_data_is_compared_as_the_labels_are(dated, capsys):
    """Date-times as instants (naive text against the same times with a UTC offset), as for --labels; one second
    off is refused."""
    pytest.importorskip("matplotlib", reason="the report needs matplotlib (extra 'report')")
    _data(dated / "zoned.csv", list(TIMES.strftime("%Y-%m-%dT%H:%M:%S+00:00")))
    r, _ = evaluate_json(capsys, dated / "scores.csv", "--labels", dated / "labels.csv", "--data", dated / "zoned.csv",
                 "--report", dated / "report")
    assert r["f1"] == pytest.approx(2 / 3) and (dated / "report" / "index.html").exists()
    _data(dated / "late.csv", list((TIMES + pd.Timedelta("1s")).strftime("%Y-%m-%d %H:%M:%S")))
    evaluate_bad(capsys, dated / "scores.csv", "--labels", dated / "labels.csv", "--data", dated / "late.csv",
         "--report", dated / "report2", names=("late.csv", "row 1", "'2024-01-01 10:00:01'", "'2024-01-01 10:00:00'"))


def test_datetime_columns_in_other_units_are_the_same_instants(dated, capsys):
    """Parquet datetimes in ns against the same times in us: numpy read both as counts in their own units, and
    equal times "differed"."""
    pytest.importorskip("pyarrow", reason="Parquet needs pyarrow (extra 'parquet')")
    scores = pd.read_csv(dated / "scores.csv")
    scores.assign(timestamp=TIMES.as_unit("us")).to_parquet(dated / "scores.parquet", index=False)
    frame = pd.DataFrame({"timestamp": TIMES.as_unit("ns"), "a": np.arange(T) * 0.1, "b": 1.0, "c": 2.0, "d": 3.0,
                          "label": LABELS})
    frame.to_parquet(dated / "data.parquet", index=False)
    r, _ = evaluate_json(capsys, dated / "scores.parquet", "--labels", dated / "labels.csv", "--data", dated / "data.parquet")
    assert r["f1"] == pytest.approx(2 / 3)
    r, _ = evaluate_json(capsys, dated / "scores.parquet", "--labels", dated / "data.parquet")
    assert r["f1"] == pytest.approx(2 / 3)


def test_evaluate_files_checks_the_data_too(numbered):
    from mscred.errors import InputError
    from mscred.evaluation import evaluate_files

    _data(numbered / "shifted.csv", np.arange(200, 200 + T), label=False)
    with pytest.raises(InputError, match="shifted.csv: row 1: timestamp 200 differs"):
        evaluate_files(numbered / "scores.csv", numbered / "labels.csv", data_path=numbered / "shifted.csv",
                       report_dir=numbered / "report")
    assert not (numbered / "report").exists()


# ------------------------------------------------------------------------------------ date-time start and end
def test_date_time_events_are_placed_by_instant(dated, capsys):
    """'2024-01-01 10:02:00' as start was "not a finite number" beside date-time SCORES timestamps; end is
    exclusive as with numbers, and the figures equal the label column's."""
    pd.DataFrame({"start": [STAMPS[2], STAMPS[7]], "end": [STAMPS[4], STAMPS[8]],
                  "root_causes": ["a;b;d", "x;y;z"]}).to_csv(dated / "events.csv", index=False)
    by_labels, _ = evaluate_json(capsys, dated / "scores.csv", "--labels", dated / "labels.csv", "--anomalies", "none")
    r, _ = evaluate_json(capsys, dated / "scores.csv", "--labels", dated / "events.csv")
    assert (r["n_anomalous_rows"], r["events_total"], r["events_found"]) == (3, 2, 2)
    for key in ("precision", "recall", "f1", "auc_roc", "auc_pr", "pa_f1"):
        assert r[key] == pytest.approx(by_labels[key]), key
    assert r["root_cause_recall_at_3"] == pytest.approx(1 / 3)   # 2 of {a, b, d}; event 2 none of {x, y, z}


def test_date_time_events_with_offsets_and_partly_outside(dated, capsys):
    """Time zones as the alignment of labels reads them (naive = UTC): 11:02+01:00 is 10:02 UTC. An event reaching
    before the first scored time is cut to it and counted, one wholly after the last is left out and counted."""
    pd.DataFrame({"start": ["2024-01-01 11:02:00+01:00", "2024-01-01 10:55:00+01:00", "2024-01-02 00:00:00+01:00"],
                  "end": ["2024-01-01 11:04:00+01:00", "2024-01-01 11:01:00+01:00", "2024-01-02 01:00:00+01:00"]}
                 ).to_csv(dated / "zoned.csv", index=False)
    r, _ = evaluate_json(capsys, dated / "scores.csv", "--labels", dated / "zoned.csv")
    # rows 2-3 (10:02, 10:03) and rows 0 (10:00) of the event from 09:55 UTC: 3 anomalous rows
    assert (r["n_anomalous_rows"], r["events_total"], r["events_clipped"], r["events_outside"]) == (3, 2, 1, 1)


def test_date_time_events_beside_labels_give_root_causes(dated, capsys):
    pd.DataFrame({"start": [STAMPS[2], STAMPS[7]], "end": [STAMPS[4], STAMPS[8]],
                  "root_causes": ["a;b;d", "x;y;z"]}).to_csv(dated / "anomalies.csv", index=False)
    r, err = evaluate_json(capsys, dated / "scores.csv", "--labels", dated / "labels.csv")
    assert err == "" and r["events_total"] == 2 and r["root_cause_recall_at_3"] == pytest.approx(1 / 3)


def test_header_only_anomalies_beside_date_time_labels_means_no_events(dated, capsys):
    """A dataset without anomalies writes a header-only anomalies.csv: beside date-time labels it was refused
    ("start/end need numeric timestamps"), though it has no start/end to place."""
    (dated / "anomalies.csv").write_text("start,end,root_causes,duration\n")
    r, _ = evaluate_json(capsys, dated / "scores.csv", "--labels", dated / "labels.csv")
    assert (r["events_total"], r["n_anomalous_rows"]) == (2, 3)     # the label column's events


def test_parquet_datetime_events_and_scores(dated, capsys):
    """A datetime column (Parquet) is date-times, not numbers: to_numeric and numpy read it as epoch counts."""
    pytest.importorskip("pyarrow", reason="Parquet needs pyarrow (extra 'parquet')")
    pd.DataFrame({"start": TIMES[[2, 7]], "end": TIMES[[4, 8]]}).to_parquet(dated / "events.parquet", index=False)
    scores = pd.read_csv(dated / "scores.csv")
    scores.assign(timestamp=TIMES).to_parquet(dated / "scores.parquet", index=False)
    for s in ("scores.csv", "scores.parquet"):
        r, _ = evaluate_json(capsys, dated / s, "--labels", dated / "events.parquet")
        assert (r["n_anomalous_rows"], r["events_total"]) == (3, 2), s
    pd.DataFrame({"start": [2, 7], "end": [4, 8]}).to_csv(dated / "numbers.csv", index=False)
    evaluate_bad(capsys, dated / "scores.parquet", "--labels", dated / "numbers.csv",
         names=("numbers.csv", "start/end are numbers", "timestamps are date-times"))


def test_dates_against_numbers_is_one_line_saying_so(numbered, dated, capsys):
    """A mix of scales: dates in one file, numbers in the other, either way round."""
    pd.DataFrame({"start": [STAMPS[2]], "end": [STAMPS[4]]}).to_csv(numbered / "dates.csv", index=False)
    evaluate_bad(capsys, numbered / "scores.csv", "--labels", numbered / "dates.csv",
         names=("dates.csv", "start/end are date-times ('2024-01-01 10:02:00' ..)",
                "the SCORES file's timestamps are numbers (100 ..)"))
    pd.DataFrame({"start": [102], "end": [104]}).to_csv(dated / "numbers.csv", index=False)
    evaluate_bad(capsys, dated / "scores.csv", "--labels", dated / "numbers.csv",
         names=("numbers.csv", "start/end are numbers (102 ..)",
                "timestamps are date-times ('2024-01-01 10:00:00' ..)"))
    pd.DataFrame({"start": [102], "end": [STAMPS[4]]}).to_csv(dated / "half.csv", index=False)
    evaluate_bad(capsys, dated / "scores.csv", "--labels", dated / "half.csv",
         names=("half.csv", "column 'start' holds numbers and column 'end' date-times"))


def test_bad_date_time_cells_are_named(dated, capsys):
    pd.DataFrame({"start": [STAMPS[2], "2024-13-45 10:00:00"], "end": [STAMPS[4], STAMPS[8]]}).to_csv(
        dated / "month13.csv", index=False)
    evaluate_bad(capsys, dated / "scores.csv", "--labels", dated / "month13.csv",
         names=("month13.csv", "column 'start' row 2", "'2024-13-45 10:00:00'", "not a date-time like row 1's"))
    pd.DataFrame({"start": [STAMPS[2], STAMPS[7]], "end": [STAMPS[1], STAMPS[8]]}).to_csv(dated / "back.csv",
                                                                                         index=False)
    evaluate_bad(capsys, dated / "scores.csv", "--labels", dated / "back.csv",
         names=("back.csv", "row 1: end 2024-01-01 10:01:00+00:00 is not after start 2024-01-01 10:02:00+00:00"))
    pd.DataFrame({"start": ["soon"], "end": [STAMPS[4]]}).to_csv(dated / "word.csv", index=False)
    evaluate_bad(capsys, dated / "scores.csv", "--labels", dated / "word.csv",
         names=("word.csv", "column 'start' row 1", "'soon'", "neither a finite number nor a date-time"))


def test_a_datasets_anomalies_table_is_still_checked_as_numbers():
    """`mscred.data.datasets` checks its anomalies.csv at load with refuse_outside and then converts start/end to
    numbers: without dates_ok they stay refused as before (not a conversion error after the check)."""
    from mscred.errors import InputError
    from mscred.evaluation import events_from_anomalies

    events = pd.DataFrame({"start": [STAMPS[2]], "end": [STAMPS[4]]})
    with pytest.raises(InputError, match="column 'start' row 1: value '2024-01-01 10:02:00' is not a finite"):
        events_from_anomalies(events, np.asarray(STAMPS, dtype=object), "anomalies.csv",
                               timestamps="the test part's", refuse_outside=True)
    rows, _, _, _ = events_from_anomalies(pd.DataFrame({"start": [102], "end": [104]}), np.arange(100, 110),
                                           "anomalies.csv", timestamps="the test part's", refuse_outside=True)
    assert rows.tolist() == [[2, 4]]


# ------------------------------------------------------------------------------------------- --anomalies none
def test_anomalies_none_leaves_out_an_unrelated_table_beside_the_labels(numbered, capsys):
    """An anomalies.csv of another dataset in the labels' folder (other time scale) made evaluate exit 2 about a
    file never passed, with no way to leave it out."""
    pd.DataFrame({"start": [5000], "end": [5010], "root_causes": ["q"]}).to_csv(numbered / "anomalies.csv",
                                                                                 index=False)
    evaluate_bad(capsys, numbered / "scores.csv", "--labels", numbered / "labels.csv", names=("anomalies.csv", "overlaps"))
    r, err = evaluate_json(capsys, numbered / "scores.csv", "--labels", numbered / "labels.csv", "--anomalies", "none")
    assert err == "" and (r["events_total"], r["events_found"], r["f1"]) == (2, 2, pytest.approx(2 / 3))
    assert "root_cause_recall_at_3" not in r and "root_cause_recall_at_3" not in r["random_baseline"]


def test_anomalies_none_in_evaluate_files(numbered):
    from mscred.evaluation import NO_ANOMALIES, evaluate_files

    (numbered / "anomalies.csv").write_text("begin,finish\n1,2\n")     # not even an anomalies table
    result = evaluate_files(numbered / "scores.csv", numbered / "labels.csv", anomalies=NO_ANOMALIES)
    assert result["events_total"] == 2 and "root_cause_recall_at_3" not in result


def test_anomalies_none_with_an_anomalies_table_as_labels_is_refused(numbered, capsys):
    """--labels an anomalies table: 'none' leaves no label column to take the events from."""
    pd.DataFrame({"start": [102], "end": [104]}).to_csv(numbered / "events.csv", index=False)
    evaluate_bad(capsys, numbered / "scores.csv", "--labels", numbered / "events.csv", "--anomalies", "none",
         names=("events.csv", "itself an anomalies table", "--anomalies none"))


def test_anomalies_help_names_none(capsys):
    code, out, _ = run_cli(capsys, "evaluate", "--help")
    assert code == 0 and "'none'" in " ".join(out.split())
