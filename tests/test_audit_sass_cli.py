"""`mscred sass` from a kernel engineer's audit of the command group: static libraries, fatbins cut short or damaged,
PTX-only files, and option values that can match nothing (negative or too wide field values, a --grep that is not
hex, an --arch that is no architecture, an --init wider than a word). Each is bad input (exit 2, one line naming the
option or file) or a normal answer, and a refused option costs no file reading and no compile."""
from __future__ import annotations

import struct
import subprocess

import pytest

pytest.importorskip("elftools", reason="pyelftools (the `sass` extra) is not installed")

from mscred.cli.main import main  # noqa: E402
from mscred.sass.fatbin import FATBIN_MAGIC, cubins  # noqa: E402
from mscred.sass.probe import template_path  # noqa: E402
from mscred.sass.toolchain import compile_cubin, find_tool  # noqa: E402

# (the sass audit's helpers and its module-scoped cubin fixture, shared rather than written again)
from test_sass_audit import needs_ptxas12, run_cli, value_cubin  # noqa: E402,F401


def one_line_error(capsys, *args) -> str:
    """``mscred sass ARGS`` refused as bad input: exit 2, one ``mscred: error:`` line, nothing on stdout."""
    code, out, err = run_cli(capsys, *args)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("mscred: error: "), err
    assert out == ""
    return lines[0]


@pytest.fixture
def not_elf(tmp_path):
    """A file no sass command can read: an option refused before the file is read names the option, not it."""
    path = tmp_path / "notes.txt"
    path.write_text("not machine code\n")
    return path


def _fatbin(*entries: bytes) -> bytes:
    body = b"".join(entries)
    return struct.pack("<IHHQ", FATBIN_MAGIC, 1, 16, len(body)) + body


def _entry(kind: int, arch: int, payload: bytes, header_size: int = 64) -> bytes:
    """A fatbin entry (uncompressed): the 64-byte header fatbin.py documents, then the payload."""
    header = struct.pack("<HHIQIIHHIIIQQQ", kind, 0x101, header_size, len(payload), 0, 0, 0, 0, arch, 0, 0, 0x11,
                         0, len(payload))
    return header + payload


# --- static libraries --------------------------------------------------------------------------------------------

def test_a_static_library_is_read_and_patched_in_place_of_its_member(tmp_path, capsys):
    """`nvcc -lib` writes an ar archive of objects; cuobjdump reads it, sass called it "not an ELF file"."""
    if find_tool("nvcc") is None:
        pytest.skip("nvcc not found (CUDA toolkit not installed)")
    lib = tmp_path / "libvalue.a"
    proc = subprocess.run([find_tool("nvcc"), "-lib", "-arch=sm_90", "-DVALUE=0xcc", "-o", str(lib),
                           str(template_path("value"))], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"nvcc could not build a static library: {proc.stderr.strip()[:200]}")
    code, text, err = run_cli(capsys, "kernels", lib)
    assert code == 0 and "cubin sm_90" in text and "_Z4testPi" in text, err
    out = tmp_path / "libvalue.dd.a"
    code, text, err = run_cli(capsys, "patch", lib, "-k", "test", "--old", "0xcc", "--new", "0xdd", "-o", out)
    assert code == 0, err
    before, after = lib.read_bytes(), out.read_bytes()
    changed = [i for i in range(len(before)) if before[i] != after[i]]
    assert len(changed) == 1 and (before[changed[0]], after[changed[0]]) == (0xCC, 0xDD)
    fields = [i.field(32, 64) for _, c in cubins(after, str(out)) for k in c.kernels.values() for i in k.instructions]
    assert 0xDD in fields and 0xCC not in fields


def test_a_damaged_static_library_is_bad_input(tmp_path, capsys):
    lib = tmp_path / "libcut.a"
    lib.write_bytes(b"!<arch>\n" + b"k.o/            0           0     0     644     9999      `\n" + b"\x7fELF")
    assert "libcut.a: damaged static library" in one_line_error(capsys, "kernels", lib)
    lib.write_bytes(b"!<arch>\n")
    assert "static library without device code" in one_line_error(capsys, "kernels", lib)


# --- fatbins cut short or damaged --------------------------------------------------------------------------------

def test_a_fatbin_cut_inside_its_header_is_not_an_empty_success(tmp_path, capsys):
    """10 bytes of a fatbin header listed nothing and exited 0 (inspect: "no kernels")."""
    path = tmp_path / "cut.fatbin"
    path.write_bytes(_fatbin()[:10])
    for command in (["kernels", path], ["inspect", path]):
        assert "fatbin header at byte 0x0 cut short (10 of 16 bytes)" in one_line_error(capsys, *command)
    path.write_bytes(_fatbin())
    assert "fatbin without entries" in one_line_error(capsys, "kernels", path)


def test_a_fatbin_entry_running_past_the_end_is_named_as_such(tmp_path, capsys):
    """A damaged header size sent the reader past the file: "payload is not a cubin" at a byte the file lacks."""
    path = tmp_path / "bad.fatbin"
    path.write_bytes(_fatbin(_entry(2, 90, b"\x7fELF" + bytes(60), header_size=0xFFFFFF00)))
    line = one_line_error(capsys, "kernels", path)
    assert "fatbin entry at byte 0x10 runs past the fatbin's end" in line and "0xffffff" not in line


def test_a_ptx_only_file_says_so_rather_than_no_such_kernel(tmp_path, capsys):
    path = tmp_path / "ptx.fatbin"
    path.write_bytes(_fatbin(_entry(1, 90, b".version 8.8\n.target sm_90\n.visible .entry _Z4testPi()\n{ ret; }\n")))
    code, text, _ = run_cli(capsys, "kernels", path)
    assert code == 0 and text.startswith("ptx sm_90")
    for command in (["dump", path, "-k", "test"], ["run", path, "-k", "test"],
                    ["patch", path, "-k", "test", "--old", "0xcc", "--new", "0xdd"]):
        line = one_line_error(capsys, *command)
        assert "no cubin, only PTX (sm_90)" in line and "nvcc -arch=sm_90" in line, line
    assert not (tmp_path / "ptx.fatbin.patched").exists()


# --- patch: values and selectors that can match nothing ----------------------------------------------------------

@pytest.mark.parametrize("option", ["--old", "--new"])
def test_a_negative_field_value_is_refused_by_its_option(option, not_elf, capsys):
    """--old -1 read as "no instruction has immediate bits [32, 64) = -0x1"; --new -1 blamed the file."""
    values = {"--old": "0xcc", "--new": "0xdd", option: "-1"}
    line = one_line_error(capsys, "patch", not_elf, "-k", "test", "--old", values["--old"], "--new", values["--new"])
    assert line.startswith(f"mscred: error: {option} -1: a field holds an unsigned number"), line


def test_a_field_value_wider_than_the_field_names_its_option(value_cubin, tmp_path, capsys):
    out = tmp_path / "wide.cubin"
    line = one_line_error(capsys, "patch", value_cubin, "-k", "test", "--old", "0xcc", "--new", "0x100000000",
                          "-o", out)
    assert line == "mscred: error: --new 4294967296 (= 0x100000000): does not fit in the 32-bit field, bits [32, 64)"
    line = one_line_error(capsys, "patch", value_cubin, "-k", "test", "--field", "register", "--old", "5",
                          "--new", "300", "-o", out)
    assert line.startswith("mscred: error: --new 300 (= 0x12c): does not fit in the 8-bit field"), line
    line = one_line_error(capsys, "patch", value_cubin, "-k", "test", "--old", "0x1000000cc", "--new", "0xdd",
                          "-o", out)
    assert line.startswith("mscred: error: --old 4294967500 (= 0x1000000cc): does not fit"), line
    assert not out.exists()


@pytest.mark.parametrize("selector, value, fragment", [("--grep", "zz", "--grep 'zz': give hex digits"),
                                                        ("--grep", "", "--grep '': give hex digits"),
                                                        ("--instruction", " ", "--instruction '': give a mnemonic")])
def test_a_selector_that_can_select_nothing_or_everything_is_refused(selector, value, fragment, not_elf, capsys):
    """--grep zz filtered every instruction out without a word; an empty --grep or --instruction selected all."""
    line = one_line_error(capsys, "patch", not_elf, "-k", "test", "--old", "0xcc", "--new", "0xdd", selector, value)
    assert fragment in line, line


def test_no_match_under_a_selector_names_it_and_what_holds_the_value(value_cubin, tmp_path, capsys):
    """Without the selectors named, "no instruction has ... = 0xcc" read as if the value were wrong."""
    line = one_line_error(capsys, "patch", value_cubin, "-k", "test", "--old", "0xcc", "--new", "0xdd",
                          "--at", "0x30", "-o", tmp_path / "x.cubin")
    assert "= 0xcc among those --at 0x30 select (without them: sm_90 +0x20)" in line, line


def test_grep_takes_the_words_as_cuobjdump_writes_them(value_cubin, tmp_path, capsys):
    """cuobjdump -sass prints `/* 0x000000ccff057435 */`: with its 0x, the --grep matched no instruction."""
    out = tmp_path / "grep.cubin"
    code, text, err = run_cli(capsys, "patch", value_cubin, "-k", "test", "--old", "0xcc", "--new", "0xdd",
                              "--grep", "0x000000ccff057435", "-o", out)
    assert code == 0 and f"wrote {out}" in text, err


# --- --arch, run's numbers, probe's refusals before any compile --------------------------------------------------

@pytest.mark.parametrize("arch", ["foo", "", "compute_90", "sm_"])
def test_an_arch_that_names_no_architecture_is_a_usage_error(arch, not_elf, capsys):
    """--arch foo read as "no cubin for sm_foo", as if the file lacked a real architecture."""
    for command in (["dump", not_elf, "-k", "test"], ["inspect", not_elf], ["probe"]):
        line = one_line_error(capsys, *command, "--arch", arch)
        assert f"Invalid value for '--arch': {arch!r} is not a GPU architecture" in line, line


def test_probe_takes_the_arch_spellings_the_other_commands_take(monkeypatch, capsys):
    """`probe --arch 90a` went to nvcc as -arch=90a ("Unsupported gpu architecture"), where dump takes 90a."""
    import mscred.sass.probe as probe_module

    seen = []
    monkeypatch.setattr(probe_module, "probe", lambda arch, *a, **k: seen.append(arch) or pytest.skip("recorded"))
    with pytest.raises(pytest.skip.Exception):
        main(["sass", "probe", "--arch", "90a"])
    assert seen == ["sm_90a"]


def test_run_init_wider_than_a_word_is_refused(not_elf, capsys):
    """0x100000000 was cut to 0 by the int32 buffer without a word."""
    line = one_line_error(capsys, "run", not_elf, "-k", "test", "--init", "0x100000000")
    assert line.startswith("mscred: error: --init 0x100000000: does not fit in a 32-bit word"), line
    line = one_line_error(capsys, "run", not_elf, "-k", "test", "--grid", str(1 << 31))
    assert "Invalid value for '--grid'" in line


def test_probe_refuses_before_compiling(monkeypatch, tmp_path, capsys):
    """A folder as --out was refused only at the write, a negative value (-5 is stored as 0xfffffffb) as "not all
    found at one instruction": both after every variant was compiled."""
    import mscred.sass.probe as probe_module

    def no_compile(*args, **kwargs):
        raise AssertionError("compiled before refusing the options")

    monkeypatch.setattr(probe_module, "compile_variants", no_compile)
    line = one_line_error(capsys, "probe", "--arch", "sm_90", "-o", tmp_path)
    assert line == f"mscred: error: --out {tmp_path}: is a folder; give a file name"
    line = one_line_error(capsys, "probe", "--arch", "sm_90", "--values", "0xcc,-5")
    assert line.startswith("mscred: error: probe value -5: immediate mode needs values from 1 to 2**32 - 1"), line
    line = one_line_error(capsys, "probe", "--arch", "sm_30")
    assert line == "mscred: error: --arch: sm_30: architectures before sm_50 are not supported"


# --- kernels on sm_5x --------------------------------------------------------------------------------------------

@needs_ptxas12
def test_kernels_counts_the_control_words_of_sm50_apart(tmp_path, capsys):
    """On sm_5x one 64-bit word in four is a control word: "code 6 x 64-bit words" understated the code by them."""
    path = tmp_path / "value50.cubin"
    path.write_bytes(compile_cubin(template_path("value"), "sm_50", {"VALUE": "0xcc"}))
    code, text, err = run_cli(capsys, "kernels", path)
    kernel = next(iter(cubins(path.read_bytes(), str(path))[0][1].kernels.values()))
    words = len(kernel.code) // 8
    assert code == 0, err
    assert f"code {words * 3 // 4} x 64-bit words (padding included) + {words // 4} control words" in text, text
