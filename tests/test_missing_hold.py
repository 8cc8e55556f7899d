"""``--missing hold`` (``missing="hold"``): a missing sensor value is its sensor's last present value before it (the
first present one before any), as a historian reconstructs a step tag or an exception-reported one between its
records -- where ``interpolate`` would draw a ramp from a value that held to the next change. Checked against
pandas' own ``ffill().bfill()`` in float64 on fresh random tables, through the grid (``--resample``), a folder
feed, and the CLI. The seams (``--context``, a Monitor's chunks) are in test_detect_context.py and
test_monitor.py, parametrized over both policies."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from cli_helpers import ON_THE_CPU, main, run_cli, sensor_frame
from mscred.data.io import fill_missing, float_read_options, table_from_frame
from mscred.errors import InputError

TRAIN = ("--epochs", "1", "--set", "channels=[4,8,8,8]", *ON_THE_CPU, "--quiet")


@pytest.mark.parametrize("rows, seed", [(1, 0), (2, 1), (7, 2), (64, 3), (1003, 4)])
def test_hold_is_pandas_ffill_then_bfill(rows, seed):
    rng = np.random.default_rng(seed)
    values = rng.standard_normal((rows, 6))
    values[rng.random(values.shape) < rng.uniform(0.05, 0.8)] = np.nan
    values[:, 0] = rng.standard_normal(rows)                      # a sensor without a gap
    values[-rows // 2:, 1] = np.nan                               # one missing to the end
    values[0, 1] = 1.5                                            # ... with a value to hold
    keep = ~np.isnan(values).all(axis=0)                          # (a sensor without any value is refused below)
    values = values[:, keep]
    want = pd.DataFrame(values).ffill().bfill().to_numpy()
    got, gaps = values.copy(), np.isnan(values)
    filled = fill_missing(got, gaps, [f"s{j}" for j in range(values.shape[1])], "t", "hold")
    np.testing.assert_array_equal(got, want)
    assert sum(filled.values()) == int(gaps.sum())


def test_a_sensor_without_any_value_is_refused():
    frame = sensor_frame(20, 3).assign(s1=np.nan)
    with pytest.raises(InputError, match="column 's1': every value is missing; nothing to fill it from"):
        table_from_frame(frame, source="t", missing="hold")


def test_a_changes_only_step_tag_on_the_grid_holds_its_value():
    """A historian's records of a step tag (a value when it changes, minutes apart) and a noisy one, on a 1-minute
    grid: each minute the mean of its records, a minute without one its last value -- pandas' resample (origin at
    the epoch) then ffill; the ramp interpolation would draw instead is gone."""
    rng = np.random.default_rng(5)
    changes = np.sort(rng.choice(np.arange(0, 6 * 3600, 7), 90, replace=False))
    times = pd.Timestamp("2026-12-06 08:00:00") + pd.to_timedelta(changes, unit="s")
    frame = pd.DataFrame({"timestamp": times, "valve": rng.integers(0, 2, 90).astype(float),
                          "flow": rng.standard_normal(90)})
    got = table_from_frame(frame.assign(timestamp=times.strftime("%Y-%m-%d %H:%M:%S")).pipe(_resampled, "1min"),
                           source="pi", missing="hold")
    want = frame.set_index("timestamp").resample("1min", origin="epoch").mean().ffill()
    np.testing.assert_allclose(got.values, want.to_numpy(), rtol=1e-14, atol=0)
    assert got.filled_by == "hold" and got.gaps.sum() == int(np.isnan(
        frame.set_index("timestamp").resample("1min", origin="epoch").mean().to_numpy()).sum())
    interpolated = table_from_frame(frame.assign(timestamp=times.strftime("%Y-%m-%d %H:%M:%S")).pipe(
        _resampled, "1min"), source="pi", missing="interpolate")
    assert not np.isin(interpolated.values[:, 0], [0.0, 1.0, 0.5]).all()   # (a ramp between the records)
    assert np.isin(got.values[:, 0], [0.0, 0.5, 1.0]).all()               # (held: the records' values and means)


def _resampled(frame: pd.DataFrame, period: str) -> pd.DataFrame:
    from mscred.data.resample import RESAMPLE

    frame = frame.copy()
    frame.attrs[RESAMPLE] = period
    return frame


def test_train_and_detect_hold(tmp_path, capsys):
    """train --missing hold: its note, the setting kept; detect of a folder feed (gaps across its seams, a sensor
    missing in a whole file) scores as detect of the files concatenated, SCORES.csv's filled counts too."""
    frame = sensor_frame(700, 4, seed=2)
    frame.loc[[10, 11, 12, 300], "s1"] = np.nan
    frame.to_csv(tmp_path / "train.csv", index=False)
    model = tmp_path / "model"
    code, _, err = run_cli(capsys, "train", tmp_path / "train.csv", "--out", model, "--missing", "hold", *TRAIN)
    assert code == 0, err
    assert "train.csv: held the last value for 4 missing value(s) in 1 sensor(s): s1 4" in err
    assert json.loads((model / "config.json").read_text())["config"]["train"]["missing"] == "hold"
    today = sensor_frame(330, 4, seed=3)
    today["timestamp"] += 1000
    today.loc[95:130, "s2"] = np.nan      # across the first seam (at 110)
    today.loc[110:219, "s3"] = np.nan     # the whole second file
    feed = tmp_path / "feed"
    feed.mkdir()
    for k, (a, b) in enumerate(((0, 110), (110, 220), (220, 330))):
        today.iloc[a:b].to_csv(feed / f"part_{k}.csv", index=False)
    today.to_csv(tmp_path / "whole.csv", index=False)
    for name, data in (("feed", feed), ("whole", tmp_path / "whole.csv")):
        assert main(["detect", str(model), str(data), "--out", str(tmp_path / f"{name}_scores.csv"),
                     *ON_THE_CPU]) == 0
    got, want = (pd.read_csv(tmp_path / f"{name}_scores.csv", **float_read_options()) for name in ("feed", "whole"))
    pd.testing.assert_frame_equal(got, want)
    assert want["filled"].sum() == 36 + 110
