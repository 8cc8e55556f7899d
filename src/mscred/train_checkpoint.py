"""Training checkpoints as ONE safetensors file: every tensor in it, everything else as JSON in its metadata.

Nothing is ever unpickled on load (safetensors holds raw tensors; the metadata is a JSON string), and the file is
written through ``atomic_path`` so a crash leaves the previous checkpoint intact.

Tensor keys:
    model.<parameter name>            the network's state_dict
    optim.<param index>.<state key>   Adam's per-parameter state (step, exp_avg, exp_avg_sq, ...)
    rng.cpu, rng.cuda.<device>        torch RNG states (uint8)
Metadata key "mscred" (JSON): {"epoch", "history", "optimizer_groups", "extra"}.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from mscred.atomic import atomic_path
from mscred.errors import InputError

CHECKPOINT_NAME = "checkpoint.safetensors"
# Optimizer settings that describe the machine the run is on, not the run's state: a resumed run keeps its own.
_RUNTIME_FLAGS = ("capturable", "foreach", "fused", "differentiable")


def save_checkpoint(path: str | Path, net: torch.nn.Module, optimizer: torch.optim.Optimizer, epoch: int,
                    history: list[dict[str, Any]], extra: dict[str, Any] | None = None) -> None:
    """Write model, optimizer, RNG state, epoch and history to ``path`` atomically."""
    tensors: dict[str, torch.Tensor] = {}
    for name, value in net.state_dict().items():
        tensors[f"model.{name}"] = value.detach().cpu().contiguous()
    state = optimizer.state_dict()
    for index, per_param in state["state"].items():
        for key, value in per_param.items():
            if not torch.is_tensor(value):  # Adam keeps only tensors; anything else would not be restored
                raise TypeError(f"optimizer state {key!r} is not a tensor")
            tensors[f"optim.{index}.{key}"] = value.detach().cpu().contiguous()
    tensors["rng.cpu"] = torch.get_rng_state()
    if torch.cuda.is_available():
        for device, rng in enumerate(torch.cuda.get_rng_state_all()):
            tensors[f"rng.cuda.{device}"] = rng
    groups = [{k: (list(v) if isinstance(v, tuple) else v) for k, v in group.items()} for group in
              state["param_groups"]]
    meta = {"epoch": epoch, "history": history, "optimizer_groups": groups, "extra": extra or {}}
    with atomic_path(path) as tmp:
        save_file(tensors, str(tmp), metadata={"mscred": json.dumps(meta)})


def load_checkpoint(path: str | Path, net: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """Restore model, optimizer and RNG state from ``path`` in place; returns the metadata (epoch, history, extra).

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
    optimizer.load_state_dict({"state": per_param, "param_groups": groups})

    torch.set_rng_state(tensors["rng.cpu"])
    cuda_keys = sorted((t for t in tensors if t.startswith("rng.cuda.")), key=lambda t: int(t.rsplit(".", 1)[1]))
    cuda_states = [tensors[k] for k in cuda_keys]
    if cuda_states and torch.cuda.is_available() and len(cuda_states) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(cuda_states)
    return meta
