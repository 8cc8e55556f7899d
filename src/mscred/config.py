"""Every setting of mscred, with the defaults of the paper and its original code where they give one.

Four dataclasses, one per stage. They are plain data: ``to_dict``/``from_dict`` round-trip them through
``config.json`` of a saved model, so adding a field with a default keeps old model directories loadable.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Optional


@dataclass
class SignatureConfig:
    # Window lengths w of the multi-scale signature matrices M_w = X X^T / w (the paper's 10, 30, 60).
    windows: tuple[int, ...] = (10, 30, 60)
    # Steps between the ends of two consecutive segments (the original code's gap_time).
    gap: int = 10
    # Segments per model input (the paper's h = 5 steps of ConvLSTM).
    steps: int = 5
    # Segments computed per chunk of the prefix-sum pass; bounds peak memory at any series length.
    chunk_segments: int = 4096


@dataclass
class ModelConfig:
    # Filled from the data at fit time; the network works for any n >= 4.
    n_sensors: int = 30
    # Input channels = number of signature scales, len(SignatureConfig.windows); deconv1 outputs as many.
    n_scales: int = 3
    # Encoder filters of conv1..conv4 (the ConvLSTM hidden size of each level equals these).
    channels: tuple[int, ...] = (32, 64, 128, 256)
    # ConvLSTM kernel (2 as the original code; 3 by config).
    lstm_kernel: int = 2
    # Added to the forget gate pre-activation, as TensorFlow's ConvLSTMCell.
    forget_bias: float = 1.0
    # "reference": plain PyTorch ops; "fused": Triton ConvLSTM cell and attention kernels (GPU); "auto": fused when
    # training on a CUDA device (compute capability >= 8.0) where those kernels work, else reference. A saved model
    # keeps "auto" and, loaded, scores with the reference ops (ops.resolve_model_backend, MSCRED.fit).
    backend: str = "auto"
    # Encoder convolutions: "torch" (cuDNN / ATen), "im2col-global", "im2col-shared", "implicit" (pipelined
    # implicit GEMM + bias + SELU), "implicit-basic" (the first implicit GEMM).
    conv_backend: str = "torch"


# Settings added after models were first written, saved in config.json only where they differ from their defaults:
# a model that does not use them stays readable by the mscred before them, which refuses a setting it does not know.
ADDED_SETTINGS = {"train": ("time_column", "na_values", "long_columns", "resample", "only_sensors", "drop_columns",
                            "time_zone", "hold_sensors", "rate_sensors", "states")}

# What a missing (NaN, or empty) sensor value gets (TrainConfig.missing, `--missing`): "error" (SPEC: exit 2 naming
# the cell), "interpolate" (linear in the row number between the neighbouring present values of its sensor; before
# the first / after the last present value, that value; mscred.data.io) or "hold" (the last present value before it,
# as a historian reconstructs a step tag or an exception-reported one between its records; before the first present
# value, that one). Infinite values are an error either way: they are glitches, not gaps.
MISSING_POLICIES = ("error", "interpolate", "hold")
# The largest seed (TrainConfig.seed, the CLI's --seed): torch.manual_seed takes a 64-bit integer, and 2**64 failed
# deep inside fit ("Overflow when unpacking long long").
MAX_SEED = 2 ** 63 - 1
# The largest count setting (TrainConfig.epochs, batch_size, micro_batch; the CLI's --epochs, --batch-size,
# --micro-batch, --nproc): JSON's portable integers (config.json records them; a reader of doubles, JavaScript's or
# pandas', rounds beyond 2**53), far above any batch, epoch count or process count a run can use.
MAX_COUNT = 2 ** 53


def finite_number(value) -> bool:
    """Whether ``value`` is a finite int or float (NumPy's too), not a bool: what a numeric setting, and a number
    of a checkpoint's metadata, must be."""
    import math

    import numpy as np   # (here, not at the top: the CLI imports this module before it needs NumPy)

    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool) and \
        math.isfinite(value)


@dataclass
class TrainConfig:
    epochs: int = 10
    batch_size: int = 32
    # Windows per forward and backward pass: a batch runs in micro-batches of this many windows, whose gradients
    # add up to the batch's, so the Adam step is the same in the memory of one micro-batch (train_graphs.
    # accumulated_step; eager, without CUDA graphs). None: the whole batch at once, unless on the CPU it would not
    # fit in the memory available, where fit picks the largest micro-batch that does and says so.
    micro_batch: Optional[int] = None
    lr: float = 2e-4  # Adam, as the paper
    # Last fraction of the training windows held out for validation (SPEC: last 2,000 of 8,000 steps).
    val_fraction: float = 0.25
    seed: int = 0
    device: str = "auto"  # auto | cpu | cuda
    # Stop after this many epochs without a better validation loss; None trains all epochs.
    early_stopping_patience: Optional[int] = None
    # bf16 autocast (fp32 master weights) on CUDA and on CPUs with native bf16 (train_graphs.bf16_native).
    bf16: bool = False
    # Capture a whole training step / inference batch in CUDA graphs (CUDA only). None (default): the training
    # steps and validation on a CUDA device, scoring eager (one pass does not repay capture + autotuning).
    cuda_graphs: Optional[bool] = None
    # Time cuDNN's convolution algorithms in the graphs' warm-up (CUDA graphs only). None (default): when the run
    # plans at least train_graphs.AUTOTUNE_MIN_STEPS steps, the break-even measured on the H200.
    cudnn_benchmark: Optional[bool] = None
    # A line per epoch on stderr. Off by default, as a library call should be (scikit-learn's verbose=0); the CLI's
    # train and demo turn it on (--quiet off).
    progress: bool = False
    # Missing (NaN) sensor values in the data, at fit and at detect (MISSING_POLICIES above): "error" (SPEC: exit 2
    # naming the cell), "interpolate" (linearly between the neighbouring rows) or "hold" (the last value before).
    # Callers holding only overrides read the default as TrainConfig.missing.
    missing: str = "error"
    # The column of the training data holding each row's time, where it is not named 'timestamp' (`--time-column`;
    # a historian's "Time" or "DateTime"): read as 'timestamp' is, and at detect, watch and calibrate the model's data
    # is read with the same name unless they are told another (SCORES.csv names it 'timestamp', as always).
    time_column: str = "timestamp"
    # Text that stands for a missing sensor value in the data (`--na-value`, repeatable; a historian's "Bad",
    # "I/O Timeout", "No Data"), besides empty cells and NaN: read as NaN, then `missing` decides. Kept in the model
    # as time_column is; the commands scoring its data add the text they are given.
    na_values: tuple[str, ...] = ()
    # A long table, one value a row (`--long SENSOR,VALUE`: the columns naming each row's sensor and holding its
    # value; a historian's or Prometheus' export), made wide as it is read (mscred.data.reading); None: a wide table.
    long_columns: Optional[tuple[str, ...]] = None
    # The period of a regular time grid the data is put on as it is read (`--resample 1min`; a number for times
    # that are numbers; `1min,last`: the last value, `max`, `min`, `first` likewise): each row the mean of a period's
    # rows, a period without a value missing (mscred.data.resample).
    # Kept in the model: every command reading its data puts it on the same grid. None: the rows as they are.
    resample: Optional[str] = None
    # The only sensors read from the data (`--sensors a,b,c`: columns of a wide table, names in a long table's sensor
    # column), the others left out as it is read; None: every sensor. Kept in the model: detect, watch and calibrate
    # read the same ones from a table holding more (mscred.data.reading).
    only_sensors: Optional[tuple[str, ...]] = None
    # Columns of the data that are not sensors (`--drop-columns status,unit`: a status text, a unit, a comment), left
    # out wherever present as it is read; kept in the model, the commands scoring its data add those they are given.
    drop_columns: tuple[str, ...] = ()
    # The IANA time zone of the data's wall times written without a UTC offset (`--time-zone Europe/Berlin`: a
    # historian's export in the site's local time), read as the instants they name -- the hour the clocks go back,
    # which comes twice, told apart by order (mscred.data.time_zone). Kept in the model: every command reading its
    # data reads its times so. None: times as they are (a repeated local hour refused as out of order).
    time_zone: Optional[str] = None
    # Sensors whose missing values hold their last present value whatever `missing` says of the others (`--hold
    # valve1,pump2`: states and step tags beside float tags, which `interpolate` would ramp between two states; under
    # "error" these alone are filled). Kept in the model, as `missing` is.
    hold_sensors: tuple[str, ...] = ()
    # Counters and totalizers given to the model as their rate (`--rate bytes_total,energy_kwh`): the increase since
    # the row before, per second where the rows have times, a reset read as a count from 0 (mscred.data.rate); their
    # raw value only grows, out of the training range. Kept in the model: every command scoring its data rates them.
    rate_sensors: tuple[str, ...] = ()
    # Columns of text states read as each state's position among them (`--states valve=CLOSED,OPEN`: a historian's
    # digital tag, CLOSED 0 and OPEN 1), "NAME=STATE,STATE,..." each (mscred.data.states); a text that is none of them
    # is refused at its cell. Kept in the model: every command reading its data reads the column so.
    states: tuple[str, ...] = ()


@dataclass
class ScoreConfig:
    # "count": the paper's number of residual entries above theta; "mse": mean squared residual; "z_sensor":
    # per-sensor residual row sums standardised by their validation mean/std, the largest one (detect.py). Default
    # z_sensor: on the paper's synthetic data after a short CPU training it finds more anomalies and root causes
    # than the count score, whose fixed theta = 0.005 flags nothing there (README, "Detection quality").
    method: str = "z_sensor"
    # Residual threshold of the count score; None chooses it from the validation residuals.
    theta: Optional[float] = 0.005
    # When theta is None: theta of each scale = this quantile of the validation residual entries (detect.py).
    theta_quantile: float = 0.99
    # Scales (window lengths) whose residuals enter the score; the original code uses w = 10 only.
    scales: tuple[int, ...] = (10,)
    # How the anomaly threshold is set: "beta_max" (paper), "percentile", "pot".
    threshold: str = "beta_max"
    beta: float = 1.5
    percentile: float = 99.0
    # POT (Siffer et al. 2017): probability that a normal score exceeds the threshold, and the quantile of the
    # initial threshold whose excesses are fitted by a Generalised Pareto Distribution.
    pot_risk: float = 1e-3
    pot_level: float = 0.98
    # Root causes reported per anomalous window.
    top_k: int = 3


# Settings that do not make another model: where and how fast it trains and scores, and what fit fills in from the
# data (the sensor count). A fleet's --resume keeps models that differ only in these; set_params keeps a fit.
RUNTIME_SETTINGS = {"model": {"n_sensors", "n_scales", "backend", "conv_backend"},
                    "train": {"device", "bf16", "cuda_graphs", "cudnn_benchmark", "progress", "micro_batch"}}


@dataclass
class MSCREDConfig:
    signature: SignatureConfig = field(default_factory=SignatureConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    score: ScoreConfig = field(default_factory=ScoreConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def saved_dict(self) -> dict[str, Any]:
        """``to_dict`` as a model's config.json holds it: the ``ADDED_SETTINGS`` only where they differ from their
        defaults (``from_dict`` reads an absent one as its default)."""
        data, defaults = self.to_dict(), MSCREDConfig().to_dict()
        for section, names in ADDED_SETTINGS.items():
            for name in names:
                if data[section][name] == defaults[section][name]:
                    del data[section][name]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "MSCREDConfig":
        if not isinstance(data, dict):  # a config.json edited by hand, or config= of the wrong shape
            raise ValueError(f"settings: expected an object of sections, got {type(data).__name__}")
        # An unknown section is refused as an unknown setting is: {"trian": {"epochs": 3}} once trained with the
        # default 10 epochs without a word.
        unknown = set(data) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ValueError(f"unknown settings section(s): {', '.join(sorted(map(str, unknown)))}; the sections are "
                             "signature, model, train, score")
        return cls(
            signature=_build(SignatureConfig, data.get("signature", {})),
            model=_build(ModelConfig, data.get("model", {})),
            train=_build(TrainConfig, data.get("train", {})),
            score=_build(ScoreConfig, data.get("score", {})),
        )


def _build(kind, values: dict[str, Any]):
    """Make ``kind`` from a JSON dict: unknown keys are an error, lists become tuples where the field is one (its
    default, or its annotation: Optional[tuple[...]] fields default to None)."""
    if not isinstance(values, dict):
        raise ValueError(f"{kind.__name__}: expected an object of settings, got {type(values).__name__}")
    known = {f.name: f for f in dataclasses.fields(kind)}
    unknown = set(values) - set(known)
    if unknown:
        raise ValueError(f"unknown {kind.__name__} setting(s): {', '.join(sorted(unknown))}")
    converted = {}
    for name, value in values.items():
        tuple_field = isinstance(known[name].default, tuple) or "tuple[" in str(known[name].type)
        converted[name] = tuple(value) if tuple_field and isinstance(value, list) else value
    return kind(**converted)
