"""The paper's synthetic data: sizes, determinism, the signal model, the injected anomalies and the written files."""
import numpy as np
import pandas as pd
import pytest

from mscred.data.io import load_table
from mscred.data.synthetic import generate_synthetic, sensor_names, write_synthetic
from mscred.errors import InputError


@pytest.fixture(scope="module")
def data():
    return generate_synthetic(seed=7)


def test_shapes_and_parts(data):
    names = sensor_names(30)
    assert names[0] == "sensor_01" and names[-1] == "sensor_30"
    assert list(data.train.columns) == ["timestamp", *names]
    assert list(data.test.columns) == ["timestamp", *names, "label"]
    np.testing.assert_array_equal(data.train["timestamp"], np.arange(0, 8_000))
    np.testing.assert_array_equal(data.test["timestamp"], np.arange(10_000, 20_000))
    assert list(data.anomalies.columns) == ["start", "end", "root_causes", "duration"]
    assert data.sensors == names


def test_anomalies_ground_truth(data):
    a = data.anomalies
    assert len(a) == 5
    assert list(a["duration"]) == [10, 30, 90, 10, 30]
    assert (a["end"] - a["start"] == a["duration"]).all()
    assert a["start"].min() >= 10_000 and a["end"].max() <= 20_000
    # Spread out: one per 2,000-step slot of the test part, hence ordered and apart.
    for k, start in enumerate(a["start"]):
        assert 10_000 + 2_000 * k <= start < 10_000 + 2_000 * (k + 1)
    for causes in a["root_causes"]:
        parts = causes.split(";")
        assert len(parts) == 3 and len(set(parts)) == 3 and set(parts) <= set(data.sensors)
    # Labels are 1 exactly inside the anomalies.
    expected = np.zeros(10_000, dtype=int)
    for start, end in zip(a["start"], a["end"]):
        expected[start - 10_000 : end - 10_000] = 1
    np.testing.assert_array_equal(data.test["label"], expected)


def test_injected_shocks(data):
    # The same seed with no anomalies draws the same signal and noise (anomalies are drawn last): the difference
    # is exactly the shocks.
    clean = generate_synthetic(seed=7, n_anomalies=0)
    pd.testing.assert_frame_equal(clean.train, data.train)
    sensors = data.sensors
    diff = data.test[sensors].to_numpy() - clean.test[sensors].to_numpy()
    touched = np.zeros_like(diff, dtype=bool)
    for row in data.anomalies.itertuples():
        cols = [sensors.index(c) for c in row.root_causes.split(";")]
        block = diff[row.start - 10_000 : row.end - 10_000][:, cols]  # (duration, 3)
        # A constant shock per sensor, of the signal's size, either sign.
        assert np.allclose(block, block[0])
        assert np.all((np.abs(block[0]) >= 1.0) & (np.abs(block[0]) <= 1.5))
        touched[row.start - 10_000 : row.end - 10_000, cols] = True
    assert np.all(diff[~touched] == 0)


def test_signal_model(data):
    x = data.train[data.sensors].to_numpy()  # (8000, 30)
    # sin/cos of amplitude 1 plus 0.3 N(0,1): variance about 1/2 + 0.09.
    assert np.allclose(x.std(axis=0), np.sqrt(0.59), atol=0.06)
    assert np.all(np.abs(x.mean(axis=0)) < 0.15)
    # Period 2 pi omega with omega in [40, 50]: the spectral peak of 8,000 steps lies at 8000 / (2 pi omega).
    spectrum = np.abs(np.fft.rfft(x - x.mean(axis=0), axis=0))
    peaks = spectrum[1:].argmax(axis=0) + 1
    assert np.all((peaks >= 25) & (peaks <= 32)), peaks
    # Noise: first differences of a slow sine are almost all noise, std 0.3 * sqrt(2).
    assert np.allclose(np.diff(x, axis=0).std(axis=0), 0.3 * np.sqrt(2), rtol=0.06)


def test_deterministic_and_seeded():
    a = generate_synthetic(n_sensors=5, length=4_000, seed=3)
    b = generate_synthetic(n_sensors=5, length=4_000, seed=3)
    c = generate_synthetic(n_sensors=5, length=4_000, seed=4)
    pd.testing.assert_frame_equal(a.test, b.test)
    pd.testing.assert_frame_equal(a.anomalies, b.anomalies)
    assert not np.allclose(a.train["sensor_1"], c.train["sensor_1"])


def test_small_sizes_scale():
    d = generate_synthetic(n_sensors=4, length=3_000, seed=1)
    assert len(d.train) == 1_200 and len(d.test) == 1_500
    assert d.test["timestamp"].iloc[0] == 1_500 and d.test["label"].sum() == 10 + 30 + 90 + 10 + 30


@pytest.mark.parametrize("kwargs", [{"n_sensors": 2}, {"length": 1_000}])
def test_impossible_sizes(kwargs):
    with pytest.raises(InputError):
        generate_synthetic(**kwargs)


def test_write_synthetic(tmp_path):
    out = tmp_path / "syn"
    data = write_synthetic(out, n_sensors=6, length=4_000, seed=2)
    assert sorted(p.name for p in out.iterdir()) == ["anomalies.csv", "test.csv", "train.csv"]
    test = load_table(out / "test.csv")
    assert test.sensors == data.sensors
    np.testing.assert_array_equal(test.labels, data.test["label"])
    np.testing.assert_array_equal(test.index, data.test["timestamp"])
    np.testing.assert_allclose(test.values, data.test[data.sensors].to_numpy(), atol=5e-7)
    train = load_table(out / "train.csv")
    assert train.labels is None and train.values.shape == (1_600, 6)
    pd.testing.assert_frame_equal(pd.read_csv(out / "anomalies.csv"), data.anomalies)
