"""Load a cubin through the CUDA driver, launch one of its kernels and read back what it wrote.

For kernels whose parameters are all pointers (the articles' ``test(int *a)``, probe's templates): parameter 0
gets an int32 output buffer filled with ``init``; every further pointer parameter gets an int32 input buffer with
``b[j] = j + 1`` so that a register patch shows which input was stored. Uses cuda-python's driver bindings
(``cuda.bindings.driver``, or the older ``cuda.cuda``) and falls back to CuPy; both are imported only here.
"""
from __future__ import annotations

import ctypes
import tempfile
from pathlib import Path

from mscred.errors import InputError
from mscred.sass.cubin import Cubin


def _driver():
    try:
        from cuda.bindings import driver
        return driver
    except ImportError:
        pass
    try:
        from cuda import cuda as driver  # cuda-python < 12.6
        return driver
    except ImportError:
        return None


def _check(result, what: str):
    err, *rest = result if isinstance(result, tuple) else (result,)
    code = int(getattr(err, "value", err))  # CUresult is an enum; its value is the CUDA error number
    if code != 0:
        raise RuntimeError(f"{what} failed: CUDA error {code} ({err})")
    return rest[0] if len(rest) == 1 else tuple(rest)


def _run_driver(drv, image: bytes, name: str, buffers: list[list[int]], grid: int, block: int) -> list[list[int]]:
    _check(drv.cuInit(0), "cuInit")
    device = _check(drv.cuDeviceGet(0), "cuDeviceGet")
    context = _check(drv.cuDevicePrimaryCtxRetain(device), "cuDevicePrimaryCtxRetain")
    _check(drv.cuCtxSetCurrent(context), "cuCtxSetCurrent")
    module = None
    pointers = []
    try:
        module = _check(drv.cuModuleLoadData(image), "cuModuleLoadData")
        function = _check(drv.cuModuleGetFunction(module, name.encode()), f"cuModuleGetFunction({name})")
        for values in buffers:
            host = (ctypes.c_int32 * len(values))(*[v & 0xFFFFFFFF if v < 0 else v for v in values])
            dptr = _check(drv.cuMemAlloc(ctypes.sizeof(host)), "cuMemAlloc")
            pointers.append((dptr, host))
            _check(drv.cuMemcpyHtoD(dptr, host, ctypes.sizeof(host)), "cuMemcpyHtoD")
        # kernelParams: an array of pointers, each to one argument's value (here: a device pointer).
        args = [ctypes.c_uint64(int(dptr)) for dptr, _ in pointers]
        params = (ctypes.c_void_p * len(args))(*[ctypes.addressof(a) for a in args])
        _check(drv.cuLaunchKernel(function, grid, 1, 1, block, 1, 1, 0, 0, ctypes.addressof(params), 0),
               "cuLaunchKernel")
        _check(drv.cuCtxSynchronize(), "cuCtxSynchronize (kernel execution)")
        out = []
        for dptr, host in pointers:
            _check(drv.cuMemcpyDtoH(host, dptr, ctypes.sizeof(host)), "cuMemcpyDtoH")
            out.append([int(v) & 0xFFFFFFFF for v in host])
        return out
    finally:
        for dptr, _ in pointers:
            drv.cuMemFree(dptr)
        if module is not None:
            drv.cuModuleUnload(module)
        drv.cuDevicePrimaryCtxRelease(device)


def _run_cupy(image: bytes, name: str, buffers: list[list[int]], grid: int, block: int) -> list[list[int]]:
    import cupy

    with tempfile.TemporaryDirectory(prefix="mscred-sass-") as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(image)
        module = cupy.RawModule(path=str(path))
        function = module.get_function(name)
    arrays = [cupy.asarray([v & 0xFFFFFFFF for v in values], dtype=cupy.uint32) for values in buffers]
    function((grid,), (block,), tuple(arrays))
    cupy.cuda.runtime.deviceSynchronize()
    return [[int(v) for v in a.get()] for a in arrays]


def run_cubin(data: bytes, kernel: str, words: int = 1, init: int = 1, grid: int = 1, block: int = 1,
              where: str = "cubin", backend: str = "auto") -> list[list[int]]:
    """Launch ``kernel`` of the cubin ``data`` on GPU 0 and return every buffer after the launch.

    Returns
    -------
    list of list of int
        Buffer k holds the ``words`` unsigned 32-bit values of parameter k after the kernel ran.
    backend : str
        "driver" (cuda-python), "cupy", or "auto": the driver bindings when importable, else CuPy.
    """
    cubin = Cubin(data, where)
    k = cubin.kernel(kernel)
    sizes = [p.size for p in k.params]
    if not sizes or any(s != 8 for s in sizes):
        raise InputError(f"{where}: kernel {k.name} has parameters of {sizes or 'no'} bytes; sass run launches "
                         f"kernels whose parameters are all pointers")
    buffers = [[init] * words] + [[j + 1 for j in range(words)] for _ in sizes[1:]]
    if backend not in ("auto", "driver", "cupy"):
        raise InputError(f"backend {backend!r}: use auto, driver or cupy")
    drv = _driver() if backend in ("auto", "driver") else None
    if drv is None and backend == "driver":
        raise InputError("sass run --backend driver needs cuda-python (pip install cuda-python)")
    try:
        if drv is not None:
            return _run_driver(drv, data, k.name, buffers, grid, block)
        return _run_cupy(data, k.name, buffers, grid, block)
    except ImportError as err:
        if backend == "cupy":  # the one asked for is missing, whatever else is installed
            why = " ".join(str(err).split())[:200]
            raise InputError(f"sass run --backend cupy needs CuPy, which does not import here ({why}): pip install "
                             f"cupy-cuda13x (or the build for your CUDA), or use --backend driver") from None
        raise InputError("sass run launches the kernel on a GPU: it needs an NVIDIA driver, a GPU, and a CUDA driver "
                         "binding (pip install cuda-python, or cupy); neither binding is installed here") from None
    except Exception as err:  # noqa: BLE001 - no GPU, or the (patched) kernel faulted: one line, not a traceback
        message = " ".join(str(err).split())
        raise InputError(f"{where}: running {k.name} failed: {type(err).__name__}: {message}") from err
