"""`mscred sass`: items left after the audits (2026-12-03).

1. Kernels of one mangled name in one architecture (two translation units' `static __global__` kernels linked into
   one executable, an -rdc=true executable's linked and relocatable cubins) could not be told apart: dump and run
   said "extract the cubin you mean", patch patched whichever held --old, or said "found 2 times; narrow it with
   --arch, --at, --instruction or --grep", none of which could. `-k NAME#N` picks the one in cubin N (the file's
   cubins numbered in file order, every one counted: test_sass_kernel_numbers.py), and the bare name is refused
   with each cubin's number.
2. A Windows executable or DLL (PE) is named as such, with the cuobjdump command that extracts its cubins.
"""
from __future__ import annotations

import struct
import subprocess

import pytest

pytest.importorskip("elftools", reason="pyelftools (the `sass` extra) is not installed")

from mscred.errors import InputError  # noqa: E402
from mscred.sass.cubin import Cubin  # noqa: E402
from mscred.sass.fatbin import cubins, find_images  # noqa: E402
from mscred.sass.probe import template_path  # noqa: E402
from mscred.sass.toolchain import find_tool  # noqa: E402

from test_audit_sass_cli import one_line_error  # noqa: E402
from test_sass_audit import run_cli  # noqa: E402

UNIT = "static __global__ void k(int* a) {{ {body} }}\nvoid launch_{name}(int* p) {{ k<<<1, 1>>>(p); }}\n"


def _nvcc(*args) -> None:
    proc = subprocess.run([find_tool("nvcc"), *map(str, args)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"nvcc could not build the input: {proc.stderr.strip()[:200]}")


@pytest.fixture(scope="module")
def two_statics(tmp_path_factory):
    """An executable of a.cu and b.cu, each with a `static __global__ void k(int*)` (mangled _Z1kPi in both): a.cu's
    stores 0xcc, b.cu's 0xcc and 0xee; one cubin each in the executable's fatbin."""
    if find_tool("nvcc") is None:
        pytest.skip("nvcc not found (CUDA toolkit not installed)")
    folder = tmp_path_factory.mktemp("statics")
    (folder / "a.cu").write_text(UNIT.format(name="a", body="a[0] = 0xcc;"))
    (folder / "b.cu").write_text(UNIT.format(name="b", body="a[0] = 0xcc; a[1] = 0xee;"))
    (folder / "main.cu").write_text("void launch_a(int*); void launch_b(int*);\n"
                                    "int main() { launch_a(nullptr); launch_b(nullptr); }\n")
    app = folder / "app"
    _nvcc("-arch=sm_90", "-o", app, folder / "a.cu", folder / "b.cu", folder / "main.cu")
    return app


def _holders(path):
    """The (image, kernel) of each cubin of ``path`` holding k, in file order."""
    return [(image, cubin.kernels["_Z1kPi"]) for image, cubin in cubins(path.read_bytes(), str(path))
            if "_Z1kPi" in cubin.kernels]


def _immediates(path) -> list[list[int]]:
    """Per cubin holding k (file order): the 32-bit immediates (bits 32..64) of its instructions."""
    return [[insn.field(32, 64) for insn in k.instructions] for _, k in _holders(path)]


# --- 1: kernels of one mangled name -------------------------------------------------------------------------------

def _numbers(path) -> list[int]:
    """The numbers of the cubins holding k, as -k k#N takes them."""
    return [image.number for image, _ in _holders(path)]


def test_the_input_holds_one_mangled_name_in_two_cubins_of_one_arch(two_statics):
    holders = _holders(two_statics)
    assert [image.arch for image, _ in holders] == ["sm_90", "sm_90"]
    assert [0xCC in values for values in _immediates(two_statics)] == [True, True]
    numbered = [image for image in find_images(two_statics.read_bytes(), "app") if image.kind == "cubin"]
    assert [image.number for image in numbered] == list(range(1, len(numbered) + 1))
    assert set(_numbers(two_statics)) < {image.number for image in numbered}   # (nvcc adds cubins without kernels)


@pytest.mark.parametrize("command", [
    ["dump"], ["run"],
    ["patch", "--old", "0xcc", "--new", "0xdd"],   # both hold it: "found 2 times; narrow it with --arch, --at ..."
    ["patch", "--old", "0xee", "--new", "0xdd"],   # b.cu's alone: patched without the user having picked it
])
def test_a_name_in_two_cubins_of_one_arch_is_refused_with_their_numbers(two_statics, command, capsys):
    line = one_line_error(capsys, command[0], two_statics, "-k", "k", *command[1:])
    a, b = _numbers(two_statics)
    assert f"{two_statics}: kernel 'k' is in 2 cubins (#{a} " in line and f"; #{b} " in line, line
    assert line.count("_Z1kPi") == 2 and line.endswith(f"-k 'k#{a}' or -k 'k#{b}'"), line
    assert not two_statics.with_name("app.patched").exists()


@pytest.mark.parametrize("holder", [1, 2])
def test_name_hash_n_patches_the_kernel_of_that_cubin_only(two_statics, holder, tmp_path, capsys):
    out = tmp_path / f"app.{holder}"
    image, kernel = _holders(two_statics)[holder - 1]
    code, text, err = run_cli(capsys, "patch", two_statics, "-k", f"k#{image.number}", "--old", "0xcc", "--new",
                              "0xdd", "-o", out)
    assert code == 0, err
    before, after = two_statics.read_bytes(), out.read_bytes()
    changed = [i for i in range(len(before)) if before[i] != after[i]]
    assert len(changed) == 1 and (before[changed[0]], after[changed[0]]) == (0xCC, 0xDD)
    code_at = image.file_offset + kernel.code_offset
    assert code_at <= changed[0] < code_at + len(kernel.code), (hex(changed[0]), hex(code_at))
    assert f"(file byte {changed[0] - 4:#x})" in text   # (the immediate is the instruction's bytes 4..8)
    values = _immediates(out)
    assert [0xDD in v for v in values] == [n == holder for n in (1, 2)]
    assert [0xCC in v for v in values] == [n != holder for n in (1, 2)]


def test_name_hash_n_picks_the_cubin_for_dump_too(two_statics, capsys):
    for holder, (image, kernel) in enumerate(_holders(two_statics), 1):
        code, text, err = run_cli(capsys, "dump", two_statics, "-k", f"k#{image.number}")
        assert code == 0, err
        assert text.splitlines()[0] == f"sm_90 _Z1kPi: code at file byte {image.file_offset + kernel.code_offset:#x}"
        assert ("0xee" in text or "000000eeff" in text) == (holder == 2)


def test_a_number_past_the_cubins_is_refused_with_how_many_there_are(two_statics, capsys):
    count = sum(image.kind == "cubin" for image in find_images(two_statics.read_bytes(), "app"))
    a, b = _numbers(two_statics)
    for command in (["dump"], ["run"], ["patch", "--old", "0xcc", "--new", "0xdd"]):
        line = one_line_error(capsys, command[0], two_statics, "-k", "k#9", *command[1:])
        assert line == (f"mscred: error: {two_statics}: -k 'k#9': no cubin #9 (the file has {count} cubins, #1 to "
                        f"#{count} in file order; 'k' is in #{a} and #{b})")
    # a cubin number is the file's, whatever --arch keeps: #1 is there, without the kernel
    line = one_line_error(capsys, "dump", two_statics, "-k", "nope#1", "--arch", "sm_90")
    assert "-k 'nope#1': cubin #1 (" in line and line.endswith(") holds no kernel 'nope'"), line


@pytest.mark.parametrize("selector", ["k#0", "k#x", "k#", "#2", "k#-1", "k#02"])
def test_a_bad_number_is_refused_before_the_file_is_read(selector, tmp_path, capsys):
    notes = tmp_path / "notes.txt"   # (read, it would be refused as "not an ELF file")
    notes.write_text("not machine code\n")
    for command in (["dump"], ["run"], ["patch", "--old", "0xcc", "--new", "0xdd"]):
        line = one_line_error(capsys, command[0], notes, "-k", selector, *command[1:])
        assert line.startswith(f"mscred: error: -k '{selector}': after '#' give the number of the cubin"), line


def test_an_rdc_executable_names_its_linked_and_relocatable_cubins_apart(tmp_path, capsys):
    """-rdc=true --no-compress: the kernel is in the linked cubin (.nv_fatbin, the one that runs) and in the
    relocatable one (__nv_relfatbin); patch said "found 2 times; narrow it with --arch ...", which could not."""
    if find_tool("nvcc") is None:
        pytest.skip("nvcc not found (CUDA toolkit not installed)")
    exe = tmp_path / "rdc"
    _nvcc("-arch=sm_90", "-rdc=true", "--no-compress", "-o", exe, template_path("article"))
    for command in (["dump"], ["patch", "--old", "0xcc", "--new", "0xdd"]):
        line = one_line_error(capsys, command[0], exe, "-k", "test", *command[1:])
        assert ":.nv_fatbin[cubin sm_90" in line and ":__nv_relfatbin[cubin sm_90" in line, line
        assert line.endswith("-k 'test#1' or -k 'test#2'"), line
    code, _, err = run_cli(capsys, "patch", exe, "-k", "test#1", "--old", "0xcc", "--new", "0xdd", "-o", tmp_path / "x")
    assert code == 0, err
    linked = [[i.field(32, 64) for k in c.kernels.values() for i in k.instructions]
              for image, c in cubins((tmp_path / "x").read_bytes(), "x") if c.kernels]
    assert 0xDD in linked[0] and 0xCC in linked[1] and 0xDD not in linked[1]


# --- 2: a Windows PE file ------------------------------------------------------------------------------------------

def _pe(size: int = 1024, pe_at: int = 0x80) -> bytes:
    """The first bytes of a Windows x64 executable: the DOS header (``MZ``, e_lfanew at 0x3c), the PE signature."""
    data = bytearray(size)
    data[:2], data[0x3C:0x40] = b"MZ", struct.pack("<I", pe_at)
    data[pe_at:pe_at + 6] = b"PE\0\0\x64\x86"   # machine 0x8664 (x64)
    return bytes(data)


def test_a_windows_executable_without_device_code_is_named(tmp_path, capsys):
    """A PE is read since PE support (tests/test_sass_pe.py); one without a .nv_fatb section (these headers have no
    sections at all) is refused by every command in one line that says it is a PE without device code."""
    pytest.importorskip("pefile", reason="pefile (mscred[sass]) reads PE headers")
    exe = tmp_path / "app.exe"
    exe.write_bytes(_pe())
    for command in (["kernels", exe], ["dump", exe, "-k", "test"], ["run", exe, "-k", "test"], ["inspect", exe],
                    ["patch", exe, "-k", "test", "--old", "0xcc", "--new", "0xdd"], ["diff", exe, exe]):
        line = one_line_error(capsys, *command)
        assert line.startswith(f"mscred: error: {exe}: a Windows PE file (executable or DLL) without device code"), \
            line
    assert not tmp_path.joinpath("app.exe.patched").exists()


def test_the_python_api_names_a_windows_dll_too():
    with pytest.raises(InputError, match=r"^cudart.dll: a Windows PE file \(executable or DLL\), not a cubin: "
                                         r"its cubins are in its .nv_fatb section"):
        Cubin(_pe(), "cudart.dll")
    pytest.importorskip("pefile", reason="pefile (mscred[sass]) reads PE headers")
    with pytest.raises(InputError, match=r"^cudart.dll: a Windows PE file \(executable or DLL\) without device code"):
        find_images(_pe(), "cudart.dll")


def test_mz_without_a_pe_signature_is_not_called_windows(tmp_path, capsys):
    """Text that happens to start with MZ (e_lfanew pointing at no PE signature) is still "not an ELF file"."""
    notes = tmp_path / "mz.txt"
    notes.write_bytes(b"MZ notes" + b" " * 200)
    assert "not an ELF file (no \\x7fELF magic), nor a fatbin" in one_line_error(capsys, "kernels", notes)
    dll = tmp_path / "a.dll"   # e_lfanew further in than usual
    dll.write_bytes(_pe(size=0x3000, pe_at=0x1100))
    assert "a Windows PE file" in one_line_error(capsys, "kernels", dll)
