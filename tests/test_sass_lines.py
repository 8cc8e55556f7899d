"""`mscred sass lines PATH -k KERNEL` and `sass triton --lines`: a kernel's instructions counted per source line from
the cubin's line table (nvdisasm -gi), inlined helpers at their own lines beside the kernel's line that called them,
the loops' share, the source text; no line table, one line with exit 2."""
from __future__ import annotations

import json
import shutil

import pytest

from cli_helpers import bad_input, run_cli
from mscred.sass.toolchain import parse_line_info

pytest.importorskip("elftools", reason="pyelftools (the `sass` extra) is not installed")

# nvdisasm -gi as it prints locations: one comment per level of inlining, innermost first; none before an
# instruction whose location did not change.
DISASSEMBLY = """
        .section        .text.first,"ax",@progbits
.text.first:
        //## File "/src/k.cu", line 5
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/                   S2R R0, SR_TID.X ;
        //## File "/src/k.cu", line 1 inlined at "/src/k.cu", line 3
        //## File "/src/k.cu", line 3 inlined at "/src/k.cu", line 7
        //## File "/src/k.cu", line 7
        /*0020*/                   FMUL R2, R0, R0 ;
        //## File "/src/k.cu", line 8
        /*0030*/                   EXIT ;
        .section        .text.second,"ax",@progbits
.text.second:
        /*0000*/                   MOV R1, 0x1 ;
        //## File "/src/k.cu", line 12
        /*0010*/                   EXIT ;
"""


def test_parse_line_info_chains_carries_and_resets_per_kernel():
    places = parse_line_info(DISASSEMBLY)
    first = places["first"]
    assert first[0x0] == first[0x10] == (("/src/k.cu", 5),)   # carried to the next instruction
    assert first[0x20] == (("/src/k.cu", 1), ("/src/k.cu", 3), ("/src/k.cu", 7))   # innermost first
    assert first[0x30] == (("/src/k.cu", 8),)
    # a new kernel starts with no location: its first instruction is not given the last kernel's
    assert places["second"] == {0x10: (("/src/k.cu", 12),)}


# A loop whose body calls a helper, and the helper called again after the loop: the helper's line is two rows
# (__expf: one MUFU.EX2 each time, which the compiler cannot merge into the caller's arithmetic).
SOURCE = """__device__ __forceinline__ float grow(float v) { return __expf(v) * v; }
extern "C" __global__ void sum_squares(float *out, const float *in, int n) {
  float acc = 0.f;
#pragma unroll 1
  for (int k = 0; k < n; ++k) {
    acc += grow(in[k]) * 0.5f;
  }
  out[0] = grow(acc);
}
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    from mscred.sass.toolchain import compile_cubin, find_tool

    if find_tool("nvcc") is None or find_tool("nvdisasm") is None:
        pytest.skip("nvcc or nvdisasm not found: no cubin to read here")
    root = tmp_path_factory.mktemp("lines")
    source = root / "build" / "squares.cu"
    source.parent.mkdir()
    source.write_text(SOURCE)
    with_lines, without = root / "squares.cubin", root / "plain.cubin"
    with_lines.write_bytes(compile_cubin(source, "sm_90", extra=["-lineinfo", "-O3"]))
    without.write_bytes(compile_cubin(source, "sm_90", extra=["-O3"]))
    return source, with_lines, without


def _report(capsys, *argv) -> dict:
    code, out, err = run_cli(capsys, "sass", "lines", *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def test_rows_per_line_inlined_helper_twice_and_totals(built, capsys):
    source, cubin, _ = built
    report = _report(capsys, cubin, "-k", "sum_squares")
    code, out, _ = run_cli(capsys, "sass", "inspect", cubin, "-k", "sum_squares", "--json")
    (summary,) = json.loads(out)
    assert report["instructions"] == summary["instructions"]          # counted as inspect counts them
    assert report["located"] == report["instructions"]                 # -lineinfo: every instruction placed
    assert sum(r["instructions"] for r in report["lines"]) == report["located"]
    rows = {(r["line"], (r["inlined_into"] or {}).get("line")): r for r in report["lines"]}
    assert {(1, 6), (1, 8)} <= set(rows), sorted(rows)                 # grow(): in the loop and after it
    in_loop, after = rows[(1, 6)], rows[(1, 8)]
    assert in_loop["in_loops"] == in_loop["instructions"] > 0 and after["in_loops"] == 0
    assert in_loop["mix"]["MUFU.EX2"] == after["mix"]["MUFU.EX2"] == 1   # __expf's one instruction, each time
    assert in_loop["source"].startswith("__device__ __forceinline__ float grow")
    assert rows[(6, None)]["source"] == "acc += grow(in[k]) * 0.5f;"
    assert 0 < report["in_loops"] < report["instructions"]
    assert sum(r["in_loops"] for r in report["lines"]) == report["in_loops"]
    # rows by count, most first; --order source by line
    counts = [r["instructions"] for r in report["lines"]]
    assert counts == sorted(counts, reverse=True)
    by_source = _report(capsys, cubin, "-k", "sum_squares", "--order", "source")["lines"]
    assert [r["line"] for r in by_source] == sorted(r["line"] for r in by_source)


def test_table_names_lines_with_their_call_sites_and_source(built, capsys):
    _, cubin, _ = built
    code, out, err = run_cli(capsys, "sass", "lines", cubin, "-k", "sum_squares", "--top", "2")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("sum_squares (sm_90): ") and "in loops" in lines[0]
    assert lines[1].split()[:3] == ["insns", "share", "loops"]
    assert len(lines) == 2 + 2 + 1 and lines[-1].lstrip().startswith("... ") and "--top 0 shows all" in lines[-1]
    code, out, _ = run_cli(capsys, "sass", "lines", cubin, "-k", "sum_squares", "--top", "0")
    assert "squares.cu:1 (in squares.cu:6)" in out and "squares.cu:1 (in squares.cu:8)" in out
    assert "out[0] = grow(acc);" in out and "more line" not in out


def test_source_found_under_source_dir_after_the_build_moved(built, tmp_path, capsys):
    source, cubin, _ = built
    checkout = tmp_path / "checkout"
    (checkout / "build").mkdir(parents=True)
    moved = checkout / "build" / "squares.cu"
    shutil.move(source, moved)   # the line table names the build's path, where the file no longer is
    try:
        lost = _report(capsys, cubin, "-k", "sum_squares")
        assert all(r["source"] is None for r in lost["lines"])
        found = _report(capsys, cubin, "-k", "sum_squares", "--source-dir", checkout)
        assert any(r["source"] == "acc += grow(in[k]) * 0.5f;" for r in found["lines"])
    finally:
        shutil.move(moved, source)


def test_no_line_table_is_one_line_saying_how_to_get_one(built, capsys):
    _, _, without = built
    bad_input(capsys, "sass", "lines", without, "-k", "sum_squares",
              names=("plain.cubin", "sum_squares has no source-line table", "-lineinfo"))
    bad_input(capsys, "sass", "lines", without, "-k", "no_such_kernel", names=("no kernel 'no_such_kernel'",))


TRITON_KERNEL = '''
import triton
import triton.language as tl


@triton.jit
def _twice(x):
    return x + x


@triton.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, PREC: tl.constexpr):
    r = tl.arange(0, 32)
    a = tl.load(a_ptr + r[:, None] * 32 + r[None, :])
    b = tl.load(b_ptr + r[:, None] * 32 + r[None, :])
    c = tl.dot(a, b, input_precision=PREC)
    tl.store(c_ptr + r[:, None] * 32 + r[None, :], _twice(c))
'''


def _triton_at_least(major: int, minor: int) -> bool:
    import triton

    return tuple(int(part) for part in triton.__version__.split(".")[:2]) >= (major, minor)


def test_triton_lines_point_into_the_python_source(tmp_path, capsys):
    pytest.importorskip("triton", reason="sass triton compiles with Triton (the gpu or dev extra)")
    source = tmp_path / "kernels.py"
    source.write_text(TRITON_KERNEL)
    # PREC is a string constexpr: given in quotes
    code, out, err = run_cli(capsys, "sass", "triton", source, "dot_kernel", "-c", "PREC='tf32'", "--lines", "0",
                             "--json")
    assert code == 0, err
    answer = json.loads(out)
    report, (summary,) = answer["lines"], answer["inspect"]
    assert report["instructions"] == summary["instructions"] and report["located"] > 0
    text = TRITON_KERNEL.splitlines()
    for row in report["lines"]:   # (Triton places a few instructions past the function's last line: no text)
        assert row["file"].endswith("kernels.py")
        assert row["source"] == (text[row["line"] - 1].strip() if row["line"] <= len(text) else None)
    dot = [r for r in report["lines"] if (r["source"] or "").startswith("c = tl.dot(")]
    assert dot and any(op.startswith("HMMA") or op.startswith("HGMMA") for op in dot[0]["mix"])   # tf32 MMAs
    helper = [r for r in report["lines"] if r["source"] == "return x + x"]
    call = text.index("    tl.store(c_ptr + r[:, None] * 32 + r[None, :], _twice(c))") + 1
    # The call site is the line table's: Triton 3.9 records it; Triton 3.6 (the GPU machine's, 2026-12-06) leaves
    # the inlined helper's instructions at its own line only, which the report then says (inlined_into None)
    assert helper
    if helper[0]["inlined_into"] is None:
        assert not _triton_at_least(3, 9), "the inlined helper's call site is missing"
    else:
        assert helper[0]["inlined_into"]["line"] == call
    code, out, err = run_cli(capsys, "sass", "triton", source, "dot_kernel", "-c", "PREC='tf32'", "--lines", "1")
    assert code == 0, err and "--lines 0 shows all" in out
    bad_input(capsys, "sass", "triton", source, "dot_kernel", "-c", "PREC=tf32",
              names=("-c PREC=tf32: not an int", "'string' in quotes"))


def test_triton_lines_name_this_file_not_an_earlier_compile_of_the_same_text(tmp_path, capsys):
    """Triton's cache keys a kernel by its text: the same kernel in a second file came back with the first file's
    line table (and `lines` showed whatever that path held). Each compile names its own file."""
    pytest.importorskip("triton", reason="sass triton compiles with Triton (the gpu or dev extra)")
    for folder in ("first", "second"):
        source = tmp_path / folder / "kernels.py"
        source.parent.mkdir()
        source.write_text(TRITON_KERNEL)
        code, out, err = run_cli(capsys, "sass", "triton", source, "dot_kernel", "-c", "PREC='tf32'", "--lines", "0",
                                 "--json")
        assert code == 0, err
        assert {row["file"] for row in json.loads(out)["lines"]["lines"]} == {str(source)}


DIFF_SOURCE = """#ifndef EXTRA
#define EXTRA 0.f
#endif
extern "C" __global__ void tail(float *out, const float *in, int n) {
  float acc = 0.f;
#pragma unroll 1
  for (int k = 0; k < n; ++k) {
    acc += in[k] * 0.5f;
  }
  out[0] = acc + EXTRA;
}
"""


def test_diff_by_source_line_names_the_line_a_define_changed(tmp_path, capsys):
    """Two builds of one source (-DEXTRA=in[1] adds a load and an add to line 10), each in a folder of its own:
    `diff --lines` matches their lines by file name and number and names line 10 first."""
    from mscred.sass.toolchain import compile_cubin, find_tool

    if find_tool("nvcc") is None or find_tool("nvdisasm") is None:
        pytest.skip("nvcc or nvdisasm not found: no cubin to read here")
    cubins = []
    for folder, extra in (("old", []), ("new", ["-DEXTRA=in[1]"])):
        source = tmp_path / folder / "tail.cu"
        source.parent.mkdir()
        source.write_text(DIFF_SOURCE)
        cubins.append(tmp_path / f"{folder}.cubin")
        cubins[-1].write_bytes(compile_cubin(source, "sm_90", extra=["-lineinfo", "-O3", *extra]))
    code, out, err = run_cli(capsys, "sass", "diff", *cubins, "--json")
    assert code == 0, err
    (kernel,) = json.loads(out)
    changes = kernel["line_changes"]
    change = changes[0]   # the largest move first (the scheduler may move an instruction or two elsewhere)
    assert change["line"] == 10 and change["file"] == "tail.cu" and change["new"] > change["old"], changes
    assert change["mix_changes"].get("LDG.E", 0) == 1 and change["source"] == "out[0] = acc + EXTRA;"
    assert not any(c["source_edited"] for c in changes)
    assert (sum(n for c in changes for n in c["mix_changes"].values())
            == kernel["new"]["instructions"] - kernel["old"]["instructions"])
    code, out, err = run_cli(capsys, "sass", "diff", *cubins, "--lines", "3")
    assert code == 0, err
    assert "by source line:" in out and "tail.cu:10" in out and "LDG.E +1" in out and "differ at" not in out
    # builds without a line table: said, not an empty list
    plain = tmp_path / "plain.cubin"
    plain.write_bytes(compile_cubin(tmp_path / "old" / "tail.cu", "sm_90", extra=["-O3", "-DEXTRA=in[2]"]))
    code, out, err = run_cli(capsys, "sass", "diff", cubins[0], plain, "--lines", "3")
    assert code == 0 and "no source lines" in out, err


def test_annotate_prints_the_source_with_counts_in_the_margin(built, tmp_path, capsys):
    source, cubin, _ = built
    report = _report(capsys, cubin, "-k", "sum_squares")
    code, out, err = run_cli(capsys, "sass", "lines", cubin, "-k", "sum_squares", "--annotate")
    assert code == 0, err
    margin = {}
    for line in out.splitlines():
        number, bar, text = line.partition(" | ")
        if bar and number.split():
            margin[int(number.split()[0])] = (number.split()[1:], text)
    # every line of the file is shown (the code spans it, with 2 lines of context), in order, with its text
    assert sorted(margin) == list(range(1, len(SOURCE.splitlines()) + 1))
    assert all(margin[n][1] == SOURCE.splitlines()[n - 1] for n in margin)
    # the helper's line sums its two call sites; a line without code has an empty margin
    helper = sum(r["instructions"] for r in report["lines"] if r["line"] == 1)
    assert margin[1][0][0] == str(helper) and margin[3][0] == []
    assert sum(int(m[0][0]) for m in margin.values() if m[0]) == report["instructions"]
    # the source moved away: its lines' counts, and how to point at it
    moved = tmp_path / "elsewhere.cu"
    shutil.move(source, moved)
    try:
        code, out, err = run_cli(capsys, "sass", "lines", cubin, "-k", "sum_squares", "--annotate")
    finally:
        shutil.move(moved, source)
    assert code == 0 and "(not found: --source-dir DIR)" in out, err
