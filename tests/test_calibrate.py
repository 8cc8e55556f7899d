"""The thresholds fitted again on normal data without training: ``MSCRED.calibrate`` and ``mscred calibrate``."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import mscred.detector as detector_module
from cli_helpers import ON_THE_CPU, bad_input, run_cli, sensor_frame, tiny_model
from mscred.detector import MSCRED, UnknownSettingError
from mscred.errors import InputError, NoteWarning

N_SENSORS = 5


@pytest.fixture(scope="module")
def series() -> pd.DataFrame:
    return sensor_frame(1600, N_SENSORS, seed=4)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, series):
    return tiny_model(tmp_path_factory.mktemp("calibrate") / "model", series.iloc[:600])


@pytest.fixture()
def model(model_dir) -> MSCRED:
    return MSCRED.load(model_dir, device="cpu")


@pytest.fixture(scope="module")
def noisier(series) -> pd.DataFrame:
    """Normal operation after the sensors' noise grew: the old threshold flags many of its windows."""
    part = series.iloc[600:1300].copy()
    part.iloc[:, 1:] += 0.15 * np.random.default_rng(1).standard_normal((len(part), N_SENSORS))
    return part


def window_scores(model: MSCRED, X) -> np.ndarray:
    """Each window's score, read from the per-row scores (every window owns the ``gap`` rows before its end)."""
    win = model.window_of_row(len(X))
    scores = model.decision_function(X)
    return np.array([scores[win == k][0] for k in range(win.max() + 1)])


def test_calibrate_fits_the_threshold_rule_on_the_windows_of_x(model, noisier):
    old = model.threshold_
    assert (window_scores(model, noisier) > old).sum() > 10   # the situation calibrate is for
    model.calibrate(noisier)
    scores = window_scores(model, noisier)   # under the new calibration (the z_sensor statistics refitted too)
    assert model.threshold_ == pytest.approx(1.5 * scores.max(), rel=1e-12)
    done = model.calibration_windows_
    assert (done["windows"], done["excluded"], done["threshold_before"], done["threshold_after"],
            done["flagged_after"]) == (len(scores), 0, old, model.threshold_, 0)
    assert done["flagged_before"] > 10
    model.calibrate(noisier, threshold="percentile", percentile=90.0)
    scores = window_scores(model, noisier)
    assert model.threshold_ == pytest.approx(np.percentile(scores, 90.0), rel=1e-9)
    assert model.calibration_windows_["flagged_after"] == (scores > model.threshold_).sum()


def test_settings_become_the_model_parameters_and_survive_save(model, noisier, tmp_path):
    model.calibrate(noisier, threshold="percentile", percentile=97.5, method="count", theta=None)
    assert model.get_params(deep=False)["threshold"] == "percentile"
    assert model.config_.score.method == "count" and len(model.theta_) == 3
    for name in ("decision_scores_", "labels_", "validation_rows_"):
        assert not hasattr(model, name)
    assert model.set_params(device="cpu").__sklearn_is_fitted__()   # the params agree with the fit: still fitted
    expect = model.decision_function(noisier)
    model.save(tmp_path / "again")
    loaded = MSCRED.load(tmp_path / "again", device="cpu")
    assert loaded.threshold_ == model.threshold_ and loaded.theta_ == model.theta_
    assert loaded.config_.score.percentile == 97.5
    np.testing.assert_array_equal(loaded.decision_function(noisier), expect)


def test_windows_over_labelled_rows_are_left_out(model, noisier):
    labelled = noisier.assign(label=0)
    labelled.iloc[300:320, labelled.columns.get_loc("label")] = 1
    labelled.iloc[500:501, labelled.columns.get_loc("label")] = 1
    model.calibrate(labelled)
    sig = model.config_.signature
    span = max(sig.windows) + (sig.steps - 1) * sig.gap
    label = labelled["label"].to_numpy()
    n_windows = (len(labelled) - span) // sig.gap + 1
    kept = np.array([not label[k * sig.gap:k * sig.gap + span].any() for k in range(n_windows)])
    assert model.calibration_windows_["excluded"] == (~kept).sum() > 0
    assert model.calibration_windows_["windows"] == kept.sum()
    scores = window_scores(model, noisier)
    assert model.threshold_ == pytest.approx(1.5 * scores[kept].max(), rel=1e-12)
    with pytest.raises(InputError, match="0 of its .* windows are free of rows labelled 1"):
        model.calibrate(noisier.assign(label=1))


def test_long_data_is_calibrated_on_its_last_chunk(model, series, monkeypatch):
    per_segment = 4 * 3 * N_SENSORS ** 2
    monkeypatch.setattr(detector_module, "STREAM_SEGMENT_BYTES", 40 * per_segment)   # 40 segments a chunk
    with pytest.warns(NoteWarning, match=r"calibrated on its last 36 windows of 91 \(rows 551 on\)"):
        model.calibrate(series.iloc[600:1600])
    assert model.calibration_windows_["windows"] == 36
    monkeypatch.undo()
    last = series.iloc[600 + 550:1600]
    scores = window_scores(model, last)
    assert len(scores) == 36 and model.threshold_ == pytest.approx(1.5 * scores.max(), rel=1e-12)


def test_bad_calibration_settings_and_data(model, noisier, series):
    with pytest.raises(InputError, match="'epochs' is not a setting of scoring"):
        model.calibrate(noisier, epochs=3)
    with pytest.raises(UnknownSettingError, match="did you mean 'percentile'"):
        model.calibrate(noisier, percentil=90)
    with pytest.raises(InputError, match="percentile"):
        model.calibrate(noisier, threshold="percentile", percentile=150.0)
    with pytest.raises(InputError, match="calibration data: 50 rows is too few to calibrate on; need at least 100"):
        model.calibrate(noisier.iloc[:50])
    with pytest.raises(InputError, match="need at least 110"):
        model.calibrate(noisier.iloc[:105], threshold="pot")
    with pytest.raises(InputError, match="calibration data: other sensors than the model was trained on"):
        model.calibrate(noisier.rename(columns={"s0": "x0"}))
    before = model.threshold_
    assert model.threshold_ == before   # a refusal changes nothing


def test_cli_calibrate(model_dir, tmp_path, capsys, noisier):
    data = tmp_path / "normal.csv"
    noisier.to_csv(data, index=False)
    code, out, err = run_cli(capsys, "calibrate", model_dir, data, "--out", tmp_path / "m2", "--threshold",
                             "percentile", "--percentile", "95", *ON_THE_CPU)
    assert code == 0, err
    expect = MSCRED.load(model_dir, device="cpu").calibrate(noisier, threshold="percentile", percentile=95.0)
    assert out.startswith(f"calibrated on {expect.calibration_windows_['windows']} windows of {data}; score z_sensor;")
    assert (f"the old one flagged {expect.calibration_windows_['flagged_before']}; wrote {tmp_path / 'm2'}"
            in out)
    saved = json.loads((tmp_path / "m2" / "config.json").read_text())
    assert saved["calibration"]["threshold"] == pytest.approx(expect.threshold_, rel=1e-12)
    assert saved["config"]["score"]["threshold"] == "percentile"
    code, out, err = run_cli(capsys, "detect", tmp_path / "m2", data, "--out", tmp_path / "s.csv")
    assert code == 0 and f"(threshold {expect.threshold_:.4g})" in out


def test_cli_calibrate_in_place_and_refusals(model_dir, tmp_path, capsys, noisier):
    import shutil

    model = tmp_path / "model"
    shutil.copytree(model_dir, model)
    data = tmp_path / "normal.csv"
    noisier.to_csv(data, index=False)
    bad_input(capsys, "calibrate", model, data, "--out", model, "--beta", "2", "--threshold", "percentile",
              names=["--beta: read by --threshold beta_max only; the threshold rule is 'percentile'"])
    bad_input(capsys, "calibrate", model, data, "--out", model, "--theta", "0.01", "--score", "mse",
              names=["--theta"])
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "mine.txt").write_text("keep")
    bad_input(capsys, "calibrate", model, data, "--out", tmp_path / "notes", names=["notes"])
    noisier.rename(columns={"s1": "t1"}).to_csv(tmp_path / "other.csv", index=False)
    bad_input(capsys, "calibrate", model, tmp_path / "other.csv", "--out", tmp_path / "m3",
              names=["other sensors than the model was trained on"])
    assert not (tmp_path / "m3").exists()
    before = (model / "config.json").read_text()
    code, out, err = run_cli(capsys, "calibrate", model, data, "--out", model, "--beta", "2")
    assert code == 0, err
    assert json.loads((model / "config.json").read_text())["config"]["score"]["beta"] == 2.0
    assert (model / "config.json").read_text() != before
    assert sorted(p.name for p in model.iterdir()) == ["config.json", "model.safetensors"]
