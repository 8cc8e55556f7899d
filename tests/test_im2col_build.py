"""CI compiles the im2col CUDA source for Hopper as the extension builds it there (sm_90a, with MSCRED_SM90A: the
wgmma kernel included) and fails on register spills or local memory; it must also compile for Ampere (sm_80), where
the extension is built for an A100, and for plain sm_90 (a build without the arch-specific features).

Reads ptxas's resource report (``-Xptxas -v``) for every kernel instantiation in ``im2col.cu``: each must have a
0-byte stack frame and no spill stores/loads (a local-memory array or a spill would cost DRAM round trips in the
inner loop). Also checks that the implicit-GEMM kernels really were compiled to tensor-core MMA (the PTX must hold
``mma.sync ... tf32``) and that the pipelined one uses cp.async. Skipped, with the reason, where nvcc is not installed.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from mscred.ops.im2col import cuda_target

SRC = Path(__file__).resolve().parents[1] / "src" / "mscred" / "ops" / "im2col" / "im2col.cu"
HOPPER = cuda_target(9, 0)[1]  # the flags the extension builds with on an H100/H200 (sm_90a, MSCRED_SM90A)


def _nvcc() -> str | None:
    found = shutil.which("nvcc")
    if found:
        return found
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    candidate = Path(home) / "bin" / "nvcc"
    return str(candidate) if candidate.exists() else None


NVCC = _nvcc()
pytestmark = pytest.mark.skipif(NVCC is None, reason="nvcc not found (set CUDA_HOME); cannot compile the .cu here")


@pytest.fixture(scope="module")
def hopper_build(tmp_path_factory) -> tuple[str, str]:
    """(ptxas's report, the PTX) of the extension's sm_90a build. The PTX is the one nvcc kept (--keep) on its way
    to ptxas: byte for byte what ``-arch=compute_90a -DMSCRED_SM90A -ptx`` writes (the same front end, flags and
    virtual architecture), without a second run of the front end (~11 s)."""
    out = tmp_path_factory.mktemp("im2col_build")
    cmd = [NVCC, "-std=c++17", "-O3", *HOPPER, "-Xptxas", "-v", "-c", str(SRC), "-o", str(out / "im2col.o"),
           "--keep", f"--keep-dir={out}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"nvcc failed:\n{proc.stderr[-4000:]}"
    (ptx,) = out.glob("*.ptx")
    return proc.stdout + proc.stderr, ptx.read_text()


@pytest.fixture(scope="module")
def ptxas_report(hopper_build) -> str:
    return hopper_build[0]


def _kernels(report: str) -> list[tuple[str, str]]:
    """(mangled kernel name, its resource lines) for every entry function ptxas compiled."""
    parts = re.split(r"ptxas info\s+: Compiling entry function '([^']+)' for 'sm_90a?'", report)
    return [(parts[i], parts[i + 1]) for i in range(1, len(parts), 2)]


def test_every_kernel_compiles_for_sm90(ptxas_report):
    names = [name for name, _ in _kernels(ptxas_report)]
    for kernel in ("im2col_kernel", "col2im_kernel", "gemm_global", "gemm_shared", "conv_implicit",
                   "selu_backward_kernel", "grad_bias_kernel"):
        assert any(kernel in name for name in names), f"{kernel} missing from the ptxas report"
    # 3 implicit tile shapes x 3 kernel-size instantiations (3x3, 2x2, generic); 3 pipelined tile shapes
    assert sum("conv_implicit" in name for name in names) == 9
    assert sum("conv_pipelined" in name for name in names) == 5
    # the whole-plane 2 x 2 patch kernels: 8 x 8 inputs in two tiles (10 and 5 images), 15 x 15 in two (5 and 1)
    assert sum("conv_patchI" in name for name in names) == 2
    assert sum("conv_patch_pad" in name for name in names) == 2
    # the same 8 x 8 and 15 x 15 patches on wgmma with tensor-map and bulk copies (one tile each)
    assert sum("conv_patch_wgmma" in name for name in names) == 2
    # the halo kernel for conv1-shaped layers: 1-3 input channels, with and without SELU, 16-byte or TMA stores
    assert sum("conv_halo3x3I" in name for name in names) == 12
    # the halo kernel for conv2-shaped layers (stride 2), with and without SELU, consumers on mma.sync or wgmma (its
    # probes are harness-only)
    assert sum("conv_halo3x3s2" in name for name in names) == 4


def test_no_spills_and_no_local_memory(ptxas_report):
    for name, info in _kernels(ptxas_report):
        frame = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", info)
        assert frame, f"no resource line for {name}"
        stack, stores, loads = map(int, frame.groups())
        assert (stack, stores, loads) == (0, 0, 0), f"{name}: stack {stack} B, spills {stores}/{loads} B"
        assert "lmem" not in info.split("Compiling")[0], f"{name} uses local memory"


def test_implicit_kernel_uses_tf32_mma(hopper_build):
    text = hopper_build[1]
    assert "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in text
    assert "cvt.rn.tf32.f32" in text  # sm_90: one F2FP instruction (cvt.rna is the pre-Hopper fallback)
    # the pipelined variant: zero-filling asynchronous copies (4-byte gathers, 16-byte weight rows), waited on
    assert "cp.async.ca.shared.global" in text and "cp.async.cg.shared.global" in text
    assert "cp.async.wait_group" in text
    # the halo conv1 kernel's output rows by bulk copies (its default store variant on Hopper), fenced for the async
    # proxy and waited on; an architecture guard that compiled them out on sm_90 would only show as a slower conv1
    assert "cp.async.bulk.global.shared::cta.bulk_group" in text
    assert "fence.proxy.async.shared::cta" in text and "cp.async.bulk.wait_group.read" in text
    # the halo conv2 kernel's producer and consumer warps hand stage buffers over by shared-memory barriers
    assert "mbarrier.init.shared.b64" in text and "mbarrier.arrive.shared.b64" in text
    assert "mbarrier.try_wait.parity.shared.b64" in text
    # the wgmma patch kernel: warpgroup MMAs with A from registers, its two tensor-map copies per K-step completing
    # on an mbarrier; an arch guard that emptied it on sm_90a would only show as a slower conv4
    assert "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32" in text
    assert "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes" in text
    assert "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes" in text
    assert "mbarrier.arrive.expect_tx.shared::cta.b64" in text and "wgmma.wait_group.sync.aligned 0" in text
    assert "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes" in text  # conv3's image runs
    # the conv2 halo kernel's consumers on wgmma (N = 64), one tap's wgmmas in flight while the next loads
    assert "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32" in text and "wgmma.wait_group.sync.aligned 1" in text


def test_the_standalone_harness_still_builds(tmp_path):
    """benchmarks/conv_harness.cu includes im2col.cu and instantiates every tile configuration of the sweep: a kernel
    change that breaks it would only show on the device, at the cost of a device call. Built to an object file, so
    that no CUDA driver or GPU is needed here."""
    harness = SRC.parents[4] / "benchmarks" / "conv_harness.cu"
    cmd = [NVCC, "-std=c++17", "-O3", *HOPPER, "-Xptxas", "-v", "-c", str(harness),
           "-o", str(tmp_path / "conv_harness.o")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"nvcc failed:\n{proc.stderr[-4000:]}"
    # the tile sweeps' rows (conv3's whole-plane kernel in four tiles) and the conv2 kernel's probes must stay
    # measurable as they are: built, and without spills
    kernels = _kernels(proc.stdout + proc.stderr)
    watched = [(name, info) for name, info in kernels
               if "conv_patch_pad" in name or "conv_halo3x3s2" in name or "conv_patch_wgmma" in name]
    assert sum("conv_patch_pad" in name for name, _ in watched) == 4
    assert sum("conv_patch_wgmma" in name for name, _ in watched) == 6
    assert sum("conv_halo3x3s2" in name for name, _ in watched) == 16  # SELU or not x 2 product kernels, 6 probes
    for name, info in watched:
        frame = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", info)
        assert frame and frame.groups() == ("0", "0", "0"), f"{name}: {frame.groups() if frame else info[:200]}"


def test_the_extension_targets():
    assert cuda_target(9, 0) == ("sm_90a", ["-gencode=arch=compute_90a,code=sm_90a", "-DMSCRED_SM90A"])
    assert cuda_target(8, 0) == ("sm_80", ["-gencode=arch=compute_80,code=sm_80"])
    assert cuda_target(10, 0)[0] == "sm_100"  # newer GPUs: their own target, the mma.sync kernels


def test_compiles_for_plain_sm90(tmp_path):
    # Without the arch-specific target (and MSCRED_SM90A) the wgmma kernel compiles empty and is never launched: a
    # build for sm_90 proper, e.g. by hand, must still succeed.
    cmd = [NVCC, "-std=c++17", "-O3", "-gencode=arch=compute_90,code=sm_90", "-c", str(SRC),
           "-o", str(tmp_path / "im2col_sm90.o")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"nvcc for sm_90 failed:\n{proc.stderr[-4000:]}"


def test_compiles_for_ampere(tmp_path):
    # The extension is built for the GPU at hand (its own -gencode), so an A100 builds this source for sm_80: the
    # Hopper-only instructions (the halo kernel's bulk copies) must stay behind __CUDA_ARCH__ guards, or the whole
    # extension fails to build there (it did before the guards).
    cmd = [NVCC, "-std=c++17", "-O3", "-gencode=arch=compute_80,code=sm_80", "-c", str(SRC),
           "-o", str(tmp_path / "im2col_sm80.o")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"nvcc for sm_80 failed:\n{proc.stderr[-4000:]}"
