"""scikit-learn's own estimator checks, run on MSCRED: parameters stored unchanged at construction and by
``set_params``, checked by ``fit`` (and the scoring methods and ``save``, which use them) with the InputError the
constructor once raised; no fitted attribute before ``fit``; scikit-learn's NotFittedError before it.

Every check runs (``test_every_sklearn_check``). Those that fit on scikit-learn's own data (1 to 100 rows: fewer than
one MSCRED input) or look for scikit-learn's wording in an error fail, and are declared so with their reasons
(``EXPECTED_FAILURES``, scikit-learn's ``expected_failed_checks``: reported as xfail, and an error where one passes);
``test_the_expected_failures_fail_for_their_reason`` checks each fails for its reason and no other. Models are tiny
(5 sensors, 300 rows, channels 4/8/8/8, one epoch on the CPU).
"""
from __future__ import annotations

import copy
import inspect
import pickle
import re
import subprocess
import sys

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


# MSCRED needs 110 rows at its default scales (SPEC: the largest window, 60, plus (5 - 1) segment gaps of 10 for one
# input, and a gap more to validate the threshold on): scikit-learn's checks fit on 1 to 100 rows, which it refuses.
_ROWS = ("fits on scikit-learn's small data ({}); MSCRED needs at least 110 rows (its largest window, 60, plus 4 "
         "segment gaps of 10, and windows to validate the threshold on) and refuses fewer with an InputError")
_TOO_FEW = r"InputError: training data: \d+ rows is too few to train"
_WORDS = ("refused, rightly, with an InputError (a ValueError) in mscred's words ({}), not the words the check "
          "looks for ({})")
# check name -> (the reason, a pattern of the error's message or of its cause's, "Type: message")
EXPECTED_FAILURES = {
    **{name: (_ROWS.format(rows), _TOO_FEW) for name, rows in (
        ("check_fit_score_takes_y", "30 rows"), ("check_estimators_overwrite_params", "21 rows"),
        ("check_dont_overwrite_parameters", "20 rows"), ("check_estimators_fit_returns_self", "21 rows"),
        ("check_readonly_memmap_input", "21 rows"), ("check_n_features_in_after_fitting", "15 rows"),
        ("check_estimators_dtypes", "20 rows"), ("check_dtype_object", "56 rows"),
        ("check_pipeline_consistency", "30 rows"), ("check_estimators_nan_inf", "10 rows"),
        ("check_estimators_pickle", "30 rows"), ("check_f_contiguous_array_estimator", "20 rows"),
        ("check_methods_sample_order_invariance", "20 rows"), ("check_methods_subset_invariance", "20 rows"),
        ("check_dict_unchanged", "20 rows"), ("check_fit_idempotent", "80 rows"),
        ("check_fit_check_is_fitted", "100 rows"), ("check_n_features_in", "100 rows"),
        ("check_fit2d_predict1d", "20 rows"),
        ("check_fit2d_1sample", "1 row, and looks for '1 sample' in the error"),
        ("check_fit2d_1feature", "10 rows, and looks for '1 feature(s)' in the error"))},
    "check_complex_data": (_WORDS.format("complex numbers; expected real numbers", "Complex data not supported"),
                           r"InputError: training data: column '\w+': complex numbers"),
    "check_estimators_empty_data_messages": (
        _WORDS.format("no sensor columns", "0 feature(s) (shape=(12, 0)) while a minimum of 1 is required"),
        r"InputError: training data: no sensor columns"),
}
_REASONS = {name: reason for name, (reason, _) in EXPECTED_FAILURES.items()}


def _every_check():
    """scikit-learn's parametrisation over all its checks of MSCRED(**SMALL), the expected failures declared
    (strict: one that passes is an error, from scikit-learn 1.8); a skipped test before 1.6, which cannot declare
    them."""
    params = inspect.signature(estimator_checks.parametrize_with_checks).parameters
    if "expected_failed_checks" not in params:
        why = f"scikit-learn {sklearn.__version__} cannot declare expected failures (1.6 and later can)"
        return pytest.mark.parametrize("estimator, check", [pytest.param(None, None, marks=pytest.mark.skip(why))])
    strict = {"xfail_strict": True} if "xfail_strict" in params else {}
    return estimator_checks.parametrize_with_checks([MSCRED(**SMALL)], expected_failed_checks=lambda _: _REASONS,
                                                    **strict)


@_every_check()
def test_every_sklearn_check(estimator, check):
    check(estimator)


def _said(exc: BaseException) -> str:
    """The exception and its causes as "Type: message" lines (a wording check's AssertionError wraps ours)."""
    lines = []
    while exc is not None:
        lines.append(f"{type(exc).__name__}: {exc}")
        exc = exc.__cause__ or exc.__context__
    return "\n".join(lines)


def test_the_expected_failures_fail_for_their_reason():
    """Each declared failure fails, and for its declared reason (an xfail alone would hide another error); every
    other check passes (or is skipped by scikit-learn itself: array API input without SCIPY_ARRAY_API)."""
    if "expected_failed_checks" not in inspect.signature(estimator_checks.check_estimator).parameters:
        pytest.skip(f"scikit-learn {sklearn.__version__} cannot declare expected failures (1.6 and later can)")
    results = estimator_checks.check_estimator(MSCRED(**SMALL), expected_failed_checks=_REASONS, on_fail=None,
                                               on_skip=None)
    for result in results:
        name, status, exc = result["check_name"], result["status"], result["exception"]
        if name in EXPECTED_FAILURES:
            assert status == "xfail", f"{name} {status}; declared to fail: {_REASONS[name]}"
            assert re.search(EXPECTED_FAILURES[name][1], _said(exc)), f"{name} failed otherwise: {_said(exc)}"
        else:
            assert status in ("passed", "skipped"), f"{name} {status}: {_said(exc)}"
    assert {r["check_name"] for r in results} >= {"check_estimators_unfitted", "check_fit_idempotent"}


def test_not_fitted_is_scikit_learns_not_fitted_error():
    """check_estimators_unfitted asks for scikit-learn's own class (``raises(NotFittedError)``: an issubclass test),
    which mscred's NotFittedError, a RuntimeError and an AttributeError, was not. With scikit-learn imported, the
    error is both classes, still a RuntimeError and an AttributeError (hasattr is False), and pickles as itself
    (joblib's workers send errors back pickled)."""
    from sklearn.exceptions import NotFittedError as SklearnNotFittedError

    model = MSCRED(**SMALL)
    for use in (model.decision_function, model.predict, model.detect, lambda X: model.threshold_):
        with pytest.raises(SklearnNotFittedError) as raised:
            use(_frame())
        assert isinstance(raised.value, (NotFittedError)) and isinstance(raised.value, RuntimeError)
    assert not hasattr(model, "threshold_") and repr(raised.value).startswith("NotFittedError('this MSCRED")
    again = pickle.loads(pickle.dumps(raised.value))
    assert type(again) is type(raised.value) and again.args == raised.value.args
    estimator_checks.check_estimators_unfitted("MSCRED", model)


def test_without_scikit_learn_the_error_imports_nothing():
    """Where scikit-learn is not imported, NotFittedError is mscred's own (a RuntimeError, a ValueError and an
    AttributeError) and raising it imports nothing: scikit-learn is no dependency."""
    code = ("import sys\nfrom mscred.detector import MSCRED\nfrom mscred.errors import NotFittedError\n"
            "try:\n    MSCRED().decision_function([[0.0] * 5] * 200)\nexcept NotFittedError as err:\n    e = err\n"
            "assert 'sklearn' not in sys.modules, 'imported scikit-learn'\n"
            "assert type(e) is NotFittedError and isinstance(e, (RuntimeError)) and isinstance(e, ValueError)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


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


@pytest.mark.parametrize("kind", ["csr_array", "csr_matrix", "coo_array"])
def test_sparse_input_is_refused_by_name(kind):
    """A scipy sparse matrix is refused in one line that says sparse input is not supported and what to pass (it
    was "expected a table (DataFrame), got csr_array"), before any training; scipy comes with scikit-learn."""
    import scipy.sparse

    data = getattr(scipy.sparse, kind)(np.random.default_rng(0).random((300, 5)))
    with pytest.raises(InputError, match=rf"training data: a sparse {kind}: sparse input is not supported"):
        MSCRED(**SMALL).fit(data)
