"""`mscred sass probe`: the articles' findings re-derived by compiling variants (sm_50 via CUDA 12 ptxas, sm_90)."""
from __future__ import annotations

import pytest

pytest.importorskip("elftools", reason="pyelftools (the `sass` extra) is not installed")

from mscred.sass.isa import KNOWN_FIELDS  # noqa: E402
from mscred.sass.probe import RZ, probe  # noqa: E402
from mscred.sass.toolchain import find_tool  # noqa: E402

needs_nvcc = pytest.mark.skipif(find_tool("nvcc") is None, reason="nvcc not found (CUDA toolkit not installed)")
needs_ptxas12 = pytest.mark.skipif(find_tool("nvcc") is None or find_tool("ptxas12") is None,
                                   reason="sm_50 needs nvcc plus a CUDA 12 ptxas (pip install nvidia-cuda-nvcc-cu12)")


def _check_immediate(r, width_bits):
    lo, hi = r.immediate_bits
    assert hi - lo == 32 and r.instruction_bits == width_bits
    for value, insn in r.words:  # every variant holds its own value there, at the same offset
        assert insn.offset == r.offset and insn.field(lo, hi) == int(value, 0)
    assert r.differing_offsets == [r.offset]  # the diff the articles did by eye: one instruction changes
    assert (lo, hi) == KNOWN_FIELDS[width_bits]["immediate"]


def _check_register(r, width_bits):
    lo, hi = r.register_bits
    assert hi - lo == 8 and r.register_values["0"] == RZ
    regs = [r.register_values[value] for value, _ in r.words]
    assert len(set(regs)) == len(regs) and all(reg < RZ for reg in regs)
    for value, insn in r.words:
        assert insn.field(lo, hi) == r.register_values[value]
    assert (lo, hi) == KNOWN_FIELDS[width_bits]["register"]


@needs_ptxas12
def test_sm50_immediate_is_the_articles_010VVVVVVVV7f00R():
    r = probe("sm_50")
    assert r.to_json() == {"arch": "sm_50", "kernel": "_Z4testPi", "instruction_bits": 64, "offset": r.offset,
                           "immediate_bits": [20, 52]}
    _check_immediate(r, 64)
    # the articles' notation: opcode 010, eight V digits, then 7f00R (here R0, so the last digit is 0)
    layout = r.layout()
    assert layout.startswith("010VVVVVVVV7f00") and len(layout) == 16
    assert r.words[0][1].hex() == "010000000cc7f000"  # the first article's `f000 0cc7 0000 0100`


@needs_ptxas12
def test_sm50_store_register_is_the_low_byte():
    r = probe("sm_50", template="register")
    _check_register(r, 64)
    assert r.register_bits == (0, 8)
    # the second article's store `eedX200000070Y0R`
    assert all(insn.hex().startswith("eed") for _, insn in r.words)


@needs_nvcc
def test_sm90_immediate():
    r = probe("sm_90")
    assert set(r.to_json()) == {"arch", "kernel", "instruction_bits", "offset", "immediate_bits"}
    assert r.to_json()["immediate_bits"] == [32, 64]
    _check_immediate(r, 128)
    if r.disassembly:  # nvdisasm reads sm_90: its text of each variant shows the instruction it decoded
        assert len(r.disassembly) == len(r.words)


@needs_nvcc
def test_sm90_store_register_agrees_with_nvdisasm():
    r = probe("sm_90", template="register")
    assert r.to_json()["register_bits"] == [32, 40] and r.to_json()["immediate_bits"] is None
    _check_register(r, 128)
    if not r.disassembly:
        pytest.skip("no nvdisasm reads sm_90 here: the register numbers cannot be cross-checked")
    for value, text in r.disassembly.items():  # e.g. "STG.E desc[UR4][R4.64], R13"
        assert text.startswith("ST") and text.endswith(f", R{r.register_values[value]}")
