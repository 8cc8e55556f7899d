"""`mscred.sass.loops`: the loops of a kernel's machine code, from its disassembly (backward branches)."""
from __future__ import annotations

import json

import pytest

from mscred.sass.loops import find_loops, format_loops


def _asm(lines: dict[int, str]) -> dict[int, str]:
    return dict(sorted(lines.items()))


def test_nested_loops_with_two_back_branches_to_one_head():
    # 0x00 set-up; outer loop 0x10..0x90 (two branches back to 0x10: a `continue` at 0x50 and the loop end at 0x90),
    # inner loop 0x30..0x40; a forward branch (0x60 -> 0x80) and the padding BRA-to-itself after EXIT ignored.
    asm = _asm({0x00: "MOV R1, c[0x0][0x28]", 0x10: "IADD3 R2, R2, 0x1, RZ", 0x20: "LDS R3, [R4]",
                0x30: "FFMA R5, R3, R3, R5", 0x40: "@P0 BRA `(.L_x_1)", 0x50: "@P1 BRA `(.L_x_0)",
                0x60: "@P2 BRA `(.L_x_2)", 0x70: "STG.E [R6.64], R5", 0x80: "ISETP.GE.AND P3, PT, R2, 0x8, PT",
                0x90: "@!P3 BRA `(.L_x_0)", 0xa0: "EXIT", 0xb0: "BRA `(.L_x_3)"})
    labels = {".L_x_0": 0x10, ".L_x_1": 0x30, ".L_x_2": 0x80, ".L_x_3": 0xb0}
    outer, inner = find_loops(asm, labels)
    assert (outer.start, outer.end, outer.instructions, outer.own, outer.depth) == (0x10, 0x90, 9, 7, 1)
    assert (inner.start, inner.end, inner.instructions, inner.own, inner.depth) == (0x30, 0x40, 2, 2, 2)
    assert outer.mix["BRA"] == 3 and inner.mix == {"FFMA": 1, "BRA": 1}
    text = "\n".join(format_loops([outer, inner]))
    assert "loop 0x0010-0x0090: 9 instructions, 7 outside inner loops" in text
    assert "  loop 0x0030-0x0040: 2 instructions" in text  # indented one level deeper
    assert json.loads(json.dumps(inner.to_json()))["depth"] == 2


def test_absolute_branch_targets_as_cuobjdump_prints_them():
    asm = _asm({0x100: "IADD3 R1, R1, 0x1, RZ", 0x110: "ISETP.NE.AND P0, PT, R1, 0x10, PT", 0x120: "@P0 BRA 0x100"})
    (loop,) = find_loops(asm)
    assert (loop.start, loop.end, loop.instructions) == (0x100, 0x120, 3)


def test_straight_line_code_has_no_loops():
    assert find_loops(_asm({0x0: "MOV R1, 0x1", 0x10: "EXIT", 0x20: "BRA `(.L_x_0)"}), {".L_x_0": 0x20}) == []


def test_inspect_loops_of_a_compiled_kernel(tmp_path, capsys):
    pytest.importorskip("elftools", reason="pyelftools (the `sass` extra) is not installed")
    from mscred.cli.main import main
    from mscred.sass.toolchain import compile_cubin, find_tool

    if find_tool("nvcc") is None or find_tool("nvdisasm") is None:
        pytest.skip("nvcc or nvdisasm not found: no cubin to disassemble here")
    source = tmp_path / "loops.cu"
    source.write_text(
        "__global__ void rows(float* a, const int* n) {\n"
        "  for (int i = 0; i < n[0]; ++i) {\n"
        "    float s = 0.f;\n"
        "#pragma unroll 1\n"
        "    for (int j = 0; j < n[1]; ++j) s += a[i * n[1] + j] * a[j];\n"
        "    a[i] = s;\n"
        "  }\n"
        "}\n")
    cubin = tmp_path / "loops.cubin"
    cubin.write_bytes(compile_cubin(source, "sm_90"))
    code = main(["sass", "inspect", str(cubin), "--loops", "--json"])
    rows = json.loads(capsys.readouterr().out)
    assert code == 0 and len(rows) == 1
    loops = rows[0]["loops"]
    depths = sorted(lp["depth"] for lp in loops)
    assert depths and depths[0] == 1 and 2 in depths, loops  # the j loop inside the i loop
    inner = [lp for lp in loops if lp["depth"] == 2]
    outer = [lp for lp in loops if lp["depth"] == 1 and any(lp["start"] <= q["start"] and q["end"] <= lp["end"]
                                                            for q in inner)]
    assert outer and all(lp["instructions"] > lp["own"] for lp in outer)
    assert any("FFMA" in lp["mix"] for lp in inner)  # the dot product is the inner loop's work
    code = main(["sass", "inspect", str(cubin), "--loops"])
    assert code == 0 and "loop 0x" in capsys.readouterr().out
    # dump names the loop heads: each branch target's label has a line of its own before its instruction
    code = main(["sass", "dump", str(cubin), "-k", "rows"])
    lines = capsys.readouterr().out.splitlines()
    heads = {f"{lp['start']:#06x}" for lp in loops}
    labelled = {lines[i + 1].split(":")[0].strip() for i, line in enumerate(lines[:-1]) if line.startswith(".L_x_")}
    assert code == 0 and heads <= labelled, (heads, labelled)


def test_local_memory_in_a_loop_is_always_shown():
    """Spills in a loop show on its line even when LDL/STL are not among its most frequent instructions; --top sets
    how many of those are listed."""
    from collections import Counter

    from mscred.sass.loops import Loop
    mix = Counter({"HMMA.16816.F32.BF16": 512, "FADD": 384, "FMUL": 224, "MUFU.TANH": 224, "LDL": 3, "STL": 1})
    line, = format_loops([Loop(0x100, 0x900, 1200, 1200, 1, mix)], top=2)
    assert "HMMA.16816.F32.BF16 512  FADD 384  (LDL/STL 4)" in line and "FMUL" not in line
    line, = format_loops([Loop(0x100, 0x900, 1200, 1200, 1, mix)], top=6)
    assert "LDL 3" in line and "(LDL/STL" not in line
    clean = Counter({"HMMA.16816.F32.BF16": 512, "FADD": 384})
    assert "LDL/STL" not in format_loops([Loop(0x100, 0x900, 900, 900, 1, clean)], top=1)[0]
