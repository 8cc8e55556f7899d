"""Compile Triton kernels for the H200 (sm_90) on a machine without a GPU, and read what they ask of it.

The CPU suite runs the kernels under Triton's interpreter, which checks no hardware limit: a tile whose shared
memory exceeds the H200's 227 KB passes every interpreted test and fails only on the device (OutOfResources; the
small conv's float32 weight gradient did, benchmarks/results/small_conv_confirm/). Triton's compiler, though, builds
for a named target without a driver (``ASTSource`` + ``GPUTarget``), and the compiled kernel's metadata holds the
shared memory its launch will request. The compiler runs in a process of its own with TRITON_INTERPRET=0 (the
test process interprets); one process compiles a list of configurations.

``shared_bytes(module, kernel, configs)`` -> the shared memory of each configuration, in bytes;
``sass(module, kernel, config)`` -> the machine code of one, as nvdisasm (from the Triton wheel) prints it;
``compiled_code`` -> that listing with the registers per thread and the shared memory. A
configuration is a dict: ``constants`` (the kernel's constexpr arguments by name; a string "tl.<type>" names a Triton
type, e.g. a compute type), ``pointers`` (pointer arguments by name: Triton types such as "*bf16"; any argument named
``*_ptr`` and not listed is "*fp32"), ``floats`` (names of float scalar arguments; every other argument is an int32
scalar), ``aligned`` (int arguments the launch would see divisible by 16, as Triton specialises them: strides
whose loads then vectorise), and the compile options ``num_warps``, ``num_stages``, ``maxnreg``.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from mscred.ops.triton.runtime import HOPPER_SHARED_MEMORY  # noqa: F401 (the tests compare with it here)

ROOT = Path(__file__).resolve().parents[1]


def shared_bytes(module: str, kernel: str, configs: list[dict]) -> list[int]:
    """Shared memory (bytes) of ``module.kernel`` compiled for sm_90 with each of ``configs``, in order."""
    return json.loads(_in_compiler_process("_compile_all", module, kernel, json.dumps(configs)))


def sass(module: str, kernel: str, config: dict) -> str:
    """The sm_90 machine code of ``module.kernel`` compiled with ``config`` (nvdisasm's listing)."""
    return compiled_code(module, kernel, config)["listing"]


def compiled_code(module: str, kernel: str, config: dict) -> dict:
    """{"listing": nvdisasm's listing, "registers": per thread, "shared": bytes} of ``module.kernel`` compiled for
    sm_90 with ``config`` (the registers as cuobjdump -res-usage reads them from the cubin)."""
    return json.loads(_in_compiler_process("_code_of", module, kernel, json.dumps(config)))


def _in_compiler_process(function: str, module: str, kernel: str, argument: str) -> str:
    """The last stdout line of ``function(module, kernel, argument)``, run in a process that compiles (does not
    interpret)."""
    program = (f"import sys; sys.path[:0] = {[str(ROOT / 'tests'), str(ROOT / 'src')]!r}; import sm90_compile; "
               f"print(sm90_compile.{function}({module!r}, {kernel!r}, {argument!r}))")
    run = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=600,
                         env={**os.environ, "TRITON_INTERPRET": "0"})
    if run.returncode != 0:
        raise RuntimeError(f"compiling {module}.{kernel} for sm_90 failed:\n{run.stderr[-3000:]}")
    return run.stdout.strip().splitlines()[-1]


def _compile(module: str, kernel: str, config: dict):
    import importlib

    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    fn = getattr(importlib.import_module(module), kernel)
    constants, pointers = config.get("constants", {}), config.get("pointers", {})
    floats, aligned = set(config.get("floats", ())), set(config.get("aligned", ()))
    signature, constexprs, attrs = {}, {}, {}
    for i, name in enumerate(fn.arg_names):
        if name in constants:
            value = constants[name]
            if isinstance(value, str) and value.startswith("tl."):
                value = getattr(tl, value[3:])
            signature[name], constexprs[(i,)] = "constexpr", value
        elif name in pointers or name.endswith("_ptr"):
            signature[name] = pointers.get(name, "*fp32")
            attrs[(i,)] = [["tt.divisibility", 16]]
        else:
            signature[name] = "fp32" if name in floats else "i32"
            if name in aligned:
                attrs[(i,)] = [["tt.divisibility", 16]]
    options = {key: config[key] for key in ("num_warps", "num_stages", "maxnreg") if config.get(key)}
    return triton.compile(ASTSource(fn, signature, constexprs, attrs), target=GPUTarget("cuda", 90, 32),
                          options=options)


def _compile_all(module: str, kernel: str, configs_json: str) -> str:
    return json.dumps([_compile(module, kernel, config).metadata.shared for config in json.loads(configs_json)])


def _code_of(module: str, kernel: str, config_json: str) -> str:
    import re
    import tempfile

    import triton

    compiled = _compile(module, kernel, json.loads(config_json))
    tools = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(compiled.asm["cubin"])
        f.flush()
        listing = subprocess.run([str(tools / "nvdisasm"), "-c", f.name], capture_output=True, text=True,
                                 check=True).stdout
        usage = subprocess.run([str(tools / "cuobjdump"), "-res-usage", f.name], capture_output=True, text=True,
                               check=True).stdout
    registers = int(re.search(r"REG:(\d+)", usage).group(1))
    return json.dumps(dict(listing=listing, registers=registers, shared=compiled.metadata.shared))
