"""`mscred sass diff`: two builds' kernels side by side (what a change did to the machine code)."""
from __future__ import annotations

import json
from collections import Counter

import pytest

from mscred.sass.diff import diff_summaries, format_diff
from mscred.sass.inspect import KernelSummary
from mscred.sass.loops import Loop


def _kernel(name, registers=32, frame=0, mix=None, loops=None, arch="sm_90"):
    mix = Counter(mix or {})
    groups = {"tensor": mix.get("HMMA.1688.F32.TF32", 0), "shared": mix.get("LDS", 0), "global": mix.get("LDG.E", 0),
              "ldg128": 0, "local": mix.get("STL", 0), "barrier": 0, "ffma": 0, "tma": 0}
    return KernelSummary(image="x.cubin", arch=arch, name=name, registers=registers, frame_bytes=frame,
                         stack_bytes=0, shared_bytes=0, param_bytes=16, instructions=sum(mix.values()), mix=mix,
                         groups=groups, disassembler=True, readable=name + "()", loops=loops)


def _loop(size):
    return Loop(start=0x100, end=0x100 + 16 * (size - 1), instructions=size, own=size, depth=1, mix=Counter())


def test_kernels_matched_by_arch_and_name_with_their_status():
    old = [_kernel("a", mix={"LDS": 8, "HMMA.1688.F32.TF32": 4}), _kernel("b"), _kernel("gone"),
           _kernel("a", arch="sm_80", mix={"LDS": 8})]
    new = [_kernel("a", registers=40, frame=16, mix={"LDS": 4, "HMMA.1688.F32.TF32": 4, "STL": 2}), _kernel("b"),
           _kernel("fresh"), _kernel("a", arch="sm_80", mix={"LDS": 8})]
    diffs = {(d.arch, d.name): d for d in diff_summaries(old, new)}
    assert {k: d.status for k, d in diffs.items()} == {
        ("sm_90", "a"): "changed", ("sm_90", "b"): "same", ("sm_90", "fresh"): "added", ("sm_90", "gone"): "removed",
        ("sm_80", "a"): "same"}
    # the largest moves first: LDS -4, then STL +2; HMMA did not move
    assert diffs[("sm_90", "a")].mix_changes() == [("LDS", 8, 4), ("STL", 0, 2)]


def test_format_shows_changes_spills_and_loops():
    old = [_kernel("k", registers=128, mix={"LDS": 144, "HMMA.1688.F32.TF32": 144, "IMAD": 300}, loops=[_loop(1061)])]
    new = [_kernel("k", registers=126, frame=16, mix={"LDS": 72, "HMMA.1688.F32.TF32": 144, "IMAD": 250, "STL": 3},
                   loops=[_loop(948)])]
    text = format_diff(diff_summaries(old, new))
    assert "changed  k()" in text
    assert "registers 128 -> 126 (-2)" in text and "local 0 -> 16 (+16)" in text  # a spill appeared
    assert "instructions 588 -> 469 (-119, -20.2%)" in text
    assert "tensor 144 " in text and "shared ld/st 144 -> 72 (-72)" in text and "LDL/STL 0 -> 3 (+3)" in text
    assert "most changed: LDS -72  IMAD -50  STL +3" in text
    assert "largest loop 1061 -> 948 (-113, -10.7%) instructions" in text
    assert text.splitlines()[-1] == "1 changed"


def test_unchanged_kernels_only_with_all_and_json_shape():
    old, new = [_kernel("same", mix={"LDS": 1})], [_kernel("same", mix={"LDS": 1})]
    assert "same()" not in format_diff(diff_summaries(old, new))
    assert "same     same()" in format_diff(diff_summaries(old, new), show_same=True)
    (row,) = [d.to_json() for d in diff_summaries(old, new)]
    assert row["status"] == "same" and row["mix_changes"] == [] and row["old"]["registers"] == 32


def test_diff_of_two_compiled_builds(tmp_path, capsys):
    pytest.importorskip("elftools", reason="pyelftools (the `sass` extra) is not installed")
    from mscred.cli.main import main
    from mscred.sass.toolchain import compile_cubin, find_tool

    if find_tool("nvcc") is None or find_tool("nvdisasm") is None:
        pytest.skip("nvcc or nvdisasm not found: no cubins to compare here")
    body = "  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] += a * x[i];\n"
    builds = {}
    for name, unroll, extra in [("old", "", ""), ("new", "#pragma unroll 4\n",
                                                  "__global__ void fill(float* y, float v) { y[threadIdx.x] = v; }\n")]:
        source = tmp_path / f"{name}.cu"
        source.write_text("__global__ void axpy(float* y, const float* x, float a, int n) {\n" + unroll + body + "}\n"
                          + extra)
        builds[name] = tmp_path / f"{name}.cubin"
        builds[name].write_bytes(compile_cubin(source, "sm_90"))
    code = main(["sass", "diff", str(builds["old"]), str(builds["new"]), "--loops", "--json"])
    rows = {r["kernel"]: r for r in json.loads(capsys.readouterr().out)}
    assert code == 0
    axpy = next(r for k, r in rows.items() if "axpy" in k)
    fill = next(r for k, r in rows.items() if "fill" in k)
    assert axpy["status"] == "changed" and fill["status"] == "added" and fill["old"] is None
    assert axpy["new"]["largest_loop"] > axpy["old"]["largest_loop"]  # unrolled 4 times
    assert axpy["new"]["groups"]["global"] > axpy["old"]["groups"]["global"]
    code = main(["sass", "diff", str(builds["old"]), str(builds["new"])])
    assert code == 0 and "1 changed, 1 added" in capsys.readouterr().out
    # --code: the unrolled loop's instructions, old against new, with the branch targets named alike
    code = main(["sass", "diff", str(builds["old"]), str(builds["new"]), "--code", "400"])
    out = capsys.readouterr().out
    assert code == 0 and "        @@ " in out and "L1:" in out and "\n        +    LDG.E" in out
    assert "more lines of the instruction diff" not in out
    code = main(["sass", "diff", str(builds["old"]), str(builds["new"]), "--code", "3"])
    assert code == 0 and "more lines of the instruction diff" in capsys.readouterr().out


def test_bad_input_is_one_line(tmp_path, capsys):
    from mscred.cli.main import main

    assert main(["sass", "diff", str(tmp_path / "a.cubin"), str(tmp_path / "b.cubin")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("a.cubin: no such file") and "\n" not in err


def test_anonymous_namespaces_match_across_builds():
    # nvcc names an anonymous namespace after the file and a hash that changes between builds; the ABI's plain
    # form makes the same kernel of two builds one key
    from mscred.sass.diff import stable_name

    one = "_ZN13mscred_im2col41_GLOBAL__N__dc70bf10_9_im2col_cu_f5da5b4b14conv_halo3x3s2ILb1EEEvPKfS3_"
    two = "_ZN13mscred_im2col41_GLOBAL__N__0e2a11c3_9_im2col_cu_7b09e1d214conv_halo3x3s2ILb1EEEvPKfS3_"
    assert stable_name(one) == stable_name(two) == "_ZN13mscred_im2col12_GLOBAL__N_114conv_halo3x3s2ILb1EEEvPKfS3_"
    assert stable_name("_Z4fillPffi") == "_Z4fillPffi"
    (d,) = diff_summaries([_kernel(one, registers=254)], [_kernel(two, registers=194)])
    assert d.status == "changed" and d.old.registers == 254


def _templated(args, params="(float const*, int)", arch="sm_90", **kw):
    name = "k" + "".join(a.replace(" ", "") for a in args)
    kernel = _kernel(name, arch=arch, **kw)
    kernel.readable = f"void ns::(anonymous namespace)::conv<{', '.join(args)}>{params}"
    return kernel


def test_a_template_parameter_added_with_a_default_still_matches_its_kernel():
    # today's case: conv_patch<..., 8> became conv_patch<..., 8, 0> (a PROBE parameter, 0 in the product)
    old = [_templated(["2", "4", "true", "8"], mix={"LDS": 4}), _templated(["4", "2", "true", "8"])]
    new = [_templated(["2", "4", "true", "8", "0"], mix={"LDS": 4}),
           _templated(["4", "2", "true", "8", "0"], mix={"LDS": 2})]
    diffs = diff_summaries(old, new)
    assert [d.status for d in diffs] == ["same", "changed"]
    assert diffs[1].was == "void ns::(anonymous namespace)::conv<4, 2, true, 8>(float const*, int)"
    text = format_diff(diffs)
    assert "was void ns::(anonymous namespace)::conv<4, 2, true, 8>" in text and text.splitlines()[-1] == "1 changed, 1 same"
    assert json.loads(json.dumps([d.to_json() for d in diffs]))[1]["was"].endswith("<4, 2, true, 8>(float const*, int)")


def test_a_bool_parameter_that_became_an_integer_still_matches_its_kernel():
    # conv_halo3x3s2<true, 0, false> became <true, 0, 0> (a bool candidate switch replaced by an int one), and one
    # that also gained a parameter
    old = [_templated(["true", "0", "false"], mix={"LDS": 4}), _templated(["false", "0", "false"])]
    new = [_templated(["true", "0", "0"], mix={"LDS": 4}), _templated(["0", "0", "0", "8"])]
    diffs = diff_summaries(old, new)
    assert [d.status for d in diffs] == ["same", "same"]
    assert [d.was.split("<")[1] for d in diffs] == ["true, 0, false>(float const*, int)",
                                                    "false, 0, false>(float const*, int)"]
    # a value that differs is another kernel
    assert {d.status for d in diff_summaries([_templated(["true", "0"])], [_templated(["0", "0"])])} == {
        "added", "removed"}


def test_no_pairing_when_it_is_not_one_to_one_or_the_function_differs():
    # two new instantiations extend the same old one: which one continues it is not known, so neither is paired
    old = [_templated(["2", "4"])]
    new = [_templated(["2", "4", "0"]), _templated(["2", "4", "1"])]
    assert sorted(d.status for d in diff_summaries(old, new)) == ["added", "added", "removed"]
    # other parameters, another architecture, or arguments that are not a prefix: different kernels
    assert {d.status for d in diff_summaries([_templated(["2"])], [_templated(["2", "0"], params="(float*)")])} == {
        "added", "removed"}
    assert {d.status for d in diff_summaries([_templated(["2"], arch="sm_80")], [_templated(["2", "0"])])} == {
        "added", "removed"}
    assert {d.status for d in diff_summaries([_templated(["2", "4"])], [_templated(["3", "4", "0"])])} == {
        "added", "removed"}


@pytest.mark.parametrize("readable,expected", [
    ("void ns::k<2, true>(float*)", ("void ns::k(float*)", ("2", "true"))),
    ("void a::(anonymous namespace)::k<f<1, 2>, 3>(a::S, bool)", ("void a::(anonymous namespace)::k(a::S, bool)",
                                                                  ("f<1, 2>", "3"))),
    ("void plain(float*)", None),
    ("k", None),
])
def test_template_parts(readable, expected):
    from mscred.sass.diff import template_parts
    assert template_parts(readable) == expected


def test_same_counts_are_told_from_the_same_instructions():
    # "same" compares counts; the code digest says whether the instruction stream is the same to the instruction
    old = [_kernel("a", mix={"LDS": 1}), _kernel("b", mix={"LDS": 1})]
    new = [_kernel("a", mix={"LDS": 1}), _kernel("b", mix={"LDS": 1})]
    old[0].code_digest, new[0].code_digest = "d1", "d1"
    old[1].code_digest, new[1].code_digest = "d1", "d2"  # reordered, or other registers
    diffs = diff_summaries(old, new)
    assert [(d.status, d.identical) for d in diffs] == [("same", True), ("same", False)]
    text = format_diff(diffs, show_same=True)
    assert text.splitlines()[-1] == "2 same (1 identical to the instruction)"
    assert "b()\n        the same counts, other instructions or order" in text
    assert [d.to_json()["identical"] for d in diffs] == [True, False]
    # without a disassembler nothing is claimed
    assert format_diff(diff_summaries([_kernel("c")], [_kernel("c")])).splitlines()[-1] == "1 same"


def test_code_digest_ignores_label_numbers_symbol_hashes_and_padding():
    from mscred.sass.inspect import code_digest
    one = {0x0: "ISETP.NE.AND P0, PT, R8, RZ, PT", 0x10: "@!P0 BRA `(.L_x_1810)",
           0x20: "RET.REL.NODEC R16 `(_ZN13mscred_im2col41_GLOBAL__N__adb61d00_9_im2col_cu_f5da5b4b1kEv)",
           0x30: "EXIT", 0x40: "NOP"}
    two = {0x0: "ISETP.NE.AND P0, PT, R8, RZ, PT", 0x10: "@!P0 BRA `(.L_x_2292)",
           0x20: "RET.REL.NODEC R16 `(_ZN13mscred_im2col41_GLOBAL__N__dc70bf10_9_im2col_cu_f5da5b4b1kEv)",
           0x30: "EXIT", 0x40: "NOP", 0x50: "NOP"}
    assert code_digest(one, {".L_x_1810": 0x30}) == code_digest(two, {".L_x_2292": 0x30})
    # a branch to another place, or another register, is another stream
    assert code_digest(one, {".L_x_1810": 0x20}) != code_digest(two, {".L_x_2292": 0x30})
    three = {**two, 0x0: "ISETP.NE.AND P0, PT, R9, RZ, PT"}
    assert code_digest(three, {".L_x_2292": 0x30}) != code_digest(two, {".L_x_2292": 0x30})


def test_code_lines_name_branch_targets_by_position():
    from mscred.sass.inspect import code_lines
    text = {0x0: "ISETP.NE.AND P0, PT, R8, RZ, PT", 0x10: "@!P0 BRA `(.L_x_2292)", 0x20: "BRA `(.L_x_17)",
            0x30: "RET.REL.NODEC R16 `(_ZN2ns41_GLOBAL__N__dc70bf10_9_im2col_cu_f5da5b4b1kEv)", 0x40: "EXIT",
            0x50: "NOP", 0x60: "NOP"}
    lines = code_lines(text, {".L_x_2292": 0x40, ".L_x_17": 0x30})
    assert lines == ["    ISETP.NE.AND P0, PT, R8, RZ, PT", "    @!P0 BRA `(L2)", "    BRA `(L1)", "L1:",
                     "    RET.REL.NODEC R16 `(_ZN2ns12_GLOBAL__N_11kEv)", "L2:", "    EXIT"]


def test_format_shows_the_instruction_diff_when_asked():
    old, new = _kernel("k", mix={"LDS": 2}), _kernel("k", mix={"LDS": 2, "FADD": 1})
    old.code = ["    LDS R1, [R2]", "    LDS R3, [R2+0x4]", "    EXIT"]
    new.code = ["    LDS R1, [R2]", "    LDS R3, [R2+0x4]", "    FADD R1, R1, R3", "    EXIT"]
    diffs = diff_summaries([old], [new])
    text = format_diff(diffs, code_lines=50)
    assert "        +    FADD R1, R1, R3" in text and "        @@ " in text
    assert "FADD R1" not in format_diff(diffs)  # only when asked
    capped = format_diff(diffs, code_lines=2)
    assert capped.count("\n        ") >= 2 and "more lines of the instruction diff" in capped


def test_with_code_a_reordered_kernel_is_shown():
    old, new = _kernel("r", mix={"LDS": 2}), _kernel("r", mix={"LDS": 2})
    old.code, new.code = ["    LDS R1, [R2]", "    LDS R3, [R4]"], ["    LDS R3, [R4]", "    LDS R1, [R2]"]
    old.code_digest, new.code_digest = "x", "y"
    diffs = diff_summaries([old], [new])
    assert "r()" not in format_diff(diffs)  # the same counts: listed only with --all ...
    text = format_diff(diffs, code_lines=20)  # ... or with --code, with its diff
    assert "same     r()" in text and "+    LDS R3, [R4]" in text and "-    LDS R3, [R4]" in text


def test_the_tensor_core_loop_is_compared_apart_from_the_largest():
    """The MMA main loop is usually nested in a larger one: --loops compares it too (the loop with the most tensor
    instructions of its own, the innermost on a tie), and --json carries it and the loop count."""
    def nest(outer, inner, hmma):
        return [Loop(0x100, 0x100 + 16 * outer, outer, outer - inner, 1, Counter({"IADD3": outer - inner})),
                Loop(0x200, 0x200 + 16 * inner, inner, inner, 2, Counter({"HMMA.16816.F32.BF16": hmma, "LDSM": 9}))]
    old = [_kernel("k", mix={"HMMA.16816.F32.BF16": 256}, loops=nest(2019, 1125, 256))]
    new = [_kernel("k", mix={"HMMA.16816.F32.BF16": 512}, loops=nest(3120, 2138, 512))]
    text = format_diff(diff_summaries(old, new))
    assert "largest loop 2019 -> 3120 (+1101, +54.5%) instructions; loops 2" in text
    assert "tensor-core loop 1125 -> 2138 (+1013, +90.0%) instructions" in text
    side = diff_summaries(old, new)[0].to_json()["new"]
    assert side["largest_loop"] == 3120 and side["tensor_loop"] == 2138 and side["loops"] == 2
    plain = [_kernel("k", mix={"FFMA": 4}, loops=[_loop(40)])]
    assert "tensor-core loop" not in format_diff(diff_summaries(plain, plain), show_same=True)
