"""The CUDA kernels' default builds are the ones the GPU suite last passed on.

Sessions without a GPU still change the CUDA sources (A/B builds behind -D switches, refactors); a change that
reaches a default build must be run on the GPU before it ships. Each source's default build is compiled here to PTX
for sm_90a (nvcc only: no ptxas, ~1 s a source), normalised (comments and the anonymous namespace's per-file hashes
dropped), and its sha256 compared with the one recorded when the GPU suite passed on it. An A/B switch does not move
it; a change to a default build fails until the GPU tests ran on it and its new hash is recorded here.

Recorded: results/gpu_suite_1202d/ (2026-12-02, night: both conv_cell kernels' tile walks the default), nvcc 13.0;
conv_cell_bwd.cu again after results/attn_fold/ and results/attn_fold_final/ (2026-12-04: the attention folded into
its epilogue's dout; the conv_cell backward, training and attention-fold GPU tests passed on it); graph_memsets.cu
after results/graph_memsets/ and results/memsets_final/ (2026-12-04, night: its GPU tests passed on fdd27d8's build,
the same PTX as today's).
"""
from __future__ import annotations

import hashlib
import re
import subprocess
from pathlib import Path

import pytest

from mscred.ops.cuda_extension import cuda_target
from mscred.sass.toolchain import find_tool

NVCC = find_tool("nvcc")
OPS = Path(__file__).resolve().parents[1] / "src" / "mscred" / "ops"
GPU_TESTED_NVCC = "release 13.0,"
GPU_TESTED_PTX = {
    "conv_cell/conv_cell.cu": "29dadef13443788bf53f6e05805bfc898b9cdcc1f1c493d08f185d6d2e26791d",
    "conv_cell/conv_cell_bwd.cu": "a8041c8ec0489d820d74eafc8029867a39c19274e5e3f860bf8b0bca2234fe8d",
    "graph_memsets/graph_memsets.cu": "58836586ff65011370fc619a08715acaa67cfc4c1257c4492e6391f2bb7b05e7",
    "im2col/im2col.cu": "5e26f866e526ec97024b5fdb83e1c391834b61c01110d36819f3fd23402978b7",
    "resident_lstm/resident_lstm.cu": "94888c326aa96b32fd8ab5394897365e146a9af0e2be698d22b795bcb9e7118f",
}


def normalised_ptx(text: str) -> str:
    """PTX without its comment lines (nvcc's version banner, file paths) and with the anonymous namespace's
    per-file hashes (``GLOBAL__N__<hash>_``, ``_cu_<hash>``: they follow the source text) made constant."""
    lines = [line for line in text.splitlines() if not line.startswith("//")]
    return re.sub(r"_cu_[0-9a-f]{8}", "_cu_X", re.sub(r"GLOBAL__N__[0-9a-f]+_", "GN_", "\n".join(lines)))


def test_normalising_keeps_the_code_and_drops_the_names():
    a = "// banner\n.entry _ZN1x23_GLOBAL__N__1a2b_7_k_cu_0badf00d1kE(\nadd.s32 %r1, %r2, 1;"
    b = "// other\n.entry _ZN1x23_GLOBAL__N__ffee_7_k_cu_123456781kE(\nadd.s32 %r1, %r2, 1;"
    assert normalised_ptx(a) == normalised_ptx(b)
    assert normalised_ptx(a) != normalised_ptx(b.replace("1;", "2;"))


@pytest.mark.skipif(NVCC is None, reason="nvcc not found (CUDA toolkit not installed); cannot compile the .cu here")
@pytest.mark.parametrize("source", sorted(GPU_TESTED_PTX))
def test_default_builds_are_the_gpu_tested_ones(source, tmp_path):
    version = subprocess.run([NVCC, "--version"], capture_output=True, text=True).stdout
    if GPU_TESTED_NVCC not in version:
        pytest.skip(f"the recorded PTX is nvcc 13.0's; this is {version.strip().splitlines()[-1]}")
    path = OPS / source
    out = tmp_path / "kernel.ptx"
    cmd = [NVCC, "-std=c++17", "-O3", *cuda_target(9, 0)[1], f"-I{path.parent}", "-ptx", str(path), "-o", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    digest = hashlib.sha256(normalised_ptx(out.read_text()).encode()).hexdigest()
    assert digest == GPU_TESTED_PTX[source], (
        f"{source}'s default build changed since the GPU suite last passed on it: run the GPU tests "
        "(benchmarks/gpu_suite_parallel.sh) before recording its new hash in tests/test_gpu_tested_builds.py")
