"""Scoring a series after the rows before it: ``MSCRED.detect(X, context=...)`` and ``mscred detect --context``
(``mscred.data.context``)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cli_helpers import ON_THE_CPU, bad_input, run_cli, sensor_frame, tiny_model
from mscred.data.context import continued, seam_note
from mscred.data.io import table_from_frame
from mscred.detect import timestamp_windows
from mscred.detector import MSCRED
from mscred.errors import InputError

N_SENSORS = 5


@pytest.fixture(scope="module")
def series() -> pd.DataFrame:
    """1,500 rows: the model trains on the first 600, the rest is scored in parts."""
    return sensor_frame(1500, N_SENSORS, seed=3)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, series):
    return tiny_model(tmp_path_factory.mktemp("context") / "model", series.iloc[:600])


@pytest.fixture(scope="module")
def model(model_dir) -> MSCRED:
    return MSCRED.load(model_dir, device="cpu")


@pytest.mark.parametrize("settings", [{}, {"windows": (7, 13), "gap": 4, "steps": 3, "scales": (7,)},
                                      {"windows": (5,), "steps": 1, "scales": (5,)},
                                      {"windows": (6, 9), "gap": 4, "steps": 2, "scales": (6,)}])
def test_context_rows_score_the_most_rows_of_x(settings):
    """For every length of X and of the context: never more rows than given; the fewest rows that leave the most
    rows of X in a window (against every choice, counted from ``timestamp_windows``); with enough, every row."""
    model = MSCRED(**settings)
    sig = model.resolved_config().signature
    for length in range(1, 3 * sig.gap + 2):
        scored_after = [(timestamp_windows(k + length, sig.windows, sig.gap, sig.steps)[k:] >= 0).sum()
                        for k in range(model.min_rows + 2 * sig.gap)]
        for available in range(len(scored_after)):
            rows = model.context_rows(available, length)
            best = max(scored_after[:available + 1])
            assert rows == scored_after.index(best), (length, available, rows)
            if available >= model.min_rows + sig.gap:
                assert best == length, (length, available)


@pytest.mark.parametrize("cut,end", [(300, 1500), (305, 1500), (331, 1200), (1440, 1500), (1495, 1500),
                                     (150, 260), (40, 700)])
def test_scores_equal_the_series_scored_from_the_context_rows_on(model, series, cut, end):
    """X = series[cut:end] after series[:cut]: the scores are those of the series from the context rows used on
    (a plain detect of it), restricted to X's rows; every row of X scored when the context has enough rows."""
    before, x = series.iloc[600:cut] if cut > 600 else series.iloc[:cut], series.iloc[cut:end]
    got = model.detect(x, context=before)
    assert len(got) == len(x)
    np.testing.assert_array_equal(got["timestamp"], x["timestamp"])
    rows = model.context_rows(len(before), len(x))
    whole = model.detect(pd.concat([before.iloc[len(before) - rows:], x]))
    pd.testing.assert_frame_equal(got.reset_index(drop=True), whole.iloc[rows:].reset_index(drop=True))
    covered = model.window_of_row(rows + len(x))[rows:] >= 0
    if len(before) >= 100:   # 90 rows of context suffice at the defaults, 99 whatever X's length
        assert covered.all()
    np.testing.assert_array_equal(model.decision_function(x, context=before), got["score"])
    np.testing.assert_array_equal(model.predict(x, context=before), got["is_anomaly"])


def test_short_parts_of_a_feed_scored_one_after_another_score_every_row(model, series):
    """A feed scored 37 rows at a time (the last part 30), each after the rows before it: every row in a window,
    each part as a plain detect of it with its context rows."""
    starts = range(300, 600, 37)
    parts = [model.detect(series.iloc[start:min(start + 37, 600)], context=series.iloc[:start]) for start in starts]
    scores = pd.concat(parts)
    assert len(scores) == 300
    np.testing.assert_array_equal(scores["timestamp"], series["timestamp"].iloc[300:600])
    for start, part in zip(starts, parts):
        rows = model.context_rows(start, len(part))
        assert (model.window_of_row(rows + len(part))[rows:] >= 0).all()
        whole = model.detect(series.iloc[start - rows:start + len(part)])
        np.testing.assert_array_equal(part["score"], whole["score"].iloc[rows:])


def test_context_with_other_column_order_and_arrays(model, series):
    before, x = series.iloc[:400], series.iloc[400:700]
    expect = model.detect(x, context=before)
    shuffled = before[["timestamp"] + [f"s{i}" for i in reversed(range(N_SENSORS))]]
    pd.testing.assert_frame_equal(model.detect(x, context=shuffled), expect)
    plain = model.decision_function(x.drop(columns="timestamp").to_numpy(),
                                    context=before.drop(columns="timestamp").to_numpy())
    np.testing.assert_array_equal(plain, expect["score"])


@pytest.mark.parametrize("policy", ["interpolate", "hold"])
def test_gaps_at_the_seam_are_filled_across_it(series, policy):
    """A sensor missing over the context's last rows and X's first: filled between the last value before the seam
    and the first after (or held at the last before, ``hold``), as the one table of both rows fills it; other gaps
    as each table filled them."""
    raw = series.iloc[:300].copy()
    raw.iloc[180:215, 2] = np.nan        # across the seam at row 200
    raw.iloc[195:200, 4] = np.nan        # ends the context only
    raw.iloc[200:203, 1] = np.nan        # starts X only
    raw.iloc[100:110, 3] = np.nan        # inside the context, before the rows used
    raw.iloc[250:260, 5] = np.nan        # inside X
    context = table_from_frame(raw.iloc[:200], source="ctx", missing=policy)
    table = table_from_frame(raw.iloc[200:], source="x", missing=policy)
    whole = table_from_frame(raw, source="whole", missing=policy)
    for rows in (0, 5, 30, 150, 200):
        np.testing.assert_allclose(continued(context, table, rows), whole.values[200 - rows:], rtol=0, atol=1e-12)
    # Alone each table held the end value flat: a different series, so the test above can fail
    assert not np.allclose(np.concatenate([context.values, table.values]), whole.values)


def test_seam_checks_and_note():
    frame = sensor_frame(120, 3)
    ctx = table_from_frame(frame.iloc[:60], source="ctx")
    assert seam_note(ctx, table_from_frame(frame.iloc[60:], source="x")) is None
    later = frame.iloc[60:].assign(timestamp=frame["timestamp"].iloc[60:] + 500)
    note = seam_note(ctx, table_from_frame(later, source="x"))
    assert "x: the time jumps by 501 from the last row of its context ctx" in note and "usual step is 1" in note
    with pytest.raises(InputError, match=r"x: its first timestamp 30 does not follow the last of its context ctx "
                                         r"\(59\)"):
        seam_note(ctx, table_from_frame(frame.iloc[30:90], source="x"))
    with pytest.raises(InputError, match="x: no 'timestamp' column, while ctx has one"):
        seam_note(ctx, table_from_frame(frame.iloc[60:].drop(columns="timestamp"), source="x"))
    dates = frame.assign(timestamp=pd.date_range("2024-01-01", periods=120, freq="min").strftime("%Y-%m-%d %H:%M"))
    with pytest.raises(InputError, match="does not follow"):   # date text after numbers: no order between them
        seam_note(ctx, table_from_frame(dates.iloc[60:], source="x"))
    ids = frame.assign(timestamp=[f"run-{i}" for i in range(120)])
    assert seam_note(table_from_frame(ids.iloc[:60], source="ctx"), table_from_frame(ids.iloc[60:], source="x")) \
        is None   # ids in order: nothing to judge a step by


def test_bad_context_in_python(model, series):
    x = series.iloc[700:800]
    with pytest.raises(InputError, match="context: other sensors than the model was trained on"):
        model.detect(x, context=series.iloc[:300].rename(columns={"s1": "t1"}))
    with pytest.raises(InputError, match="context: an array of 3 column"):
        model.detect(x, context=np.zeros((300, 3)))
    with pytest.raises(InputError, match="input: 10 rows after 20 of its context context are too few to score; "
                                         "need at least 100 together"):
        model.detect(series.iloc[20:30], context=series.iloc[:20])
    with pytest.raises(InputError, match="does not follow the last of its context"):
        model.detect(series.iloc[100:200], context=series.iloc[:300])


def test_cli_context_scores_every_row(model_dir, tmp_path, capsys, series):
    data, before = tmp_path / "part2.csv", tmp_path / "part1.csv"
    series.iloc[600:900].to_csv(before, index=False)
    series.iloc[900:1200].to_csv(data, index=False)
    code, out, err = run_cli(capsys, "detect", model_dir, data, "--context", before, "--out", tmp_path / "s.csv",
                             *ON_THE_CPU)
    assert code == 0, err
    assert out.startswith("scored 300 of 300 rows after 90 rows of context:"), out
    scores = pd.read_csv(tmp_path / "s.csv")
    expect = MSCRED.load(model_dir, device="cpu").detect(series.iloc[900:1200], context=series.iloc[600:900])
    np.testing.assert_allclose(scores["score"], expect["score"], rtol=1e-12)
    np.testing.assert_array_equal(scores["timestamp"], series["timestamp"].iloc[900:1200])
    code, out, err = run_cli(capsys, "detect", model_dir, data, "--out", tmp_path / "alone.csv")
    assert code == 0 and "scored 210 of 300 rows (90 before the first full window" in out, out


def test_cli_context_notes_a_time_jump(model_dir, tmp_path, capsys, series):
    data, before = tmp_path / "later.csv", tmp_path / "before.csv"
    series.iloc[600:900].to_csv(before, index=False)
    series.iloc[900:1200].assign(timestamp=series["timestamp"].iloc[900:1200] + 10_000).to_csv(data, index=False)
    code, out, err = run_cli(capsys, "detect", model_dir, data, "--context", before, "--out", tmp_path / "s.csv")
    assert code == 0, err
    assert f"note: {data}: the time jumps by 10001 from the last row of its context {before}" in err


def test_cli_bad_context(model_dir, tmp_path, capsys, series):
    data, before, out = tmp_path / "x.csv", tmp_path / "ctx.csv", tmp_path / "s.csv"
    series.iloc[900:1000].to_csv(data, index=False)
    series.iloc[950:1100].to_csv(before, index=False)
    bad_input(capsys, "detect", model_dir, data, "--context", before, "--out", out,
              names=[f"{data}: its first timestamp 900 does not follow the last of its context {before} (1099)"])
    bad_input(capsys, "detect", model_dir, data, "--context", data, "--out", out, names=["--context is DATA itself"])
    bad_input(capsys, "detect", model_dir, data, "--context", tmp_path / "none.csv", "--out", out,
              names=["none.csv", "not found"])
    bad_input(capsys, "detect", model_dir, data, "--context", before, "--out", before,
              names=["is also an input of this command"])
    series.iloc[:300].drop(columns="s2").to_csv(before, index=False)
    bad_input(capsys, "detect", model_dir, data, "--context", before, "--out", out,
              names=[f"{before}: other sensors than the model was trained on"])
    assert not out.exists()


@pytest.mark.parametrize("timed", [True, False])
def test_a_folder_of_files_of_any_length_scores_as_the_files_concatenated(model_dir, tmp_path, capsys, series, timed):
    """Files whose lengths are not multiples of the gap (one of 6 rows), a gap of a sensor across two seams filled as
    in one table: the folder's SCORES.csv is that of `detect` of the files written as one file, to the bit -- with
    --context too. (Scored file by file, each file's windows ended at its own last row: shifted from the whole
    table's, and the last rows of the first file scored 0.)"""
    whole = (series if timed else series.drop(columns="timestamp")).iloc[600:1200].reset_index(drop=True)
    whole.iloc[130:400, 2] = np.nan   # (across the seams at 137 and 143, to within the third file)
    feed = tmp_path / "feed"
    feed.mkdir()
    cuts = [0, 137, 143, 391, 600]
    for k, (start, stop) in enumerate(zip(cuts, cuts[1:])):
        whole.iloc[start:stop].to_csv(feed / f"part-{k}.csv", index=False)
    whole.to_csv(tmp_path / "all.csv", index=False)
    (series if timed else series.drop(columns="timestamp")).iloc[400:600].to_csv(tmp_path / "before.csv",
                                                                                 index=False)
    for context in ([], ["--context", tmp_path / "before.csv"]):
        got, want = (tmp_path / f"{name}{len(context)}.csv" for name in ("folder", "file"))
        for data, out in ((feed, got), (tmp_path / "all.csv", want)):
            code, _, err = run_cli(capsys, "detect", model_dir, data, "--out", out, "--missing", "interpolate",
                                   *context, *ON_THE_CPU)
            assert code == 0, err
        pd.testing.assert_frame_equal(pd.read_csv(got), pd.read_csv(want))


@pytest.mark.parametrize("timed", [True, False])
def test_cli_detect_of_a_folder_is_one_feed(model_dir, tmp_path, capsys, series, timed):
    """DATA a folder of a logger's rolled files (one of them 10 rows): scored in name order as one table, as `detect`
    of the feed as one table;
    untimed rows numbered through the files; a gap filled in one file marks its rows in `filled`, 0 elsewhere;
    SCORES.csv inside the folder refused (the next run would score it as the feed's next file)."""
    whole = series if timed else series.drop(columns="timestamp")
    feed, before = tmp_path / "feed", tmp_path / "before.csv"
    feed.mkdir()
    whole.iloc[600:900].to_csv(before, index=False)
    pieces = {"day1.csv": (900, 1000), "day2.csv": (1000, 1010), "day3.csv": (1010, 1200)}
    for name, (start, stop) in pieces.items():
        whole.iloc[start:stop].to_csv(feed / name, index=False)
    (feed / "notes.txt").write_text("not a table")
    code, out, err = run_cli(capsys, "detect", model_dir, feed, "--context", before, "--out", tmp_path / "s.csv",
                             "--device", "cpu")
    assert code == 0, err
    assert out.startswith("scored 300 of 300 rows after 90 rows of context:"), out
    got = pd.read_csv(tmp_path / "s.csv")
    model = MSCRED.load(model_dir, device="cpu")
    expect = model.detect(whole.iloc[900:1200].reset_index(drop=True), context=whole.iloc[600:900].reset_index(
        drop=True))
    np.testing.assert_allclose(got["score"], expect["score"], rtol=1e-6, atol=1e-12)
    np.testing.assert_array_equal(got.iloc[:, 0], whole["timestamp"].iloc[900:1200] if timed else np.arange(300))
    gappy = whole.iloc[1000:1010].copy()
    gappy.iloc[4, -1] = np.nan
    gappy.to_csv(feed / "day2.csv", index=False)
    code, out, err = run_cli(capsys, "detect", model_dir, feed, "--out", tmp_path / "s2.csv", "--device", "cpu",
                             "--missing", "interpolate")
    assert code == 0, err
    filled = pd.read_csv(tmp_path / "s2.csv")["filled"]
    assert filled.sum() == 1 and filled.iloc[104] == 1 and len(filled) == 300
    bad_input(capsys, "detect", model_dir, feed, "--out", feed / "s.csv", names=["is in the folder DATA"])


def test_a_sensor_missing_in_all_of_data_is_filled_from_its_context(model_dir, tmp_path, capsys, series):
    """--missing interpolate with --context: a sensor without a value anywhere in DATA is held at the context's last
    value, as the one table of both would have it (read alone, DATA would be refused: nothing to interpolate from),
    and every score is that table's."""
    before, data = series.iloc[600:900].copy(), series.iloc[900:1200].copy()
    data["s2"] = np.nan
    before.to_csv(tmp_path / "before.csv", index=False)
    data.to_csv(tmp_path / "data.csv", index=False)
    pd.concat([before, data]).to_csv(tmp_path / "both.csv", index=False)
    for args, out in (([tmp_path / "data.csv", "--context", tmp_path / "before.csv"], "ctx.csv"),
                      ([tmp_path / "both.csv"], "both_scores.csv")):
        code, _, err = run_cli(capsys, "detect", model_dir, *args, "--out", tmp_path / out, "--missing",
                               "interpolate", *ON_THE_CPU)
        assert code == 0, err
    got = pd.read_csv(tmp_path / "ctx.csv")
    want = pd.read_csv(tmp_path / "both_scores.csv").iloc[300:].reset_index(drop=True)
    np.testing.assert_allclose(got["score"], want["score"], rtol=1e-6, atol=1e-12)
    assert (got["filled"] == 1).all()
