"""The PyTorch glue of the CUDA extensions (``ops/im2col/binding.cpp``, ``ops/resident_lstm/binding.cpp``,
``ops/conv_cell/binding.cpp`` and ``binding_bwd.cpp``, ``ops/graph_memsets/binding.cpp``) must
compile: on a GPU machine a compile error there would only show as the extension's one-time "unavailable" warning
and the slower paths (the kernels themselves are compiled by nvcc in test_im2col_build.py / test_resident_lstm.py).
Here each is checked by the host compiler against the installed torch's headers and the CUDA toolkit's
(``-fsyntax-only``). A CPU build of torch lacks one generated header, ``c10/cuda/impl/cuda_cmake_macros.h`` (build
settings only), which the test supplies empty. Skipped where no C++ compiler or CUDA headers are found.

Each binding starts with ``#include <torch/extension.h>``, whose parse was ~25 of each check's ~30 s: it is parsed
once, into a precompiled header that g++ takes in its place (``-include``; the binding's own include of it is then a
repeat that its ``#pragma once`` skips), for the bindings whose first line of code is that include. Where the
header cannot be precompiled, or g++ finds the .gch unusable (-Winvalid-pch says so), each check parses it itself."""
from __future__ import annotations

import os
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest
import torch

from mscred.sass.toolchain import find_tool

OPS = Path(__file__).resolve().parents[1] / "src" / "mscred" / "ops"


def _cuda_include() -> Path | None:
    """The CUDA toolkit's include directory (where cuda_runtime_api.h is), from CUDA_HOME or nvcc's location."""
    nvcc = find_tool("nvcc")
    candidates = [Path(os.environ[v]) / "include" for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    if nvcc:
        candidates.append(Path(os.path.realpath(nvcc)).parents[1] / "include")
    candidates += [Path("/usr/local/cuda/include")]
    return next((c for c in candidates if (c / "cuda_runtime_api.h").is_file()), None)


CXX = shutil.which("g++") or shutil.which("c++")
CUDA_INCLUDE = _cuda_include()


TORCH_EXTENSION = "#include <torch/extension.h>"


@pytest.fixture(scope="module")
def host_flags(tmp_path_factory):
    """(g++'s flags for every binding's check, the flags that add the precompiled torch/extension.h or [] where it
    could not be built). The .gch (~750 MB) is deleted after the module's checks."""
    root = tmp_path_factory.mktemp("bindings")
    stub = root / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h"
    stub.parent.mkdir(parents=True)
    stub.write_text("#pragma once\n")
    torch_include = Path(torch.__file__).parent / "include"
    flags = ["-std=c++17", f"-I{root}", f"-I{torch_include}",
             f"-I{torch_include / 'torch' / 'csrc' / 'api' / 'include'}", f"-I{sysconfig.get_paths()['include']}",
             f"-I{CUDA_INCLUDE}", "-DTORCH_EXTENSION_NAME=check"]
    header = root / "pch" / "torch_extension.h"
    header.parent.mkdir()
    header.write_text(TORCH_EXTENSION + "\n")
    gch = header.with_name(header.name + ".gch")
    # the same -std and -D as the checks: g++ uses a .gch only when they match
    built = subprocess.run([CXX, "-x", "c++-header", *flags, str(header), "-o", str(gch)], capture_output=True,
                           text=True, timeout=600)
    yield flags, (["-Winvalid-pch", "-include", str(header)] if built.returncode == 0 else [])
    gch.unlink(missing_ok=True)


@pytest.mark.skipif(CXX is None or CUDA_INCLUDE is None, reason="no C++ compiler or CUDA headers found")
@pytest.mark.parametrize("extension, binding", [("im2col", "binding.cpp"), ("resident_lstm", "binding.cpp"),
                                                ("conv_cell", "binding.cpp"), ("conv_cell", "binding_bwd.cpp"),
                                                ("graph_memsets", "binding.cpp")])
def test_binding_compiles(extension, binding, host_flags):
    flags, pch = host_flags
    source = OPS / extension / binding
    # the precompiled header stands in for the binding's first include only: one that starts otherwise (another
    # header first, a macro defined before it) parses its headers itself
    code = [line for line in source.read_text().splitlines() if line.strip() and not line.startswith("//")]
    cmd = [CXX, "-fsyntax-only", *flags, *(pch if code[0] == TORCH_EXTENSION else []), f"-I{OPS / extension}",
           str(source)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_a_failed_build_is_remembered_and_warned_once(monkeypatch):
    """LazyExtension: a build that fails is tried once; ``usable`` warns once naming what runs instead, and every
    later call raises with the first failure's reason."""
    import warnings

    from mscred.ops.cuda_extension import LazyExtension

    attempts = []

    def broken():
        attempts.append(1)
        raise OSError("ninja: build stopped")
    ext = LazyExtension("test extension", "mscred_test", OPS, [])
    monkeypatch.setattr(ext, "_build", broken)
    with pytest.warns(RuntimeWarning, match=r"test extension unavailable \(OSError: ninja: build stopped\); plan B"):
        assert not ext.usable("plan B")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not ext.usable("plan B")
    with pytest.raises(RuntimeError, match="ninja: build stopped"):
        ext()
    assert attempts == [1]


def test_build_names_and_flags(monkeypatch):
    """What each extension asks torch to build on an H100/H200: its module name (torch's cache key with the flags),
    the sm_90a target, im2col's digest of its headers (so a header change rebuilds), and the resident kernel's A/B
    flags in a module of their own name."""
    import copy
    import threading

    import torch.utils.cpp_extension as cpp

    from mscred.ops import im2col, resident_lstm
    calls = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    monkeypatch.setattr(cpp, "load", lambda **kw: calls.append(kw) or "built module")

    def build(ext):
        fresh = copy.copy(ext)  # the module's own object may hold this CPU machine's "no CUDA device"
        fresh.module, fresh.error, fresh._lock = None, None, threading.Lock()
        assert fresh() == "built module" and fresh.capability == (9, 0)
        return calls[-1]

    hopper = "-gencode=arch=compute_90a,code=sm_90a"
    kw = build(im2col._extension)
    assert kw["name"] == "mscred_im2col_sm_90a" and hopper in kw["extra_cuda_cflags"]
    assert f"-DMSCRED_IM2COL_SOURCES={im2col.sources_digest()}" in kw["extra_cuda_cflags"]
    assert [Path(s).name for s in kw["sources"]] == ["binding.cpp", "im2col.cu"]
    monkeypatch.delenv("MSCRED_RESIDENT_LSTM_FLAGS", raising=False)
    kw = build(resident_lstm._extension)
    assert kw["name"] == "mscred_resident_lstm_sm_90a" and hopper in kw["extra_cuda_cflags"]
    monkeypatch.setenv("MSCRED_RESIDENT_LSTM_FLAGS", "-DMSCRED_RESIDENT_WARPS=8")
    kw = build(resident_lstm._extension)
    assert kw["name"].startswith("mscred_resident_lstm_") and kw["name"] != "mscred_resident_lstm_sm_90a"
    assert "-DMSCRED_RESIDENT_WARPS=8" in kw["extra_cuda_cflags"]


def test_minimum_capability_is_the_extensions_own(monkeypatch):
    """The tensor-core extensions refuse a Turing GPU (7.5) with the reason; the graph memset extension, which has no
    tensor-core code, builds for it (sm_75)."""
    import copy
    import threading

    import torch.utils.cpp_extension as cpp

    from mscred.ops import graph_memsets, im2col
    calls = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 5))
    monkeypatch.setattr(cpp, "load", lambda **kw: calls.append(kw) or "built module")

    def fresh(ext):
        ext = copy.copy(ext)
        ext.module, ext.error, ext._lock = None, None, threading.Lock()
        return ext

    with pytest.raises(RuntimeError, match=r"needs compute capability >= 8\.0 \(tensor-core mma\.sync\), device "
                                           r"has 7\.5"):
        fresh(im2col._extension)()
    assert fresh(graph_memsets._extension)() == "built module"
    assert "-gencode=arch=compute_75,code=sm_75" in calls[-1]["extra_cuda_cflags"]
