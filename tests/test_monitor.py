"""A feed scored chunk by chunk: ``MSCRED.monitor()`` (``mscred.monitor.Monitor``). Each chunk's frame must be that
of ``detect(chunk, context=every row before it)`` once the feed has one window's rows, and rows no window covers
yet must score 0, as ``detect`` scores them."""
from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from cli_helpers import sensor_frame, tiny_model
from mscred.data.io import table_from_frame
from mscred.detector import MSCRED, SENSOR_SCORE_PREFIX
from mscred.errors import InputError, NotFittedError
from mscred.monitor import Monitor

N_SENSORS = 4
TRAIN_ROWS = 600


@pytest.fixture(scope="module")
def series() -> pd.DataFrame:
    """1,000 rows: the model trains on the first 600; the feed is the 400 after them."""
    return sensor_frame(TRAIN_ROWS + 400, N_SENSORS, seed=11)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, series):
    return tiny_model(tmp_path_factory.mktemp("monitor") / "model", series.iloc[:TRAIN_ROWS])


@pytest.fixture
def model(model_dir) -> MSCRED:
    return MSCRED.load(model_dir, device="cpu")


def _cuts(total: int, seed: int) -> list[int]:
    """Chunk boundaries over ``total`` rows: single rows, short and long chunks, in a random order."""
    rng = np.random.default_rng(seed)
    cuts, at = [0], 0
    while at < total:
        at = min(total, at + int(rng.choice([1, 2, 7, 9, 23, 37, 64, 150])))
        cuts.append(at)
    return cuts


def _expected(model, feed: pd.DataFrame, a: int, b: int, **kw) -> pd.DataFrame:
    """What the monitor must give for feed[a:b]: detect after every row before it, or score 0 before a window."""
    if b < model.min_rows:
        return None
    return model.detect(feed.iloc[a:b], context=feed.iloc[:a] if a else None, **kw)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_each_chunk_is_scored_after_every_row_before_it(model, series, seed):
    feed = series.iloc[TRAIN_ROWS:].reset_index(drop=True)
    monitor = model.monitor(sensor_scores=True)
    cuts = _cuts(len(feed), seed)
    scored = 0
    for a, b in zip(cuts, cuts[1:]):
        got = monitor.update(feed.iloc[a:b])
        assert len(got) == b - a and list(got["timestamp"]) == list(feed["timestamp"].iloc[a:b])
        want = _expected(model, feed, a, b, sensor_scores=True)
        if want is None:
            assert (got["score"] == 0).all() and (got["is_anomaly"] == 0).all()
            assert got.filter(like=SENSOR_SCORE_PREFIX).isna().all().all()
            assert list(got.columns) == ["timestamp", "score", "is_anomaly", "root_causes", "scales"] + [
                SENSOR_SCORE_PREFIX + f"s{j}" for j in range(N_SENSORS)]
        else:
            pd.testing.assert_frame_equal(got.reset_index(drop=True), want.reset_index(drop=True))
            if a >= model.min_rows:   # a whole window of rows before the chunk: every row of it in a window
                assert (model.window_of_row(b - a, model.context_rows(a, b - a)) >= 0).all()
            scored += b - a
        assert len(monitor._history) <= monitor.tail_rows
    assert monitor.rows_seen == len(feed) and scored >= len(feed) - model.min_rows


def test_the_tail_is_the_most_context_rows_takes(model):
    """``tail_rows`` is enough context for a chunk of any length (so the tail never shortens a chunk's windows)."""
    monitor = model.monitor()
    sig = model.config_.signature
    for length in range(1, 4 * sig.gap):
        assert model.context_rows(10 ** 9, length) <= monitor.tail_rows
    assert monitor.tail_rows == max(model.context_rows(10 ** 9, length) for length in range(1, sig.gap + 1))


def test_rows_without_timestamps_are_numbered_across_the_feed(model, series):
    """Arrays, lists of rows and DataFrames of fresh row numbers: one numbering from 0, and the same scores as the
    same rows with their sensors named."""
    values = series.iloc[TRAIN_ROWS:, 1:].to_numpy()
    by_array, by_frame = model.monitor(), model.monitor()
    cuts = [0, 50, 51, 130, 200, 333, 400]
    for i, (a, b) in enumerate(zip(cuts, cuts[1:])):
        chunk = values[a:b] if i % 2 else values[a:b].tolist()
        got = by_array.update(chunk)
        named = by_frame.update(pd.DataFrame(values[a:b], columns=[f"s{j}" for j in range(N_SENSORS)]))
        assert list(got["row"]) == list(range(a, b)) == list(named["row"])
        np.testing.assert_array_equal(got["score"], named["score"])
        if b >= model.min_rows:
            whole = pd.DataFrame(values[:b], columns=[f"s{j}" for j in range(N_SENSORS)])
            want = model.detect(whole.iloc[a:], context=whole.iloc[:a] if a else None)
            np.testing.assert_array_equal(got["score"], want["score"])


@pytest.mark.parametrize("policy", ["interpolate", "hold"])
def test_gaps_are_filled_as_in_the_whole_feed(series, policy):
    """With ``missing="interpolate"`` (and ``"hold"``): each chunk is scored as the rows seen so far read as one table (a gap filled
    between the values either side of it, the last value held where the next is not known yet) -- through a gap
    longer than the tail, one across a chunk's end and a chunk's start, a chunk of one row with a value missing and
    a chunk in which a sensor has no value at all (which ``detect(chunk, context=...)`` refuses: it reads the chunk
    alone); and equal to ``detect(chunk, context=every row before)`` wherever that reads the chunk."""
    model = MSCRED(epochs=1, channels=(4, 8, 8, 8), device="cpu", missing=policy).fit(series.iloc[:TRAIN_ROWS])
    assert model.monitor().missing == policy
    feed = series.iloc[TRAIN_ROWS:].reset_index(drop=True).copy()
    feed.loc[120:260, "s0"] = np.nan     # 141 rows: longer than the tail; the chunk 200..250 has no s0 at all
    feed.loc[295:305, "s2"] = np.nan     # across the cut at 300
    feed.loc[338:340, "s1"] = np.nan     # the end of the chunk 300..340, and the one-row chunk 340
    monitor = model.monitor()
    cuts = [0, 115, 200, 250, 262, 300, 340, 341, 400]
    compared = 0
    for a, b in zip(cuts, cuts[1:]):
        got = monitor.update(feed.iloc[a:b])["score"].to_numpy()
        if b < model.min_rows:
            continue
        rows = model.context_rows(a, b - a)
        whole = table_from_frame(feed.iloc[:b], missing=policy)
        want = model.detect(whole.last(rows + b - a))["score"].to_numpy()[rows:]
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)
        if a and not feed.iloc[a:b].isna().all().any():
            alone = model.detect(feed.iloc[a:b], context=feed.iloc[:a])["score"].to_numpy()
            np.testing.assert_allclose(got, alone, rtol=1e-12, atol=0)
            compared += 1
    assert compared == 5


def test_a_refused_chunk_leaves_the_monitor_as_it_was(model, series):
    feed = series.iloc[TRAIN_ROWS:].reset_index(drop=True)
    monitor = model.monitor()
    monitor.update(feed.iloc[:150])
    for bad, message in [(feed.iloc[100:120], "does not follow the feed's last"),   # times go back
                         (feed.iloc[149:151], "does not follow the feed's last"),   # short: checked too
                         (feed.iloc[150:200].drop(columns=["s1"]), "missing sensor(s) s1"),
                         (feed.iloc[150:200].drop(columns=["timestamp"]),
                          "has no 'timestamp' column; the feed's earlier rows have one"),
                         (feed.iloc[150:150], "chunk: no rows"),
                         (np.zeros((3, N_SENSORS + 1)), "the model takes rows of 4 sensors"),
                         ("150,1,2,3,4", "expected a DataFrame")]:
        with pytest.raises(InputError, match=re.escape(message)):
            monitor.update(bad)
        assert monitor.rows_seen == 150 and monitor._history["timestamp"].iloc[-1] == feed["timestamp"].iloc[149]
    got = monitor.update(feed.iloc[150:170])
    pd.testing.assert_frame_equal(got.reset_index(drop=True),
                                  model.detect(feed.iloc[150:170], context=feed.iloc[:150]).reset_index(drop=True))


def test_an_unfitted_model_has_no_monitor():
    with pytest.raises(NotFittedError):
        MSCRED().monitor()
    with pytest.raises(NotFittedError):
        Monitor(MSCRED())


def test_primed_rows_are_context_not_scores(model, series):
    """``prime(before)`` then ``update(chunk)``: detect(chunk, context=before); untimed rows numbered after them."""
    feed = series.iloc[TRAIN_ROWS:].reset_index(drop=True)
    monitor = model.monitor()
    monitor.prime(feed.iloc[:180])
    assert monitor.rows_seen == 180
    pd.testing.assert_frame_equal(monitor.update(feed.iloc[180:187]).reset_index(drop=True),
                                  model.detect(feed.iloc[180:187], context=feed.iloc[:180]).reset_index(drop=True))
    with pytest.raises(InputError, match="does not follow the feed's last"):
        monitor.prime(feed.iloc[100:110])
    untimed = model.monitor()
    untimed.prime(feed.iloc[:130, 1:].to_numpy())
    assert list(untimed.update(feed.iloc[130:133, 1:].to_numpy())["row"]) == [130, 131, 132]
