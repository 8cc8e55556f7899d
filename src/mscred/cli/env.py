"""`mscred env`: versions, devices and which kernel backends work here (for bug reports)."""
from __future__ import annotations

import importlib.metadata
import os
import platform

import click


def _version(name: str) -> str:
    """Installed version of a distribution, or "not installed" (an optional package's absence is information)."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


# Variables of other tools that change what this command reports: TRITON_INTERPRET=1 turns "fused ok" on a machine
# without CUDA (the Triton kernels on the CPU interpreter, as the test suite sets it), OMP_NUM_THREADS the torch
# threads, CUDA_VISIBLE_DEVICES the devices. A report showed their effect and not their cause.
OTHER_VARIABLES = ("TRITON_INTERPRET", "OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES")


def _usable_cores() -> int | None:
    """The cores this process may run on (taskset, a container's cpuset): os.cpu_count() counts the machine's."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):   # (not on every OS)
        return os.cpu_count()


def _kernels() -> dict[str, str]:
    """The kernels the backends pick by themselves where they work: "ok", or why not here."""
    from mscred import packed_adam
    from mscred.ops import conv_cell, graph_memsets, resident_lstm
    kernels = {"resident ConvLSTM (bf16 scoring, levels 1-2)": resident_lstm.is_available(),
               "conv + cell step (bf16 training, level 1)": conv_cell.is_available(),
               "conv + cell backward step (bf16 training, level 1)": conv_cell.is_backward_available(),
               "packed Adam (fused-backend training, Triton)": packed_adam.is_available(),
               "graph memsets as kernel nodes (CUDA graphs)": graph_memsets.is_available()}
    return {name: "ok" if ok else f"unavailable: {why}" for name, (ok, why) in kernels.items()}


def _sass_tools() -> dict[str, str]:
    """The CUDA tools `mscred sass` runs, each "RELEASE at PATH" or "not found": nvcc (probe, compiles),
    nvdisasm (instruction mixes, lines, diffs), cuobjdump, and a CUDA 12 ptxas (the sm_5x-sm_72 cubins CUDA 13 no
    longer builds). Where `sass` said "no nvdisasm reads these cubins", this says which one it found."""
    from mscred.sass.toolchain import find_tool, tool_release

    out = {}
    for name in ("nvcc", "nvdisasm", "cuobjdump", "ptxas12"):
        path = find_tool(name)
        out[name] = f"{tool_release(path) or 'release unknown'} at {path}" if path else "not found"
    return out


def collect() -> dict:
    """Everything `mscred env` prints, as a dict (tested, and handy in bug reports)."""
    import torch

    import mscred
    from mscred.ops import backend_status, resolve_model_backend
    from mscred.train_graphs import bf16_native

    info = {
        "mscred": mscred.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "packages": {name: _version(name) for name in
                     ("torch", "numpy", "pandas", "safetensors", "click", "rich", "triton", "pyarrow",
                      "matplotlib", "pyelftools")},
        "cpu_cores": os.cpu_count(),
        "cpu_cores_usable": _usable_cores(),
        "torch_threads": torch.get_num_threads(),
        "cpu_bf16_native": bf16_native(torch.device("cpu")),
        "cuda_available": torch.cuda.is_available(),
        "torch_cuda": torch.version.cuda,
        "devices": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())],
        "backends": backend_status(),
        "kernels": _kernels(),
        "sass_tools": _sass_tools(),
        # The MSCRED_* variables set here (MSCRED_CONV1_KERNEL / MSCRED_CONV2_KERNEL / MSCRED_PATCH_KERNEL force
        # kernels, MSCRED_WINDOW_LSTM / MSCRED_RESIDENT_LSTM switch the per-window ConvLSTM kernels, MSCRED_DEBUG
        # shows tracebacks, ...): a bug report should say which were on.
        "environment": {k: v for k, v in sorted(os.environ.items()) if k.startswith("MSCRED_")},
        "other_variables": {k: os.environ[k] for k in OTHER_VARIABLES if k in os.environ},
    }
    device = "cuda" if info["cuda_available"] else "cpu"
    # What `mscred train` uses here by default (--backend auto, CUDA graphs on a CUDA device).
    info["defaults"] = {"device": device, "backend": resolve_model_backend("auto", device),
                        "cuda_graphs": device == "cuda"}
    return info


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def env(as_json: bool) -> None:
    """Print versions, devices and the status of every kernel backend."""
    info = collect()
    if as_json:
        import json

        click.echo(json.dumps(info, indent=2))
        return
    click.echo(f"mscred {info['mscred']}  python {info['python']}  {info['platform']}")
    click.echo("packages: " + ", ".join(f"{k} {v}" for k, v in info["packages"].items()))
    usable = info["cpu_cores_usable"]
    cores = f"{info['cpu_cores']} cores" + (f" ({usable} usable here)" if usable != info["cpu_cores"] else "")
    click.echo(f"cpu: {cores}, torch threads {info['torch_threads']}, bf16 "
               f"{'native (--bf16 applies on the CPU)' if info['cpu_bf16_native'] else 'not native (--bf16 ignored)'}")
    if info["cuda_available"]:
        click.echo(f"cuda {info['torch_cuda']}: " + "; ".join(info["devices"]))
    else:
        built = f"torch built with CUDA {info['torch_cuda']}" if info["torch_cuda"] else "a CPU build of torch"
        click.echo(f"cuda: not available ({built})")
    for op, backends in info["backends"].items():
        for backend, state in backends.items():
            click.echo(f"  {op:<20} {backend:<15} {state}")
    for kernel, state in info["kernels"].items():
        click.echo(f"  {kernel}: {state}")
    click.echo("sass tools: " + ", ".join(f"{name} {state}" for name, state in info["sass_tools"].items()))
    if info["environment"]:
        click.echo("environment: " + ", ".join(f"{k}={v}" for k, v in info["environment"].items()))
    if info["other_variables"]:
        click.echo("other variables: " + ", ".join(f"{k}={v}" for k, v in info["other_variables"].items()))
    d = info["defaults"]
    click.echo(f"mscred train by default: device {d['device']}, backend {d['backend']}, "
               f"CUDA graphs {'on' if d['cuda_graphs'] else 'off'}")
