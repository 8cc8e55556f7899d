"""Each sensor's score on every row: ``MSCRED.detect(X, sensor_scores=True)`` and ``mscred detect --sensor-scores``."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cli_helpers import ON_THE_CPU, run_cli, sensor_frame, tiny_model
from mscred.detector import MSCRED

N_SENSORS = 6


@pytest.fixture(scope="module")
def series() -> pd.DataFrame:
    frame = sensor_frame(1200, N_SENSORS, seed=5)
    frame.iloc[900:960, 3] += 2.0   # an anomaly on s2, so that rows are flagged and ranked
    return frame


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, series):
    return tiny_model(tmp_path_factory.mktemp("sensor_scores") / "model", series.iloc[:600])


def columns(model: MSCRED) -> list[str]:
    return [f"score_{name}" for name in model.sensors_]


def test_z_sensor_score_is_the_largest_sensor_score_and_ranks_the_causes(model_dir, series):
    model = MSCRED.load(model_dir, device="cpu")
    plain = model.detect(series.iloc[600:])
    found = model.detect(series.iloc[600:], sensor_scores=True)
    pd.testing.assert_frame_equal(found[plain.columns], plain)
    assert list(found.columns[len(plain.columns):]) == columns(model)
    per_sensor = found[columns(model)].to_numpy()
    covered = model.window_of_row(len(found)) >= 0
    assert np.isnan(per_sensor[~covered]).all() and not np.isnan(per_sensor[covered]).any()
    np.testing.assert_array_equal(found["score"][covered], per_sensor[covered].max(axis=1))
    flagged = found["is_anomaly"].to_numpy() == 1
    assert flagged.sum() > 0
    for row in np.flatnonzero(flagged):
        top = np.argsort(-per_sensor[row], kind="stable")[:3]
        assert found["root_causes"].iloc[row] == ";".join(model.sensors_[i] for i in top)
    assert "s2" in found["root_causes"][flagged].str.split(";").str[0].to_list()


@pytest.mark.parametrize("method", ["count", "mse"])
def test_count_and_mse_sensor_scores_are_residual_row_sums(model_dir, series, method):
    """Against float64 residual row sums of the last step's signature matrices and their reconstructions."""
    model = MSCRED.load(model_dir, device="cpu")
    model.calibrate(series.iloc[:600], method=method)
    x = series.iloc[600:900]
    found = model.detect(x, sensor_scores=True)
    segments = model._segments(model._aligned(model._table(x)))
    steps = model.config_.signature.steps
    target = segments[steps - 1:].astype(np.float64)
    recon = model._reconstruct(segments).astype(np.float64)
    scales = [model.config_.signature.windows.index(w) for w in model.config_.score.scales]
    row_sums = ((target - recon) ** 2)[:, scales].sum(axis=(1, 3))   # (W, n)
    win = model.window_of_row(len(x))
    covered = win >= 0
    np.testing.assert_allclose(found[columns(model)].to_numpy()[covered], row_sums[win[covered]], rtol=1e-5,
                               atol=1e-9)


def test_cli_sensor_scores_and_evaluate_reads_the_file(model_dir, series, tmp_path, capsys):
    data, out = tmp_path / "x.csv", tmp_path / "s.csv"
    series.iloc[600:].assign(label=0).to_csv(data, index=False)
    code, stdout, err = run_cli(capsys, "detect", model_dir, data, "--out", out, "--sensor-scores", *ON_THE_CPU)
    assert code == 0, err
    written = pd.read_csv(out)
    expect = MSCRED.load(model_dir, device="cpu").detect(series.iloc[600:], sensor_scores=True)
    assert list(written.columns) == list(expect.columns)
    np.testing.assert_allclose(written[columns(MSCRED.load(model_dir))], expect[columns(MSCRED.load(model_dir))],
                               rtol=1e-12)
    code, stdout, err = run_cli(capsys, "evaluate", out, "--labels", data)
    assert code == 0, err
    code, stdout, err = run_cli(capsys, "detect", model_dir, data, "--out", tmp_path / "plain.csv")
    assert not any(c.startswith("score_") for c in pd.read_csv(tmp_path / "plain.csv").columns)
