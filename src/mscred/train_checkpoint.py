"""Training checkpoints as ONE safetensors file: every tensor in it, everything else as JSON in its metadata.

Nothing is ever unpickled on load (safetensors holds raw tensors; the metadata is a JSON string), and the file is
written through ``atomic_path`` so a crash leaves the previous checkpoint intact.

Tensor keys:
    model.<parameter name>            the network's state_dict
    optim.<param index>.<state key>   Adam's per-parameter state (step, exp_avg, exp_avg_sq, ...)
    rng.cpu, rng.cuda.<device>        torch RNG states (uint8)
Metadata key "mscred" (JSON): {"epoch", "history", "optimizer_groups", "extra"}.

Saving is two steps, ``checkpoint_contents`` (a CPU snapshot) then ``write_checkpoint``, so that the Trainer can
write from a ``BackgroundWriter`` thread while the next epoch trains.
"""
from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from mscred.atomic import atomic_path, check_folders_above, save_safetensors
from mscred.config import finite_number
from mscred.errors import InputError

CHECKPOINT_NAME = "checkpoint.safetensors"
DATA_RECORD_NAME = "sensors.json"   # beside the checkpoint: the data it was trained on (match_checkpoint_data)
# Optimizer settings that describe the machine the run is on, not the run's state: a resumed run keeps its own.
_RUNTIME_FLAGS = ("capturable", "foreach", "fused", "differentiable")


def checkpoint_contents(net: torch.nn.Module, optimizer: torch.optim.Optimizer, epoch: int,
                        history: list[dict[str, Any]], extra: dict[str, Any] | None = None
                        ) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """What a checkpoint holds, as (tensors, safetensors metadata): a snapshot. Every tensor is a CPU copy (also
    of CPU parameters, which ``.cpu()`` would return as they are) and the metadata is JSON text already, so
    training may go on while ``write_checkpoint`` writes it from another thread."""
    from mscred.model import cpu_state  # (here: the CLI imports this module for CHECKPOINT_NAME alone)

    tensors = {f"model.{name}": value for name, value in cpu_state(net).items()}
    state = optimizer.state_dict()
    for index, per_param in state["state"].items():
        for key, value in per_param.items():
            if not torch.is_tensor(value):  # Adam keeps only tensors; anything else would not be restored
                raise TypeError(f"optimizer state {key!r} is not a tensor")
            tensors[f"optim.{index}.{key}"] = value.detach().to("cpu", copy=True).contiguous()
    tensors["rng.cpu"] = torch.get_rng_state()
    if torch.cuda.is_available():
        for device, rng in enumerate(torch.cuda.get_rng_state_all()):
            tensors[f"rng.cuda.{device}"] = rng
    groups = [{k: (list(v) if isinstance(v, tuple) else v) for k, v in group.items()} for group in
              state["param_groups"]]
    from mscred import __version__

    meta = {"epoch": epoch, "history": history, "optimizer_groups": groups, "extra": extra or {},
            "mscred_version": __version__}
    return tensors, {"mscred": json.dumps(meta)}


def write_checkpoint(path: str | Path, tensors: dict[str, torch.Tensor], metadata: dict[str, str]) -> None:
    """Write ``checkpoint_contents``'s snapshot to ``path`` atomically."""
    with atomic_path(path) as tmp:
        save_safetensors(tensors, tmp, metadata=metadata)


class BackgroundWriter:
    """Runs one job at a time on a worker thread: the Trainer's per-epoch checkpoint reaches the disk while the next
    epoch trains. (On the H200 the writes took 0.5 s of a 4-s `mscred train` of 10 epochs, 38 MB each for the
    default model's weights and Adam state: results/cli_phases/.) ``submit`` first waits for the job before it, so
    checkpoints land in order and at most one snapshot is held; ``join`` waits for the last one and returns its
    error, if any, for the caller to raise."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def submit(self, fn, *args) -> None:
        error = self.join()
        if error is not None:
            raise error

        def run() -> None:
            try:
                fn(*args)
            except BaseException as err:  # noqa: BLE001 - handed to the training thread by join()
                self._error = err

        self._thread = threading.Thread(target=run, name="mscred-checkpoint", daemon=False)
        self._thread.start()

    def join(self) -> BaseException | None:
        """Wait for the job in flight; its exception (cleared), or None."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        error, self._error = self._error, None
        return error


# What a resumed run must share with the checkpoint's run for the result to be the model of one run: the batch order
# and split (seed, batch size, validation share), the optimiser (learning rate) and the network (its config).
# Epochs may grow (train further), the device and kernels may change (another machine).
RUN_SETTINGS = {"train_config": ("batch_size", "lr", "seed", "val_fraction"),
                "model_config": ("n_sensors", "n_scales", "channels", "lstm_kernel", "forget_bias")}


def check_resumable(meta: dict[str, Any], path: str | Path, epochs: int, train_config: dict[str, Any],
                    model_config: dict[str, Any] | None, steps: int | None = None) -> None:
    """InputError unless a run with these settings may continue the checkpoint whose metadata is ``meta``: the
    ``RUN_SETTINGS`` equal (where the checkpoint recorded them), and no fewer ``epochs`` than it has done. Once a
    resumed run took a checkpoint of other settings silently (exit 0, a model of neither run)."""
    extra = meta.get("extra") or {}
    differ = []
    for section, keys in RUN_SETTINGS.items():
        then, now = extra.get(section) or {}, (train_config if section == "train_config" else model_config) or {}
        for key in keys:
            if key in then and key in now and _plain(then[key]) != _plain(now[key]):
                differ.append(f"{key} {_plain(then[key])} -> {_plain(now[key])}")
    if steps is not None and "steps" in extra and extra["steps"] != steps:   # (the windows' length: other inputs)
        differ.append(f"steps {extra['steps']} -> {steps}")
    if differ:
        raise InputError(f"{path}: the checkpoint's run had other settings ({'; '.join(differ)}); resume with the "
                         "same settings, or train without --resume to start over")
    done = int(meta.get("epoch", 0))
    if epochs < done:
        raise InputError(f"{path}: the checkpoint has {done} epoch(s) done, this run asks for {epochs}; resume with "
                         f"--epochs {done} or more")


def _plain(value):
    """JSON's view of a setting (tuples are lists there), so that a recorded and a current value compare."""
    return list(value) if isinstance(value, tuple) else value


def load_checkpoint(path: str | Path, net: torch.nn.Module, optimizer: torch.optim.Optimizer,
                    check=None) -> dict[str, Any]:
    """Restore model, optimizer and RNG state from ``path`` in place; returns the metadata (epoch, history, extra).
    ``check(meta)``, if given, runs first (``check_resumable``): a checkpoint of other settings is refused naming
    them, not by the size mismatch of some weight.

    Parameters are copied into the existing tensors (their addresses stay), the optimizer's hyperparameters come
    from the file except the runtime flags of ``_RUNTIME_FLAGS``, which stay those of ``optimizer``.
    """
    path = Path(path)
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = json.loads(f.metadata()["mscred"])
            tensors = {key: f.get_tensor(key) for key in f.keys()}
    except Exception as err:  # noqa: BLE001 - any failure to read means a damaged checkpoint
        raise InputError(f"{path}: not a readable mscred checkpoint ({type(err).__name__}: {err})") from err
    problem = checkpoint_problem(meta, tensors)
    if problem is not None:   # (a KeyError, a TypeError or a RuntimeError of torch's from deep inside, exit 1)
        raise InputError(f"{path}: not a checkpoint this mscred can resume ({problem}{_written_by(meta)}); train "
                         "without --resume to start over")
    if check is not None:
        check(meta)

    model_state = {k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")}
    try:
        net.load_state_dict(model_state, strict=True)
    except RuntimeError as err:
        raise InputError(f"{path}: checkpoint does not match this network ({str(err).splitlines()[0]})") from err

    current = optimizer.state_dict()["param_groups"]
    groups = meta["optimizer_groups"]
    if len(groups) != len(current):
        raise InputError(f"{path}: checkpoint has {len(groups)} optimizer groups, this run {len(current)}")
    for saved, now in zip(groups, current):
        if "betas" in saved:
            saved["betas"] = tuple(saved["betas"])
        for flag in _RUNTIME_FLAGS:
            if flag in now:
                saved[flag] = now[flag]
    per_param: dict[int, dict[str, torch.Tensor]] = {}
    for key, value in tensors.items():
        if key.startswith("optim."):
            _, index, name = key.split(".", 2)
            per_param.setdefault(int(index), {})[name] = value
    try:
        optimizer.load_state_dict({"state": per_param, "param_groups": groups})
    except (ValueError, KeyError, TypeError, RuntimeError) as err:
        raise InputError(f"{path}: the checkpoint's optimizer state does not match this network "
                         f"({str(err).splitlines()[0]})") from err
    for param, state in optimizer.state.items():   # (a wrong shape failed only at the first Adam step, in torch)
        if not torch.is_tensor(param):   # (torch keeps the state of a parameter index it does not have, by index)
            raise InputError(f"{path}: the checkpoint's optimizer state does not match this network (state of "
                             f"parameter {param!r}, which it does not have)")
        for name, value in state.items():
            if name != "step" and torch.is_tensor(value) and value.shape != param.shape:
                raise InputError(f"{path}: the checkpoint's optimizer state does not match this network ({name} "
                                 f"of shape {tuple(value.shape)} for a parameter of shape {tuple(param.shape)})")

    try:
        torch.set_rng_state(tensors["rng.cpu"])
    except RuntimeError as err:
        raise InputError(f"{path}: the checkpoint's random state is damaged ({str(err).splitlines()[0]})") from err
    cuda_keys = sorted((t for t in tensors if t.startswith("rng.cuda.")), key=lambda t: int(t.rsplit(".", 1)[1]))
    cuda_states = [tensors[k] for k in cuda_keys]
    if cuda_states and torch.cuda.is_available() and len(cuda_states) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(cuda_states)
    return meta


def _epochs_done(path: Path) -> str:
    """" (N epochs done)" from the checkpoint at ``path``, or "" when it cannot say."""
    try:
        with safe_open(str(path), framework="pt") as f:
            epoch = json.loads(f.metadata()["mscred"])["epoch"]
        return f" ({int(epoch)} epoch(s) done)"
    except Exception:  # noqa: BLE001 - a damaged one is removed all the same
        return ""


def _written_by(meta) -> str:
    """", written by mscred X" when the checkpoint says another version wrote it (else "")."""
    from mscred import __version__

    version = meta.get("mscred_version") if isinstance(meta, dict) else None
    if version is None:
        return ""   # (a checkpoint written before the version was recorded)
    return f", written by mscred {version}" if version != __version__ else ""


def checkpoint_problem(meta, tensors: dict[str, torch.Tensor]) -> str | None:
    """What makes a checkpoint's metadata ``meta`` (its "mscred" JSON) and ``tensors`` unusable for a resume, in a
    few words, or None. A checkpoint of another mscred, or one edited or damaged, was a KeyError, a TypeError or
    torch's RuntimeError from deep inside the resume (exit 1), or NaN weights that trained on to a "diverged"."""
    if not isinstance(meta, dict):
        return f"its metadata is a {type(meta).__name__}, not an object"
    for key in ("epoch", "history", "optimizer_groups"):
        if key not in meta:
            return f"no {key!r} in its metadata"
    epoch, history, groups, extra = meta["epoch"], meta["history"], meta["optimizer_groups"], meta.get("extra", {})
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        return f"epoch {epoch!r} is not a count of epochs"
    if not isinstance(history, list) or not all(isinstance(record, dict) for record in history):
        return "its history is not a list of epochs"
    if len(history) != epoch:
        return f"{len(history)} epoch(s) of history for {epoch} epoch(s) done"
    if not isinstance(groups, list) or not all(isinstance(g, dict) and isinstance(g.get("params"), list)
                                               for g in groups):
        return "its optimizer groups are not a list of groups of parameters"
    for group in groups:
        for key in ("lr", "eps", "weight_decay"):
            if key in group and not finite_number(group[key]):
                return f"optimizer setting {key} {group[key]!r} is not a number"
        betas = group.get("betas", [0.9, 0.999])
        if not (isinstance(betas, list) and len(betas) == 2 and all(finite_number(b) for b in betas)):
            return f"optimizer setting betas {betas!r} is not two numbers"
    if not isinstance(extra, dict) or not all(isinstance(extra.get(section), dict) for section in RUN_SETTINGS
                                              if section in extra):
        return "its recorded settings are not objects of settings"
    if "rng.cpu" not in tensors:
        return "no random state (rng.cpu)"
    for key, value in tensors.items():
        if key.startswith("optim.") and (key.count(".") < 2 or not key.split(".", 2)[1].isdigit()):
            return f"tensor {key!r} is not optim.<parameter>.<state>"
        if key.startswith("model.") and value.is_floating_point() and not torch.isfinite(value).all():
            return f"weight {key[len('model.'):]} holds NaN or infinite values"
    return None


def match_checkpoint_data(ckpt: Path, sensors, values, source, resume: bool,
                          signature: dict | None = None) -> None:
    """Record the data of a run beside its checkpoints (its sensors, row count and a hash of its values, and the
    ``signature`` settings that make its windows: windows, gap, steps); a resume on other data, or on the same data
    cut into other windows (a gap of 5 instead of 10 loaded the same weights), is bad input naming ``source``. A
    run that does not resume starts over: a checkpoint left by an earlier run is removed before the record is
    rewritten (else a later resume continued that run's checkpoint under this run's record).

    The network's convolutions do not depend on the sensor count, so a checkpoint of other data would load and
    training would silently continue a model of other data. ``MSCRED.fit`` checks it; the CLI checks it itself
    only for ``--nproc`` and torchrun ranks, which do not go through ``fit``. A record of an older mscred (a list of
    sensors) is checked for the sensors only; a checkpoint folder without one resumes.
    """
    import hashlib

    import numpy as np

    ckpt = Path(ckpt)
    sensors = [str(s) for s in sensors]
    values = np.ascontiguousarray(values)
    now = {"sensors": sensors, "rows": int(values.shape[0]),
           "values_sha256": hashlib.sha256(values.tobytes()).hexdigest()}
    if signature is not None:
        now["signature"] = {key: _plain(value) for key, value in signature.items()}
    record = ckpt / DATA_RECORD_NAME
    if resume and record.is_file():
        try:
            before = json.loads(record.read_text())
        except (ValueError, UnicodeDecodeError):
            before = None
        recorded = before if isinstance(before, list) else before.get("sensors") if isinstance(before, dict) else None
        if not isinstance(recorded, list) and (ckpt / CHECKPOINT_NAME).exists():
            # (read as "no record" once, and the checkpoint resumed on whatever data was given)
            raise InputError(f"{record}: damaged, so the data the checkpoint in {ckpt} was trained on is unknown; "
                             "train without --resume to start over")
        if isinstance(recorded, list) and recorded != sensors:
            missing = [s for s in recorded if s not in sensors]
            extra = [s for s in sensors if s not in recorded]
            detail = "; ".join(part for part in (
                "missing " + ", ".join(missing) if missing else "",
                "new " + ", ".join(extra) if extra else "",
                "same sensors in another order" if not (missing or extra) else "") if part)
            raise InputError(f"{source}: other sensors than the checkpoint in {ckpt} ({detail}); train "
                             "without resuming to start over")
        if isinstance(before, dict) and (before.get("rows"), before.get("values_sha256")) != (
                now["rows"], now["values_sha256"]):
            rows = (f"{now['rows']} rows against its {before.get('rows')}" if before.get("rows") != now["rows"]
                    else f"the same {now['rows']} rows, other values")
            raise InputError(f"{source}: other data than the checkpoint in {ckpt} (the same sensors, {rows}); train "
                             "without resuming to start over")
        then = before.get("signature") if isinstance(before, dict) else None
        if isinstance(then, dict) and "signature" in now:
            differ = [f"{key} {then[key]} -> {value}" for key, value in now["signature"].items()
                      if key in then and then[key] != value]
            if differ:
                raise InputError(f"{ckpt}: the checkpoint's run cut the data into other windows ({'; '.join(differ)});"
                                 " resume with the same signature settings, or train without --resume to start over")
    check_folders_above(ckpt / DATA_RECORD_NAME)   # (ckpt itself a file is named too)
    ckpt.mkdir(parents=True, exist_ok=True)
    if not resume and (ckpt / CHECKPOINT_NAME).exists():
        # (removed without a word once: a rerun that forgot --resume lost the epochs of the interrupted run)
        import warnings

        from mscred.errors import NoteWarning

        warnings.warn(NoteWarning(f"{ckpt}: training from the start, so the checkpoint of an earlier run"
                                  f"{_epochs_done(ckpt / CHECKPOINT_NAME)} is removed (--resume continues one)"),
                      stacklevel=2)
        (ckpt / CHECKPOINT_NAME).unlink(missing_ok=True)
    with atomic_path(record) as tmp:   # the ranks of a torchrun launch all write it: never a half-written record
        Path(tmp).write_text(json.dumps(now))
