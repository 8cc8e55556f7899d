"""The MSCRED estimator: DataFrames in, per-timestamp scores, labels and root causes by sensor name out.

Follows pyod's contract: ``fit(X)`` sets ``decision_scores_`` (per training row), ``threshold_`` and ``labels_``;
``decision_function(X)`` gives per-row scores (higher = more anomalous) and ``predict(X)`` 0/1 labels. ``detect(X)``
adds root causes and the scales that flag each row. ``save(dir)`` writes ``config.json`` (every setting, the
normalisation, the calibration, the sensor names, the package version) and ``model.safetensors``; ``MSCRED.load``
reads them back without unpickling anything.

Pipeline of ``fit``: validate -> min-max normalise (statistics of the training data) -> signature matrices ->
split the windows (the last ``val_fraction`` of them validate) -> train -> reconstruct the validation windows ->
calibrate theta and the thresholds on them (:class:`mscred.detect.Calibration`) -> score the training rows.
"""
from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import math
import os
import warnings
from pathlib import Path
from typing import Any, Optional

import numpy as np
import pandas as pd

from mscred import __version__
from mscred.atomic import atomic_path, save_safetensors
from mscred.config import (RUNTIME_SETTINGS, MSCREDConfig, ModelConfig, ScoreConfig, SignatureConfig, TrainConfig,
                           finite_number)
from mscred.detect import SENSOR_SCORE_PREFIX, Calibration, WindowResult, score_windows, timestamp_windows
from mscred.data.io import LABEL
from mscred.data.parts import in_order_of, is_parts, joined, record_signature, window_starts
from mscred.errors import CalibrationWarning, InputError, MicroBatchWarning, NotFittedError, NoteWarning

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
MODEL_FILES = (CONFIG_FILE, WEIGHTS_FILE)  # all a model directory holds: what save() may replace
MIN_SENSORS = 4   # the network's smallest signature matrix (mscred.model: n >= 4 sensors)
# model.safetensors' metadata key recording the signature settings, sensors and normalisation the weights were trained
# with (``_check_trained_with``), so that config.json edited afterwards is refused rather than scored with.
TRAINED_WITH = "trained_with"
FORMAT = "mscred-model"
FORMAT_VERSION = 1
# Fewer validation windows than this leave the threshold to chance: one makes z_sensor's standardised score 0 on it
# (the threshold 0 then flags every row scored above it), two give a spread from a pair, and up to ~10 the spread
# is still too narrow: on a synthetic normal process the default threshold flagged 43-50% of the training rows
# themselves at 5 validation windows, 8-13% at 8, none at 13 (and 81-84%, 25-32%, 3-5% of later normal rows;
# benchmarks/calibration_small_data.py, results/calibration_small_data/). Tables under ~500 rows at the default
# settings (validation 25% of the windows) have fewer; train says so after training (CalibrationWarning).
MIN_VALIDATION_WINDOWS = 10
# Between the sensor names of detect's root_causes column (SPEC); fit refuses a sensor name that holds it.
ROOT_CAUSE_SEPARATOR = ";"
# Windows per inference batch: larger than a training batch (no gradients to keep), still small in memory. On CUDA
# eager scoring is bound by kernel launches up to about a thousand windows: the H200 took 7.4-10.4 ms per call from
# 32 to 1,024 windows of 30 sensors (bf16, benchmarks/results/window_model/), so batches of 1,024 score ~8x more
# windows per second than batches of 128. Activations grow with the square of the sensor count, so past
# INFER_SENSORS_CUDA sensors the CUDA batch shrinks in proportion (down to INFER_BATCH), holding no more than 1,024
# windows of 30 sensors do.
INFER_BATCH = 128
INFER_BATCH_CUDA = 1024
INFER_SENSORS_CUDA = 30
# On a CPU a scoring batch holds ~3.3 KB of activations per window per sensor squared at the default channels
# (a no-grad forward of 128 windows peaked at 1.36 GB with 40 sensors and 3.37 GB with 80, the difference over
# 128 x (80^2 - 40^2); benchmarks/measure_train_memory.py --score, results/train_memory/): 128 windows of 200
# sensors would need ~17 GB. The CPU batch is kept within INFER_BYTES_CPU of them (128 windows up to ~50 sensors,
# 8 at 200); past a few dozen windows of that size a smaller batch costs a CPU no speed.
SCORE_BYTES_PER_WINDOW_SENSOR2 = 3_300
INFER_BYTES_CPU = 2 ** 30
# Signature matrices scored at a time (``MSCRED._score_rows``), whatever the series' length: one pass up to ~24,000
# segments of 30 sensors (~240,000 rows at the default gap). 100,000 rows x 80 sensors then peaked at 1.6 GB of
# process memory against 2.7 GB in one pass (benchmarks/results/detect_memory/).
STREAM_SEGMENT_BYTES = 256 * 2 ** 20


def inference_batch(device: str, train_batch: int, n_sensors: int) -> int:
    """Windows per scoring batch on ``device`` ("cpu" or "cuda", as ``_resolve_device`` gives it) for a model of
    ``n_sensors``: at least the training batch, except on a CPU where that many windows of this size would hold
    more than INFER_BYTES_CPU of activations (then as many as fit in them, at least one)."""
    if device != "cuda":
        fit = INFER_BYTES_CPU // (SCORE_BYTES_PER_WINDOW_SENSOR2 * n_sensors ** 2)
        return max(1, min(max(train_batch, INFER_BATCH), fit))
    scaled = INFER_BATCH_CUDA * INFER_SENSORS_CUDA ** 2 // max(n_sensors, INFER_SENSORS_CUDA) ** 2
    return max(train_batch, INFER_BATCH, scaled)


class UnknownSettingError(InputError, TypeError):
    """A setting name that no config section has: a TypeError, as Python's for an unexpected keyword argument of
    the constructor, and a ValueError (InputError), as scikit-learn's ``set_params`` raises for an invalid name.
    Raised by ``fit`` (and the other methods that use the settings), not where the name is given: the parameters
    are stored unchecked, as scikit-learn's conventions have them."""


# Where a setting name is looked up: ``field`` in the section that has it, or ``section__field``.
SECTIONS = {"signature": SignatureConfig, "model": ModelConfig, "train": TrainConfig, "score": ScoreConfig}
# Runtime settings (config.RUNTIME_SETTINGS) that fit fills in from the data: a fitted model keeps its own.
FROM_DATA = {"model": {"n_sensors", "n_scales"}}


def _setting_names() -> list[str]:
    """Every name ``_apply_overrides`` takes: ``field`` and ``section__field``."""
    fields = [(section, name) for section, kind in SECTIONS.items() for name in kind.__dataclass_fields__]
    return [name for _, name in fields] + [f"{section}__{name}" for section, name in fields]


def _unknown_setting(key: str) -> UnknownSettingError:
    """The error for an unknown ``key``, with the nearest known name (``epoch=3`` -> "did you mean 'epochs'?")."""
    section, _, name = key.rpartition("__")
    owner = next((s for s, kind in SECTIONS.items() if name in kind.__dataclass_fields__), None)
    # a field under another section (model__epochs) is that section's, whatever the spelling's nearest neighbour
    near = [f"{owner}__{name}"] if section and owner else difflib.get_close_matches(key, _setting_names(), n=1)
    hint = f"; did you mean {near[0]!r}?" if near else " (see mscred.config for the settings)"
    return UnknownSettingError(f"MSCRED got an unknown setting {key!r}{hint}")


def setting_field(key: str) -> tuple[str, str]:
    """(section, field) of a setting name, ``field`` or ``section__field``; UnknownSettingError for none."""
    if "__" in key:
        section, name = key.split("__", 1)
        owners = [section] if section in SECTIONS and name in SECTIONS[section].__dataclass_fields__ else []
    else:
        name = key
        owners = [s for s, kind in SECTIONS.items() if name in kind.__dataclass_fields__]
    if not owners:
        raise _unknown_setting(key)
    if len(owners) > 1:
        raise UnknownSettingError(f"setting {key!r} is ambiguous; write one of "
                                  + ", ".join(f"{o}__{name}" for o in owners))
    return owners[0], name


def _apply_overrides(cfg: MSCREDConfig, overrides: dict[str, Any]) -> MSCREDConfig:
    """Set ``field=value`` (or ``section__field=value``) on the config section that has that field."""
    for key, value in overrides.items():
        section, name = setting_field(key)
        if isinstance(value, list):
            value = tuple(value)
        setattr(getattr(cfg, section), name, value)
    return cfg


def _setting_or_none(key: str) -> Optional[tuple[str, str]]:
    """``setting_field`` of a name, None for an unknown one (left to fit to name)."""
    try:
        return setting_field(key)
    except InputError:
        return None


def _model_change(fitted: MSCREDConfig, cfg: MSCREDConfig) -> bool:
    """Whether ``cfg`` differs from the settings a model was fitted with in a setting other than a runtime one:
    its network, normalisation and thresholds belong to the fitted ones (scoring would mix the two)."""
    before, after = fitted.to_dict(), cfg.to_dict()
    return any(before[section][name] != value for section, fields in after.items() for name, value in fields.items()
               if name not in RUNTIME_SETTINGS.get(section, ()))


def _check_config(cfg: MSCREDConfig) -> None:
    """Every setting, checked before any work: InputError naming the first bad one."""
    problem = config_problem(cfg)
    if problem:
        raise InputError(problem)


DEVICES = ("auto", "cpu", "cuda")
# What fit sets: restored as they were when a fit fails part way; absent before fit (scikit-learn's convention).
_FITTED = ("config_", "device_", "sensors_", "normalizer_", "net_", "history_", "calibration_", "decision_scores_",
           "labels_", "validation_rows_", "calibration_windows_", "rates_per_second_")


def _resolve_device(name: str) -> str:
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise InputError("device cuda: no CUDA device is available here (use cpu or auto)")
    if name not in DEVICES:
        raise InputError(f"device {name!r}: choose {', '.join(DEVICES)}")
    return name


def _config_argument(config):
    """``config=`` as ``MSCRED.resolved_config`` reads it: None, an MSCREDConfig or its dict; anything else an
    InputError (a ValueError, what scikit-learn's checks expect of a bad parameter value), not an AttributeError
    from deep inside."""
    if config is None or isinstance(config, (MSCREDConfig, dict)):
        return config
    raise InputError(f"config: expected an MSCREDConfig or its dict (MSCREDConfig.to_dict()), got "
                     f"{type(config).__name__}")


def _array_like(X, source: str):
    """A list or tuple of rows as the array it spells (scikit-learn takes any array-like; it was "expected a table
    (DataFrame), got list"); anything else as it is."""
    if not isinstance(X, (list, tuple)):
        return X
    try:
        return np.asarray(X)
    except ValueError:   # (rows of unequal lengths: NumPy's "inhomogeneous shape after 1 dimensions")
        raise InputError(f"{source}: a list whose rows are not all of one length; expected rows (T) of n sensor "
                         "values each") from None


def _joined(parts: list[WindowResult]) -> WindowResult:
    """The window results of consecutive chunks as one."""
    return WindowResult(*(np.concatenate([getattr(part, f.name) for part in parts])
                          for f in dataclasses.fields(WindowResult)))


def _config_from_dict(values: dict) -> MSCREDConfig:
    """``MSCREDConfig.from_dict`` with a dict of the wrong shape (a section that is not a dict, an unknown setting)
    as an InputError naming ``config``, as every other bad setting is."""
    try:
        return MSCREDConfig.from_dict(values)
    except (ValueError, TypeError) as err:
        raise InputError(f"config: {err}") from None


class MSCRED:
    """Multi-Scale Convolutional Recurrent Encoder-Decoder (Zhang et al., AAAI 2019) as an estimator.

    Parameters
    ----------
    config : MSCREDConfig, optional
        All settings (or their dict, ``MSCREDConfig.to_dict()``); ``mscred.config``'s defaults when omitted.
    **overrides
        Any config field by name (``epochs=3``, ``theta=None``, ``device="cpu"``), or ``section__field``.

    The parameters are stored as given (scikit-learn's convention: ``clone``, ``set_params`` and searches hold any
    value) and checked by ``fit``, and by the scoring methods and ``save``, which use them: a bad one is an
    InputError naming it there, before any work. ``resolved_config()`` gives the settings they make.

    Attributes (after ``fit``)
    ----------
    config_ : MSCREDConfig, the settings of the fit (the parameters', with the sensor count of the data)
    decision_scores_ : float64 (T_train,) score of every training row (0 where no window covers it)
    threshold_ : float, the anomaly threshold on the scores
    labels_ : int64 (T_train,) 0/1
    validation_rows_ : bool (T_train,) the rows scored by the validation windows (the threshold's data)
    sensors_ : list[str]
    history_ : list[dict] per-epoch training history

    ``decision_scores_``, ``labels_`` and ``validation_rows_`` describe the training table: ``save`` does not keep
    them (a loaded model has none of the three: score the data again). Before ``fit`` the fitted attributes are
    absent (an AttributeError, so that ``hasattr`` is False, as scikit-learn's fitted attributes are); the methods
    and ``threshold_`` raise NotFittedError.
    """

    def __init__(self, config: Optional[MSCREDConfig | dict] = None, **overrides):
        # Stored unchanged and unchecked (scikit-learn's clone hands them back by identity; a grid search sets any
        # value): resolved_config() checks them, at fit. The keyword settings have no attribute of their own: any
        # name may be given (fit names an unknown one), and one could shadow a method (MSCRED(fit=1)).
        self.config = config
        self._overrides = overrides

    # ----------------------------------------------------------------------------------------------- settings
    def resolved_config(self) -> MSCREDConfig:
        """The settings the parameters make, checked: a new MSCREDConfig of ``config`` (the defaults when None)
        with the keyword settings applied in order. InputError naming the first bad one (UnknownSettingError, also
        a TypeError, for an unknown name). ``fit`` trains with these and keeps them, the sensor count filled in from
        the data, as ``config_``; the ``config`` given is never changed."""
        config = _config_argument(self.config)
        if isinstance(config, MSCREDConfig) and not self._overrides:
            _check_config(config)   # as given: a section of another type is named, not failed on in the copy
            return MSCREDConfig.from_dict(config.to_dict())
        cfg = MSCREDConfig() if config is None else _config_from_dict(
            config if isinstance(config, dict) else config.to_dict())
        cfg = _apply_overrides(cfg, self._overrides)
        _check_config(cfg)
        return cfg

    def _settings(self) -> MSCREDConfig:
        """The settings in effect: the fit's (``config_``) once fitted, else the parameters' (checked)."""
        return self.config_ if hasattr(self, "config_") else self.resolved_config()

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The parameters, as scikit-learn's ``clone`` and searches read them: ``config`` and each keyword setting,
        the very objects given; with ``deep`` also every field of the settings they make as ``section__field``
        (what ``set_params`` and the constructor take), when they make settings (a bad one is left to ``fit``)."""
        params: dict[str, Any] = {"config": self.config, **self._overrides}
        if deep:
            try:
                fields = self.resolved_config().to_dict()
            except InputError:
                return params
            params.update({f"{section}__{name}": value for section, values in fields.items()
                           for name, value in values.items() if f"{section}__{name}" not in params})
        return params

    def set_params(self, **params) -> "MSCRED":
        """Change parameters (``config=``, ``field=`` or ``section__field=``), stored unchecked as the constructor
        stores them: ``fit`` (or scoring) names a bad one. ``config=`` starts over from it, as the constructor does
        (``set_params(config=None, seed=3)`` is ``MSCRED(seed=3)``'s settings); without it the keyword settings add
        to the current ones, a setting given again under either of its names replacing it.

        A fitted model keeps its fit when only runtime settings change (``config.RUNTIME_SETTINGS``: the device,
        bf16, graphs, kernels, micro-batch, progress); any other change unfits it, since its network, normalisation
        and thresholds belong to the settings it was fitted with (scoring would mix the two)."""
        if "config" in params:
            self.config = params.pop("config")
            self._overrides = params
        else:
            self._overrides = self._merged_overrides(params)
        if self.__sklearn_is_fitted__():
            try:
                cfg = self.resolved_config()
            except InputError:
                return self   # a bad setting: kept fitted, and scoring names it (as fit would)
            if _model_change(self.config_, cfg):
                self._unfit()
                return self
            try:
                self._take_runtime(cfg)   # still fitted: score where now asked
            except InputError:
                pass   # (device cuda where there is none) said by the scoring that would use it
        return self

    def _merged_overrides(self, params: dict[str, Any]) -> dict[str, Any]:
        """The keyword settings with ``params`` added, a setting given again under either of its names replaced."""
        fields = {_setting_or_none(key) for key in params} - {None}
        kept = {key: value for key, value in self._overrides.items()
                if key not in params and _setting_or_none(key) not in fields}
        return {**kept, **params}

    def _take_runtime(self, cfg: MSCREDConfig) -> None:
        """A fitted model's runtime settings taken from ``cfg`` (its network moved to a new device); the sensor
        count and scales stay the fit's. Its other settings stay the fit's too (``config_``): a change of one
        through ``set_params`` unfits, and one made in place on the config object takes effect at the next fit, as
        scikit-learn's parameters do."""
        fitted = self.config_
        if cfg.train.device != fitted.train.device:
            device = _resolve_device(cfg.train.device)   # (InputError before anything changes)
            self.net_ = self.net_.to(device)
            self.device_ = device
        for section, names in RUNTIME_SETTINGS.items():
            for name in names - FROM_DATA.get(section, set()):
                setattr(getattr(fitted, section), name, getattr(getattr(cfg, section), name))

    def _current(self) -> None:
        """Before scoring or saving: fitted, and the parameters checked (``set_params`` stores them unchecked: a bad
        one is an InputError here, naming it), their runtime settings taken up."""
        self._check_fitted()
        self._take_runtime(self.resolved_config())

    def __sklearn_is_fitted__(self) -> bool:
        """scikit-learn's ``check_is_fitted`` asks this: fit (or load) has set the network and the calibration."""
        return all(hasattr(self, name) for name in ("config_", "net_", "calibration_"))

    def __sklearn_tags__(self):
        """scikit-learn (1.6 and later) reads these in ``check_is_fitted``, pipelines and its other utilities, and
        fails on an estimator without them. Imported here: only scikit-learn calls it, and it is no dependency.
        No estimator type: "outlier_detector" would promise scikit-learn's -1/1 labels, not pyod's 0/1."""
        from sklearn.utils import Tags, TargetTags

        tags = Tags(estimator_type=None, target_tags=TargetTags(required=False), transformer_tags=None,
                    regressor_tags=None, classifier_tags=None)
        try:
            train = self.resolved_config().train
            fills = train.missing != "error" or bool(train.hold_sensors)
        except InputError:   # (tags are read unchecked, as the parameters are stored: fit names a bad one)
            fills = True
        tags.input_tags.allow_nan = fills
        return tags

    def _unfit(self) -> None:
        for name in _FITTED:
            if name in vars(self):
                delattr(self, name)

    def __repr__(self) -> str:
        """MSCRED(the settings that differ from the defaults), as scikit-learn shows an estimator; parameters that
        make no settings (a bad one, which fit names) as they were given."""
        try:
            ours = self.resolved_config().to_dict()
        except InputError:
            given = {"config": self.config} if self.config is not None else {}
            return f"MSCRED({', '.join(f'{name}={value!r}' for name, value in {**given, **self._overrides}.items())})"
        default = MSCREDConfig().to_dict()
        changed = [f"{name}={value!r}" for section, fields in ours.items() for name, value in fields.items()
                   if section != "model" or name not in ("n_sensors", "n_scales")    # set from the data by fit
                   if default[section].get(name) != value]
        return f"MSCRED({', '.join(changed)})"

    # ----------------------------------------------------------------------------------------------- inputs
    @property
    def min_rows(self) -> int:
        """Fewest rows that make one window: the largest window plus (steps - 1) gaps."""
        sig = self._settings().signature
        return max(sig.windows) + (sig.steps - 1) * sig.gap

    def _table(self, X, source: str = "input", ignore_label: bool = False, missing: Optional[str] = None):
        """Validate X (DataFrame, 2-D array or a list of its rows, or a loaded Table) into a Table; ``ignore_label``
        drops a ``label`` column unread (scoring, as ``mscred detect``); ``missing``: the model's setting unless
        given (``mscred watch --missing``)."""
        from mscred.data.io import Table, table_from_frame
        from mscred.data.reading import Reading

        if isinstance(X, Table):
            return X
        X = _array_like(X, source)
        if isinstance(X, np.ndarray):
            if X.ndim != 2:
                raise InputError(f"{source}: expected a 2-D array (T, n), got shape {X.shape}")
            X = pd.DataFrame(X, columns=[f"sensor_{j}" for j in range(X.shape[1])])
        elif isinstance(X, pd.DataFrame):
            # The settings' reading (train.time_column, na_values, long_columns) as a file's; a frame without
            # the time column (indexed by its times, or with a 'timestamp' column) or wide already is read as any
            # frame is.
            X = Reading.of_model(self._settings().train).frame(X, source, strict=False)
        return table_from_frame(X, source=source, missing=missing or self._settings().train.missing,
                                ignore_label=ignore_label)

    def _check_rows(self, table, what: str, windows: int = 1) -> None:
        """Enough rows for ``windows`` windows (training needs two: one to train on, one to validate)."""
        rows, sensors = table.values.shape
        sig = self._settings().signature
        needed = self.min_rows + (windows - 1) * sig.gap
        if rows < needed:
            # (a 6 x 400 array of 6 sensors read as 6 rows of 400 sensors: the likelier mistake, named)
            hint = f"; it has {sensors} sensor columns: transposed? (rows are time steps)" if sensors > rows else ""
            more = (" for one window, one gap more for a second to validate" if windows == 2 else
                    f" for one window, {windows - 1} gaps more for {windows} windows" if windows > 2 else "")
            raise InputError(f"{table.source}: {rows} rows is too few to {what}; need at least {needed} (largest "
                             f"window {max(sig.windows)} + (steps {sig.steps} - 1) x gap {sig.gap}{more}){hint}")

    def _aligned(self, table) -> np.ndarray:
        """The table's values in the training sensor order; other sensors than at training is an InputError. A
        table without names of its own (a .npy array) gives the training sensors in order, as an array does."""
        return self._in_training_order(table).values

    def _in_training_order(self, table):
        """The table with its columns (values, and where they were filled) in the training sensor order, as
        ``_aligned`` checks them."""
        names = list(table.sensors)
        if names == self.sensors_:
            return table
        if table.positional:
            if len(names) != len(self.sensors_):
                raise InputError(f"{table.source}: an array of {len(names)} column(s); the model was trained on "
                                 f"{len(self.sensors_)} sensors, which an array gives in their training order")
            return table
        difference = sensor_difference(self.sensors_, names)
        if difference:
            raise InputError(f"{table.source}: other sensors than the model was trained on: {difference}")
        return table.in_order(self.sensors_)

    def _inputs(self, table) -> np.ndarray:
        """The model's inputs from ``table`` (in the training sensor order, ``_aligned``'s): its values, the
        counters of ``train.rate_sensors`` as their rates over its rows (``mscred.data.rate``)."""
        from mscred.data.rate import rated

        ordered = self._in_training_order(table)
        if ordered.positional:   # (a .npy array's columns are the training sensors in order: named so here)
            ordered = dataclasses.replace(ordered, sensors=list(self.sensors_))
        return rated(ordered, self._settings().train.rate_sensors, self.rates_per_second).values

    @property
    def rates_per_second(self) -> Optional[bool]:
        """Whether the counters' rates (``train.rate_sensors``) were taken per second of the rows' times at fit (True)
        or per row (False: rows without times), so that scoring takes them so; None before fit and without them."""
        return getattr(self, "rates_per_second_", None)

    def _segments(self, values: np.ndarray) -> np.ndarray:
        from mscred.signature import signature_matrices

        sig = self.config_.signature
        scaled = self.normalizer_.transform(values)
        return signature_matrices(scaled, windows=sig.windows, gap=sig.gap, chunk_segments=sig.chunk_segments)

    # ----------------------------------------------------------------------------------------------- fit
    def fit(self, X, y=None, checkpoint_dir: Optional[str | os.PathLike] = None, resume: bool = False) -> "MSCRED":
        """Train on normal data X (T, n) and calibrate the threshold on its last ``val_fraction`` of windows.

        Parameters
        ----------
        X : DataFrame (sensor columns; optional ``timestamp``/``label``), ndarray (T, n) or a list of its rows,
            or a loaded Table; or a list of such tables (DataFrames, Tables, 2-D arrays): parts of the training
            data that are not one series (runs between stops), each with its own windows, none spanning two
        y : ignored (unsupervised; pyod compatibility)
        checkpoint_dir : a directory for per-epoch checkpoints (``resume`` continues from it)
        resume : continue from the checkpoint in ``checkpoint_dir``

        The parameters are checked first (``resolved_config``: an InputError naming the first bad setting, before
        any work). If fit fails, the estimator is left as it was before the call (a fitted model stays the model it
        was). The seed is applied to a fork of torch's random state: the caller's random numbers are not changed by
        fit.
        """
        import torch

        cfg = self.resolved_config()
        before = {name: getattr(self, name) for name in _FITTED if name in vars(self)}
        try:
            device = _resolve_device(cfg.train.device)        # a bad device fails before any work
            # fit fills the sensor count into its own settings: the parameters (get_params) stay as given
            self.config_ = cfg
            with torch.random.fork_rng(devices=[] if device == "cpu" else [torch.cuda.current_device()]):
                return self._fit(X, device, checkpoint_dir, resume)
        except BaseException:
            self._unfit()
            for name, value in before.items():
                setattr(self, name, value)
            raise

    def _fit(self, X, device: str, checkpoint_dir, resume: bool) -> "MSCRED":
        import torch

        from mscred.data.io import Normalizer
        from mscred.model import MSCREDNet
        from mscred.ops import resolve_model_backend
        from mscred.train import seed_torch
        from mscred.train_checkpoint import match_checkpoint_data

        cfg = self.config_
        self.device_ = device
        parts = self._training_parts(X)
        table = parts[0] if len(parts) == 1 else joined(parts)
        if len(parts) == 1:
            self._check_rows(table, "train and validate", windows=2)
        steps = cfg.signature.steps
        check_sensor_count(table)
        self.sensors_ = list(table.sensors)
        if table.labels is not None and table.labels.any():   # documented as ignored, yet easy to miss
            warnings.warn(NoteWarning(f"{table.source}: {int(table.labels.sum())} row(s) are labelled anomalous "
                                      "(label 1); training takes every row as normal, those too"), stacklevel=3)
        separated = next((name for name in self.sensors_ if ROOT_CAUSE_SEPARATOR in name), None)
        if separated is not None:   # ("temp;inlet" read back as two sensors, neither of them real)
            raise InputError(f"{table.source}: column {separated!r}: a sensor name cannot hold "
                             f"'{ROOT_CAUSE_SEPARATOR}', which separates the root causes detect lists; rename it")
        check_rate_sensors(table, cfg.train.rate_sensors)
        self.rates_per_second_ = None
        if cfg.train.rate_sensors:   # (taken as the first part's rows allow; the other parts' the same way)
            from mscred.data.rate import step_seconds

            self.rates_per_second_ = step_seconds(parts[0].index[:2]) is not None
        # (each part rated alone: no window spans two parts, and the first row of each has no row before)
        inputs = [self._inputs(part) for part in parts]
        self.normalizer_ = Normalizer().fit(np.concatenate(inputs) if len(inputs) > 1 else inputs[0])
        if len(parts) == 1:
            segments, starts = self._segments(inputs[0]), None          # (S, n_scales, n, n)
            n_windows = len(segments) - steps + 1
        else:   # each part's segments, one after the other; no window spans two parts
            pieces = [self._segments(values) for values in inputs]
            segments, starts = np.concatenate(pieces), window_starts([len(piece) for piece in pieces], steps)
            n_windows = len(starts)
        if n_windows < 2:
            raise InputError(f"{table.source}: {len(table.values)} rows is too few to train and validate; need at "
                             f"least {self.min_rows + cfg.signature.gap} (two windows)")
        n_val = min(max(int(round(n_windows * cfg.train.val_fraction)), 1), n_windows - 1)
        # Window k uses segments k..k+steps-1. The last n_val windows validate: their segments start at
        # n_windows - n_val; the training windows end with segment n_windows - n_val + steps - 2.
        split = n_windows - n_val
        if starts is None:
            train_seg, val_seg = segments[:split + steps - 1], segments[split:]
            windows_of = {}
        else:   # (the same split by the windows' first segments: the validation windows are the last parts')
            train_seg, val_seg = segments[:starts[split - 1] + steps], segments[starts[split]:]
            windows_of = {"train_starts": starts[:split], "val_starts": starts[split:] - starts[split]}
        self._check_validation(table, n_val)

        cfg.model.n_sensors = len(self.sensors_)
        cfg.model.n_scales = len(cfg.signature.windows)
        train_cfg = cfg.train
        if self.device_ == "cpu":   # (a CUDA run that does not fit raises torch's OutOfMemoryError, said in one line)
            micro = training_micro_batch(table.source, cfg, min(cfg.train.batch_size, split), available_memory(),
                                         world_size=self._ddp_world_size, processes=_processes())
            train_cfg = dataclasses.replace(cfg.train, micro_batch=micro)  # the saved config keeps the setting
        seed_torch(cfg.train.seed, self.device_)                      # the initial weights are part of the seed
        # backend "auto" trains fused on a CUDA device; the saved config keeps "auto", which a loaded model (a
        # one-shot `mscred detect`) scores with the reference ops: with the fused kernels' start-up in a fresh
        # process, detect of 10,000 rows took 9.1-12.1 s on the H200 against 5.1-5.7 s (results/cli_defaults/).
        self.net_ = MSCREDNet(dataclasses.replace(cfg.model, backend=resolve_model_backend(cfg.model.backend,
                                                                                            self.device_)))
        trainer = self._make_trainer(self.net_, train_cfg, steps)
        if checkpoint_dir is not None:   # a resume on other data would continue a model of that data silently
            match_checkpoint_data(Path(checkpoint_dir), self.sensors_, table.values, table.source, resume,
                                  signature=record_signature(dataclasses.asdict(cfg.signature), parts))
        self.history_ = trainer.fit(train_seg, val_seg, checkpoint_dir=checkpoint_dir, resume=resume, **windows_of)

        if len(parts) > 1:
            self._score_parts(parts, pieces, val_seg, windows_of["val_starts"], split)
        elif len(segments) <= self._chunk_segments():
            # One reconstruction of every window serves both the calibration (its last n_val windows) and the scores.
            target, recon = segments[steps - 1:], self._reconstruct(segments)   # (W, n_scales, n, n) each
            self.calibration_ = Calibration.fit(target[split:], recon[split:], cfg.score, cfg.signature.windows)
            result = score_windows(target, recon, cfg.score, cfg.signature.windows, self.calibration_)
        else:
            # A long or wide series: every window's reconstruction at once (with the residuals, ~3 x the signature
            # matrices) could exhaust the memory only after the whole training. The validation windows calibrate
            # and are scored from that one reconstruction; the training windows are scored a chunk at a time, as
            # detect scores them (they had been chunked with the validation windows, reconstructed a second time).
            val_target, val_recon = val_seg[steps - 1:], self._reconstruct(val_seg)
            self.calibration_ = Calibration.fit(val_target, val_recon, cfg.score, cfg.signature.windows)
            val_result = score_windows(val_target, val_recon, cfg.score, cfg.signature.windows, self.calibration_)
            del val_recon
            result = _joined([self._score_segment_chunks(train_seg), val_result])
        if len(parts) == 1:
            self.decision_scores_ = self._per_row(result.score, len(table.values))
            # The rows whose score comes from a validation window: the normal scores the threshold was fitted on
            # (`mscred train --val-scores` writes them for `evaluate --threshold ... --val-scores`).
            self.validation_rows_ = self.window_of_row(len(table.values)) >= split
        self.labels_ = (self.decision_scores_ > self.threshold_).astype(np.int64)
        self._warn_calibration(table, n_val)
        return self

    def _training_parts(self, X) -> list:
        """X as the list of its parts' Tables, in one sensor order (one Table when X is one table)."""
        if not is_parts(X):
            return [self._table(X, "training data")]
        if len(X) == 1:
            return [self._table(X[0], "training data")]
        tables = [self._table(part, f"training data part {k + 1}") for k, part in enumerate(X)]
        for table in tables:
            self._check_rows(table, "train on as a part (each part makes its own windows)")
        return [tables[0]] + [in_order_of(tables[0], table) for table in tables[1:]]

    def _score_parts(self, parts, pieces, val_seg, val_starts, split: int) -> None:
        """After training on parts: the calibration on the validation windows (the last ``n_val`` windows, of the
        last parts), and every training row scored within its own part (``decision_scores_``,
        ``validation_rows_``: the parts' rows one after the other)."""
        cfg, steps = self.config_, self.config_.signature.steps
        val_target, val_recon = val_seg[steps - 1:][val_starts], self._reconstruct(val_seg)[val_starts]
        self.calibration_ = Calibration.fit(val_target, val_recon, cfg.score, cfg.signature.windows)
        del val_recon
        scores, validation, before = [], [], 0
        for part, piece in zip(parts, pieces):
            result = self._score_segment_chunks(piece)
            win = self.window_of_row(len(part.values))
            scores.append(self._per_row(result.score, len(part.values), win=win))
            validation.append((win >= 0) & (win + before >= split))
            before += len(piece) - steps + 1
        self.decision_scores_, self.validation_rows_ = np.concatenate(scores), np.concatenate(validation)

    def _check_validation(self, table, n_val: int) -> None:
        """Before training: the threshold rule needs enough validation windows (the last ``val_fraction`` of the
        training data's windows). POT's tail fit needs two scores at least: refused as bad input."""
        if self.config_.score.threshold == "pot" and n_val < 2:
            raise InputError(f"{table.source}: {len(table.values)} rows leave {n_val} validation window; the POT "
                             "threshold needs at least 2: train on more rows, or choose another --threshold")

    def _warn_calibration(self, table, n_val: int) -> None:
        """After training and calibration (so that a refusal found on the way stays the one line it is): a
        threshold fitted on fewer than ``MIN_VALIDATION_WINDOWS`` validation windows, or a POT threshold without a
        tail to fit, is a CalibrationWarning."""
        rule = self.config_.score.threshold
        level = self.config_.score.pot_level
        if rule == "pot" and n_val >= 2 and int(level * n_val) >= n_val - 1:
            # Siffer's initial threshold is the score of rank floor(level * n): on this few it is the largest, no
            # score lies above it, and pot() returns it as the threshold without fitting a tail (once silently).
            warnings.warn(CalibrationWarning(
                f"{table.source}: --threshold pot on {n_val} validation windows: its initial threshold (the "
                f"{level:g} quantile) is their largest score, which leaves no tail to fit, so the threshold is that "
                f"score; POT needs more than {math.ceil(1 / (1 - level))} validation windows"), stacklevel=4)
        if n_val < MIN_VALIDATION_WINDOWS:
            warnings.warn(CalibrationWarning(
                f"{table.source}: the threshold rests on {n_val} validation window(s) (the last "
                f"{self.config_.train.val_fraction:.0%} of its windows); fewer than {MIN_VALIDATION_WINDOWS} make it "
                "unreliable: train on more rows"), stacklevel=4)   # (the caller of fit)

    # Ranks of a DistributedDataParallel fit sharing each batch (mscred.distributed sets it for its fits)
    _ddp_world_size = 1

    def _make_trainer(self, net, train_cfg, steps: int):
        """The Trainer of ``fit``; ``mscred.distributed`` substitutes its DistributedTrainer here (DDP training)."""
        from mscred.train import Trainer

        return Trainer(net, train_cfg, steps=steps)

    @property
    def threshold_(self) -> float:
        self._check_fitted()
        return self.calibration_.threshold

    @property
    def theta_(self) -> list[float]:
        """Residual threshold of each scale used by the count score (fixed, or from the validation quantile)."""
        self._check_fitted()
        return list(self.calibration_.theta)

    def _check_fitted(self) -> None:
        if not self.__sklearn_is_fitted__():
            raise NotFittedError("this MSCRED is not fitted yet: call fit(X) or MSCRED.load(dir) first")

    # ----------------------------------------------------------------------------------------------- scoring
    def _reconstruct(self, segments: np.ndarray) -> np.ndarray:
        from mscred.train import predict

        tc = self.config_.train
        # Scoring replays CUDA graphs only when asked for (cuda_graphs=True): by default (None) they serve the many
        # training steps, while one scoring pass does not repay the capture and cuDNN's autotuning (on the H200,
        # `mscred detect` of 10,000 rows took 10.7-12.1 s graphed against 5.7 s eager,
        # benchmarks/results/cli_defaults/).
        batch = inference_batch(self.device_, tc.batch_size, self.config_.model.n_sensors)
        return predict(self.net_, segments, batch, self.device_,
                       steps=self.config_.signature.steps, bf16=tc.bf16, cuda_graphs=tc.cuda_graphs is True)

    def _score_segments(self, segments: np.ndarray) -> WindowResult:
        steps = self.config_.signature.steps
        recon = self._reconstruct(segments)                           # (W, n_scales, n, n)
        return score_windows(segments[steps - 1:], recon, self.config_.score, self.config_.signature.windows,
                             self.calibration_)

    def calibrate(self, X, **settings) -> "MSCRED":
        """Fit what scoring learns again -- the threshold, each scale's threshold, the z_sensor score's per-sensor
        statistics, the count score's theta when chosen from the data -- on every window of X, normal data, without
        training again: when the noise of normal operation moved after training (too many alarms on a normal week),
        or the threshold rule should change. The weights, normalisation and signature settings stay as they are.

        ``settings``: any setting of the score section, by name (``threshold="percentile"``, ``percentile=99.5``,
        ``beta=2.0``, ``method="count"``, ``theta=None``), applied first; they become the model's parameters, as
        ``set_params`` would make them, without unfitting it. ``fit``'s ``decision_scores_``, ``labels_`` and
        ``validation_rows_`` (its training rows, scored by the old calibration) are dropped. ``calibration_windows_``
        says on how many windows of X it was fitted and how many of them the old and new thresholds flag.

        Where X has a ``label`` column, the windows over a row labelled 1 (a known incident) are left out, and
        counted as ``excluded``: a threshold fitted on them (1.5 x the largest score) would rise above the very
        anomalies it is for.

        A series longer than one chunk of scoring (``STREAM_SEGMENT_BYTES`` of signature matrices: ~250,000 rows at
        30 sensors) is calibrated on its last chunk's windows, with a note, since the thresholds' quantiles need every
        residual at once.
        """
        self._current()
        for key in settings:
            section, _ = setting_field(key)
            if section != "score":
                raise InputError(f"calibrate: {key!r} is not a setting of scoring (mscred.config.ScoreConfig); the "
                                 "others belong to the trained network: fit again to change them")
        cfg = _apply_overrides(MSCREDConfig.from_dict(self.config_.to_dict()), settings)
        _check_config(cfg)
        table = self._scoring_table(X, "calibration data", ignore_label=False)
        needed = 2 if cfg.score.threshold == "pot" else 1
        self._check_rows(table, "calibrate on", windows=needed)
        segments = self._segments(self._inputs(table))
        sig = cfg.signature
        steps, windows = sig.steps, sig.windows
        first = max(len(segments) - self._chunk_segments(), 0)
        if first:
            warnings.warn(NoteWarning(
                f"{table.source}: calibrated on its last {self._chunk_segments() - steps + 1} windows of "
                f"{len(segments) - steps + 1} (rows {first * sig.gap + 1} on), as many as one pass of scoring "
                "holds"), stacklevel=2)
            segments = segments[first:]
        keep = np.ones(len(segments) - steps + 1, dtype=bool)
        if table.labels is not None:   # window k spans rows (first + k) * gap .. its last segment's end
            labelled = np.concatenate([[0], np.cumsum(table.labels)])
            starts = (first + np.arange(len(keep))) * sig.gap
            keep = labelled[starts + max(windows) + (steps - 1) * sig.gap] == labelled[starts]
            if keep.sum() < needed:
                raise InputError(f"{table.source}: {keep.sum()} of its {len(keep)} windows are free of rows labelled "
                                 f"1, too few to calibrate on (need {needed})")
        target, recon = segments[steps - 1:][keep], self._reconstruct(segments)[keep]
        old = self.calibration_
        before = score_windows(target, recon, self.config_.score, windows, old).score
        calibration = Calibration.fit(target, recon, cfg.score, windows)
        after = score_windows(target, recon, cfg.score, windows, calibration).score
        self.config_, self.calibration_ = cfg, calibration
        self._overrides = self._merged_overrides(settings)
        for name in ("decision_scores_", "labels_", "validation_rows_"):
            vars(self).pop(name, None)
        self.calibration_windows_ = {
            "windows": len(target), "excluded": int((~keep).sum()),
            "threshold_before": old.threshold, "threshold_after": calibration.threshold,
            "flagged_before": int((before > old.threshold).sum()),
            "flagged_after": int((after > calibration.threshold).sum())}
        return self

    def window_of_row(self, length: int, context_rows: int = 0) -> np.ndarray:
        """(length,) int: the window whose score each row of a series of ``length`` rows gets, -1 for the rows no
        window covers (before the first full window, after the last segment), which score 0. ``context_rows``: the
        rows put before it (``context_rows()``), whose windows count from the context's first row."""
        sig = self._settings().signature
        return timestamp_windows(context_rows + length, sig.windows, sig.gap, sig.steps)[context_rows:]

    def context_rows(self, available: int, length: int) -> int:
        """How many of ``available`` rows of context ``detect(X, context=...)`` puts before the ``length`` rows of X:
        the fewest that complete the windows over X's first row, counted so that the last window ends at X's last
        row -- every row of X scored (without context the windows start at X's first row, and its first rows and
        up to ``gap - 1`` last ones score 0). With fewer rows available, the fewest of them that leave the most rows
        of X scored (its first rows then score 0, as without context)."""
        sig = self._settings().signature
        largest, gap, steps = max(sig.windows), sig.gap, sig.steps
        first = largest + (steps - 2) * gap    # the first row (of context and X together) a window scores

        def scored(rows: int) -> int:   # rows of X in a window after ``rows`` rows of context (timestamp_windows)
            total = rows + length
            segments = (total - largest) // gap + 1 if total >= largest else 0
            return max(0, largest + (segments - 1) * gap - max(first, rows)) if segments >= steps else 0

        start = max(first, 0)
        wanted = start + ((largest - length) % gap - start) % gap   # >= start, and the last segment ends at X's end
        if available >= wanted:
            return wanted
        return max(range(available + 1), key=lambda rows: (scored(rows), -rows))

    def _per_row(self, window_values: np.ndarray, length: int, fill=0.0, win: Optional[np.ndarray] = None
                 ) -> np.ndarray:
        win = self.window_of_row(length) if win is None else win
        out = np.full(length, fill, dtype=np.asarray(window_values).dtype)
        out[win >= 0] = window_values[win[win >= 0]]
        return out

    def _scoring_table(self, X, source: str, ignore_label: bool = True, missing: Optional[str] = None):
        """X validated for scoring (as ``_table``; a label column dropped unread unless ``ignore_label`` is False);
        a 2-D array's columns are the training sensors in order."""
        X = _array_like(X, source)
        if isinstance(X, np.ndarray) and X.ndim == 2:
            # An array has no names: its columns are the training sensors in order (as scikit-learn matches them),
            # so only its width can be wrong (it once read "missing sensor(s) ...; unknown sensor(s) sensor_0").
            if X.shape[1] != len(self.sensors_):
                raise InputError(f"{source}: an array of {X.shape[1]} column(s); the model was trained on "
                                 f"{len(self.sensors_)} sensors, which an array gives in their training order")
            X = pd.DataFrame(X, columns=self.sensors_)
        return self._table(X, source, ignore_label=ignore_label, missing=missing)  # scoring needs no ground truth

    def _windows(self, X, context=None):
        """(X's table, its windows' results, (T,) the window each row of X takes or -1): X scored alone, or after
        the last rows of ``context`` (``context_rows``)."""
        self._current()
        table = self._scoring_table(X, "input")
        if context is None:
            self._check_rows(table, "score")
            values = self._inputs(table)
            return table, self._score_rows(values), self.window_of_row(len(values))
        from mscred.data.context import continued

        ordered = self._in_training_order(table)
        before = self._in_training_order(self._scoring_table(context, "context"))
        rows = self.context_rows(len(before.values), len(ordered.values))
        if rows + len(ordered.values) < self.min_rows:
            raise InputError(f"{table.source}: {len(ordered.values)} rows after {len(before.values)} of its context "
                             f"{before.source} are too few to score; need at least {self.min_rows} together")
        # One context row more where there is one, for the rates of counters (train.rate_sensors): the first row
        # scored takes its increase from the row before it, as in one table of both
        extra = int(bool(self._settings().train.rate_sensors) and rows < len(before.values))
        index = before.index[len(before.values) - rows - extra:].append(ordered.index) \
            if not isinstance(ordered.index, pd.RangeIndex) else pd.RangeIndex(rows + extra + len(ordered.values))
        joined = dataclasses.replace(ordered, values=continued(before, ordered, rows + extra), index=index, gaps=None)
        values = self._inputs(joined)[extra:]
        return table, self._score_rows(values), self.window_of_row(len(ordered.values), rows)

    def _score_rows(self, values: np.ndarray) -> WindowResult:
        """Every window of ``values`` (T, n) scored, a bounded number of segments at a time: the signature
        matrices and their reconstructions take 2 x 4 x n_scales x n^2 bytes per segment, ~21 KB at 30 sensors but
        ~240 KB at 100, so a long series (a year of seconds: 3M segments) would not fit at once. Chunks of
        ``_segments_per_chunk`` segments overlap by steps - 1, so that every window is scored once, from the same
        segments (computed from the chunk's rows: equal to the one-pass values to float rounding)."""
        sig = self.config_.signature
        n_seg = (len(values) - max(sig.windows)) // sig.gap + 1
        if n_seg <= self._chunk_segments():
            return self._score_segments(self._segments(values))
        return _joined([self._score_segments(self._segments(values[self._segment_rows(first, last)]))
                        for first, last in self._chunks(n_seg)])

    def _score_segment_chunks(self, segments: np.ndarray) -> WindowResult:
        """Every window of ``segments`` (computed already: fit's) scored ``_chunk_segments`` segments at a time,
        the chunks overlapping by steps - 1 as ``_score_rows``'s."""
        return _joined([self._score_segments(segments[first:last]) for first, last in self._chunks(len(segments))])

    def _chunk_segments(self) -> int:
        """Segments scored at a time: ``_segments_per_chunk``, and at least one window's steps + 1."""
        return max(self._segments_per_chunk(), self.config_.signature.steps + 1)

    def _chunks(self, n_seg: int) -> list[tuple[int, int]]:
        """(first, last) segment ranges of ``_chunk_segments`` segments, overlapping by steps - 1, so that every
        window of ``n_seg`` segments is scored once."""
        steps, chunk = self.config_.signature.steps, self._chunk_segments()
        return [(first, min(first + chunk, n_seg)) for first in range(0, n_seg - steps + 1, chunk - steps + 1)]

    def _segment_rows(self, first: int, last: int) -> slice:
        """The rows whose signature matrices are segments first .. last - 1 of the series (segment j ends, exclusive,
        at row max(windows) + j * gap): ``_segments`` of just those rows gives exactly those segments."""
        sig = self.config_.signature
        return slice(first * sig.gap, max(sig.windows) + (last - 1) * sig.gap)

    def _segments_per_chunk(self) -> int:
        """Segments scored at a time: STREAM_SEGMENT_BYTES of signature matrices (the model's scales and sensors)."""
        per_segment = 4 * self.config_.model.n_scales * len(self.sensors_) ** 2
        return max(1, STREAM_SEGMENT_BYTES // per_segment)

    def decision_function(self, X, context=None) -> np.ndarray:
        """Per-row anomaly scores, float64 (T,); higher = more anomalous; 0 for rows no window covers: those before
        the first full window and the last ``(T - max(windows)) % gap`` rows (fewer than ``gap``), which the next
        segment would cover (``detect.timestamp_windows``).

        ``context``: the rows just before X (the same sensors; timestamps, if X has them, before X's), in any form X
        takes. Its last rows (``context_rows``) complete the windows over X's first rows, and the windows are
        counted back from X's last row, so that every row of X is scored; the result still has one row per row of X.
        """
        table, result, win = self._windows(X, context)
        return self._per_row(result.score, len(table.values), win=win)

    def predict(self, X, context=None) -> np.ndarray:
        """Per-row labels, int64 (T,): 1 where the score is above ``threshold_`` (``context``: as
        ``decision_function``'s)."""
        return (self.decision_function(X, context) > self.threshold_).astype(np.int64)

    def detect(self, X, context=None, sensor_scores: bool = False) -> pd.DataFrame:
        """One row per input row: the index (``timestamp`` or ``row``), score, is_anomaly, root_causes, scales.

        ``root_causes`` are the top-k sensors by residual row sum, ``;``-joined, most anomalous first, and
        ``scales`` the window lengths whose own score is above their own threshold (``;``-joined), both only on
        anomalous rows (empty strings elsewhere). ``context``: the rows just before X, as ``decision_function``
        takes them (every row of X scored).

        ``sensor_scores``: also one column ``score_<sensor>`` per sensor, on every row, holding what the root causes
        are ranked by (``WindowResult.sensor_scores``: under the default z_sensor score each sensor's standardised
        residual, of which ``score`` is the largest); NaN on rows no window covers.
        """
        table, result, win = self._windows(X, context)
        length = len(table.values)
        score = self._per_row(result.score, length, win=win)
        flagged = score > self.threshold_
        causes = np.full(length, "", dtype=object)
        scales = np.full(length, "", dtype=object)
        windows = self.config_.signature.windows
        cause_text = [ROOT_CAUSE_SEPARATOR.join(self.sensors_[i] for i in row) for row in result.root_causes]
        scale_text = [";".join(str(w) for w, lit in zip(windows, row) if lit) for row in result.scales_lit]
        for t in np.flatnonzero(flagged):
            causes[t] = cause_text[win[t]]
            scales[t] = scale_text[win[t]]
        # The first column is the timestamp, or the row number when the input has none: for a DataFrame given here
        # its own row numbers (df.iloc[50:] gives 50 .., so the result joins back onto it; a table read from a
        # file numbers its rows from 0, as SCORES.csv always has).
        index_name = index_column(table)
        rows = np.asarray(table.index)
        if index_name == "row" and isinstance(X, pd.DataFrame) and isinstance(X.index, pd.RangeIndex):
            rows = X.index.to_numpy()
        frame = pd.DataFrame({index_name: rows, "score": score,
                              "is_anomaly": flagged.astype(np.int64), "root_causes": causes, "scales": scales})
        if sensor_scores:
            per_sensor = np.full((length, len(self.sensors_)), np.nan)
            per_sensor[win >= 0] = result.sensor_scores[win[win >= 0]]
            names = [SENSOR_SCORE_PREFIX + sensor for sensor in self.sensors_]
            frame = pd.concat([frame, pd.DataFrame(per_sensor, columns=names)], axis=1)
        return frame

    def events(self, X, context=None) -> pd.DataFrame:
        """The anomalies ``detect`` finds in X as events, one row per run of flagged rows: start, end (timestamps or
        row numbers, the last row included), rows, peak_score and peak_at, the root causes ranked by the votes of its
        rows (top ``top_k``), and the scales that flagged it (``mscred.events.events_table``)."""
        from mscred.events import events_table

        return events_table(self.detect(X, context), top_k=self.config_.score.top_k)

    def monitor(self, sensor_scores: bool = False, missing: Optional[str] = None):
        """A ``mscred.monitor.Monitor`` of this model: ``update(chunk)`` scores a feed's rows as they arrive, any
        number at a time, each chunk after the rows before it (``detect(chunk, context=...)``, the tail kept for
        the caller), rows without timestamps numbered across the feed. ``missing``: the policy for missing values
        in the feed (the model's ``missing`` setting unless given)."""
        from mscred.monitor import Monitor

        return Monitor(self, sensor_scores=sensor_scores, missing=missing)

    # ----------------------------------------------------------------------------------------------- save/load
    def save(self, directory: str | os.PathLike) -> Path:
        """Write ``config.json`` + ``model.safetensors`` into ``directory`` atomically (all or nothing). An existing
        ``directory`` is replaced only if it holds nothing else (a previous model); otherwise InputError."""
        self._current()
        directory = Path(directory)
        meta = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "mscred_version": __version__,
            "config": self.config_.saved_dict(),
            "sensors": self.sensors_,
            "normalization": self.normalizer_.to_dict(),
            "calibration": self.calibration_.to_dict(),
            "history": getattr(self, "history_", []),
        }
        if self.rates_per_second is not None:   # (a model with counters given as rates: how they were taken)
            meta["rates_per_second"] = self.rates_per_second
        from mscred.model import cpu_state

        state = cpu_state(self.net_)
        meta = _jsonable(meta)
        with atomic_path(directory, owned=MODEL_FILES, what="an mscred model") as tmp:
            tmp.mkdir()
            (tmp / CONFIG_FILE).write_text(json.dumps(meta, indent=2) + "\n")
            save_safetensors(state, tmp / WEIGHTS_FILE, metadata={"format": FORMAT, "mscred_version": __version__,
                                                                   TRAINED_WITH: _trained_with(self.config_, meta)})
        return directory

    @classmethod
    def load(cls, directory: str | os.PathLike, device: str = "auto") -> "MSCRED":
        """Read a model directory written by :meth:`save`. Damaged or missing files raise InputError."""
        from safetensors import SafetensorError, safe_open

        from mscred.data.io import Normalizer
        from mscred.model import MSCREDNet

        directory = Path(directory)
        if not directory.is_dir():
            raise InputError(f"{directory}: " + ("is a file, not a model directory (config.json and model.safetensors)"
                                                 if directory.exists() else "model directory not found"))
        cfg_path, weights_path = directory / CONFIG_FILE, directory / WEIGHTS_FILE
        for path in (cfg_path, weights_path):
            if not path.is_file():
                raise InputError(f"{path}: missing from the model directory")
        try:
            meta = json.loads(cfg_path.read_text())
            if not isinstance(meta, dict) or meta.get("format") != FORMAT:
                raise ValueError("not an mscred model config")
            _check_format_version(meta)
            config = MSCREDConfig.from_dict(meta["config"])
            if not isinstance(meta["sensors"], list):
                raise TypeError(f"sensors is a {type(meta['sensors']).__name__}, not a list")
            sensors = [str(s) for s in meta["sensors"]]
            calibration = Calibration.from_dict(meta["calibration"])
            normalizer = Normalizer.from_dict(meta["normalization"])
            history = meta.get("history", [])
            per_second = meta.get("rates_per_second")
            if per_second is not None and not isinstance(per_second, bool):
                raise TypeError(f"rates_per_second is {per_second!r}, not true or false")
            if not isinstance(history, list):   # (kept as history_, and written back by the next save)
                raise TypeError(f"history is a {type(history).__name__}, not a list")
            _check_settings(config, sensors, calibration)
            net = MSCREDNet(config.model)
            model = cls(config)
        except InputError as err:
            raise InputError(f"{cfg_path}: {err}") from None
        except (ValueError, KeyError, TypeError, UnicodeDecodeError, OverflowError) as err:
            msg = " ".join(str(err).split())[:300]
            raise InputError(f"{cfg_path}: damaged model config ({type(err).__name__}: {msg})") from None
        if len(sensors) != config.model.n_sensors or len(normalizer.min_) != len(sensors):
            raise InputError(f"{cfg_path}: damaged model config (sensor count does not match the settings)")

        # The settings as the parameter (get_params, clone: an unfitted twin of these settings), and a copy of
        # them as the fit's (an edit of the parameter in place takes effect at the next fit, as after fit).
        model.config_ = MSCREDConfig.from_dict(config.to_dict())
        model.sensors_, model.normalizer_, model.calibration_ = sensors, normalizer, calibration
        model.history_ = history
        if per_second is not None:
            model.rates_per_second_ = per_second
        # "auto" means this machine's best device, not the training one: a model trained on a GPU loads on a CPU.
        model.device_ = _resolve_device(device)
        try:
            # One open for the metadata and the tensors (the check came from a second open of the same file).
            with safe_open(str(weights_path), "pt") as weights:
                _check_trained_with(config, meta, (weights.metadata() or {}).get(TRAINED_WITH), cfg_path)
                state = {name: weights.get_tensor(name) for name in weights.keys()}
            mismatch = _weights_mismatch(net.state_dict(), state)
            if mismatch:
                raise InputError(f"{weights_path}: damaged weights ({mismatch})")
            net.load_state_dict(state, strict=True)
        except InputError:   # (an InputError is a ValueError: it was wrapped in a second "damaged weights (...)")
            raise
        except (SafetensorError, OSError, RuntimeError, ValueError) as err:
            msg = " ".join(str(err).split())[:300]
            raise InputError(f"{weights_path}: damaged weights ({type(err).__name__}: {msg})") from None
        for name, tensor in state.items():   # NaN weights would score every window NaN: never "normal" silently
            if tensor.is_floating_point() and not bool(tensor.isfinite().all()):
                raise InputError(f"{weights_path}: damaged weights (tensor '{name}' holds NaN or infinite values)")
        model.net_ = net.to(model.device_).eval()
        return model


def index_column(table) -> str:
    """The first column of a SCORES table for ``table``: "timestamp" when it has one, else "row" (row numbers)."""
    return "row" if isinstance(table.index, pd.RangeIndex) else "timestamp"


def sensor_difference(expected, got) -> str:
    """"missing sensor(s) a, b; unknown sensor(s) c" for the names of ``expected`` not in ``got`` and the other way
    round; "" when both hold the same names (in any order)."""
    missing = [s for s in expected if s not in got]
    extra = [s for s in got if s not in expected]
    return "; ".join(part for part in ("missing sensor(s) " + _name_list(missing) if missing else "",
                                       "unknown sensor(s) " + _name_list(extra) if extra else "") if part)


def _name_list(names: list[str], shown: int = 10) -> str:
    """Names for a one-line message: the first ``shown``, then how many more (a fleet may differ in hundreds)."""
    text = ", ".join(names[:shown])
    return text + (f" ... ({len(names) - shown} more)" if len(names) > shown else "")


def _trained_with(config: MSCREDConfig, meta: dict) -> str:
    """What the weights were trained on and with, for ``model.safetensors``' metadata (``TRAINED_WITH``): the
    signature settings as they are, the sensors and their normalisation (config.json's ``meta``, JSON types) as
    SHA-256 digests."""
    def digest(value) -> str:
        return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()

    return json.dumps({"signature": _jsonable(config.to_dict()["signature"]), "sensors": digest(meta["sensors"]),
                       "normalization": digest(meta["normalization"])}, sort_keys=True)


def _check_trained_with(config: MSCREDConfig, meta: dict, recorded: str | None, cfg_path: Path) -> None:
    """InputError when config.json no longer says what the weights were trained with: a hand-edited gap, steps or
    window list (or sensor list, or normalisation) loaded, its weight shapes unchanged, and scored every window with
    settings the model never saw. ``recorded``: the weights' ``TRAINED_WITH`` metadata; models saved before the
    weights recorded it (None) load as they did."""
    if recorded is None:
        return
    saved, now = json.loads(recorded), json.loads(_trained_with(config, meta))
    if not isinstance(saved, dict) or not isinstance(saved.get("signature"), dict):
        raise ValueError(f"its {TRAINED_WITH} metadata is not an object with the signature settings")
    for key, value in saved["signature"].items():
        if now["signature"].get(key) != value:
            raise InputError(f"{cfg_path}: signature.{key} is {now['signature'].get(key)}, but the weights beside it "
                             f"were trained with {value}; the file was edited after training (retrain, or restore it)")
    for part, what in (("sensors", "sensor list"), ("normalization", "normalization")):
        if now[part] != saved.get(part):
            raise InputError(f"{cfg_path}: its {what} is not the one the weights beside it were trained with; the "
                             "file was edited after training (retrain, or restore it)")


def _check_format_version(meta: dict) -> None:
    """The layout of config.json + model.safetensors is versioned by ``format_version``; the package version that
    wrote it is informational (a model of another mscred release with the same format loads)."""
    version = meta.get("format_version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise ValueError(f"format_version is {version!r}, not an integer")
    if version != FORMAT_VERSION:
        raise InputError(f"model format {version} (written by mscred {meta.get('mscred_version', '?')}); this mscred "
                         f"{__version__} reads format {FORMAT_VERSION}")
    if not isinstance(meta.get("mscred_version"), str):
        raise ValueError(f"mscred_version is {meta.get('mscred_version')!r}, not a version string")


def _whole(value, low: int) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= low


def config_problem(config: MSCREDConfig) -> Optional[str]:
    """The first setting of ``config`` that fitting or scoring could not use, as "section.field value: why", or None.
    Checked at ``fit`` (and by the scoring methods and ``save``: ``MSCRED.resolved_config``) and when a model is
    loaded, so that a bad value fails before any work, naming itself, instead of after training or deep inside
    scoring."""
    from mscred.config import (MAX_COUNT, MAX_SEED, MISSING_POLICIES, ModelConfig, ScoreConfig, SignatureConfig,
                               TrainConfig)
    from mscred.detect import SCORE_METHODS
    from mscred.ops import AUTO, CONV_BACKENDS, MODEL_BACKENDS
    from mscred.thresholds import METHODS

    for name, kind in (("signature", SignatureConfig), ("model", ModelConfig), ("train", TrainConfig),
                       ("score", ScoreConfig)):   # (MSCREDConfig(train=5) was an AttributeError from in here)
        if not isinstance(getattr(config, name), kind):
            return f"config.{name}: expected a {kind.__name__}, got {type(getattr(config, name)).__name__}"
    sig, score, model, train = config.signature, config.score, config.model, config.train
    # Training: what the CLI's option types check (epochs=0 once trained nothing and scored an untrained network
    # as fitted; batch_size=0 and a zero channel count divided by zero deep inside).
    for name, value, low in (("epochs", train.epochs, 1), ("batch_size", train.batch_size, 1), ("seed", train.seed, 0)):
        if not _whole(value, low):
            return f"train.{name} {value!r}: must be an integer >= {low}"
    if train.seed > MAX_SEED:   # torch seeds are 64-bit: 2**64 failed at fit, "Overflow when unpacking long long"
        return f"train.seed {train.seed!r}: must be below 2**63 (the CLI's --seed range)"
    if train.micro_batch is not None and not _whole(train.micro_batch, 1):
        return f"train.micro_batch {train.micro_batch!r}: must be None (the whole batch) or an integer >= 1"
    for name, value in (("epochs", train.epochs), ("batch_size", train.batch_size), ("micro_batch", train.micro_batch)):
        if value is not None and value > MAX_COUNT:   # (config.json records them: JSON's portable integers)
            return f"train.{name} {value!r}: must be at most 2**53 (the CLI's range)"
    if train.early_stopping_patience is not None and not _whole(train.early_stopping_patience, 1):
        return f"train.early_stopping_patience {train.early_stopping_patience!r}: must be None or an integer >= 1"
    if not (finite_number(train.lr) and train.lr > 0):
        return f"train.lr {train.lr!r}: must be a finite number > 0"
    if not (finite_number(train.val_fraction) and 0 < train.val_fraction < 1):
        return f"train.val_fraction {train.val_fraction!r}: must be between 0 and 1 (exclusive)"
    for name in ("bf16", "progress"):
        if not isinstance(getattr(train, name), bool):
            return f"train.{name} {getattr(train, name)!r}: must be True or False"
    for name in ("cuda_graphs", "cudnn_benchmark"):
        if getattr(train, name) is not None and not isinstance(getattr(train, name), bool):
            return f"train.{name} {getattr(train, name)!r}: must be None (automatic), True or False"
    channels = model.channels
    if not (isinstance(channels, (tuple, list)) and len(channels) == 4 and all(_whole(c, 1) for c in channels)):
        return f"model.channels {channels!r}: must be 4 integers >= 1 (one per level)"
    windows = tuple(sig.windows) if isinstance(sig.windows, (tuple, list)) else ()
    if not windows or not all(_whole(w, 1) for w in windows) or len(set(windows)) != len(windows):
        return f"signature.windows {sig.windows!r}: must be distinct positive integers"
    for name in ("gap", "steps", "chunk_segments"):
        if not _whole(getattr(sig, name), 1):
            return f"signature.{name} {getattr(sig, name)!r}: must be a positive integer"
    if score.method not in SCORE_METHODS:
        return f"score.method {score.method!r}: must be one of {', '.join(SCORE_METHODS)}"
    if score.threshold not in METHODS:
        return f"score.threshold {score.threshold!r}: must be one of {', '.join(METHODS)}"
    if not _whole(score.top_k, 1):
        return f"score.top_k {score.top_k!r}: must be a positive integer"
    if not isinstance(score.scales, (tuple, list)) or not score.scales or not set(score.scales) <= set(windows):
        return f"score.scales {score.scales!r}: must be some of the windows {windows}"
    if score.theta is not None and not (finite_number(score.theta) and score.theta >= 0):
        return f"score.theta {score.theta!r}: must be None (chosen on the validation residuals) or a number >= 0"
    for name, low, high in (("theta_quantile", 0, 1), ("pot_risk", 0, 1), ("pot_level", 0, 1)):
        value = getattr(score, name)
        if not (finite_number(value) and low < value < high):
            return f"score.{name} {value!r}: must be a number between {low} and {high} (exclusive)"
    if not (finite_number(score.beta) and score.beta > 0):
        return f"score.beta {score.beta!r}: must be a number > 0"
    if not (finite_number(score.percentile) and 0 <= score.percentile <= 100):
        return f"score.percentile {score.percentile!r}: must be a number from 0 to 100"
    if not _whole(model.lstm_kernel, 2) or model.lstm_kernel not in (2, 3):
        return f"model.lstm_kernel {model.lstm_kernel!r}: must be 2 or 3"
    if not finite_number(model.forget_bias):
        return f"model.forget_bias {model.forget_bias!r}: must be a finite number"
    for name, value, choices in (("model.backend", model.backend, (AUTO, *MODEL_BACKENDS)),
                                 ("model.conv_backend", model.conv_backend, CONV_BACKENDS),
                                 ("train.missing", config.train.missing, MISSING_POLICIES),
                                 ("train.device", config.train.device, DEVICES)):
        if value not in choices:
            return f"{name} {value!r}: must be one of {', '.join(choices)}"
    time_column = config.train.time_column
    if not isinstance(time_column, str) or not time_column.strip() or time_column != time_column.strip() \
            or time_column == LABEL:
        return (f"train.time_column {time_column!r}: must be a column name (not empty, no blanks about it, not "
                f"'{LABEL}')")
    na_values = config.train.na_values
    if not isinstance(na_values, tuple) or not all(isinstance(v, str) and v.strip() == v and v for v in na_values):
        return (f"train.na_values {na_values!r}: must be a list of texts (each not empty, no blanks about it), "
                "e.g. ['Bad', 'I/O Timeout']")
    long_columns = config.train.long_columns
    if long_columns is not None and not (
            isinstance(long_columns, tuple) and len(long_columns) == 2 and len(set(long_columns)) == 2
            and all(isinstance(c, str) and c.strip() == c and c and c not in (LABEL, time_column)
                    for c in long_columns)):
        return (f"train.long_columns {long_columns!r}: must be None or two column names, the sensor name's and the "
                f"value's (e.g. ['Tag', 'Value']), neither the time column nor '{LABEL}'")
    example_names = {"only_sensors": ["TI101", "PI102"], "drop_columns": ["status", "unit"],
                     "hold_sensors": ["valve1", "pump2"], "rate_sensors": ["bytes_total", "energy_kwh"]}
    for name, names, empty_ok in (("only_sensors", config.train.only_sensors, False),
                                  ("drop_columns", config.train.drop_columns, True),
                                  ("hold_sensors", config.train.hold_sensors, True),
                                  ("rate_sensors", config.train.rate_sensors, True)):
        if name == "only_sensors" and names is None:
            continue
        # (a long table's sensor and value columns are read as such: leaving one out would leave no table)
        long_table = (long_columns or ()) if name == "drop_columns" else ()
        if not (isinstance(names, tuple) and (names or empty_ok) and len(set(names)) == len(names)
                and all(isinstance(c, str) and c.strip() == c and c and c not in (LABEL, time_column, *long_table)
                        for c in names)):
            also = ", nor a long table's sensor or value column" if long_table else ""
            return (f"train.{name} {names!r}: must be {'None or ' if not empty_ok else ''}a list of column names "
                    f"(each once, not empty, no blanks about it, neither the time column nor '{LABEL}'{also}), e.g. "
                    f"{example_names[name]}")
    if config.train.only_sensors is not None and set(config.train.only_sensors) & set(config.train.drop_columns):
        both = sorted(set(config.train.only_sensors) & set(config.train.drop_columns))
        return f"train.only_sensors and train.drop_columns both name {both[0]!r}: read it, or leave it out"
    states = config.train.states
    if not isinstance(states, tuple) or not all(isinstance(spec, str) for spec in states):
        return f"train.states {states!r}: must be a list of texts NAME=STATE,STATE,..., e.g. ['valve=CLOSED,OPEN']"
    from mscred.data.states import state_columns

    try:
        state_names = tuple(state_columns(states, "train.states"))
    except InputError as error:
        return str(error)
    if time_column in state_names:
        return f"train.states names {time_column!r}, the time column, which is read as such"
    for name, verb in (("hold_sensors", "hold"), ("rate_sensors", "rate"), ("states", "read the states of")):
        names = state_names if name == "states" else getattr(config.train, name)   # (sensors read, by name)
        if set(names) & set(config.train.drop_columns):
            both = sorted(set(names) & set(config.train.drop_columns))
            return f"train.{name} and train.drop_columns both name {both[0]!r}: a column left out is no sensor"
        if config.train.only_sensors is not None and set(names) - set(config.train.only_sensors):
            extra = sorted(set(names) - set(config.train.only_sensors))
            return f"train.{name} names {extra[0]!r}, which train.only_sensors does not read: {verb} only sensors read"
    time_zone = config.train.time_zone
    if time_zone is not None:
        from mscred.data.time_zone import checked_zone

        try:
            checked_zone(time_zone if isinstance(time_zone, str) else "")
        except InputError:
            return (f"train.time_zone {time_zone!r}: must be None or an IANA time zone name known here, e.g. "
                    "'Europe/Berlin', 'America/Chicago' or 'UTC'")
    resample = config.train.resample
    if resample is not None:
        from mscred.data.resample import parse_period

        if not isinstance(resample, str):
            return f"train.resample {resample!r}: must be None or a period as text, e.g. '1min', '10s' or '60'"
        try:
            parse_period(resample)
        except InputError as error:
            return f"train.resample {resample!r}: {str(error).split(': ', 1)[-1]}"
    return None


def check_rate_sensors(table, names) -> None:
    """Every counter given a rate (``train.rate_sensors``) is a sensor of ``table``, else an InputError naming it."""
    unknown = [name for name in names if name not in table.sensors]
    if unknown:
        shown = ", ".join(table.sensors[:8]) + (", ..." if len(table.sensors) > 8 else "")
        raise InputError(f"{table.source}: --rate names {unknown[0]!r}, which is not one of its sensors ({shown})")


def check_sensor_count(table) -> None:
    """InputError for a table of fewer than MIN_SENSORS sensors (fit's first check of its sensors; ``mscred train``
    makes it before its notes about them)."""
    if len(table.sensors) < MIN_SENSORS:
        raise InputError(f"{table.source}: {len(table.sensors)} sensor(s); MSCRED needs at least {MIN_SENSORS}")


# Peak memory of CPU training through fit (reference ops, float32, eager), at the default channels (32 first) and
# 5 steps: the process itself, TRAIN_BYTES_PER_WINDOW_SENSOR2 per window of a forward/backward pass (a batch, or a
# micro-batch) per sensor squared, and the scoring pass after training (inference_batch's windows at
# SCORE_BYTES_PER_WINDOW_SENSOR2), which adds to it rather than reusing the training's freed memory. Measured with
# ru_maxrss on this 2-core box, 2026-12-03 (benchmarks/measure_train_memory.py, results/train_memory/): 80 sensors
# at passes of 2 / 8 / 16 / 32 windows 1.74 / 2.41 / 3.03 / 4.14 GB, 120 sensors at 4 / 16 windows 2.44 / 4.86 GB,
# 40 sensors at 32 windows 1.63 GB; the per-window figure is the steepest of those slopes (10.8-14.0 KB), so the
# estimate is above every measurement (by 0-29%) and is taken as it is. 200 sensors at batch 32: ~20 GB.
TRAIN_BYTES_PER_WINDOW_SENSOR2 = 14_500
TRAIN_BASE_BYTES = 0.68e9   # torch and the process itself, with a small model


def training_memory(n_sensors: int, batch: int, channels: tuple[int, ...], steps: int, per_pass: Optional[int] = None
                    ) -> float:
    """Estimated peak bytes of CPU training at ``batch`` in passes of ``per_pass`` windows (None: the batch), its
    scoring pass included; the activations, which dominate, scale with the first level's channels and the steps."""
    scale = (channels[0] / 32) * (steps / 5)
    scoring = inference_batch("cpu", batch, n_sensors) * SCORE_BYTES_PER_WINDOW_SENSOR2
    return TRAIN_BASE_BYTES + scale * n_sensors ** 2 * (scoring + TRAIN_BYTES_PER_WINDOW_SENSOR2 * (per_pass or batch))


def available_memory() -> Optional[int]:
    """Bytes the kernel says a process can still get (Linux's MemAvailable), or None where it does not say."""
    try:
        with open("/proc/meminfo") as info:
            for line in info:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def training_micro_batch(source, cfg: MSCREDConfig, batch: int, available: Optional[int],
                         world_size: int = 1, processes: Optional[int] = None) -> Optional[int]:
    """The micro-batch (``TrainConfig.micro_batch``) CPU training runs at, from ``training_memory`` against the
    memory available: past it the OOM killer ends the process without a word (a pass holds all its windows'
    activations, which grow with the sensor count squared).

    A micro-batch that was set is kept when it fits and refused (InputError naming one that fits) when it does not.
    Unset: None (the whole batch in one pass) when the batch fits, else the largest micro-batch that does, with a
    note (MicroBatchWarning): the same Adam steps in more passes. InputError when even one window does not fit.
    Under DDP (``world_size`` ranks) each rank runs its share of the batch; the ``processes`` training on this
    machine at once (default: ``world_size``; fleet's, each with whole batches of its own entity) share the memory.
    """
    set_micro = cfg.train.micro_batch
    if available is None:
        return set_micro
    n, channels, steps = cfg.model.n_sensors, tuple(cfg.model.channels), cfg.signature.steps
    processes = processes or world_size
    share = -(-batch // world_size)
    per_pass = min(set_micro or share, share)
    memory = available / processes

    def need(windows: int) -> float:
        return training_memory(n, share, channels, steps, per_pass=windows)

    if need(per_pass) <= memory:
        return set_micro
    largest = next((b for b in range(per_pass - 1, 0, -1) if need(b) <= memory), None)
    passes = f"in micro-batches of {per_pass}" if set_micro and set_micro < share else f"at batch {per_pass}"
    what = (f"{source}: training {n} sensors {passes}{f' in each of {processes} processes' if processes > 1 else ''}"
            f" needs ~{need(per_pass) * processes / 2 ** 30:.4g} GiB on the CPU (it grows with the sensors squared), "
            f"{available / 2 ** 30:.4g} GiB is available")
    if largest is None:
        raise InputError(f"{what}; even one window does not fit: fewer sensors, or a GPU")
    if set_micro is not None:
        raise InputError(f"{what}; --micro-batch {largest} (micro_batch={largest}) fits")
    warnings.warn(MicroBatchWarning(
        f"{what}: each batch runs in micro-batches of {largest} window(s), the same training in "
        f"{-(-share // largest)} passes per batch (--micro-batch, micro_batch sets it)"), stacklevel=4)
    return largest


def _processes() -> int:
    """Processes training at once on this machine: the process group's (DDP's ranks, fleet's processes), else 1."""
    import torch.distributed as dist

    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def _weights_mismatch(expected: dict, got: dict) -> str:
    """What keeps weights ``got`` from the network of the settings (``expected``), in a few words: torch's own
    message lists every tensor, several hundred characters cut mid-word. Empty when they match."""
    missing = [name for name in expected if name not in got]
    unknown = [name for name in got if name not in expected]
    shapes = [name for name in expected if name in got and tuple(got[name].shape) != tuple(expected[name].shape)]
    if shapes:
        name = shapes[0]
        return (f"{len(shapes)} tensor(s) of another shape than the settings' model, e.g. '{name}' "
                f"{tuple(got[name].shape)} against {tuple(expected[name].shape)}: weights of another model size")
    if missing or unknown:
        return "; ".join(part for part in (
            f"{len(missing)} tensor(s) missing, e.g. '{missing[0]}'" if missing else "",
            f"{len(unknown)} unknown tensor(s), e.g. '{unknown[0]}'" if unknown else "") if part)
    return ""


def _check_settings(config: MSCREDConfig, sensors: list[str], calibration: Calibration) -> None:
    """The settings scoring relies on, checked once at load (a hand-edited config.json would otherwise fail later,
    deep inside scoring, as an internal error): ``config_problem``, then the sensors and the calibration against
    them. Raises ValueError saying which setting."""
    problem = config_problem(config)
    if problem:
        raise ValueError(problem)
    windows = tuple(config.signature.windows)
    if len(calibration.scale_thresholds) != len(windows):
        raise ValueError(f"calibration has {len(calibration.scale_thresholds)} scale threshold(s) for "
                         f"{len(windows)} windows")
    if config.score.method == "count" and len(calibration.theta) != len(windows):
        raise ValueError(f"calibration has {len(calibration.theta)} theta(s) for {len(windows)} windows")
    if config.score.method == "z_sensor":
        stats = calibration.sensor_stats
        if stats is None or stats.mean.shape != (len(windows) + 1, len(sensors)):
            raise ValueError("calibration.sensor_stats missing or not (windows + 1, sensors) in shape")
    if not sensors or len(set(sensors)) != len(sensors):
        raise ValueError("sensors must be distinct names" if sensors else "no sensors")
    separated = next((name for name in sensors if ROOT_CAUSE_SEPARATOR in name), None)
    if separated is not None:   # fit refuses such a name: detect's root_causes would read it back as two sensors
        raise ValueError(f"sensor {separated!r} holds '{ROOT_CAUSE_SEPARATOR}', which separates detect's root causes")
    if not _whole(config.model.n_scales, 1) or config.model.n_scales != len(windows):
        raise ValueError(f"model.n_scales {config.model.n_scales!r} does not match {len(windows)} windows")
    # A NaN or infinite threshold never flags (NaN compares false): the model would call everything normal.
    for name, values in (("calibration.threshold", [calibration.threshold]),
                         ("calibration.scale_thresholds", calibration.scale_thresholds),
                         ("calibration.theta", calibration.theta)):
        if not all(finite_number(v) for v in values):
            raise ValueError(f"{name} {values!r} must be finite numbers")


def _jsonable(value):
    """Tuples to lists, NumPy scalars to Python numbers, non-finite floats to None (JSON has no NaN)."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (np.floating, float)):
        value = float(value)
        return value if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    return value
