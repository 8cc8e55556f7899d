"""`mscred sass` on damaged and unusual input, from the audit of the sass command group: every case is bad input
(exit 2, one line) or a normal answer, never an internal error."""
from __future__ import annotations

import json
import struct
import subprocess
import sys

import pytest

pytest.importorskip("elftools", reason="pyelftools (the `sass` extra) is not installed")

from mscred.cli.main import main  # noqa: E402
from mscred.errors import InputError  # noqa: E402
from mscred.sass import toolchain  # noqa: E402
from mscred.sass.cubin import Cubin  # noqa: E402
from mscred.sass.fatbin import FLAG_ZSTD, _decompress, find_images  # noqa: E402
from mscred.sass.nvinfo import NvInfoError, parse_nvinfo  # noqa: E402
from mscred.sass.probe import template_path  # noqa: E402
from mscred.sass.toolchain import compile_cubin, find_tool, parse_disassembly, parse_labels  # noqa: E402

needs_nvcc = pytest.mark.skipif(find_tool("nvcc") is None, reason="nvcc not found (CUDA toolkit not installed)")
needs_ptxas12 = pytest.mark.skipif(find_tool("nvcc") is None or find_tool("ptxas12") is None,
                                   reason="sm_50 needs nvcc plus a CUDA 12 ptxas (pip install nvidia-cuda-nvcc-cu12)")
needs_nvdisasm = pytest.mark.skipif(find_tool("nvdisasm") is None, reason="nvdisasm not found (the case is its output)")


def run_cli(capsys, *args):
    code = main(["sass", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code, err, *fragments):
    assert code == 2, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def _nvcc(*args):
    proc = subprocess.run([find_tool("nvcc"), *map(str, args)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"nvcc could not build the input: {proc.stderr.strip()[:200]}")


@pytest.fixture(scope="module")
def value_cubin(tmp_path_factory):
    if find_tool("nvcc") is None:
        pytest.skip("nvcc not found (CUDA toolkit not installed)")
    path = tmp_path_factory.mktemp("sassaudit") / "value.cubin"
    path.write_bytes(compile_cubin(template_path("value"), "sm_90", {"VALUE": "0xcc"}))
    return path


def _section(data: bytes, name: str) -> tuple[int, int]:
    """(file offset, size) of a cubin's section."""
    from io import BytesIO

    from elftools.elf.elffile import ELFFile
    section = ELFFile(BytesIO(data)).get_section_by_name(name)
    return section["sh_offset"], section["sh_size"]


# --- 1: a damaged .nv.info section -------------------------------------------------------------------------------

def test_nvinfo_record_cut_short_is_a_damaged_section():
    """A record whose value bytes are missing failed as struct.error / IndexError, not as the damaged section."""
    for data in (bytes([3, 0x1B, 1]), bytes([4, 0x2F, 8])):
        with pytest.raises(NvInfoError, match="runs past the section end"):
            parse_nvinfo(data)
    with pytest.raises(NvInfoError, match="unknown record format 127"):
        parse_nvinfo(bytes([0x7F, 0x2F, 0, 0]))


@needs_nvcc
def test_damaged_nvinfo_is_bad_input_in_every_command(value_cubin, capsys, tmp_path):
    """`unknown record format 127` and `runs past the section end` were `internal error: ValueError`, exit 1."""
    data = value_cubin.read_bytes()
    offset, size = _section(data, ".nv.info._Z4testPi")
    unknown = bytearray(data)
    unknown[offset] = 0x7F
    past = bytearray(data)
    assert past[offset] == 4  # an SVAL record first (its 16-bit size follows the attribute byte)
    past[offset + 2:offset + 4] = struct.pack("<H", size + 100)
    for name, damaged, words in (("unknown.cubin", unknown, "unknown record format 127"),
                                 ("past.cubin", past, "runs past the section end")):
        path = tmp_path / name
        path.write_bytes(bytes(damaged))
        for args in (["kernels", path], ["dump", path, "-k", "test"], ["inspect", path],
                     ["patch", path, "-k", "test", "--old", "0xcc", "--new", "0xdd"], ["run", path, "-k", "test"],
                     ["diff", value_cubin, path]):
            code, _, err = run_cli(capsys, *args)
            assert_one_line_error(code, err, name, "damaged ELF file", ".nv.info._Z4testPi", words)


@needs_nvcc
def test_damaged_nv_compat_only_loses_the_arch_suffix(value_cubin):
    """.nv.compat only tells sm_90a from sm_90: a damaged one leaves the kernels readable."""
    data = bytearray(value_cubin.read_bytes())
    offset, _ = _section(bytes(data), ".nv.compat")
    data[offset] = 0x7F
    cubin = Cubin(bytes(data), "compat.cubin")
    assert cubin.arch == "sm_90" and "_Z4testPi" in cubin.kernels


# --- 2: a corrupt zstd entry ----------------------------------------------------------------------------------------

def test_corrupt_zstd_payload_is_an_unreadable_entry():
    pytest.importorskip("zstandard", reason="zstandard not installed: zstd entries are not decompressed at all")
    frame = b"\x28\xb5\x2f\xfd" + b"\xff" * 32  # zstd magic, then garbage
    data, compression, note = _decompress(frame, FLAG_ZSTD, 100)
    assert data is None and compression == "zstd" and "could not be decompressed" in note


@needs_nvcc
def test_corrupt_zstd_entry_leaves_the_readable_cubin_usable(tmp_path, capsys):
    """A damaged zstd (PTX) entry was `internal error: ZstdError` in every command, the plain cubin beside it
    unreachable."""
    pytest.importorskip("zstandard", reason="zstandard not installed: zstd entries are not decompressed at all")
    obj = tmp_path / "value.o"
    _nvcc("-arch=sm_90", "-c", "-o", obj, template_path("value"))
    data = bytearray(obj.read_bytes())
    if not any(im.compression == "zstd" for im in find_images(bytes(data), "value.o")):
        pytest.skip("this nvcc stores no zstd entry in the object")
    frame = data.find(b"\x28\xb5\x2f\xfd")
    data[frame + 16:frame + 32] = b"\xff" * 16
    bad = tmp_path / "bad.o"
    bad.write_bytes(bytes(data))
    code, text, err = run_cli(capsys, "kernels", bad)
    assert code == 0, err
    assert "could not be decompressed" in text and "_Z4testPi" in text
    for args in (["dump", bad, "-k", "test"], ["inspect", bad], ["diff", obj, bad],
                 ["patch", bad, "-k", "test", "--old", "0xcc", "--new", "0xdd", "-o", tmp_path / "bad.dd.o"]):
        code, text, err = run_cli(capsys, *args)
        assert code == 0, (args[0], err)


# --- 3: bytes that are not UTF-8 in nvdisasm's output ---------------------------------------------------------------

def _strtab_name_offset(data: bytes, symbol: str) -> int:
    """File offset of a symbol's name in .strtab (what nvdisasm prints as the `.text.<kernel>:` label)."""
    from io import BytesIO

    from elftools.elf.elffile import ELFFile
    elf = ELFFile(BytesIO(data))
    symtab = elf.get_section_by_name(".symtab")
    strtab = elf.get_section(symtab["sh_link"])
    sym = next(s for s in symtab.iter_symbols() if s.name == symbol)
    return strtab["sh_offset"] + sym["st_name"]


@needs_nvcc
@needs_nvdisasm
def test_non_utf8_byte_in_a_name_nvdisasm_prints(value_cubin, capsys, tmp_path):
    """A byte such as 0x97 in the section symbol's name was a UnicodeDecodeError, exit 1, in inspect, dump, patch
    and diff; the kernel's instructions are still found under its own name (the section header's)."""
    data = bytearray(value_cubin.read_bytes())
    at = _strtab_name_offset(bytes(data), ".text._Z4testPi") + len(".text._Z4te")
    assert data[at] == ord("s")
    data[at] = 0x97
    path = tmp_path / "badname.cubin"
    path.write_bytes(bytes(data))
    code, text, err = run_cli(capsys, "inspect", path, "--json")
    assert code == 0, err
    assert "STG.E" in str([row["mix"] for row in json.loads(text)])
    code, text, err = run_cli(capsys, "dump", path, "-k", "test")
    assert code == 0 and "STG.E" in text, err
    code, _, err = run_cli(capsys, "diff", value_cubin, path)
    assert code == 0, err
    code, _, err = run_cli(capsys, "patch", path, "-k", "test", "--old", "0xcc", "--new", "0xdd",
                           "-o", tmp_path / "badname.dd.cubin")
    assert code == 0, err
    # every byte of every copy of the kernel's name: bad input or an answer, never an internal error
    start = 0
    while (start := bytes(data).find(b"_Z4testPi", start + 1)) != -1:
        damaged = bytearray(value_cubin.read_bytes())
        damaged[start + 5] = 0x97
        path.write_bytes(bytes(damaged))
        for args in (["inspect", path], ["dump", path, "-k", "test"], ["diff", value_cubin, path]):
            code, _, err = run_cli(capsys, *args)
            assert code == 0 or (code == 2 and len(err.strip().splitlines()) == 1), (start, args[0], err)


def test_kernels_are_named_by_the_section_header_not_its_symbol():
    text = ("\t.section\t.text._Z4testPi,\"ax\",@progbits\n_Z4testPi:\n.text._Z4testP\x97:\n"
            "        /*0000*/                   LDC R1, c[0x0][0x28] ;\n.L_x_0:\n"
            "        /*0010*/                   BRA `(.L_x_0) ;\n"
            "\t.section\t.nv.shared._Z4testPi,\"aw\",@nobits\n")
    assert parse_disassembly(text) == {"_Z4testPi": {0: "LDC R1, c[0x0][0x28]", 0x10: "BRA `(.L_x_0)"}}
    assert parse_labels(text) == {"_Z4testPi": {".L_x_0": 0x10}}
    # without .section lines (an older nvdisasm's layout), the label names the kernel as before
    assert parse_disassembly(".text.k:\n /*0000*/ EXIT ;\n") == {"k": {0: "EXIT"}}


# --- 4: sm_5x control words -----------------------------------------------------------------------------------------

@needs_ptxas12
def test_dump_prints_a_control_word_equal_to_the_previous_one(tmp_path, capsys):
    data = bytearray(compile_cubin(template_path("value"), "sm_50", {"VALUE": "0xcc"}))
    kernel = Cubin(bytes(data), "v50").kernels["_Z4testPi"]
    first = data[kernel.code_offset:kernel.code_offset + 8]
    bundles = len(kernel.code) // 32
    for b in range(bundles):  # every bundle gets the first one's control word
        data[kernel.code_offset + 32 * b:kernel.code_offset + 32 * b + 8] = first
    path = tmp_path / "same.cubin"
    path.write_bytes(bytes(data))
    code, text, err = run_cli(capsys, "dump", path, "-k", "test")
    assert code == 0, err
    controls = [ln.split(":")[0].strip() for ln in text.splitlines() if ln.endswith("(control)")]
    assert controls == [f"{32 * b:#06x}" for b in range(bundles)]


# --- 5 and 6: compressed cubins -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def rdc_object(tmp_path_factory):
    """An object built with -rdc=true: CUDA 13 stores its cubin zstd-compressed by default."""
    if find_tool("nvcc") is None:
        pytest.skip("nvcc not found (CUDA toolkit not installed)")
    obj = tmp_path_factory.mktemp("sassrdc") / "rdc.o"
    _nvcc("-arch=sm_90", "-rdc=true", "-c", "-o", obj, template_path("value"))
    if not any(im.kind == "cubin" and im.compression == "zstd" for im in find_images(obj.read_bytes(), "rdc.o")):
        pytest.skip("this nvcc does not store the -rdc=true cubin zstd-compressed")
    return obj


def test_without_zstandard_every_command_says_why(rdc_object, capsys, monkeypatch, tmp_path):
    """dump/run said "no kernel 'test' in any readable cubin", inspect "no kernels" (exit 0), diff "no kernel in X
    or X": the cubin was there, only unreadable for want of the zstandard module."""
    monkeypatch.setitem(sys.modules, "zstandard", None)  # `import zstandard` raises ImportError
    code, text, err = run_cli(capsys, "kernels", rdc_object)
    assert code == 0 and "install the 'zstandard' package" in text, err
    for args in (["dump", rdc_object, "-k", "test"], ["run", rdc_object, "-k", "test"], ["inspect", rdc_object],
                 ["inspect", rdc_object, "-k", "test"], ["diff", rdc_object, rdc_object]):
        code, _, err = run_cli(capsys, *args)
        assert_one_line_error(code, err, "rdc.o", "cubin sm_90", "install the 'zstandard' package")
    code, _, err = run_cli(capsys, "patch", rdc_object, "-k", "test", "--old", "0xcc", "--new", "0xdd")
    assert_one_line_error(code, err, "stored compressed (zstd)", "--no-compress")


@needs_nvcc
def test_a_kernel_missing_from_the_readable_cubins_names_the_unreadable_ones(tmp_path, capsys, monkeypatch):
    """An -rdc=true executable: the linked cubin is plain, the relocatable one zstd."""
    exe = tmp_path / "rdcexe"
    _nvcc("-arch=sm_90", "-rdc=true", "-o", exe, template_path("article"))
    if not any(im.kind == "cubin" and im.compression == "zstd" for im in find_images(exe.read_bytes(), "rdcexe")):
        pytest.skip("this nvcc does not store the relocatable cubin zstd-compressed")
    monkeypatch.setitem(sys.modules, "zstandard", None)
    code, text, err = run_cli(capsys, "dump", exe, "-k", "test")
    assert code == 0, err
    code, _, err = run_cli(capsys, "dump", exe, "-k", "nope")
    assert_one_line_error(code, err, "no kernel 'nope'", "1 cubin could not be read", "zstandard")


def test_patch_of_an_rdc_object_names_the_flag_that_helps(rdc_object, capsys):
    """It said "rebuild without -Xfatbin -compress-all", a flag never passed: -rdc=true compresses by default."""
    code, _, err = run_cli(capsys, "patch", rdc_object, "-k", "test", "--old", "0xcc", "--new", "0xdd")
    assert_one_line_error(code, err, "stored compressed (zstd)", "nvcc --no-compress", "-rdc=true")


@needs_nvcc
def test_no_compress_makes_an_rdc_object_patchable(rdc_object, tmp_path, capsys):
    obj = tmp_path / "plain.o"
    _nvcc("-arch=sm_90", "-rdc=true", "-c", "--no-compress", "-o", obj, template_path("value"))
    code, _, err = run_cli(capsys, "patch", obj, "-k", "test", "--old", "0xcc", "--new", "0xdd")
    assert code == 0, err


# --- 7 .. 11: options ----------------------------------------------------------------------------------------------

def test_negative_top_is_refused(capsys, tmp_path):
    """diff --top -1 hid the only changed mnemonic (a slice [:-1]); inspect's most_common(-1) dropped the last."""
    for args in (["inspect", tmp_path / "a.cubin", "--top", "-1"],
                 ["diff", tmp_path / "a.cubin", tmp_path / "b.cubin", "--top", "-1"]):
        code, _, err = run_cli(capsys, *args)
        assert_one_line_error(code, err, "--top", "-1")


@needs_nvcc
def test_top_zero_hides_the_mix(value_cubin, capsys):
    code, text, err = run_cli(capsys, "inspect", value_cubin, "--top", "0", "--loops")
    assert code == 0, err
    assert "STG" not in text and not any(ln.rstrip().endswith(":") for ln in text.splitlines())


@needs_nvcc
def test_run_backend_cupy_without_cupy_names_cupy(value_cubin, capsys, monkeypatch):
    """With cuda-bindings installed and no CuPy it said "neither binding is installed here"."""
    from mscred.sass import run

    monkeypatch.setattr(run, "_driver", lambda: object())  # as if cuda-bindings were installed
    monkeypatch.setitem(sys.modules, "cupy", None)
    code, _, err = run_cli(capsys, "run", value_cubin, "-k", "test", "--backend", "cupy")
    assert_one_line_error(code, err, "--backend cupy needs CuPy")
    assert "neither" not in err


def test_probe_values_equal_as_numbers_are_refused(capsys):
    """0xcc,204 compile to the same code, as 0xcc,0xcc does (which was refused): compared as the compiler reads
    them (octal 0314 and 204u too); refused before anything is compiled."""
    for values, shown in (("0xcc,204", "0xcc = 204"), ("0314,0xdecc,0xCC", "0314 = 0xCC"), ("204u,204", "204u = 204"),
                          ("0xcc,0xcc", "0xcc")):
        code, _, err = run_cli(capsys, "probe", "--arch", "sm_90", "--values", values)
        assert_one_line_error(code, err, "--values", shown, "must differ")


def test_probe_values_that_differ_pass_the_check():
    from mscred.sass.probe import check_distinct, value_key

    assert len({value_key(v) for v in ("0", "v0", "v3", "v6")}) == 4
    assert len({value_key(v) for v in ("0xcc", "0xdecc", "0x12345678", "0x9abcdef1")}) == 4
    check_distinct(["0", "v0", "v3", "v6"])


@pytest.mark.parametrize("command", ["patch", "probe"])
def test_an_output_path_ending_in_a_separator_is_refused(command, capsys, tmp_path):
    """-o outdir/ created a regular file named outdir."""
    target = tmp_path / "outdir"
    if command == "patch":
        src = tmp_path / "in.cubin"
        src.write_bytes(b"x")
        args = ["patch", src, "-k", "test", "--old", "0xcc", "--new", "0xdd", "-o", f"{target}/"]
    else:
        args = ["probe", "--arch", "sm_90", "-o", f"{target}/"]
    code, _, err = run_cli(capsys, *args)
    assert_one_line_error(code, err, f"{target}/", "names a folder")
    assert not target.exists()


def _fake_nvcc(monkeypatch):
    """An nvcc 13.0 that builds sm_75 .. sm_90 only, and no CUDA 12 ptxas: compile_cubin's routing, without running
    anything."""
    monkeypatch.setattr(toolchain, "find_tool", lambda name: "/fake/nvcc" if name == "nvcc" else None)
    monkeypatch.setattr(toolchain, "nvcc_archs", lambda nvcc: (75, 80, 90))
    monkeypatch.setattr(toolchain, "tool_release", lambda path: "13.0")


def test_an_arch_newer_than_nvcc_knows_is_not_sent_to_the_old_ptxas(monkeypatch, capsys):
    """sm_999 said "ptxas 12.9 -arch=sm_999 failed": every arch missing from nvcc's list went to the CUDA 12 ptxas."""
    _fake_nvcc(monkeypatch)
    with pytest.raises(InputError, match=r"nvcc 13\.0 cannot build sm_999 \(it builds sm_75, sm_80, sm_90\)"):
        compile_cubin(template_path("value"), "sm_999")
    code, _, err = run_cli(capsys, "probe", "--arch", "sm_999")
    assert_one_line_error(code, err, "nvcc 13.0 cannot build sm_999")
    # an arch older than nvcc's oldest still goes the CUDA 12 ptxas way (here: none found, said so)
    with pytest.raises(InputError, match="no CUDA 12 ptxas"):
        compile_cubin(template_path("value"), "sm_52")
