"""`mscred sass`: the items left by the earlier audits, and what a second audit of odd inputs found.

1. One reader of C integer literals for probe's values and every numeric option (0314 octal, 204u, 0x10UL,
   1'000), agreeing with what nvcc compiles; Python's spellings and 08 refused with one line.
2. A PTX-only file: every command that needs machine code refuses it (exit 2) with what it holds and how to build
   SASS; `kernels` lists it and says so; a PTX text file is named as such.
3. patch's "no instruction matched" message comes from the one pass that searched.
4. -o under missing folders creates them, as every mscred output does; one under a file is refused before work.
Then: empty files, devices, pipes, large files of another kind, unreadable files, a closed or broken stdout, probe's
--placeholder / --values / --template refusals, a diff whose second input is missing.
"""
from __future__ import annotations

import os
import struct
import subprocess
import sys
import threading
from pathlib import Path

import pytest

pytest.importorskip("elftools", reason="pyelftools (the `sass` extra) is not installed")

import mscred  # noqa: E402
from mscred.errors import InputError  # noqa: E402
from mscred.sass.literals import c_integer, parse_c_integer  # noqa: E402
from mscred.sass.toolchain import find_tool  # noqa: E402

from test_audit_sass_cli import _entry, _fatbin, one_line_error  # noqa: E402
from test_sass_audit import needs_nvcc, run_cli, value_cubin  # noqa: E402,F401

ROOT = Path(__file__).resolve().parents[1]
PTX = b".version 8.8\n.target sm_90\n.address_size 64\n.visible .entry _Z4testPi()\n{ ret; }\n"


@pytest.fixture
def no_compile(monkeypatch):
    """probe's compiles replaced by a failure: a refusal must come before them."""
    import mscred.sass.probe as probe_module

    def refuse(*args, **kwargs):
        raise AssertionError("compiled before refusing the options")

    monkeypatch.setattr(probe_module, "compile_variants", refuse)


@pytest.fixture
def ptx_fatbin(tmp_path):
    path = tmp_path / "ptx.fatbin"
    path.write_bytes(_fatbin(_entry(1, 90, PTX)))
    return path


# --- 1: C integer literals -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, number", [
    ("204", 204), ("0xcc", 0xCC), ("0XCC", 0xCC), ("0314", 204), ("0", 0), ("00", 0), ("0u", 0), ("204u", 204),
    ("204U", 204), ("0x10UL", 16), ("0x10ul", 16), ("204lu", 204), ("204ll", 204), ("204ULL", 204), ("0XCCull", 204),
    ("204z", 204), ("1'000", 1000), ("0xdead'beef", 0xDEADBEEF), ("0b101", 5), ("0B1'0", 2), ("03'14", 204),
    ("-1", -1), ("+5", 5), (" 7 ", 7), ("- 1", -1), ("0x9abcdef1", 0x9ABCDEF1)])
def test_a_c_integer_literal_reads_as_the_compiler_reads_it(text, number):
    assert parse_c_integer(text) == number


@pytest.mark.parametrize("text", ["08", "09", "1_000", "0o17", "v3", "", "0x", "0b", "0b2", "1''0", "'1", "1'",
                                  "0x'10", "204Ll", "204lL", "204uu", "12abc", "1.5", "1e3", "--1", "+-1", "0xg"])
def test_what_is_no_c_integer_literal_is_not_read_as_one(text):
    assert parse_c_integer(text) is None
    with pytest.raises(InputError, match="not an integer literal"):
        c_integer(text, "--old")


def test_a_near_miss_says_what_to_write():
    for text, hint in (("08", "a leading 0 makes it octal"), ("1_000", "C separates digits with '"),
                       ("0o17", "C writes octal with a leading 0")):
        with pytest.raises(InputError, match=hint):
            c_integer(text, "probe value")


def test_probe_and_the_options_share_one_reader():
    """probe's _parse_int read 0314 as "not an integer" (Python's int(x, 0)) where the CLI's _c_value read it as
    octal 204; patch's --old took 1_000 and 0o17, which the compiler refuses."""
    from mscred.cli.sass import _int
    from mscred.sass.probe import _immediate_value, value_key

    for text in ("0314", "204u", "0x10UL", "1'000", "0b101"):
        assert _int(text, "--old") == _immediate_value(text, 32) == value_key(text) == parse_c_integer(text)
    for text in ("1_000", "0o17", "08"):
        with pytest.raises(InputError):
            _int(text, "--old")
        with pytest.raises(InputError):
            _immediate_value(text, 32)


def test_probe_takes_c_literals_and_refuses_the_rest_before_compiling(monkeypatch, capsys):
    import mscred.sass.probe as probe_module

    seen = []

    def record(template, arch, values, *args, **kwargs):
        seen.append(values)
        raise InputError("recorded")

    monkeypatch.setattr(probe_module, "compile_variants", record)
    line = one_line_error(capsys, "probe", "--arch", "sm_90", "--values", "0314,0x10UL,1'000,0b101")
    assert line == "mscred: error: recorded" and seen == [["0314", "0x10UL", "1'000", "0b101"]]
    for values, fragment in (("0xcc,08", "probe value '08': not an integer literal: a leading 0"),
                             ("0xcc,1_000", "probe value '1_000': not an integer literal: C separates"),
                             ("0xcc,0o17", "probe value '0o17'"), ("0314,204u", "0314 = 204u given more than once")):
        assert fragment in one_line_error(capsys, "probe", "--arch", "sm_90", "--values", values)
    assert len(seen) == 1


@needs_nvcc
def test_probe_finds_the_values_as_nvcc_compiled_them(capsys):
    """The reader agrees with nvcc: each variant holds the number the reader made of its text."""
    code, out, err = run_cli(capsys, "probe", "--arch", "sm_90", "--values", "0314,0x10UL,1'000,0b101,0x9abcdef1u",
                             "--json")
    assert code == 0, err
    assert '"immediate_bits": [32, 64]' in out


@needs_nvcc
def test_patch_reads_old_and_new_as_probe_does(value_cubin, tmp_path, capsys):
    """--old 0314 (the template's 0xcc, octal) was "not an integer"."""
    out = tmp_path / "v.cubin"
    code, text, err = run_cli(capsys, "patch", value_cubin, "-k", "test", "--old", "0314", "--new", "0xddu",
                              "--at", "0x20", "-o", out)
    assert code == 0, err
    assert "0xcc -> 0xdd" in text
    line = one_line_error(capsys, "patch", value_cubin, "-k", "test", "--old", "0o314", "--new", "0xdd")
    assert line.startswith("mscred: error: --old '0o314': not an integer literal"), line


def test_register_mode_takes_zero_as_the_compiler_writes_it():
    from mscred.sass.probe import _is_zero

    assert all(_is_zero(v) for v in ("0", "00", "0x0", "0u", " 0 "))
    assert not any(_is_zero(v) for v in ("v0", "1", "0x10"))


# --- 2: PTX only ---------------------------------------------------------------------------------------------------

def test_inspect_and_diff_of_a_ptx_only_file_say_so(ptx_fatbin, tmp_path, capsys):
    """inspect printed "no kernels" with exit 0; diff against a PTX-only build listed every kernel as removed."""
    for command in (["inspect", ptx_fatbin], ["inspect", ptx_fatbin, "--arch", "sm_90"],
                    ["diff", ptx_fatbin, ptx_fatbin], ["inspect", ptx_fatbin, "--loops", "--json"]):
        line = one_line_error(capsys, *command)
        assert "ptx.fatbin: no cubin, only PTX (sm_90): no machine code (SASS)" in line, line
        assert "nvcc -arch=sm_90 (or -gencode arch=compute_90,code=sm_90)" in line, line


def test_kernels_lists_a_ptx_only_file_and_says_what_it_means(ptx_fatbin, capsys):
    code, out, err = run_cli(capsys, "kernels", ptx_fatbin)
    assert code == 0 and out.startswith("ptx sm_90")
    assert err.startswith("note: ") and "only PTX (sm_90)" in err and "nvcc -arch=sm_90" in err


@needs_nvcc
def test_diff_against_a_ptx_only_build_is_refused(value_cubin, ptx_fatbin, capsys):
    for old, new in ((value_cubin, ptx_fatbin), (ptx_fatbin, value_cubin)):
        assert "only PTX" in one_line_error(capsys, "diff", old, new)


@needs_nvcc
def test_a_real_ptx_only_build_is_named_in_every_command(tmp_path, capsys):
    """nvcc -gencode arch=compute_90,code=compute_90: the PTX is compressed (zstd) by CUDA 13."""
    path = tmp_path / "app.fatbin"
    proc = subprocess.run([find_tool("nvcc"), "-fatbin", "-gencode", "arch=compute_90,code=compute_90", "-o",
                           str(path), str(ROOT / "src/mscred/sass/templates/value.cu")], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"nvcc could not build the input: {proc.stderr.strip()[:200]}")
    for command in (["inspect", path], ["dump", path, "-k", "test"], ["diff", path, path],
                    ["patch", path, "-k", "test", "--old", "0xcc", "--new", "0xdd"], ["run", path, "-k", "test"]):
        line = one_line_error(capsys, *command)
        assert "only PTX (sm_90)" in line and "code=sm_90" in line, line


@needs_nvcc
def test_an_arch_with_ptx_but_no_cubin_says_so(value_cubin, tmp_path, capsys):
    path = tmp_path / "mixed.fatbin"
    path.write_bytes(_fatbin(_entry(2, 90, value_cubin.read_bytes()),
                             _entry(1, 100, PTX.replace(b"sm_90", b"sm_100"))))
    line = one_line_error(capsys, "inspect", path, "--arch", "sm_100")
    assert "no cubin for sm_100 (and PTX for it, which holds no machine code) (the file has sm_90)" in line, line


def test_a_ptx_text_file_is_named_with_how_to_assemble_it(tmp_path, capsys):
    """`nvcc -ptx` output read as "not an ELF file (no \\x7fELF magic)"."""
    path = tmp_path / "value.ptx"
    path.write_bytes(b"//\n// Generated by NVIDIA NVVM Compiler\n//\n\n" + PTX)
    for command in (["inspect", path], ["kernels", path], ["dump", path, "-k", "test"]):
        line = one_line_error(capsys, *command)
        assert "value.ptx: PTX text (.target sm_90), not machine code (SASS)" in line, line
        assert f"ptxas -arch=sm_90 -o value.cubin {path}" in line, line


# --- 3: patch's message from one pass -------------------------------------------------------------------------------

@needs_nvcc
def test_no_match_under_a_selector_reads_the_file_once(value_cubin, tmp_path, monkeypatch, capsys):
    """The message's "(without them: ...)" came from a second find_matches over the whole file."""
    import mscred.sass.patch as patch_module

    calls = []
    real = patch_module.find_images
    monkeypatch.setattr(patch_module, "find_images", lambda *a, **k: calls.append(a[1]) or real(*a, **k))
    for selector in (["--at", "0x30"], ["--grep", "eedd2"], ["--at", "0x30", "--grep", "ff05"]):
        calls.clear()
        line = one_line_error(capsys, "patch", value_cubin, "-k", "test", "--old", "0xcc", "--new", "0xdd",
                              *selector, "-o", tmp_path / "x.cubin")
        assert "(without them: sm_90 +0x20)" in line, line
        assert len(calls) == 1, calls
    calls.clear()
    line = one_line_error(capsys, "patch", value_cubin, "-k", "test", "--old", "0xab", "--new", "0xdd", "--at", "0x20")
    assert line.endswith("= 0xab among those --at 0x20 select"), line
    assert len(calls) == 1 and not (tmp_path / "x.cubin").exists()


# --- 4: output folders ---------------------------------------------------------------------------------------------

@needs_nvcc
def test_patch_output_under_missing_folders_creates_them(value_cubin, tmp_path, capsys):
    """As train --out and detect --out do (mscred.atomic.atomic_path)."""
    out = tmp_path / "new" / "dir" / "v.cubin"
    code, text, err = run_cli(capsys, "patch", value_cubin, "-k", "test", "--old", "0xcc", "--new", "0xdd", "-o", out)
    assert code == 0 and f"wrote {out}" in text, err
    assert out.read_bytes() != value_cubin.read_bytes() and len(out.read_bytes()) == len(value_cubin.read_bytes())


def test_an_output_under_a_file_is_refused_before_any_work(tmp_path, no_compile, monkeypatch, capsys):
    """probe compiled its variants and only then failed to write -o notes.txt/answer.json."""
    import mscred.sass.patch as patch_module

    notes = tmp_path / "notes.txt"
    notes.write_text("mine\n")
    line = one_line_error(capsys, "probe", "--arch", "sm_90", "-o", notes / "answer.json")
    assert line == f"mscred: error: {notes / 'answer.json'}: {notes} is a file, not a folder"
    monkeypatch.setattr(patch_module, "patch_file", lambda *a, **k: pytest.fail("patched before refusing"))
    line = one_line_error(capsys, "patch", notes, "-k", "test", "--old", "0xcc", "--new", "0xdd",
                          "-o", notes / "x.cubin")
    assert line.endswith(f"{notes} is a file, not a folder"), line
    assert notes.read_text() == "mine\n"


def test_a_default_patch_output_that_is_a_folder_is_refused_first(tmp_path, monkeypatch, capsys):
    import mscred.sass.patch as patch_module

    src = tmp_path / "in.cubin"
    src.write_bytes(b"\x7fELF")
    (tmp_path / "in.cubin.patched").mkdir()
    monkeypatch.setattr(patch_module, "patch_file", lambda *a, **k: pytest.fail("patched before refusing"))
    line = one_line_error(capsys, "patch", src, "-k", "test", "--old", "0xcc", "--new", "0xdd")
    assert "in.cubin.patched (the default output): is a folder" in line, line


# --- odd inputs ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("command", [["kernels"], ["inspect"], ["dump", "-k", "test"],
                                     ["patch", "-k", "test", "--old", "0xcc", "--new", "0xdd"]])
def test_an_empty_file_is_said_to_be_empty(command, tmp_path, capsys):
    path = tmp_path / "empty.cubin"
    path.write_bytes(b"")
    line = one_line_error(capsys, command[0], path, *command[1:])
    assert line == f"mscred: error: {path}: an empty file (0 bytes)"
    assert not (tmp_path / "empty.cubin.patched").exists()


def test_a_device_is_not_called_missing(capsys):
    """/dev/null was "no such file"."""
    for command in (["inspect", "/dev/null"], ["patch", "/dev/null", "-k", "t", "--old", "1", "--new", "2"]):
        line = one_line_error(capsys, *command)
        assert line.startswith("mscred: error: /dev/null: not a regular file"), line


def test_an_elf_header_cut_short_says_so(tmp_path, capsys):
    path = tmp_path / "cut.o"
    path.write_bytes(b"\x7fELF\x02\x01\x01" + bytes(53))
    assert "damaged ELF file: its header is cut short (60 of 64 bytes)" in one_line_error(capsys, "kernels", path)


def test_a_large_file_of_another_kind_is_refused_on_its_first_bytes(tmp_path, monkeypatch, capsys):
    """A data file given by mistake was read whole (memory) before "not an ELF file"."""
    path = tmp_path / "data.csv"
    path.write_text("timestamp,s0\n" + "0,1.0\n" * 1000)
    monkeypatch.setattr(Path, "read_bytes", lambda self: pytest.fail(f"read {self} whole"))
    for command in (["inspect", path], ["diff", path, path], ["kernels", path]):
        line = one_line_error(capsys, *command)
        assert "data.csv: not an ELF file" in line, line


def test_an_unreadable_file_is_one_line(ptx_fatbin, monkeypatch, capsys):
    """(As root, chmod 000 reads anyway: the refusal of the file system is simulated.)"""
    import mscred.sass.fatbin as fatbin

    def denied(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(fatbin, "open", denied, raising=False)
    for command in (["inspect", ptx_fatbin], ["patch", ptx_fatbin, "-k", "t", "--old", "1", "--new", "2"]):
        assert one_line_error(capsys, *command) == f"mscred: error: {ptx_fatbin}: Permission denied"


@needs_nvcc
def test_a_named_pipe_is_read(value_cubin, tmp_path, capsys):
    """`mscred sass kernels <(cat x.cubin)` was "no such file"."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)

    def feed():
        with open(fifo, "wb") as f:
            f.write(value_cubin.read_bytes())

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    code, out, err = run_cli(capsys, "kernels", fifo)
    writer.join(timeout=10)
    assert code == 0 and "_Z4testPi" in out, err
    line = one_line_error(capsys, "patch", fifo, "-k", "test", "--old", "0xcc", "--new", "0xdd")
    assert "not a regular file" in line, line   # (nothing to copy or replace: refused before opening it)


def test_diff_checks_both_inputs_before_reading_either(ptx_fatbin, monkeypatch, tmp_path, capsys):
    """A typo in NEW was found only after OLD had been read and disassembled."""
    import mscred.sass.inspect as inspect_module

    monkeypatch.setattr(inspect_module, "inspect_file", lambda *a, **k: pytest.fail("inspected before checking"))
    missing = tmp_path / "typo.cubin"
    assert one_line_error(capsys, "diff", ptx_fatbin, missing) == f"mscred: error: {missing}: no such file"
    assert one_line_error(capsys, "inspect", ptx_fatbin, missing) == f"mscred: error: {missing}: no such file"


def _cli(*args: str, shell_tail: str = "") -> subprocess.CompletedProcess:
    command = " ".join([f"'{sys.executable}'", "-m", "mscred.cli.main", "sass", *(f"'{a}'" for a in args)])
    return subprocess.run(["bash", "-c", command + shell_tail], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(Path(mscred.__file__).parents[1])})


def test_a_closed_stdout_is_refused_rather_than_the_answer_lost(ptx_fatbin):
    """`kernels FILE >&-` printed nothing and exited 0."""
    run = _cli("kernels", str(ptx_fatbin), shell_tail=" >&-")
    assert run.returncode == 2, run.stderr
    assert run.stderr.strip() == "mscred: error: standard output is closed: nothing to print the answer to " \
                                 "(redirect it to a file)"


def test_a_reader_that_stops_early_ends_it_quietly(tmp_path):
    """`| head -1`: no traceback, no "internal error" (click exits 1 on EPIPE)."""
    path = tmp_path / "many.fatbin"
    path.write_bytes(_fatbin(*[_entry(1, 90, PTX) for _ in range(4000)]))
    run = _cli("kernels", str(path), shell_tail=" | head -1; exit ${PIPESTATUS[0]}")
    assert run.stdout.startswith("ptx sm_90") and len(run.stdout.splitlines()) == 1
    assert "Traceback" not in run.stderr and "internal error" not in run.stderr, run.stderr
    assert run.returncode == 1, run.stderr


# --- probe's options -----------------------------------------------------------------------------------------------

def test_probe_refuses_a_placeholder_that_can_change_nothing(tmp_path, no_compile, capsys):
    """--placeholder '' / 'A B' failed in nvcc ("macro names must be identifiers"), one the template never uses
    after four compiles as "not all found at one instruction"."""
    for name in ("", "A B", "1X"):
        line = one_line_error(capsys, "probe", "--arch", "sm_90", "--placeholder", name)
        assert line == f"mscred: error: --placeholder {name!r}: not a C identifier (the macro the values are " \
                       f"passed as, e.g. VALUE)"
    line = one_line_error(capsys, "probe", "--arch", "sm_90", "--placeholder", "VALUEX")
    assert "value.cu: does not use VALUEX" in line, line
    mine = tmp_path / "mine.cu"
    mine.write_text('#include "params.h"\n__global__ void k(int* a) { a[0] = FIELD; }\n')
    code, _, err = run_cli(capsys, "probe", "--arch", "sm_90", "--template", mine, "--placeholder", "OTHER")
    assert code == 1 and "compiled before refusing" in err  # a header of its own may use it: not refused


def test_probe_values_empty_is_not_the_defaults(no_compile, capsys):
    """--values '' ran the default values."""
    line = one_line_error(capsys, "probe", "--arch", "sm_90", "--values", "")
    assert line == "mscred: error: --values: probe needs at least two values to compare"


def test_probe_template_folder_is_named_as_a_folder(tmp_path, no_compile, capsys):
    line = one_line_error(capsys, "probe", "--arch", "sm_90", "--template", tmp_path)
    assert line.startswith(f"mscred: error: --template {tmp_path}: is a folder"), line


def test_probe_api_refuses_equal_values_too(no_compile):
    """The CLI refused 0xcc,204; the Python API compiled them."""
    from mscred.sass.probe import probe

    with pytest.raises(InputError, match="0xcc = 204 given more than once"):
        probe("sm_90", values=["0xcc", "204", "0xdd"])



# --- kernels of one name in two translation units -----------------------------------------------------------------

@pytest.fixture(scope="module")
def unit_library(tmp_path_factory):
    """`nvcc -lib` of three files, each with an anonymous-namespace kernel k: a.cu's and c.cu's store 0xcc, b.cu's
    other code. Their mangled names differ by each file's hash, which stable_name makes equal."""
    if find_tool("nvcc") is None:
        pytest.skip("nvcc not found (CUDA toolkit not installed)")
    folder = tmp_path_factory.mktemp("units")
    bodies = {"a": "a[0] = 0xcc;", "b": "a[0] = a[1] * 3 + a[2];", "c": "a[0] = 0xcc;"}
    for name, body in bodies.items():
        (folder / f"{name}.cu").write_text(f"namespace {{ __global__ void k(int* a) {{ {body} }} }}\n"
                                           f"void launch_{name}(int* p) {{ k<<<1, 1>>>(p); }}\n")
    lib = folder / "libk.a"
    proc = subprocess.run([find_tool("nvcc"), "-lib", "-arch=sm_90", "-o", str(lib),
                           *(str(folder / f"{name}.cu") for name in bodies)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"nvcc could not build a static library: {proc.stderr.strip()[:200]}")
    return lib


def test_diff_pairs_kernels_of_one_name_in_several_units_apart(unit_library, capsys):
    """A library diffed with itself read "2 changed, 1 same": every new k was compared with the last old k."""
    code, out, err = run_cli(capsys, "diff", unit_library, unit_library, "--all")
    assert code == 0, err
    assert "changed" not in out and out.strip().endswith("3 same (3 identical to the instruction)"), out


def test_a_kernel_in_several_units_of_one_arch_is_named_by_its_mangled_names(unit_library, capsys):
    """"kernel 'k' is in 3 cubins (sm_90, sm_90, sm_90); pass --arch": no --arch could pick one."""
    line = one_line_error(capsys, "dump", unit_library, "-k", "k")
    assert "is in 3 cubins (" in line and line.endswith("; name it by its mangled name"), line
    mangled = [part.rsplit(": ", 1)[1] for part in line.split("(", 1)[1].rsplit(")", 1)[0].split("; ")]
    assert len(set(mangled)) == 3 and all(m.startswith("_ZN") for m in mangled), mangled
    code, out, err = run_cli(capsys, "dump", unit_library, "-k", mangled[0])
    assert code == 0 and mangled[0] in out, err


def test_patch_of_a_value_in_two_units_suggests_the_mangled_name(unit_library, capsys, tmp_path):
    """The name that fits three units' kernels is refused as dump refuses it (it said "found 2 times ... or -k with
    the mangled name", and patched whichever unit's k alone held --old); the mangled name picks one."""
    line = one_line_error(capsys, "patch", unit_library, "-k", "k", "--old", "0xcc", "--new", "0xdd")
    assert "is in 3 cubins (" in line and line.endswith("; name it by its mangled name"), line
    mangled = [part.rsplit(": ", 1)[1] for part in line.split("(", 1)[1].rsplit(")", 1)[0].split("; ")]
    out = tmp_path / "libk.dd.a"
    code, text, err = run_cli(capsys, "patch", unit_library, "-k", mangled[2], "--old", "0xcc", "--new", "0xdd",
                              "-o", out)
    assert code == 0 and mangled[2] in text, err


def test_probe_out_over_its_own_template_is_refused(tmp_path, no_compile, capsys):
    """-o my.cu replaced the user's kernel with the JSON answer."""
    mine = tmp_path / "my.cu"
    mine.write_text("__global__ void test(int* a) { a[0] = VALUE; }\n")
    line = one_line_error(capsys, "probe", "--arch", "sm_90", "--template", mine, "-o", mine)
    assert line == f"mscred: error: --out {mine}: is the template itself; give the answer another file name"
    assert "VALUE" in mine.read_text()


@needs_nvcc
def test_bits_past_a_64_bit_instruction_are_refused(value_cubin, tmp_path, capsys):
    """--bits 60:70 on sm_5x's 64-bit words: "internal error: OverflowError" when the word was written back. (The
    sm_90 cubin relabelled sm_52 in its e_flags: read as 64-bit words, no CUDA 12 ptxas needed.)"""
    data = bytearray(value_cubin.read_bytes())
    assert data[49] == 90 and data[50] == 0  # CUDA 13's ELF ABI: the SM number in bits 8..15 of e_flags
    data[49] = 52
    fake = tmp_path / "fake52.cubin"
    fake.write_bytes(bytes(data))
    out = tmp_path / "out.cubin"
    line = one_line_error(capsys, "patch", fake, "-k", "test", "--bits", "60:70", "--old", "0", "--new", "0x3ff",
                          "--at", "0x8", "-o", out)
    assert line == "mscred: error: --bits 60:70: past the end of sm_52's 64-bit instructions (bits 0 to 64)"
    assert not out.exists()


@needs_nvcc
def test_at_a_control_word_says_so(value_cubin, tmp_path, capsys):
    """--at 0x20 on sm_5x (a bundle's control word) read as "no instruction ... among those --at 0x20 select"."""
    data = bytearray(value_cubin.read_bytes())
    data[49] = 52
    fake = tmp_path / "fake52.cubin"
    fake.write_bytes(bytes(data))
    line = one_line_error(capsys, "patch", fake, "-k", "test", "--old", "0", "--new", "1", "--at", "0x20")
    assert line.endswith("--at 0x20 is a control word of kernel '_Z4testPi', not an instruction (sm_52: the first 8 "
                         "bytes of each 32-byte bundle)"), line


def _symtab_header(cubin) -> tuple[bytearray, int]:
    """The cubin's bytes and the offset of its .symtab section header (an Elf64_Shdr), for mutating it."""
    from io import BytesIO

    from elftools.elf.elffile import ELFFile

    data = bytearray(cubin.read_bytes())
    elf = ELFFile(BytesIO(bytes(data)))
    index = next(i for i, section in enumerate(elf.iter_sections()) if section.name == ".symtab")
    return data, elf.header["e_shoff"] + index * elf.header["e_shentsize"]


@needs_nvcc
def test_a_section_offset_past_2_63_is_a_damaged_file(value_cubin, tmp_path, capsys):
    """Found by mutating cubins: "internal error: OverflowError: Python int too large to convert to C ssize_t"."""
    data, header = _symtab_header(value_cubin)
    data[header + 24:header + 32] = (0xF000_0000_0000_0000).to_bytes(8, "little")  # Elf64_Shdr.sh_offset
    path = tmp_path / "far.cubin"
    path.write_bytes(bytes(data))
    for command in (["kernels", path], ["inspect", path], ["patch", path, "-k", "test", "--old", "0xcc", "--new", "1"]):
        line = one_line_error(capsys, *command)
        assert line == f"mscred: error: {path}: damaged ELF file: an offset or size out of range", line


@needs_nvcc
def test_a_symtab_that_is_no_symbol_table_is_a_damaged_file(value_cubin, tmp_path, capsys):
    """Found by mutating cubins: "internal error: AttributeError: 'Section' object has no attribute 'iter_symbols'"."""
    data, header = _symtab_header(value_cubin)
    data[header + 4:header + 8] = (1).to_bytes(4, "little")  # Elf64_Shdr.sh_type = SHT_PROGBITS
    path = tmp_path / "nosym.cubin"
    path.write_bytes(bytes(data))
    for command in (["kernels", path], ["dump", path, "-k", "test"]):
        line = one_line_error(capsys, *command)
        assert line.endswith("damaged ELF file: its .symtab section is of type SHT_PROGBITS, not a symbol table"), line


@needs_nvcc
def test_an_nvdisasm_that_does_not_finish_is_one_line(value_cubin, monkeypatch, capsys):
    """A damaged cubin (found by mutation) made nvdisasm loop: "internal error: TimeoutExpired" after 300 s."""
    from mscred.sass import toolchain

    if find_tool("nvdisasm") is None:
        pytest.skip("nvdisasm not found")

    run = subprocess.run

    def loops(cmd, *args, timeout=None, **kwargs):
        if not str(cmd[0]).endswith("nvdisasm"):  # (c++filt)
            return run(cmd, *args, timeout=timeout, **kwargs)
        assert timeout == toolchain.nvdisasm_timeout(value_cubin.stat().st_size)
        raise subprocess.TimeoutExpired(cmd, timeout)

    monkeypatch.setattr(toolchain.subprocess, "run", loops)
    for command in (["inspect", value_cubin], ["dump", value_cubin, "-k", "test"]):
        line = one_line_error(capsys, *command)
        assert line == f"mscred: error: {value_cubin}: nvdisasm gave no answer in 60 s (a damaged cubin can make it " \
                       f"loop); nothing disassembled", line
    assert toolchain.nvdisasm_timeout(10 << 20) == 360


def test_probe_out_named_like_a_builtin_template_is_no_template(tmp_path, monkeypatch, no_compile, capsys):
    """-o value (the default template's name, as a file in the current folder) is a new file, not the template."""
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(capsys, "probe", "--arch", "sm_90", "-o", "value")
    assert code == 1 and "compiled before refusing" in err  # (reached the compiles: not refused)


def test_probe_api_takes_numbers(monkeypatch):
    """probe(values=[0xcc, 0xdd]) failed in int(204, 0) with a TypeError (internal error)."""
    import mscred.sass.probe as probe_module

    seen = []
    monkeypatch.setattr(probe_module, "compile_variants",
                        lambda template, arch, values, *a, **k: seen.append(values) or pytest.skip("recorded"))
    with pytest.raises(pytest.skip.Exception):
        probe_module.probe("sm_90", values=[0xCC, 0xDECC])
    assert seen == [["204", "57036"]]
    with pytest.raises(InputError, match="204 = 0xcc given more than once"):
        probe_module.probe("sm_90", values=[0xCC, "0xcc"])


def test_a_broken_symbolic_link_is_named_as_one(tmp_path, capsys):
    link = tmp_path / "gone.cubin"
    link.symlink_to(tmp_path / "deleted.cubin")
    line = one_line_error(capsys, "inspect", link)
    assert line == f"mscred: error: {link}: no such file (a broken symbolic link)"


def test_a_compressed_entry_claiming_an_absurd_size_is_a_damaged_entry(tmp_path, capsys):
    """Found by mutating a fatbin: "internal error: OverflowError: Python int too large to convert to C ssize_t"
    from zstandard's max_output_size (the entry header's uncompressed size, a u64)."""
    pytest.importorskip("zstandard")
    import zstandard

    payload = zstandard.ZstdCompressor().compress(b"\x7fELF" + bytes(60))
    header = struct.pack("<HHIQIIHHIIIQQQ", 2, 0x101, 64, len(payload), len(payload), 0, 0, 0, 90, 0, 0, 0x8011, 0,
                         (1 << 64) - 1)
    path = tmp_path / "huge.fatbin"
    path.write_bytes(_fatbin(header + payload))
    line = one_line_error(capsys, "inspect", path)
    assert line.endswith(f"compressed entry claims {(1 << 64) - 1} bytes uncompressed: a damaged entry header"), line
