"""The Python API as a data scientist uses it: settings and their errors, scikit-learn's conventions, array-like
input, and a hand-edited model directory. Each test pins a problem an audit of ``from mscred import MSCRED`` found.

Models are tiny (5 sensors, 300 rows, channels 4/8/8/8, one epoch on the CPU): the file runs in seconds.
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from mscred.config import MSCREDConfig
from mscred.detector import MSCRED
from mscred.errors import InputError

SMALL = dict(channels=(4, 8, 8, 8), device="cpu", epochs=1, progress=False)


def _frame(rows: int = 300, n: int = 5, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    t = np.arange(rows)[:, None]
    values = np.sin(t / (8 + 2 * np.arange(n)) + rng.uniform(0, 6, n)) + 0.05 * rng.standard_normal((rows, n))
    return pd.DataFrame(values, columns=[f"pump_{i}" for i in range(n)])


@pytest.fixture(scope="module")
def fitted() -> MSCRED:
    return MSCRED(**SMALL).fit(_frame())


# ------------------------------------------------------------------------------------------------ settings
def test_a_misspelt_config_section_is_refused():
    """{"trian": {...}} was ignored without a word (unknown fields of a section were refused, unknown sections not):
    the model trained with the default 10 epochs."""
    with pytest.raises(InputError, match="config: unknown settings section.*trian"):
        MSCRED(config={"trian": {"epochs": 3}}).fit(_frame())
    with pytest.raises(ValueError, match="trian"):
        MSCREDConfig.from_dict({"trian": {}})


def test_a_config_whose_section_is_not_a_section_is_an_input_error():
    """MSCREDConfig(train=5) was an AttributeError ('int' object has no attribute 'epochs') from the checks."""
    with pytest.raises(InputError, match="config.train: expected a TrainConfig, got int"):
        MSCRED(config=MSCREDConfig(train=5)).fit(_frame())


def test_a_seed_beyond_64_bits_fails_before_any_work():
    """seed=2**64 passed the checks and failed at fit, after the signature matrices, with torch's ValueError
    "Overflow when unpacking long long"; the CLI's --seed stops below 2**63. Refused by fit's check of the
    settings, first."""
    with pytest.raises(InputError, match=r"train\.seed .*below 2\*\*63"):
        MSCRED(seed=2 ** 64).fit(_frame())
    assert MSCRED(seed=2 ** 63 - 1).resolved_config().train.seed == 2 ** 63 - 1


@pytest.mark.parametrize("name", ["epochs", "batch_size", "micro_batch"])
def test_counts_beyond_json_integers_fail_at_fit(name):
    """The CLI stops --epochs, --batch-size and --micro-batch at 2**53 (config.json records them, and a reader of
    doubles rounds beyond); MSCRED(batch_size=2**60) was accepted."""
    with pytest.raises(InputError, match=rf"train\.{name} {2 ** 53 + 1}: must be at most 2\*\*53"):
        MSCRED(**{name: 2 ** 53 + 1}).fit(_frame())
    assert getattr(MSCRED(**{name: 2 ** 53}).resolved_config().train, name) == 2 ** 53


def test_an_unknown_setting_is_a_value_error_too_and_names_the_nearest():
    """scikit-learn's set_params raises ValueError for an invalid name (a grid search's ``except ValueError``), the
    constructor a TypeError: the error is both, and says which name was meant. Both store the name as given
    (scikit-learn's convention, which its check_do_not_raise_errors_in_init_or_set_params holds them to): fit
    raises it, before any work."""
    for made in (MSCRED(epoch=3), MSCRED().set_params(epoch=3)):
        with pytest.raises(ValueError, match="unknown setting 'epoch'; did you mean 'epochs'"):
            made.fit(_frame())
    with pytest.raises(TypeError, match="did you mean 'train__epochs'"):
        MSCRED().set_params(model__epochs=3).fit(_frame())


def test_set_params_config_none_means_the_defaults_as_in_the_constructor():
    """set_params(config=None) kept the current settings; scikit-learn's set_params(p=v) is the estimator made
    with p=v, and MSCRED(config=None) is the defaults. Leaving config out keeps the current settings."""
    model = MSCRED(epochs=5, beta=2.0)
    assert model.set_params(lr=0.1).resolved_config().train.epochs == 5
    cfg = model.set_params(config=None, seed=3).resolved_config()
    assert cfg.train.epochs == 10 and cfg.score.beta == 1.5 and cfg.train.seed == 3


# ------------------------------------------------------------------------------------------------ scikit-learn
def test_sklearn_is_fitted_reads_the_fit_not_the_attribute_names(fitted):
    """scikit-learn's check_is_fitted took MSCRED() for fitted: ``net_`` (then None) ends in "_". Fitted
    attributes are now absent before fit, as scikit-learn's convention has them."""
    import copy

    assert MSCRED().__sklearn_is_fitted__() is False
    assert not hasattr(MSCRED(), "net_") and not hasattr(MSCRED(), "config_")
    assert fitted.__sklearn_is_fitted__() is True
    unfitted = copy.deepcopy(fitted).set_params(windows=(5, 10, 20))   # a model setting: unfits
    assert unfitted.__sklearn_is_fitted__() is False and not hasattr(unfitted, "net_")


def test_scikit_learn_utilities_accept_the_estimator(fitted):
    """scikit-learn >= 1.6 asks every estimator for __sklearn_tags__ (check_is_fitted, Pipeline, ...): without
    them each failed with an AttributeError."""
    sklearn = pytest.importorskip("sklearn")
    if tuple(int(p) for p in sklearn.__version__.split(".")[:2]) < (1, 6):
        pytest.skip("tags are read from __sklearn_tags__ since scikit-learn 1.6")
    from sklearn.exceptions import NotFittedError
    from sklearn.utils import get_tags
    from sklearn.utils.validation import check_is_fitted

    with pytest.raises(NotFittedError):
        check_is_fitted(MSCRED())
    check_is_fitted(fitted)
    assert get_tags(MSCRED()).input_tags.allow_nan is False
    assert get_tags(MSCRED(missing="interpolate")).input_tags.allow_nan is True


# ------------------------------------------------------------------------------------------------ input
def test_a_list_of_rows_is_taken_as_an_array(fitted):
    """scikit-learn takes any array-like; a list of rows was "expected a table (DataFrame), got list"."""
    X = _frame(seed=2)
    np.testing.assert_array_equal(fitted.decision_function(X.to_numpy().tolist()),
                                  fitted.decision_function(X.to_numpy()))
    with pytest.raises(InputError, match="input: a list whose rows are not all of one length"):
        fitted.predict([[1.0] * 5, [1.0] * 4])
    model = MSCRED(**SMALL).fit(X.to_numpy().tolist())
    assert model.sensors_ == [f"sensor_{i}" for i in range(5)]


# ------------------------------------------------------------------------------------------------ load
@pytest.mark.parametrize("edit, named", [
    (lambda meta: meta["sensors"].__setitem__(4, "pump;4"), "sensor 'pump;4' holds ';'"),
    (lambda meta: meta["calibration"].__setitem__("threshold", True), "calibration threshold: True is not a number"),
    (lambda meta: meta["calibration"].__setitem__("threshold", "1.5"), "calibration threshold: '1.5' is not a"),
    (lambda meta: meta["calibration"]["scale_thresholds"].__setitem__(0, None), "scale_thresholds: None is not"),
    (lambda meta: meta.__setitem__("history", "garbage"), "history is a str, not a list"),
])
def test_load_refuses_hand_edits_that_fit_or_save_never_write(fitted, tmp_path, edit, named):
    """A sensor name holding ';' (fit refuses it: root_causes would read it back as two sensors), a threshold of
    true or "1.5" (float() made them 1.0 and 1.5) and a history that is not a list (kept, and saved again) loaded
    as if they were a model."""
    out = fitted.save(tmp_path / "m")
    meta = json.loads((out / "config.json").read_text())
    edit(meta)
    (out / "config.json").write_text(json.dumps(meta))
    with pytest.raises(InputError, match="config.json: damaged model config.*" + named.replace("(", r"\(")):
        MSCRED.load(out, device="cpu")
