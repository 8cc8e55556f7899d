"""The window-resident ConvLSTM kernel (``ops/resident_lstm``, CUDA C++): bf16 inference of levels 1-2.

In CI (no GPU) its source is compiled for Hopper (the extension's sm_90a flags) and Ampere (sm_80) and must keep
no stack frame, no spills and tensor-core MMAs; the Python side's conditions and weight packing are checked on the
CPU. On a CUDA machine it runs against the float64 oracle (``ops.reference.convlstm``): within twice the bf16
reference's error, at the model's shapes and awkward ones (a last pixel tile cut short, maps at the size bounds,
batches below and above the SM count, 1 and 3 steps), on the sliding windows of scoring, and replayed from a CUDA
graph.
"""
from __future__ import annotations

import os
import re
import subprocess

import pytest
import torch

from mscred.ops import reference as ref
from mscred.ops import resident_lstm
from mscred.ops.cuda_extension import cuda_target
from mscred.ops.triton import convlstm as fused
from mscred.ops.triton import convlstm_window
from mscred.sass.toolchain import find_tool
from resident_helpers import level_inputs, rel, skip_unless_it_runs

CUDA = torch.cuda.is_available()
NVCC = find_tool("nvcc")
SRC = resident_lstm._SRC / "resident_lstm.cu"
FB = 1.0
needs_cuda = pytest.mark.skipif(not CUDA, reason="the resident kernel runs on a CUDA device only (compiled in CI)")


# ----------------------------------------------------------------------------------------------------------------
# Build (CI): ptxas's resource report of every instantiation
# ----------------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def kernel_build(tmp_path_factory):
    """``build(capability)``: (nvcc's run, the PTX, the object) of the kernel's file built as the extension builds it
    for that GPU, with ptxas's report; one build per capability for this module's tests. The PTX is the one nvcc
    kept on its way to ptxas (--keep): what ``-ptx`` with the same flags writes, without a second front-end run."""
    builds = {}

    def build(capability):
        if capability not in builds:
            out = tmp_path_factory.mktemp("resident_" + cuda_target(*capability)[0])
            cmd = [NVCC, "-std=c++17", "-O3", *cuda_target(*capability)[1], f"-I{resident_lstm._SRC}", "-Xptxas",
                   "-v", "-c", str(SRC), "-o", str(out / "resident.o"), "--keep", f"--keep-dir={out}"]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            ptx = "".join(p.read_text() for p in out.glob("*.ptx"))
            builds[capability] = proc, ptx, out / "resident.o"
        return builds[capability]
    return build


@pytest.mark.skipif(NVCC is None, reason="nvcc not found (CUDA toolkit not installed); cannot compile the .cu here")
@pytest.mark.parametrize("capability", [(9, 0), (8, 0)], ids=["sm_90a", "sm_80"])
def test_compiles_without_spills_on_tensor_cores(capability, kernel_build):
    flags = cuda_target(*capability)[1]
    proc, text, _ = kernel_build(capability)
    assert proc.returncode == 0, f"nvcc failed:\n{proc.stderr[-4000:]}"
    report = proc.stdout + proc.stderr
    parts = re.split(r"Compiling entry function '([^']+)'", report)
    kernels = {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}
    assert sum("window_lstm_resident" in name for name in kernels) == 2  # 32 and 64 channels
    for name, info in kernels.items():
        frame = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", info)
        assert frame and tuple(map(int, frame.groups())) == (0, 0, 0), f"{name}: {frame and frame.group(0)}"
    assert "ldmatrix.sync.aligned" in text
    if "sm_90a" in " ".join(flags):  # the recurrent GEMM on warpgroup MMAs: one per k16 step, 8 + 16 steps
        assert text.count("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16") == 24
        assert "mma.sync.aligned" not in text
        # The weight's stores made visible to the tensor cores' reads before the block's first barrier, per kernel.
        for body in text.split(".entry")[1:]:
            assert -1 < body.find("fence.proxy.async.shared::cta") < body.find("bar.sync"), "fence before barrier"
    else:
        assert "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" in text and "wgmma" not in text
    # Every store but to shared memory is a whole 16-byte chunk to global memory in one instruction
    # (MSCRED_RESIDENT_WIDE_STORES): no narrow stores, none through generic or local addresses.
    stores = re.findall(r"\bst\.(?!shared)\S*", text)
    assert stores and set(stores) == {"st.global.v4.u32"}, sorted(set(stores))
    assert "div.s32" not in text and "div.u32" not in text  # map rows by a float multiply (MSCRED_RESIDENT_INT_ROWS)
    assert "rcp.rn.f32" in text  # 1 / W correctly rounded, as test_float_rows_are_exact assumes


def test_float_rows_are_exact():
    """The kernel's row_of: (pixel + 0.5) x (1 / W) in float32, truncated, with a correctly rounded reciprocal
    (rcp.rn, checked in the PTX above), equals pixel // W for every pixel below 2^12 and W up to 1,024 (the
    kernel's pixels stay below 2^11). numpy's float32 arithmetic rounds as the GPU's does."""
    import numpy as np
    pixels = np.arange(4096)
    for w in range(1, 1025):
        rows = ((pixels.astype(np.float32) + np.float32(0.5)) * (np.float32(1) / np.float32(w))).astype(np.int64)
        assert (rows == pixels // w).all(), w


@pytest.mark.skipif(NVCC is None, reason="nvcc not found (CUDA toolkit not installed); cannot compile the .cu here")
@pytest.mark.parametrize("flag", ["-DMSCRED_RESIDENT_PAIR=1", "-DMSCRED_RESIDENT_SCRATCH_HINT=1",
                                  "-DMSCRED_RESIDENT_FOLD_SCORES=1", "-DMSCRED_RESIDENT_WIDE_STORES=0",
                                  "-DMSCRED_RESIDENT_WGMMA=0", "-DMSCRED_RESIDENT_INT_ROWS=1"])
def test_ab_variants_compile(flag, tmp_path):
    """The A/B switches a device call times build for Hopper with tensor-core MMAs: two-tile units (measured slower,
    results/resident_pair/; ptxas spills a few bytes at 64 channels), the attention scratch's L2 evict-last hints
    (PTX that ptxas must accept; no gain, results/scratch_hint/) and the scores gathered in the last step's
    updates (8-9% slower per level, results/epilogue_variants/), these two without spills; and the plain uint4
    assignments that NVVM splits into 4-byte stores (the wide stores' A/B partner); the recurrent GEMM on
    mma.sync instead of the warpgroup MMAs (results/resident_wgmma/); the map rows found by integer division
    instead of a float multiply; without spills."""
    cmd = [NVCC, "-std=c++17", "-O3", *cuda_target(9, 0)[1], flag, f"-I{resident_lstm._SRC}", "-Xptxas", "-v",
           "-c", str(SRC), "-o", str(tmp_path / "variant.o"), "--keep", f"--keep-dir={tmp_path}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ptx = "".join(p.read_text() for p in tmp_path.glob("*.ptx"))
    mma_sync = "PAIR" in flag or "WGMMA=0" in flag
    assert ("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" in ptx) == mma_sync
    assert (ptx.count("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16") == 24) == (not mma_sync)
    if "HINT" in flag:
        assert "L2::cache_hint" in ptx and "createpolicy.fractional.L2::evict_last" in ptx
    if "WIDE_STORES=0" in flag:
        assert "st.global.u32" in ptx  # what the default build's explicit 128-bit stores replace
    if "INT_ROWS=1" in flag:
        assert "div.s32" in ptx  # the integer divisions by the map width the default build's float rows replace
    if "PAIR" not in flag:
        frames = re.findall(r"(\d+) bytes stack frame, (\d+) bytes spill stores", proc.stdout + proc.stderr)
        assert len(frames) == 2 and all(f == ("0", "0") for f in frames), frames


# ----------------------------------------------------------------------------------------------------------------
# The Python side (CPU)
# ----------------------------------------------------------------------------------------------------------------
def test_takes_only_what_it_is_written_for(monkeypatch):
    monkeypatch.delenv("MSCRED_RESIDENT_LSTM", raising=False)
    bf16 = torch.bfloat16

    def takes(dtype=bf16, layout="nhwc", save=False, ch=32, k=2, hw=900):
        return resident_lstm.takes(dtype, layout, save, ch, k, hw)

    assert takes() and takes(ch=64, hw=225) and takes(hw=1024) and takes(ch=64, hw=256) and takes(hw=1)
    assert not takes(hw=1025) and not takes(ch=64, hw=257)  # the bounds of resident_lstm.h (shared memory)
    assert not takes(ch=128, hw=64) and not takes(ch=16, hw=64)  # levels 3-4; channel counts it has no tile for
    assert not takes(torch.float16) and not takes(torch.float32) and not takes(save=True)
    assert not takes(layout="nchw") and not takes(k=3)
    assert not resident_lstm.runs(bf16, "nhwc", False, 32, 2, 900, torch.device("cpu"))
    monkeypatch.setenv("MSCRED_RESIDENT_LSTM", "0")
    assert not takes()


def _tile_pixels(capability=(9, 0), flags=None) -> int:
    """The pixels resident_lstm.cu rounds its tiles up to (kTileRound) in a build for a GPU of ``capability``
    with the -D ``flags`` (default: MSCRED_RESIDENT_LSTM_FLAGS): 64 with the warpgroup MMAs (the default on
    Hopper), 16 elsewhere and in the A/B builds without them (MSCRED_RESIDENT_WGMMA=0, or the two-tile units)."""
    flags = " ".join(os.environ.get("MSCRED_RESIDENT_LSTM_FLAGS", "").split() if flags is None else flags)
    mma_sync = re.search(r"MSCRED_RESIDENT_WGMMA=0|MSCRED_RESIDENT_PAIR(=[1-9]|\b(?!=))", flags)
    return 64 if capability == (9, 0) and not mma_sync else 16


def _shared_bytes(ch, hw, capability=(9, 0), flags=None):
    """resident_lstm.cu's shared_bytes: weight, bias, two (hw + 2)-row maps, the float16 cells of every 16-pixel
    tile (rounded up to whole 64-pixel units with wgmma), the attention's per-warp score partials (kMaxWarps x
    kMaxAttentionSteps floats)."""
    round_to = _tile_pixels(capability, flags)
    tiles = -(-hw // round_to) * (round_to // 16)
    return 2 * (16 * ch * ch + 2 * (hw + 2) * ch) + 4 * 4 * ch + tiles * (ch // 32) * 1024 + 4 * 16 * 5


@pytest.mark.skipif(NVCC is None, reason="nvcc not found (CUDA toolkit not installed); cannot compile the .cu here")
@pytest.mark.parametrize("capability", [(9, 0), (8, 0)], ids=["sm_90a", "sm_80"])
def test_shared_bytes_mirror_matches_the_build(capability, tmp_path, kernel_build):
    """The host's shared_bytes of a build for each architecture (a small host program linked with the kernel's
    object, as the build test above compiled it with the extension's flags; no GPU needed) equals the mirror above,
    which the fit tests use: 64-pixel rounding on Hopper only; and its mma_kind, which `mscred env` reports."""
    kernel, _, kernel_object = kernel_build(capability)
    assert kernel.returncode == 0, kernel.stderr[-3000:]
    main = tmp_path / "main.cu"
    main.write_text('#include <cstdio>\n#include "resident_lstm.h"\nint main() {\n'
                    '  const int shapes[][2] = {{32, 900}, {32, 1024}, {32, 600}, {32, 17}, {64, 225}, {64, 256}, '
                    '{64, 81}, {64, 1}};\n'
                    '  for (auto& s : shapes) std::printf("%d %d %zu\\n", s[0], s[1], '
                    'mscred_resident::shared_bytes(s[0], s[1]));\n'
                    '  std::printf("%s\\n", mscred_resident::mma_kind());\n}\n')
    exe = tmp_path / "shared_bytes"
    cmd = [NVCC, "-std=c++17", "-O3", *cuda_target(*capability)[1], f"-I{resident_lstm._SRC}", str(main),
           str(kernel_object), "-o", str(exe)]
    build = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr[-3000:]
    *lines, kind = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60, check=True).stdout.split()
    assert kind == {(9, 0): "wgmma", (8, 0): "mma.sync"}[capability]  # what `mscred env` reports
    got = {(int(ch), int(hw)): int(n) for ch, hw, n in zip(lines[::3], lines[1::3], lines[2::3])}
    assert len(got) == 8
    assert got == {(ch, hw): _shared_bytes(ch, hw, capability, flags=[]) for ch, hw in got}
    assert got[(32, 900)] == {(9, 0): 210_496, (8, 0): 207_424}[capability]


def test_runs_only_where_the_block_fits(monkeypatch):
    """On a CUDA device the kernel runs where its block's shared memory fits the device (an A100's 163 KB takes
    level 1 only below ~690 pixels, and level 2 of 15 x 15 not at all) and the extension was built for that
    device's architecture."""
    monkeypatch.delenv("MSCRED_RESIDENT_LSTM", raising=False)

    class Built:
        capability = (8, 0)

        def __call__(self):
            return self

        def usable(self, instead):
            return True

        def shared_bytes(self, ch, hw):
            return _shared_bytes(ch, hw, self.capability)

    monkeypatch.setattr(resident_lstm, "_extension", Built())
    monkeypatch.setattr(resident_lstm, "shared_limit", lambda device: 166_912)  # an A100's opt-in limit
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 0))
    cuda, bf16 = torch.device("cuda", 0), torch.bfloat16
    assert resident_lstm.runs(bf16, "nhwc", False, 32, 2, 600, cuda)
    assert not resident_lstm.runs(bf16, "nhwc", False, 32, 2, 900, cuda)   # level 1 at 30 sensors: 203 KB
    assert not resident_lstm.runs(bf16, "nhwc", False, 64, 2, 225, cuda)   # level 2: 216 KB
    monkeypatch.setattr(resident_lstm, "shared_limit", lambda device: 232_448)  # an H100 / H200
    assert resident_lstm.runs(bf16, "nhwc", False, 32, 2, 1024, cuda)
    assert resident_lstm.runs(bf16, "nhwc", False, 64, 2, 256, cuda)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))  # built for another GPU
    assert not resident_lstm.runs(bf16, "nhwc", False, 32, 2, 900, cuda)


def test_bounds_are_the_headers():
    """MAX_PIXELS is the kernel header's kMaxPixels32 / kMaxPixels64 (one place to change both)."""
    header = (resident_lstm._SRC / "resident_lstm.h").read_text()
    bounds = {int(ch): int(px) for ch, px in re.findall(r"constexpr int kMaxPixels(\d+) = (\d+);", header)}
    assert bounds == resident_lstm.MAX_PIXELS


def test_packed_weight_rows_are_gate_columns():
    """Row n of the packed weight is gate column n; column (ky * 2 + kx) * Ch + ci its tap and input channel: the
    Triton window kernel's (K, 4Ch) matrix transposed."""
    w_h = torch.randn(4 * 8, 8, 2, 2)
    packed = resident_lstm.packed_weight(w_h)
    assert packed.shape == (32, 32) and packed.is_contiguous()
    assert packed[5, (1 * 2 + 0) * 8 + 3] == w_h[5, 3, 1, 0]
    torch.testing.assert_close(packed, convlstm_window.packed_weight(w_h).t(), rtol=0, atol=0)
    channels_last = resident_lstm.packed_weight(w_h.contiguous(memory_format=torch.channels_last))
    torch.testing.assert_close(channels_last, packed, rtol=0, atol=0)


# ----------------------------------------------------------------------------------------------------------------
# On the GPU: against the float64 oracle
# ----------------------------------------------------------------------------------------------------------------
def _infer(monkeypatch, x, w, b):
    """The fused op under no_grad in channels-last buffers, and how many calls took the resident kernel."""
    monkeypatch.setenv("MSCRED_FUSED_LAYOUT", "nhwc")
    calls, real = [], resident_lstm.run
    monkeypatch.setattr(resident_lstm, "run", lambda *a: calls.append(1) or real(*a))
    with torch.no_grad():
        return fused.convlstm(x, w, b, FB), len(calls)


@needs_cuda
@pytest.mark.parametrize("B, T, Ch, n", [(128, 5, 32, 30), (128, 5, 64, 15), (3591, 5, 32, 30), (300, 5, 64, 15),
                                         (7, 5, 32, 30), (5, 3, 32, 32), (2, 5, 32, 13), (140, 1, 64, 9),
                                         (3, 5, 64, 16), (1, 5, 32, 1), (133, 5, 64, 11)])
def test_against_float64_oracle(B, T, Ch, n, monkeypatch):
    monkeypatch.delenv("MSCRED_RESIDENT_LSTM", raising=False)
    skip_unless_it_runs(Ch, n)
    _check_against_oracle(monkeypatch, *level_inputs(B, T, Ch, Ch, n, seed=B + T + Ch + n))


def _check_against_oracle(monkeypatch, x, w, b):
    """The level in bf16 through the resident kernel (one call) against the float64 reference, within twice the
    bf16 reference's own error."""
    oracle = ref.convlstm(x, w, b, FB)
    low = [t.to(torch.bfloat16) for t in (x, w, b)]
    yardstick = rel(ref.convlstm(*low, FB), oracle)
    got, calls = _infer(monkeypatch, *low)
    assert calls == 1 and got.dtype == torch.bfloat16 and got.shape == oracle.shape
    assert torch.isfinite(got).all()
    assert rel(got, oracle) <= 2 * yardstick + 1e-3, (rel(got, oracle), yardstick)


@needs_cuda
@pytest.mark.parametrize("B, Ch, H, W", [(37, 32, 7, 13), (130, 32, 30, 17), (21, 64, 5, 9), (9, 64, 16, 3)])
def test_non_square_maps(B, Ch, H, W, monkeypatch):
    """Maps wider than tall and taller than wide: the rows found from the pixel index (a float multiply by 1/W),
    the taps' bounds and the gate addressing per axis."""
    monkeypatch.delenv("MSCRED_RESIDENT_LSTM", raising=False)
    if not resident_lstm.runs(torch.bfloat16, "nhwc", False, Ch, 2, H * W, torch.device("cuda")):
        pytest.skip(f"the resident kernel does not run here for {Ch} channels at {H} x {W}")
    x, w, b = level_inputs(B, 5, Ch, Ch, max(H, W), seed=H * 100 + W)
    _check_against_oracle(monkeypatch, x[..., :H, :W].contiguous(), w, b)


@needs_cuda
def test_sliding_windows_of_scoring(monkeypatch):
    """Scoring hands a level its windows as one strided view of the segments (shared input gates): the kernel
    reads the gates through those strides, and each window's state stays its own."""
    monkeypatch.delenv("MSCRED_RESIDENT_LSTM", raising=False)
    B, T, C, Ch, n = 300, 5, 16, 32, 30
    skip_unless_it_runs(Ch, n)
    x, w, b = level_inputs(B + T - 1, 1, C, Ch, n, seed=3)
    steps = x[:, 0].to(torch.bfloat16).contiguous(memory_format=torch.channels_last)
    windows = steps.as_strided((B, T, C, n, n), (steps.stride(0), *steps.stride()), 0)
    oracle = ref.convlstm(windows.double().contiguous(), w, b, FB)
    yardstick = rel(ref.convlstm(windows.contiguous(), w.to(torch.bfloat16), b.to(torch.bfloat16), FB), oracle)
    got, calls = _infer(monkeypatch, windows, w.to(torch.bfloat16), b.to(torch.bfloat16))
    assert calls == 1
    assert rel(got, oracle) <= 2 * yardstick + 1e-3


@needs_cuda
def test_replayed_from_a_cuda_graph(monkeypatch):
    """Captured in a CUDA graph (the product's scoring), replays on new data equal an eager call."""
    monkeypatch.delenv("MSCRED_RESIDENT_LSTM", raising=False)
    monkeypatch.setenv("MSCRED_FUSED_LAYOUT", "nhwc")
    skip_unless_it_runs(32, 30)
    x, w, b = (t.to(torch.bfloat16) for t in level_inputs(256, 5, 32, 32, 30, seed=5))
    with torch.no_grad():
        fused.convlstm(x, w, b, FB)  # build and warm up outside the capture
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            y = fused.convlstm(x, w, b, FB)
        x.copy_(torch.randn_like(x))
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(y, fused.convlstm(x, w, b, FB), rtol=0, atol=0)


@needs_cuda
def test_switched_off_runs_the_triton_kernels(monkeypatch):
    """MSCRED_RESIDENT_LSTM=0 (A/B runs): the other paths, to the same accuracy."""
    monkeypatch.setenv("MSCRED_RESIDENT_LSTM", "0")
    x, w, b = level_inputs(64, 5, 32, 32, 30, seed=8)
    oracle = ref.convlstm(x, w, b, FB)
    low = [t.to(torch.bfloat16) for t in (x, w, b)]
    got, calls = _infer(monkeypatch, *low)
    assert calls == 0
    assert rel(got, oracle) <= 2 * rel(ref.convlstm(*low, FB), oracle) + 1e-3


@needs_cuda
def test_is_available_runs_a_level(monkeypatch):
    """`mscred env`'s check: ok where the extension builds and a level of the default model fits, checked against
    the float64 reference; switched off, it says so. The extension's shared-memory sizes are the ones `fits` and
    the CPU test above assume."""
    monkeypatch.delenv("MSCRED_RESIDENT_LSTM", raising=False)
    cuda, bf16 = torch.device("cuda"), torch.bfloat16
    ok, why = resident_lstm.is_available()
    fits_a_level = any(resident_lstm.runs(bf16, "nhwc", False, ch, 2, hw, cuda) for ch, hw in ((32, 900), (64, 225)))
    assert ok == fits_a_level, why
    if resident_lstm._extension.usable("-"):
        capability = resident_lstm._extension.capability
        level1 = {64: 210_496, 16: 207_424}[_tile_pixels(capability)]
        assert resident_lstm._extension().shared_bytes(32, 900) == _shared_bytes(32, 900, capability) == level1
        assert resident_lstm._extension().shared_bytes(64, 256) == _shared_bytes(64, 256, capability) <= 232_448
        kind = "wgmma" if _tile_pixels(capability) == 64 else "mma.sync"
        assert resident_lstm._extension().mma_kind() == kind and (not ok or f"built ({kind})" in why), why
    monkeypatch.setenv("MSCRED_RESIDENT_LSTM", "0")
    assert resident_lstm.is_available() == (False, "switched off (MSCRED_RESIDENT_LSTM=0)")
