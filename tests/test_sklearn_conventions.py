"""scikit-learn's own estimator checks of the constructor and the parameters, run on MSCRED: parameters stored
unchanged at construction and by ``set_params``, checked by ``fit`` (and the scoring methods and ``save``, which use
them) with the InputError the constructor once raised; no fitted attribute before ``fit``.

Checks that fit on scikit-learn's own data (20 rows of 3 features: fewer than one MSCRED window, and fewer than its
4 sensors) are not run: MSCRED refuses that data, rightly, with an InputError. Models are tiny (5 sensors, 300 rows,
channels 4/8/8/8, one epoch on the CPU).
"""
from __future__ import annotations

import copy
import re

import numpy as np
import pytest

from mscred.config import MSCREDConfig
from mscred.detector import MSCRED
from mscred.errors import InputError, NotFittedError

sklearn = pytest.importorskip("sklearn")
from sklearn.base import clone  # noqa: E402  (after the skip: scikit-learn is a dev extra, not a dependency)
from sklearn.utils import estimator_checks  # noqa: E402
from test_audit_python_api import SMALL, _frame, fitted  # noqa: E402, F401  (fitted: the fixture)


# The checks of __init__, get_params and set_params (the first four once failed), and of what scikit-learn's
# utilities read (repr, clone, tags). A check older scikit-learn releases lack is skipped.
CHECKS = ["check_no_attributes_set_in_init", "check_parameters_default_constructible", "check_set_params",
          "check_do_not_raise_errors_in_init_or_set_params", "check_get_params_invariance", "check_estimator_repr",
          "check_estimator_cloneable", "check_estimator_tags_renamed", "check_valid_tag_types", "check_mixin_order"]

ESTIMATORS = {
    "default": lambda: MSCRED(),
    "keywords": lambda: MSCRED(epochs=2, device="cpu", windows=[10, 20], score__top_k=2),
    "config object": lambda: MSCRED(config=MSCREDConfig(), theta=None),
    "config dict": lambda: MSCRED(config={"train": {"epochs": 2}}),
}


@pytest.mark.parametrize("estimator", ESTIMATORS)
@pytest.mark.parametrize("check", CHECKS)
def test_sklearn_estimator_check(check, estimator):
    run = getattr(estimator_checks, check, None)
    if run is None:
        pytest.skip(f"scikit-learn {sklearn.__version__} has no {check}")
    run("MSCRED", ESTIMATORS[estimator]())


# (parameters, the InputError's whole message): each as the constructor raised it, now raised by fit
BAD = [
    (dict(config=-1), "config: expected an MSCREDConfig or its dict (MSCREDConfig.to_dict()), got int"),
    (dict(config={"trian": {"epochs": 3}}),
     "config: unknown settings section(s): trian; the sections are signature, model, train, score"),
    (dict(epochs=0), "train.epochs 0: must be an integer >= 1"),
    (dict(epoch=3), "MSCRED got an unknown setting 'epoch'; did you mean 'epochs'?"),
    (dict(method="foo"), "score.method 'foo': must be one of "),
    (dict(device="gpu"), "train.device 'gpu': must be one of auto, cpu, cuda"),
]


@pytest.mark.parametrize("params, message", BAD)
def test_a_bad_parameter_is_stored_and_refused_at_fit_with_its_message(params, message):
    """Construction and set_params store a bad value as given (scikit-learn's convention); fit refuses it first,
    with the one-line InputError that names the setting, and leaves the estimator unfitted."""
    model = MSCRED(**params)
    assert all(model.get_params(deep=False)[name] is value for name, value in params.items())
    with pytest.raises(InputError) as raised:
        model.fit(_frame())
    assert str(raised.value).startswith(message) and "\n" not in str(raised.value)
    assert not hasattr(model, "net_") and not hasattr(model, "config_")
    # the same through set_params, and through resolved_config (what the CLI reads before training)
    later = MSCRED(**SMALL).set_params(**params)
    with pytest.raises(InputError, match=re.escape(message)):
        later.fit(_frame())
    with pytest.raises(InputError, match=re.escape(message)):
        later.resolved_config()


def test_a_bad_parameter_set_on_a_fitted_model_is_refused_where_used(fitted, tmp_path):
    """set_params on a fitted model stores a bad value too: the scoring methods and save, which use the settings,
    refuse it with the message fit gives; set back, the fit scores as before (it was kept)."""
    model = copy.deepcopy(fitted)
    before = model.decision_function(_frame(seed=1))
    model.set_params(device="gpu")
    for use in (lambda: model.decision_function(_frame(seed=1)), lambda: model.predict(_frame(seed=1)),
                lambda: model.detect(_frame(seed=1)), lambda: model.save(tmp_path / "m")):
        with pytest.raises(InputError, match=re.escape("train.device 'gpu': must be one of auto, cpu, cuda")):
            use()
    assert not (tmp_path / "m").exists()
    model.set_params(device="cpu")
    np.testing.assert_array_equal(model.decision_function(_frame(seed=1)), before)


def test_fitted_attributes_appear_with_fit_and_parameters_stay_as_given(fitted):
    """No attribute ending in "_" before fit (hasattr False: net_ was None); fit leaves the parameters as given and
    keeps its settings, the sensor count filled in, as config_; clone gives an unfitted twin of the parameters."""
    given = MSCREDConfig()
    model = MSCRED(given, **SMALL)
    assert not any(hasattr(model, name) for name in ("net_", "config_", "calibration_", "sensors_", "history_"))
    with pytest.raises(NotFittedError):
        model.decision_function(_frame())
    params = model.get_params(deep=False)
    model.fit(_frame())
    after = model.get_params(deep=False)
    assert after.keys() == params.keys() and all(after[name] is value for name, value in params.items())
    assert model.config is given and given.model.n_sensors == MSCREDConfig().model.n_sensors
    assert model.config_.model.n_sensors == 5 and model.config_.train.epochs == 1
    twin = clone(fitted)
    assert not hasattr(twin, "net_") and twin.get_params(deep=False).keys() == fitted.get_params(deep=False).keys()
    assert twin.resolved_config().to_dict() == fitted.resolved_config().to_dict()


def test_a_setting_given_again_under_its_other_name_replaces_it():
    """set_params(train__epochs=4) on MSCRED(epochs=2): the latest wins, and get_params lists it once."""
    model = MSCRED(epochs=2, beta=2.0).set_params(train__epochs=4)
    assert model.get_params(deep=False) == {"config": None, "beta": 2.0, "train__epochs": 4}
    assert model.resolved_config().train.epochs == 4
    assert model.set_params(epochs=5).resolved_config().train.epochs == 5
    assert "train__epochs" not in model.get_params(deep=False)


def test_a_loaded_model_keeps_its_settings_as_the_parameter(fitted, tmp_path):
    """MSCRED.load: the saved settings are the ``config`` parameter (clone makes an unfitted model of them) and a
    copy of them the fit's, config_."""
    loaded = MSCRED.load(fitted.save(tmp_path / "m"), device="cpu")
    assert loaded.__sklearn_is_fitted__() and loaded.config.to_dict() == fitted.config_.to_dict()
    assert loaded.config_.to_dict() == fitted.config_.to_dict() and loaded.config_ is not loaded.config
    np.testing.assert_allclose(loaded.decision_function(_frame(seed=1)), fitted.decision_function(_frame(seed=1)),
                               rtol=1e-6)
    twin = clone(loaded)
    assert not twin.__sklearn_is_fitted__() and twin.resolved_config().to_dict() == loaded.config.to_dict()
