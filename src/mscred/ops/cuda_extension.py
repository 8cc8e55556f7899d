"""CUDA C++ extensions built on first use (``torch.utils.cpp_extension.load``: ninja, cached on disk by torch), for
the GPU at hand: the im2col convolutions (``ops/im2col``) and the window-resident ConvLSTM (``ops/resident_lstm``).

``LazyExtension`` builds once per process, remembers a failure (so a machine without a working toolchain pays the
attempt once) and raises RuntimeError naming it on every later use; ``usable`` answers whether it works and warns
once, naming what the caller runs instead. Builds of one extension in several processes take turns under an OS
file lock (``build_turn``), which also clears the lock file that torch leaves behind when a build is killed.
"""
from __future__ import annotations

import contextlib
import threading
import warnings
from pathlib import Path
from typing import Callable, Optional

import torch

MIN_CAPABILITY = (8, 0)  # bf16 / TF32 mma.sync, cp.async, ldmatrix: Ampere and later


def cuda_target(major: int, minor: int) -> tuple[str, list[str]]:
    """The build target for a GPU of compute capability major.minor: its name and nvcc flags. Hopper (9.0) builds
    for sm_90a, the arch-specific target whose wgmma and tensor-map copies the im2col conv2-4 kernels use
    (patch_wgmma.cuh, halo_s2.cuh); its cubin runs on H100/H200 only, as an sm_90 one would. Naming an arch in the
    flags stops torch from adding its own list (TORCH_CUDA_ARCH_LIST)."""
    if (major, minor) == (9, 0):
        return "sm_90a", ["-gencode=arch=compute_90a,code=sm_90a", "-DMSCRED_SM90A"]
    arch = f"{major}{minor}"
    return f"sm_{arch}", [f"-gencode=arch=compute_{arch},code=sm_{arch}"]


@contextlib.contextmanager
def build_turn(build_dir: str | Path):
    """Hold this process's turn to build into ``build_dir``, and clear a stale torch build lock there.

    torch's ``load`` serialises builds with a lock file (``FileBaton``) that only the building process removes: a
    build killed midway (Ctrl-C, a time limit; it happened to a device script whose step was cut at its cap) leaves
    it, and every later ``load`` of that extension waits on it forever. An ``flock`` on a file of our own is released
    by the OS when its holder dies, so once we hold it no live mscred build is running here, and torch's lock file,
    if any, is stale: removed. Without fcntl (Windows) this is a no-op and torch's own locking stands."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - POSIX everywhere we build
        yield
        return
    build_dir = Path(build_dir)
    build_dir.mkdir(parents=True, exist_ok=True)
    with open(build_dir / "mscred_build.flock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            stale = build_dir / "lock"
            if stale.exists():
                warnings.warn(f"mscred: removed {stale}, left by an interrupted build", RuntimeWarning, stacklevel=3)
                stale.unlink(missing_ok=True)
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class LazyExtension:
    """The module built from ``sources`` (file names in ``src``, which is also the include path) as
    ``{name}{suffix}_{target}``; ``flags()`` gives extra nvcc flags and the module-name suffix, read at the build
    (so a digest of the headers, or A/B switches, rebuild under a name of their own)."""

    def __init__(self, label: str, name: str, src: Path, sources: list[str],
                 flags: Callable[[], tuple[list[str], str]] = lambda: ([], ""),
                 min_capability: tuple[int, int] = MIN_CAPABILITY) -> None:
        self.label, self.name, self.src, self.sources, self.flags = label, name, src, sources, flags
        self.min_capability = min_capability  # the oldest GPU it is built for (the tensor-core kernels': Ampere)
        self.module = None
        self.capability: Optional[tuple[int, int]] = None  # of the GPU it was built for
        self.error: Optional[str] = None
        self.warned = False
        self._lock = threading.Lock()

    def __call__(self):
        """The compiled module; RuntimeError if it cannot be built or loaded here (the first failure is kept)."""
        with self._lock:
            if self.module is None and self.error is None:
                try:
                    self.module = self._build()
                except Exception as err:  # noqa: BLE001 - any build/load failure means "unavailable"
                    text = str(err).strip()
                    self.error = f"{type(err).__name__}: {text.splitlines()[-1] if text else ''}"
            if self.module is None:
                raise RuntimeError(f"{self.label} unavailable ({self.error})")
            return self.module

    def usable(self, instead: str, stacklevel: int = 4) -> bool:
        """Whether the module builds (or has built) here; the first failure warns once, "mscred: <why>; <instead>"."""
        try:
            self()
            return True
        except RuntimeError as err:
            with self._lock:
                first, self.warned = not self.warned, True
            if first:
                warnings.warn(f"mscred: {err}; {instead}", RuntimeWarning, stacklevel=stacklevel)
            return False

    def _build(self):
        if not torch.cuda.is_available():
            raise RuntimeError("no CUDA device")
        major, minor = torch.cuda.get_device_capability()
        if (major, minor) < self.min_capability:
            need = self.min_capability
            why = " (tensor-core mma.sync)" if need == MIN_CAPABILITY else ""
            raise RuntimeError(f"needs compute capability >= {need[0]}.{need[1]}{why}, device has {major}.{minor}")
        from torch.utils.cpp_extension import _get_build_directory, load
        target_name, target = cuda_target(major, minor)
        flags, suffix = self.flags()
        self.capability = (major, minor)
        name = f"{self.name}{suffix}_{target_name}"
        with build_turn(_get_build_directory(name, False)):
            return load(name=name, sources=[str(self.src / s) for s in self.sources], extra_cflags=["-O3"],
                        extra_cuda_cflags=["-O3", *target, *flags], extra_include_paths=[str(self.src)], verbose=False)
