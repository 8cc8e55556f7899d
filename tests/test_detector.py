"""The MSCRED estimator: pyod contract, input checks, save/load, and detection of an injected shock.

Models are tiny (5-6 sensors, small channels, 1-3 epochs on CPU) so the file runs in well under a minute.
"""
from __future__ import annotations

import json
import pickle
import re
import warnings

import numpy as np
import pandas as pd
import pytest
import torch

from mscred.config import MSCREDConfig
from mscred.detector import MSCRED
from mscred.errors import IgnoredSettingWarning, InputError, NoteWarning

SMALL = dict(channels=(4, 8, 8, 8), device="cpu", progress=False)




def _frame(rows: int = 600, n: int = 5, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    t = np.arange(rows)[:, None]
    phase = rng.uniform(0, 6, n)
    values = np.sin(t / (8 + 2 * np.arange(n)) + phase) + 0.05 * rng.standard_normal((rows, n))
    return pd.DataFrame(values, columns=[f"pump_{i}" for i in range(n)])


@pytest.fixture(scope="module")
def fitted() -> MSCRED:
    return MSCRED(epochs=2, method="count", theta=None, **SMALL).fit(_frame())


def test_pyod_attributes(fitted):
    T = 600
    assert fitted.decision_scores_.shape == (T,) and fitted.labels_.shape == (T,)
    assert isinstance(fitted.threshold_, float)
    np.testing.assert_array_equal(fitted.labels_, (fitted.decision_scores_ > fitted.threshold_).astype(int))
    # Per-timestamp rule: rows before the end of the first window's second-to-last segment have no window.
    first = 60 + (5 - 2) * 10
    assert (fitted.decision_scores_[:first] == 0).all()
    assert fitted.sensors_ == [f"pump_{i}" for i in range(5)]
    assert len(fitted.history_) == 2 and fitted.history_[-1]["val_loss"] is not None
    assert len(fitted.theta_) == 3 and all(t > 0 for t in fitted.theta_)


def test_decision_function_matches_fit_scores_and_predict(fitted):
    X = _frame()
    np.testing.assert_allclose(fitted.decision_function(X), fitted.decision_scores_, rtol=1e-6)
    np.testing.assert_array_equal(fitted.predict(X), fitted.labels_)


def test_columns_by_name_and_ndarray_input(fitted):
    X = _frame(seed=3)
    base = fitted.decision_function(X)
    shuffled = X[list(reversed(X.columns))]
    np.testing.assert_allclose(fitted.decision_function(shuffled), base, rtol=1e-6)
    # A plain array has no names: its columns are the training sensors in order (as scikit-learn matches them);
    # another width is refused, naming the sensors.
    np.testing.assert_allclose(fitted.decision_function(X.to_numpy()), base, rtol=1e-6)
    np.testing.assert_raises(InputError, fitted.decision_function, X.to_numpy()[:, :4])
    model = MSCRED(epochs=1, **SMALL).fit(X.to_numpy())
    assert model.sensors_ == [f"sensor_{i}" for i in range(5)]
    assert model.decision_function(X.to_numpy()).shape == (600,)


def test_sensor_mismatch_names_missing_and_extra(fitted):
    X = _frame().rename(columns={"pump_2": "valve"})
    with pytest.raises(InputError, match=r"missing sensor\(s\) pump_2; unknown sensor\(s\) valve"):
        fitted.detect(X)


def test_too_few_rows(fitted):
    with pytest.raises(InputError, match="99 rows is too few to score; need at least 100"):
        fitted.decision_function(_frame(rows=99))
    assert fitted.decision_function(_frame(rows=100)).shape == (100,)
    with pytest.raises(InputError, match="105 rows is too few to train and validate; need at least 110"):
        MSCRED(epochs=1, **SMALL).fit(_frame(rows=105))  # one window: nothing left to validate
    # fewer rows than one window: the same minimum, not 100 first and 110 after (as it once said)
    with pytest.raises(InputError, match="99 rows is too few to train and validate; need at least 110"):
        MSCRED(epochs=1, **SMALL).fit(_frame(rows=99))


def test_overrides():
    m = MSCRED(epochs=3, theta=None, score__top_k=5, windows=[10, 20])
    cfg = m.resolved_config()
    assert cfg.train.epochs == 3 and cfg.score.theta is None and cfg.score.top_k == 5
    assert cfg.signature.windows == (10, 20)
    unknown = MSCRED(no_such=1)   # stored as given (scikit-learn's convention): fit names it
    with pytest.raises(TypeError, match="unknown setting"):
        unknown.fit(_frame())
    base = MSCREDConfig()
    base.train.epochs = 7
    # kept as given (scikit-learn's clone requires it), with overrides too: they are applied to a copy
    assert MSCRED(base).config is base and MSCRED(base, epochs=2).config is base
    assert MSCRED(base).resolved_config().train.epochs == 7
    assert MSCRED(base, epochs=2).resolved_config().train.epochs == 2
    assert base.train.epochs == 7


def test_reproducible_on_cpu():
    a = MSCRED(epochs=1, seed=3, **SMALL).fit(_frame())
    b = MSCRED(epochs=1, seed=3, **SMALL).fit(_frame())
    np.testing.assert_array_equal(a.decision_scores_, b.decision_scores_)
    assert a.threshold_ == b.threshold_


def test_save_load_round_trip_without_pickle(fitted, tmp_path, monkeypatch):
    out = fitted.save(tmp_path / "m")
    meta = json.loads((out / "config.json").read_text())
    assert meta["mscred_version"] and meta["sensors"] == fitted.sensors_
    assert meta["config"]["score"]["theta"] is None
    assert meta["calibration"]["threshold"] == pytest.approx(fitted.threshold_)
    assert len(meta["normalization"]["min"]) == 5
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "model.safetensors"]

    def no_unpickling(*args, **kwargs):
        raise AssertionError("loading a model must never unpickle")

    monkeypatch.setattr(pickle, "load", no_unpickling)
    monkeypatch.setattr(pickle, "loads", no_unpickling)
    monkeypatch.setattr(torch, "load", no_unpickling)
    loaded = MSCRED.load(out, device="cpu")
    X = _frame(seed=5)
    np.testing.assert_allclose(loaded.decision_function(X), fitted.decision_function(X), rtol=1e-6)
    assert loaded.threshold_ == fitted.threshold_ and loaded.theta_ == fitted.theta_


@pytest.mark.parametrize("edit, named", [
    (lambda m: m["config"]["signature"].update(gap=5), "signature.gap is 5, but the weights beside it were trained "
                                                        "with 10"),
    (lambda m: m["config"]["signature"].update(steps=4), "signature.steps is 4"),
    (lambda m: m["config"]["signature"].update(windows=[10, 30, 50]), "signature.windows is [10, 30, 50]"),
    (lambda m: m["sensors"].reverse(), "its sensor list is not the one"),
    (lambda m: m["normalization"]["scale"].__setitem__(0, 9.0), "its normalization is not the one"),
])
def test_config_edited_after_training_is_refused(fitted, tmp_path, edit, named):
    """config.json's gap, steps or windows edited by hand loaded with the weights' shapes unchanged, and every window
    was scored with settings the model never saw; the weights now record what they were trained with."""
    out = fitted.save(tmp_path / "m")
    meta = json.loads((out / "config.json").read_text())
    edit(meta)
    (out / "config.json").write_text(json.dumps(meta))
    with pytest.raises(InputError, match=re.escape(named)):
        MSCRED.load(out, device="cpu")


def test_model_saved_before_the_weights_recorded_their_settings_loads(fitted, tmp_path):
    """A model directory of an earlier release (no ``trained_with`` in the weights' metadata) loads as it did."""
    from safetensors.torch import load_file, save_file

    out = fitted.save(tmp_path / "m")
    save_file(load_file(out / "model.safetensors"), out / "model.safetensors", metadata={"format": "mscred"})
    X = _frame(seed=5)
    np.testing.assert_allclose(MSCRED.load(out, device="cpu").decision_function(X), fitted.decision_function(X),
                               rtol=1e-6)


def test_load_opens_the_weights_file_once(fitted, tmp_path, monkeypatch):
    """load opened model.safetensors twice: once for the metadata saying what the weights were trained with, then
    again (safetensors.torch.load_file) for the tensors. Both come from one safe_open now."""
    import os

    import safetensors
    import safetensors.torch

    out = fitted.save(tmp_path / "m")
    opened, real = [], safetensors.safe_open

    def counting(path, *args, **kwargs):
        opened.append(os.path.basename(str(path)))
        return real(path, *args, **kwargs)

    for module in (safetensors, safetensors.torch):   # (load_file opens through safetensors.torch's own name)
        monkeypatch.setattr(module, "safe_open", counting)
    loaded = MSCRED.load(out, device="cpu")
    assert opened == ["model.safetensors"]
    X = _frame(seed=5)
    np.testing.assert_allclose(loaded.decision_function(X), fitted.decision_function(X), rtol=1e-6)


def test_save_is_atomic(fitted, tmp_path, monkeypatch):
    import safetensors.torch

    out = fitted.save(tmp_path / "m")
    before = (out / "model.safetensors").read_bytes()

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(safetensors.torch, "save_file", broken)
    with pytest.raises(OSError):
        fitted.save(out)
    with pytest.raises(OSError):
        fitted.save(tmp_path / "new")
    assert (out / "model.safetensors").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]


def test_unfitted_model_refuses():
    with pytest.raises(RuntimeError, match="not fitted"):
        MSCRED().decision_function(_frame())


def test_detects_injected_shock_and_its_root_causes():
    n = 6
    model = MSCRED(epochs=3, **SMALL).fit(_frame(rows=1200, n=n))  # the default score (z_sensor)
    X = _frame(rows=600, n=n, seed=1)
    X.loc[300:329, ["pump_1", "pump_4"]] += 2.5   # a 30-step shock on two sensors
    out = model.detect(X)
    assert list(out.columns) == ["row", "score", "is_anomaly", "root_causes", "scales"]
    inside = out.iloc[300:340]
    assert inside["is_anomaly"].any()
    assert out["score"].iloc[300:340].max() > out["score"].iloc[100:280].max()
    flagged = inside[inside["is_anomaly"] == 1]
    top2 = [set(text.split(";")[:2]) for text in flagged["root_causes"]]
    assert sum(t == {"pump_1", "pump_4"} for t in top2) >= len(top2) / 2
    # Outside the shock and its 60-step echo, few rows are flagged.
    assert out["is_anomaly"].iloc[100:280].mean() < 0.2
    assert (out.loc[out["is_anomaly"] == 0, "root_causes"] == "").all()


def test_mse_score():
    model = MSCRED(epochs=1, method="mse", **SMALL).fit(_frame())
    assert model.theta_ == []
    assert model.decision_function(_frame(seed=2)).min() >= 0


def test_z_sensor_score_round_trip(tmp_path):
    model = MSCRED(epochs=1, method="z_sensor", **SMALL).fit(_frame())
    assert model.calibration_.sensor_stats.mean.shape == (4, 5)   # 3 scales + their combination, 5 sensors
    X = _frame(seed=2)
    loaded = MSCRED.load(model.save(tmp_path / "m"), device="cpu")
    np.testing.assert_allclose(loaded.decision_function(X), model.decision_function(X), rtol=1e-6)


def test_detect_first_column_is_timestamp_or_row(fitted):
    X = _frame()
    X.index = pd.date_range("2026-01-01", periods=len(X), freq="min")
    out = fitted.detect(X)
    assert out.columns[0] == "timestamp" and out["timestamp"].iloc[0] == pd.Timestamp("2026-01-01")
    assert fitted.detect(_frame()).columns[0] == "row"


def test_model_trained_for_cuda_loads_anywhere(fitted, tmp_path):
    out = fitted.save(tmp_path / "m")
    meta = json.loads((out / "config.json").read_text())
    meta["config"]["train"]["device"] = "cuda"          # as written by `mscred train --device cuda`
    (out / "config.json").write_text(json.dumps(meta))
    loaded = MSCRED.load(out)                            # auto: CUDA when present, else the CPU
    assert loaded.device_ == ("cuda" if torch.cuda.is_available() else "cpu")
    np.testing.assert_allclose(loaded.decision_function(_frame()), fitted.decision_scores_, rtol=1e-5)


def test_auto_backend_and_graphs_resolve_by_device(fitted):
    """The defaults: backend "auto" and cuda_graphs None train with the reference backend and eager steps on a CPU,
    with the fused backend and CUDA graphs on a CUDA device; the config keeps "auto"."""
    from mscred.config import ModelConfig
    from mscred.model import MSCREDNet
    from mscred.ops import resolve_model_backend
    from mscred.train import graphs_enabled

    assert MSCREDConfig().model.backend == "auto" and MSCREDConfig().train.cuda_graphs is None
    assert fitted.config_.model.backend == "auto" and fitted.net_.cfg.backend == "reference"
    assert resolve_model_backend("auto", "cpu") == "reference"
    with warnings.catch_warnings():   # (its note without CUDA: test_cli.py's test_backend_fused_on_a_cpu_is_a_note)
        warnings.simplefilter("ignore", IgnoredSettingWarning)
        assert resolve_model_backend("fused", "cpu") == "fused"
    assert resolve_model_backend("reference", "cuda") == "reference"
    assert MSCREDNet(ModelConfig(n_sensors=5, channels=(4, 8, 8, 8))).cfg.backend == "reference"  # a bare network
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert not graphs_enabled(None, cpu) and not graphs_enabled(True, cpu)
    assert graphs_enabled(None, cuda) and graphs_enabled(True, cuda) and not graphs_enabled(False, cuda)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the CUDA defaults need a CUDA device")
def test_defaults_on_cuda_train_fused_with_graphs(tmp_path):
    from mscred.ops.triton.runtime import triton

    model = MSCRED(epochs=2, channels=(4, 8, 8, 8), device="cuda", progress=False).fit(_frame())
    expected = "fused" if triton is not None else "reference"
    assert model.config_.model.backend == "auto" and model.net_.cfg.backend == expected
    assert model.config_.train.cuda_graphs is None and np.isfinite(model.decision_scores_).all()
    eager = MSCRED(epochs=2, channels=(4, 8, 8, 8), device="cuda", progress=False, backend="reference",
                   cuda_graphs=False).fit(_frame())
    # Same data, seed and initial weights: graphs and kernels change the rounding, not what is found.
    assert np.corrcoef(model.decision_scores_, eager.decision_scores_)[0, 1] > 0.99
    model.save(tmp_path / "m")
    assert json.loads((tmp_path / "m" / "config.json").read_text())["config"]["model"]["backend"] == "auto"
    loaded = MSCRED.load(tmp_path / "m")  # a one-shot scorer: the reference ops (no kernel start-up)
    assert loaded.net_.cfg.backend == "reference"
    assert np.corrcoef(loaded.decision_function(_frame()), model.decision_scores_)[0, 1] > 0.999


@pytest.mark.parametrize("capability,expected", [((7, 0), "reference"), ((8, 0), "fused"), ((9, 0), "fused")])
def test_auto_backend_needs_ampere(monkeypatch, capability, expected):
    """On a CUDA device where Triton runs, "auto" picks the fused kernels from compute capability 8.0 on (what they
    were written and measured for); an older GPU keeps the reference. (Simulated: no GPU needed.)"""
    import mscred.ops.triton.runtime as runtime
    from mscred.ops import resolve_model_backend

    monkeypatch.setattr(runtime, "is_available", lambda what: (True, ""))
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    assert resolve_model_backend("auto", "cuda") == expected
    monkeypatch.setattr(runtime, "is_available", lambda what: (False, "triton not importable"))
    assert resolve_model_backend("auto", "cuda") == "reference"


def test_scoring_batch_per_device(fitted, monkeypatch):
    """Scoring batches: 1,024 windows of up to 30 sensors on CUDA (eager scoring there is launch-bound up to about
    that), fewer in proportion to the activations for more sensors, 128 on a CPU, never fewer than the training
    batch; the detector hands predict the one for its device and model."""
    from mscred import detector, train
    assert detector.inference_batch("cuda", 128, 30) == detector.INFER_BATCH_CUDA == 1024
    assert detector.inference_batch("cuda", 128, 5) == 1024
    assert detector.inference_batch("cuda", 128, 60) == 256  # 4x the activations per window: a quarter
    assert detector.inference_batch("cuda", 32, 200) == detector.INFER_BATCH  # never below 128
    assert detector.inference_batch("cpu", 32, 30) == detector.INFER_BATCH == 128
    assert detector.inference_batch("cpu", 256, 30) == 256   # at least the training batch, within INFER_BYTES_CPU
    seen = []
    real = train.predict
    monkeypatch.setattr(train, "predict", lambda net, seg, batch, *a, **k: seen.append(batch) or real(net, seg, batch,
                                                                                                     *a, **k))
    fitted.decision_function(_frame(300, seed=1))
    assert seen == [detector.inference_batch("cpu", fitted.config_.train.batch_size, fitted.config_.model.n_sensors)]


@pytest.mark.parametrize("setting", [dict(epochs=0), dict(epochs=-1), dict(epochs="2"), dict(batch_size=0),
                                     dict(channels=(0, 8, 8, 8)), dict(channels=(4, 8)), dict(lr=float("nan")),
                                     dict(val_fraction=1.0), dict(seed=-1), dict(early_stopping_patience=0)])
def test_bad_training_settings_are_refused_at_fit(setting):
    """The settings the CLI's option types check: epochs=0 once trained nothing and scored an untrained network as
    fitted; batch_size=0 and a zero channel count divided by zero inside fit. Stored as given at construction
    (scikit-learn's convention), refused by fit before any work."""
    from mscred.errors import InputError

    model = MSCRED(**setting)
    with pytest.raises(InputError, match=next(iter(setting))):
        model.fit(_frame(300))


@pytest.mark.parametrize("setting, named", [
    (dict(method="foo"), "score.method"), (dict(threshold="pctl"), "score.threshold"),
    (dict(threshold=0.5), "score.threshold"), (dict(beta=-1), "score.beta"), (dict(beta=float("nan")), "score.beta"),
    (dict(theta=float("nan")), "score.theta"), (dict(theta=-1), "score.theta"), (dict(top_k=0), "score.top_k"),
    (dict(top_k=1.5), "score.top_k"), (dict(scales=(7,)), "score.scales"), (dict(scales=()), "score.scales"),
    (dict(percentile=150), "score.percentile"), (dict(pot_risk=0), "score.pot_risk"),
    (dict(theta_quantile=1), "score.theta_quantile"), (dict(windows=()), "signature.windows"),
    (dict(windows=(10, 10)), "signature.windows"), (dict(windows=(10.5,)), "signature.windows"),
    (dict(gap=1.5), "signature.gap"), (dict(steps=0), "signature.steps"), (dict(device="gpu"), "train.device"),
    (dict(lstm_kernel=4), "model.lstm_kernel"), (dict(missing="drop"), "train.missing"),
    (dict(backend="fast"), "model.backend"), (dict(bf16="no"), "train.bf16"), (dict(progress="x"), "train.progress"),
    (dict(cuda_graphs="no"), "train.cuda_graphs"), (dict(lstm_kernel=2.0), "model.lstm_kernel")])
def test_bad_scoring_and_signature_settings_are_refused_at_fit(setting, named):
    """Settings that once failed only after training had run (method, threshold, beta, scales, percentile,
    pot_risk), as internal errors deep inside fit (steps=0, gap=1.5, windows=()), or were accepted and made a model
    that flags nothing (beta or theta NaN, theta < 0) or that load refused (top_k=0, windows=(10.5,)): InputError
    at fit, before any work, naming the setting (stored as given at construction: scikit-learn's convention)."""
    model = MSCRED(**setting)
    with pytest.raises(InputError, match=named.replace(".", r"\.")):
        model.fit(_frame(300))


@pytest.mark.parametrize("section, name, value", [("score", "method", "foo"), ("train", "epochs", 0)])
def test_fit_checks_settings_changed_after_construction(section, name, value):
    given = MSCREDConfig()
    given.train.epochs = 1
    model = MSCRED(given, **SMALL)
    setattr(getattr(model.config, section), name, value)   # (model.config is the object given)
    with pytest.raises(InputError, match=name):
        model.fit(_frame())
    # scikit-learn's convention: no fitted attribute before a fit succeeds (net_ was None)
    assert not hasattr(model, "net_") and not hasattr(model, "history_") and not hasattr(model, "config_")


def test_fit_leaves_the_given_config_alone_and_set_params_unfits_on_model_settings(fitted):
    """fit fills the sensor count into its own copy of the config (the one given stays as given); set_params of a
    runtime setting keeps a fit, of any other setting unfits (the network and thresholds belong to the old ones:
    new windows scored silently with the old network, a new score method failed inside scoring)."""
    import copy

    from mscred.errors import NotFittedError

    given = MSCREDConfig()
    given.train.epochs, given.train.device, given.train.progress, given.model.channels = 1, "cpu", False, (4, 8, 8, 8)
    model = MSCRED(config=given).fit(_frame(300))
    assert given.model.n_sensors == MSCREDConfig().model.n_sensors and model.config_.model.n_sensors == 5
    assert model.config is given and model.get_params()["config"] is given
    model = copy.deepcopy(fitted)
    before = model.decision_function(_frame(300, seed=2))
    model.set_params(progress=True)
    np.testing.assert_array_equal(model.decision_function(_frame(300, seed=2)), before)
    assert model.config_.model.n_sensors == 5 and model.config_.train.progress is True
    model.set_params(device="auto")   # a runtime setting: kept fitted, and scores where now asked
    assert model.net_ is not None and model.device_ == ("cuda" if torch.cuda.is_available() else "cpu")
    model.set_params(device="cpu")
    assert model.device_ == "cpu" and next(model.net_.parameters()).device.type == "cpu"
    model.set_params(windows=(5, 10, 20))
    with pytest.raises(NotFittedError):
        model.decision_function(_frame(300, seed=2))
    # set_params(config=obj) keeps the object, as the constructor does (scikit-learn's check_set_params reads it
    # back with get_params: it once got a copy); on a fitted model, whose fit fills n_sensors, a copy of it
    other = MSCREDConfig()
    assert model.set_params(config=other).get_params()["config"] is other
    kept = copy.deepcopy(fitted)
    runtime = MSCREDConfig.from_dict(kept.config_.to_dict())
    runtime.model.n_sensors, runtime.train.progress = None, True
    kept.set_params(config=runtime)
    assert kept.net_ is not None and kept.config_.model.n_sensors == 5 and runtime.model.n_sensors is None


def test_failed_refit_leaves_the_fitted_model_as_it_was(fitted, monkeypatch):
    """A fit that fails part way (here: the calibration, after training) restores what the estimator held: the
    same network, sensors, calibration and config, still scoring as before."""
    import copy

    from mscred import detector

    model = copy.deepcopy(fitted)
    before = model.decision_function(_frame(seed=4))
    net, sensors, config = model.net_, model.sensors_, model.config_.to_dict()

    def broken(*a, **k):
        raise RuntimeError("calibration failed")

    monkeypatch.setattr(detector.Calibration, "fit", broken)
    with pytest.raises(RuntimeError, match="calibration failed"):
        model.fit(_frame(n=6, seed=5))       # other sensors: fit had replaced sensors_ and net_ before failing
    assert model.net_ is net and model.sensors_ == sensors and model.config_.to_dict() == config
    np.testing.assert_array_equal(model.decision_function(_frame(seed=4)), before)


def test_fit_leaves_the_callers_random_state_alone(monkeypatch):
    """The CPU generator is restored after fit, and a CPU fit seeds no CUDA generator (torch.manual_seed would queue
    one for every CUDA device of a GPU machine)."""
    torch.manual_seed(123)
    state = torch.get_rng_state()
    cuda_seeds = []
    monkeypatch.setattr(torch.cuda, "manual_seed_all", lambda seed: cuda_seeds.append(seed))
    MSCRED(epochs=1, seed=7, **SMALL).fit(_frame(300))
    assert torch.equal(torch.get_rng_state(), state)
    assert cuda_seeds == []


def test_config_as_a_dict():
    model = MSCRED(config={"train": {"epochs": 2}, "score": {"method": "mse"}})
    assert model.resolved_config().train.epochs == 2 and model.resolved_config().score.method == "mse"


def test_detect_keeps_a_sliced_frames_row_numbers(fitted):
    """detect of df.iloc[50:] numbers its rows 50 .., as the frame does, so that the result joins back onto it."""
    X = _frame(400, seed=6)
    found = fitted.detect(X.iloc[50:])
    assert found.columns[0] == "row" and list(found["row"][:3]) == [50, 51, 52]
    np.testing.assert_allclose(found["score"].to_numpy(), fitted.decision_function(X.iloc[50:]))


def test_params_repr_and_not_fitted():
    """get_params / set_params as scikit-learn's clone and searches use them; a repr of the changed settings; an
    unfitted model raises NotFittedError (a RuntimeError and an AttributeError: hasattr is False)."""
    from mscred.errors import NotFittedError

    import copy

    model = MSCRED(epochs=2, method="mse", **SMALL)
    params = model.get_params(deep=False)
    assert params == {"config": None, "epochs": 2, "method": "mse", **SMALL} and params["config"] is model.config
    # What sklearn.base.clone does: deep-copy each parameter, construct, and require get_params to hand back
    # the very objects it passed.
    passed = {name: copy.deepcopy(value) for name, value in params.items()}
    twin = type(model)(**passed)
    assert all(twin.get_params(deep=False)[name] is value for name, value in passed.items())
    assert twin.resolved_config().to_dict() == model.resolved_config().to_dict()
    deep = model.get_params()
    assert deep["train__epochs"] == 2 and deep["score__method"] == "mse"
    assert model.set_params(epochs=4, score__top_k=2) is model
    assert model.resolved_config().train.epochs == 4 and model.resolved_config().score.top_k == 2
    # a bad value is stored as given (scikit-learn's check_set_params reads it back) and refused by fit, unfitted
    assert model.set_params(method="foo").get_params()["method"] == "foo"
    with pytest.raises(InputError, match="score.method"):
        model.fit(_frame(300))
    assert not hasattr(model, "config_")
    model.set_params(method="mse")
    assert model.resolved_config().score.method == "mse"
    text = repr(model)
    assert text.startswith("MSCRED(") and "epochs=4" in text and "method='mse'" in text and "lr=" not in text
    with pytest.raises(NotFittedError):
        model.decision_function(_frame(300))
    assert isinstance(NotFittedError("x"), RuntimeError) and not hasattr(model, "threshold_")


@pytest.mark.parametrize("rows", [600, 607, 1234])
def test_scoring_in_chunks_of_segments_equals_one_pass(fitted, monkeypatch, rows):
    """A long series is scored a bounded number of segments at a time (chunks overlapping by steps - 1): scores,
    flags, root causes and scales equal the one-pass result, at lengths whose last chunk is partial."""
    from mscred import detector

    X = _frame(rows, seed=9)
    X.iloc[300:320, 2] += 3.0   # something to flag, with root causes and scales
    whole = fitted.detect(X)
    assert whole["is_anomaly"].sum() > 0 and (whole["root_causes"] != "").any()
    per_segment = 4 * fitted.config_.model.n_scales * len(fitted.sensors_) ** 2
    for chunk in (7, 8, 13):   # segments per chunk: the smallest that still holds a window and more
        monkeypatch.setattr(detector, "STREAM_SEGMENT_BYTES", chunk * per_segment)
        assert fitted._segments_per_chunk() == chunk
        parts = fitted.detect(X)
        np.testing.assert_allclose(parts["score"], whole["score"], rtol=1e-5, atol=1e-6)
        pd.testing.assert_frame_equal(parts.drop(columns="score"), whole.drop(columns="score"))


def test_fit_scores_a_long_series_in_chunks_as_in_one_pass(fitted, monkeypatch):
    """fit reconstructed every training window at once after the training (with the residuals ~3 x the signature
    matrices: a long, wide series could exhaust the memory only then); past a chunk it calibrates on the validation
    windows and scores the rest a chunk at a time, to the same calibration, scores and flags."""
    from mscred import detector

    X = _frame()
    whole = MSCRED(epochs=2, method="count", theta=None, **SMALL).fit(X)
    per_segment = 4 * fitted.config_.model.n_scales * len(fitted.sensors_) ** 2
    calls, rebuilt = [], []
    original, reconstruct = MSCRED._score_segments, MSCRED._reconstruct
    monkeypatch.setattr(MSCRED, "_score_segments", lambda self, seg: calls.append(len(seg)) or original(self, seg))
    monkeypatch.setattr(detector, "STREAM_SEGMENT_BYTES", 9 * per_segment)
    steps = whole.config_.signature.steps
    with monkeypatch.context() as m:   # (fit's history aside, only scoring reconstructs)
        m.setattr(MSCRED, "_reconstruct", lambda self, seg: rebuilt.append(len(seg) - steps + 1)
                  or reconstruct(self, seg))
        parts = MSCRED(epochs=2, method="count", theta=None, **SMALL).fit(X)
    assert len(calls) > 2 and max(calls) == 9   # (it did go in chunks)
    # each window is reconstructed once: the validation windows had been reconstructed again in the chunks
    assert sum(rebuilt) == (parts.window_of_row(len(X)).max() + 1)
    np.testing.assert_allclose(parts.calibration_.theta, whole.calibration_.theta, rtol=1e-5)
    assert parts.threshold_ == pytest.approx(whole.threshold_, rel=1e-5)
    np.testing.assert_allclose(parts.decision_scores_, whole.decision_scores_, rtol=1e-5, atol=1e-6)
    assert (parts.labels_ == whole.labels_).all()
    assert (parts.validation_rows_ == whole.validation_rows_).all()


@pytest.mark.parametrize("bad", [1.5, "cfg", [1]])
def test_config_of_another_type_is_an_input_error(bad):
    """config= of another type was an AttributeError from deep inside (scikit-learn's checks expect a ValueError
    for a bad parameter value; InputError is one). Stored as given, refused by fit."""
    with pytest.raises(InputError, match="config: expected an MSCREDConfig"):
        MSCRED(config=bad).fit(_frame(300))
    with pytest.raises(InputError, match="config: expected an MSCREDConfig"):
        MSCRED().set_params(config=bad).fit(_frame(300))


@pytest.mark.parametrize("bad, named", [({"train": 5}, "TrainConfig: expected an object"),
                                        ({"signature": []}, "SignatureConfig: expected an object"),
                                        ({"train": {"epochz": 3}}, "unknown TrainConfig setting")])
def test_config_dict_of_the_wrong_shape_is_an_input_error(bad, named):
    """A section that is not a dict was a TypeError ('int' object is not iterable) or an AttributeError."""
    with pytest.raises(InputError, match=f"config: {named}"):
        MSCRED(config=bad).fit(_frame(300))
    with pytest.raises(InputError, match=f"config: {named}"):
        MSCRED().set_params(config=bad).fit(_frame(300))


def test_resume_on_other_data_is_refused_in_python_too(tmp_path):
    """The CLI's --resume checked the data against the checkpoint's record; fit(resume=True) did not, and went on
    training a model of other data (the network does not depend on the sensor count or the values)."""
    ckpt = tmp_path / "ckpt"
    MSCRED(epochs=1, **SMALL).fit(_frame(), checkpoint_dir=ckpt)
    with pytest.raises(InputError, match="other data than the checkpoint"):
        MSCRED(epochs=2, **SMALL).fit(_frame(seed=5), checkpoint_dir=ckpt, resume=True)
    renamed = _frame().rename(columns={"pump_0": "valve_0"})
    with pytest.raises(InputError, match="other sensors than the checkpoint.*missing pump_0; new valve_0"):
        MSCRED(epochs=2, **SMALL).fit(renamed, checkpoint_dir=ckpt, resume=True)
    with pytest.warns(NoteWarning, match="after epoch 1 of 2"):
        resumed = MSCRED(epochs=2, **SMALL).fit(_frame(), checkpoint_dir=ckpt, resume=True)   # the same data resumes
    assert len(resumed.history_) == 2


def test_load_of_a_file_says_it_is_a_file(tmp_path):
    (tmp_path / "notes.txt").write_text("notes")
    with pytest.raises(InputError, match="notes.txt: is a file, not a model directory"):
        MSCRED.load(tmp_path / "notes.txt")
    with pytest.raises(InputError, match="model directory not found"):
        MSCRED.load(tmp_path / "absent")


def test_save_and_checkpoints_under_a_file_are_input_errors(fitted, tmp_path):
    """save("notes.txt/model") and fit(checkpoint_dir="notes.txt") were FileExistsErrors about a path the caller
    did not write; save("notes.txt") was already an InputError."""
    notes = tmp_path / "notes.txt"
    notes.write_text("notes")
    with pytest.raises(InputError, match="notes.txt is a file, not a folder"):
        fitted.save(notes / "model")
    with pytest.raises(InputError, match="notes.txt is a file, not a folder"):
        MSCRED(epochs=1, **SMALL).fit(_frame(), checkpoint_dir=notes)
    with pytest.raises(InputError, match="notes.txt is a file, not a folder"):
        MSCRED(epochs=1, **SMALL).fit(_frame(), checkpoint_dir=notes / "deeper" / "ckpt")
    assert notes.read_text() == "notes"


def test_training_that_would_not_fit_the_cpu_memory_is_refused_up_front(monkeypatch):
    """The batch holds every window's activations, which grow with the sensors squared (200 sensors at batch 32:
    ~24 GB): past the memory available the OOM killer ended the process without a word. Where micro-batches fit,
    fit runs them (tests/test_micro_batch.py); where not even one window does, it refuses up front."""
    import mscred.detector as detector

    from mscred.detector import training_memory, training_micro_batch

    # the estimate against the measurements it was taken from (ru_maxrss, results/train_memory/): above each, by
    # less than a third
    channels = (32, 64, 128, 256)
    for sensors, per_pass, measured in ((40, 32, 1.63e9), (80, 2, 1.74e9), (80, 8, 2.41e9), (80, 16, 3.03e9),
                                        (80, 32, 4.14e9), (120, 4, 2.44e9), (120, 16, 4.86e9)):
        assert measured <= training_memory(sensors, 32, channels, 5, per_pass=per_pass) < 1.3 * measured
    cfg = MSCREDConfig()
    cfg.model.n_sensors = 200
    assert training_micro_batch("t.csv", cfg, 32, None) is None            # the OS does not say: no check
    assert training_micro_batch("t.csv", cfg, 32, 64 * 2 ** 30) is None    # fits
    with pytest.raises(InputError, match=r"t.csv: training 200 sensors at batch 32 needs ~18.\d GiB on the CPU "
                                         r".*0.25 GiB is available; even one window does not fit"):
        training_micro_batch("t.csv", cfg, 32, 2 ** 28)
    # fit checks it before any training, with the batch capped at the training windows
    monkeypatch.setattr(detector, "available_memory", lambda: 2 ** 20)
    with pytest.raises(InputError, match="training data: training 5 sensors at batch 32 needs"):
        MSCRED(epochs=1, **SMALL).fit(_frame())


def test_pot_on_too_few_validation_windows_says_it_has_no_tail():
    """On 13 validation windows POT's initial threshold (the 0.98 quantile) is their largest score: pot() returns
    it without a tail fit, which a user read as POT's answer (the same as --threshold percentile's there)."""
    from mscred.errors import CalibrationWarning

    with pytest.warns(CalibrationWarning, match=r"--threshold pot on \d+ validation windows: .* is their largest "
                                                r"score.*POT needs more than 50 validation windows") as caught:
        model = MSCRED(epochs=1, threshold="pot", **SMALL).fit(_frame())
    assert len(caught) == 1
    scores = model.decision_scores_[model.validation_rows_]
    assert model.threshold_ == pytest.approx(scores.max())
    with warnings.catch_warnings():
        warnings.simplefilter("error", CalibrationWarning)
        MSCRED(epochs=1, **SMALL).fit(_frame())   # beta_max there: no such note


def test_fit_notes_rows_labelled_anomalous():
    """A label column is ignored by training: the CLI said so, a Python fit did not."""
    from mscred.errors import NoteWarning

    frame = _frame()
    frame["label"] = 0
    frame.loc[100:104, "label"] = 1
    with pytest.warns(NoteWarning, match=r"training data: 5 row\(s\) are labelled anomalous \(label 1\); training "
                                         "takes every row as normal"):
        MSCRED(epochs=1, **SMALL).fit(frame)
