"""`mscred sass` on Windows PE files (an .exe or .dll that nvcc built with MSVC's linker).

nvcc on Windows puts its fatbins in the sections it uses on Linux, their names cut to the 8 characters a PE image
keeps: ``.nv_fatb`` (``.nv_fatbin``) and ``__nv_rel`` (``__nv_relfatbin``); ``.nvFatBi`` holds the runtime's
24-byte wrapper, not a fatbin. There is no Windows nvcc here, so the tests write PE files themselves (``write_pe``:
DOS header, PE signature, COFF header, PE32+ optional header, section table, section data) around the fatbin of
an ELF executable nvcc builds here, placed at the file byte it has in the ELF file: every command must then answer
for the PE exactly as for the ELF file, file bytes included.
"""
from __future__ import annotations

import json
import random
import struct
import subprocess
import sys

import pytest

pytest.importorskip("elftools", reason="pyelftools (the `sass` extra) is not installed")
pefile = pytest.importorskip("pefile", reason="pefile (the `sass` extra) is not installed")

from mscred.errors import InputError  # noqa: E402
from mscred.sass.cubin import Cubin  # noqa: E402
from mscred.sass.fatbin import cubins, find_images  # noqa: E402
from mscred.sass.pe import checksum  # noqa: E402
from mscred.sass.probe import template_path  # noqa: E402
from mscred.sass.toolchain import find_tool  # noqa: E402

from test_audit_sass_cli import one_line_error  # noqa: E402
from test_sass_audit import run_cli  # noqa: E402

needs_nvdisasm = pytest.mark.skipif(find_tool("nvdisasm") is None,
                                    reason="nvdisasm not found (the test reads its text of the code)")

FILE_ALIGNMENT, SECTION_ALIGNMENT = 0x200, 0x1000
# The runtime's fatbin wrapper (.nvFatBinSegment): magic 0x466243b1, version 1, a pointer to the fatbin, 0.
WRAPPER = struct.pack("<IIQQ", 0x466243B1, 1, 0x140003000, 0)


def _align(value: int, to: int) -> int:
    return -(-value // to) * to


def write_pe(sections: list[tuple[bytes, bytes, int | None]], dll: bool = False, with_checksum: bool = False,
             pe_at: int = 0x80) -> bytes:
    """A Windows x64 PE32+ image whose sections hold the given bytes.

    ``sections``: (name, data, file byte or None), in file order, the first entered at (``.text``, say); a file
    byte puts ``data`` there exactly (the
    section starts at the 512-byte boundary below it, zeros between, which a fatbin section's reader skips as
    the padding between fatbins), None at the next boundary. ``with_checksum``: the optional header's CheckSum
    set, by pefile (not by the code under test). ``pe_at``: where the PE signature starts (e_lfanew).
    """
    count = len(sections)
    headers = _align(pe_at + 4 + 20 + 240 + 40 * count, FILE_ALIGNMENT)
    table, body = b"", b""
    raw_at, rva = headers, SECTION_ALIGNMENT
    for name, data, at in sections:
        start = raw_at if at is None else at // FILE_ALIGNMENT * FILE_ALIGNMENT
        assert start >= raw_at, "sections overlap"
        body += bytes(start - len(body) - headers)
        content = bytes(0 if at is None else at - start) + data
        raw = _align(len(content), FILE_ALIGNMENT)
        body += content + bytes(raw - len(content))
        # initialised read-only data (0x40000040); .text: code, executable (0x60000020)
        flags = 0x60000020 if name == b".text" else 0x40000040
        table += struct.pack("<8sIIIIIIHHI", name, len(content), rva, raw, start, 0, 0, 0, 0, flags)
        raw_at, rva = start + raw, _align(rva + len(content), SECTION_ALIGNMENT)
    coff = struct.pack("<HHIIIHH", 0x8664, count, 0, 0, 0, 240, 0x2022 if dll else 0x22)
    # PE32+: magic, linker version, code/data sizes, entry point and code base (the first section), image base,
    # alignments, OS/image/subsystem versions, image and header sizes, CheckSum 0, console subsystem, DLL flags
    # (ASLR, NX, high entropy), stack and heap sizes, 16 data directories (all empty)
    optional = struct.pack("<HBBIIIIIQIIHHHHHHIIIIHHQQQQII", 0x20B, 14, 0, 0, 0, 0, SECTION_ALIGNMENT,
                           SECTION_ALIGNMENT, 0x140000000, SECTION_ALIGNMENT, FILE_ALIGNMENT, 6, 0, 0, 0, 6, 0, 0, rva,
                           headers, 0, 3, 0x8160, 1 << 20, 0x1000, 1 << 20, 0x1000, 0, 16) + bytes(16 * 8)
    dos = bytearray(pe_at)
    dos[:2], dos[0x3C:0x40] = b"MZ", struct.pack("<I", pe_at)
    head = bytes(dos) + b"PE\0\0" + coff + optional + table
    image = head + bytes(headers - len(head)) + body
    if with_checksum:
        pe = pefile.PE(data=image)
        pe.OPTIONAL_HEADER.CheckSum = pe.generate_checksum()
        image = pe.write()
    return bytes(image)


def _elf_section(path, name: str) -> tuple[bytes, int]:
    """(bytes, file offset) of the ELF file's section ``name``."""
    from elftools.elf.elffile import ELFFile

    with open(path, "rb") as f:
        section = ELFFile(f).get_section_by_name(name)
        return section.data(), section["sh_offset"]


def _nvcc(*args) -> None:
    if find_tool("nvcc") is None:
        pytest.skip("nvcc not found (CUDA toolkit not installed)")
    try:
        proc = subprocess.run([find_tool("nvcc"), *map(str, args)], capture_output=True, text=True)
    except OSError as err:   # ($MSCRED_NVCC naming no program)
        pytest.skip(f"nvcc could not be run: {err}")
    if proc.returncode != 0:
        pytest.skip(f"nvcc could not build the input: {proc.stderr.strip()[:200]}")


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """The articles' program for sm_90 as a Linux executable (``linux_app``) and as a Windows one (``app.exe``)
    whose .nv_fatb section holds the ELF file's .nv_fatbin at the same file byte, beside a .text section and the
    runtime's .nvFatBi wrapper (which is not a fatbin, and must not be read as one)."""
    d = tmp_path_factory.mktemp("sasspe")
    elf = d / "linux_app"   # (no prefix of the PE's name: _as_pe replaces it)
    _nvcc("-arch=sm_90", "-o", elf, template_path("article"))
    fatbin, at = _elf_section(elf, ".nv_fatbin")
    exe = d / "app.exe"
    exe.write_bytes(write_pe([(b".text", b"\xc3" * 64, None), (b".nv_fatb", fatbin, at),
                              (b".nvFatBi", WRAPPER, None)]))
    return elf, exe


def _as_pe(text: str, elf, exe) -> str:
    """ELF output as the PE's would read: its path and section name."""
    return text.replace(f"{elf}:.nv_fatbin[", f"{exe}:.nv_fatb[").replace(str(elf), str(exe))


# --- the same answers as for the ELF file ---------------------------------------------------------------------------

@pytest.mark.parametrize("command", [["kernels"], ["dump", "-k", "test"], ["inspect"], ["inspect", "--json"],
                                     ["inspect", "--loops", "-k", "test#2"]], ids=" ".join)
def test_the_pe_reads_as_the_elf_file(pair, capsys, command):
    """File bytes, cubin numbers, kernels, code and (where nvdisasm runs) its text: all as for the ELF file."""
    elf, exe = pair
    code, from_elf, err = run_cli(capsys, command[0], elf, *command[1:])
    assert code == 0, err
    code, from_pe, err = run_cli(capsys, command[0], exe, *command[1:])
    assert code == 0, err
    assert from_pe == _as_pe(from_elf, elf, exe)
    assert "_Z4testPi" in from_pe or "test(int*)" in from_pe


@needs_nvdisasm
def test_dump_of_the_pe_disassembles(pair, capsys):
    code, out, err = run_cli(capsys, "dump", pair[1], "-k", "test")
    assert code == 0, err
    assert "000000ccff057435   HFMA2.MMA R5, -RZ, RZ" in out and "STG.E" in out


def test_the_python_api_finds_the_same_images(pair):
    elf, exe = pair
    from_elf, from_pe = find_images(elf.read_bytes(), "app"), find_images(exe.read_bytes(), "app.exe")
    fields = [(i.kind, i.arch, i.file_offset, i.data, i.compression, i.note, i.number) for i in from_elf]
    assert [(i.kind, i.arch, i.file_offset, i.data, i.compression, i.note, i.number) for i in from_pe] == fields
    assert all(i.where.startswith("app.exe:.nv_fatb[") for i in from_pe)   # (.nvFatBi, the wrapper, not read)
    (image, cubin), = [(i, c) for i, c in cubins(exe.read_bytes(), "app.exe") if c.kernels]
    assert list(cubin.kernels) == ["_Z4testPi"] and image.number == 2


def test_diff_pairs_the_pe_with_the_elf_file(pair, capsys):
    elf, exe = pair
    code, out, err = run_cli(capsys, "diff", elf, exe)
    assert code == 0, err
    identical = " (1 identical to the instruction)" if find_tool("nvdisasm") is not None else ""
    assert out.splitlines()[0] == f"1 same{identical}"   # (without nvdisasm a line says what was not compared)


def test_run_loads_the_same_cubin(pair, capsys, monkeypatch):
    """run hands the driver the cubin it found; the PE's must be the ELF file's, byte for byte (no GPU needed)."""
    import mscred.sass.run as run_module

    loaded = []
    monkeypatch.setattr(run_module, "run_cubin", lambda image, name, *a, **k: loaded.append((image, name)) or [[0xCC]])
    for path in pair:
        code, out, err = run_cli(capsys, "run", path, "-k", "test")
        assert (code, out) == (0, "*a = cc\n"), err
    (elf_cubin, elf_name), (pe_cubin, pe_name) = loaded
    assert pe_cubin == elf_cubin and pe_name == elf_name == "_Z4testPi"


def test_patch_writes_the_same_bytes_in_the_pe(pair, capsys, tmp_path):
    """In place in the .nv_fatb section, at the file byte the ELF file's patch has; nothing else of the file
    changes (the CheckSum was 0: left so)."""
    assert_patched_as_the_elf(capsys, tmp_path, *pair, ".exe")


def assert_patched_as_the_elf(capsys, tmp_path, elf, other, suffix: str) -> None:
    """``patch`` of ``other`` (a file holding ``elf``'s fatbin at the same file bytes: a PE here, a COFF object in
    test_sass_coff) prints what the ELF file's patch prints and changes the same bytes, nothing else, and the
    patched file dumps the new constant."""
    outputs = []
    for path, out in ((elf, tmp_path / "app.dd"), (other, tmp_path / f"app.dd{suffix}")):
        code, text, err = run_cli(capsys, "patch", path, "-k", "test", "--old", "0xcc", "--new", "0xdd", "-o", out)
        assert code == 0, err
        outputs.append(text.replace(str(out), "OUT"))
    assert outputs[0] == outputs[1]
    fatbin, at = _elf_section(elf, ".nv_fatbin")
    end = at + len(fatbin)
    elf_dd, before = (tmp_path / "app.dd").read_bytes(), other.read_bytes()
    after = (tmp_path / f"app.dd{suffix}").read_bytes()
    assert after[at:end] == elf_dd[at:end] != before[at:end]
    assert after[:at] == before[:at] and after[end:] == before[end:]
    code, text, err = run_cli(capsys, "dump", tmp_path / f"app.dd{suffix}", "-k", "test")
    assert code == 0 and "000000ddff057435" in text and "000000ccff057435" not in text, err


def test_patch_keeps_a_set_checksum_right(pair, tmp_path, capsys):
    """A PE whose CheckSum was set (link /RELEASE) gets the patched file's; one of 0 (the linkers' default) or a
    wrong one is left as it was. pefile, not the code under test, says what is right."""
    elf, _ = pair
    fatbin, _ = _elf_section(elf, ".nv_fatbin")
    sections = [(b".text", b"\xc3" * 64, None), (b".nv_fatb", fatbin, None)]
    stale = bytearray(write_pe(sections, with_checksum=True))
    at = 0x80 + 4 + 20 + 64
    stale[at:at + 4] = struct.pack("<I", struct.unpack_from("<I", stale, at)[0] ^ 0x5A5A)
    for name, data in (("set", write_pe(sections, with_checksum=True)), ("unset", write_pe(sections)),
                       ("wrong", bytes(stale))):
        src, out = tmp_path / f"{name}.dll", tmp_path / f"{name}.dd.dll"
        src.write_bytes(data)
        code, _, err = run_cli(capsys, "patch", src, "-k", "test", "--old", "0xcc", "--new", "0xdd", "-o", out)
        assert code == 0, err
        before, after = pefile.PE(data=data), pefile.PE(data=out.read_bytes())
        if name == "set":
            assert before.verify_checksum() and after.verify_checksum()
            assert after.OPTIONAL_HEADER.CheckSum != before.OPTIONAL_HEADER.CheckSum
        else:
            assert after.OPTIONAL_HEADER.CheckSum == before.OPTIONAL_HEADER.CheckSum
            assert not after.verify_checksum()


@pytest.mark.parametrize("pe_at, tail", [(0x80, b""), (0x80, b"\x07"), (0x81, b"")])
def test_checksum_is_windows_checksum(pair, pe_at, tail):
    """mscred.sass.pe.checksum (numpy) against pefile's (a Python loop): an odd length, an odd e_lfanew."""
    fatbin, _ = _elf_section(pair[0], ".nv_fatbin")
    data = write_pe([(b".text", b"\xc3" * 64, None), (b".nv_fatb", fatbin, None)], pe_at=pe_at) + tail
    assert checksum(data) == pefile.PE(data=data).generate_checksum()


def test_relocatable_device_code_in_a_dll(tmp_path, capsys):
    """An -rdc=true build's relocatable cubins (ELF __nv_relfatbin) are in the PE's __nv_rel section: read,
    numbered in file order after the linked ones, as in the ELF file."""
    # (nvcc compresses the relocatable cubin with zstd: unread without the module, the kernel is in one readable
    # cubin and `dump -k test` is not ambiguous -- the GPU machine's Python has no zstandard)
    pytest.importorskip("zstandard", reason="the relocatable cubin is zstd-compressed (pip install zstandard)")
    elf = tmp_path / "rdc"
    _nvcc("-arch=sm_90", "-rdc=true", "-o", elf, template_path("article"))
    linked, _ = _elf_section(elf, ".nv_fatbin")
    relocatable, _ = _elf_section(elf, "__nv_relfatbin")
    dll = tmp_path / "rdc.dll"
    dll.write_bytes(write_pe([(b".text", b"\xc3" * 64, None), (b".nv_fatb", linked, None),
                              (b"__nv_rel", relocatable, None)], dll=True))
    fields = lambda images: [(i.kind, i.arch, i.data, i.compression, i.note, i.number) for i in images]  # noqa: E731
    from_pe = find_images(dll.read_bytes(), "rdc.dll")
    assert fields(from_pe) == fields(find_images(elf.read_bytes(), "rdc"))
    assert {i.where.split("[")[0] for i in from_pe} == {"rdc.dll:.nv_fatb", "rdc.dll:__nv_rel"}
    line = one_line_error(capsys, "dump", dll, "-k", "test")   # in both: the cubins' numbers pick one
    assert "rdc.dll:.nv_fatb[cubin sm_90" in line and "rdc.dll:__nv_rel[cubin sm_90" in line, line


# --- what is refused, in one line -----------------------------------------------------------------------------------

COMMANDS = (["kernels"], ["dump", "-k", "test"], ["inspect"], ["run", "-k", "test"],
            ["patch", "-k", "test", "--old", "0xcc", "--new", "0xdd"])


def _each_command(capsys, path) -> list[str]:
    """The one error line of every command (and of diff, the file on either side) given ``path``."""
    lines = [one_line_error(capsys, command[0], path, *command[1:]) for command in COMMANDS]
    return lines + [one_line_error(capsys, "diff", path, path)]


def test_a_pe_without_device_code(tmp_path, capsys):
    """As an ELF file without cubins: said so, whatever the command (the wrapper section alone is not one)."""
    plain = tmp_path / "host.exe"
    plain.write_bytes(write_pe([(b".text", b"\xc3" * 64, None), (b".nvFatBi", WRAPPER, None)]))
    for line in _each_command(capsys, plain):
        assert line == (f"mscred: error: {plain}: a Windows PE file (executable or DLL) without device code (no "
                        f"cubin, no .nv_fatb section)")
    zeros = tmp_path / "zeros.dll"
    zeros.write_bytes(write_pe([(b".text", b"\xc3" * 64, None), (b".nv_fatb", bytes(256), None)], dll=True))
    assert one_line_error(capsys, "kernels", zeros).endswith(
        f"{zeros}: a Windows PE file (executable or DLL) without device code (its .nv_fatb section holds no fatbin)")
    assert not tmp_path.joinpath("host.exe.patched").exists()


def test_without_pefile_one_line_says_what_to_install(pair, capsys, monkeypatch):
    elf, exe = pair
    monkeypatch.setitem(sys.modules, "pefile", None)   # `import pefile` raises ImportError
    for line in _each_command(capsys, exe):
        assert line == "mscred: error: mscred sass needs pefile to read Windows PE files: pip install 'mscred[sass]'"
    code, _, err = run_cli(capsys, "kernels", elf)     # (an ELF file needs no pefile)
    assert code == 0, err


def test_a_damaged_pe_is_one_line(pair, tmp_path, capsys):
    """Cut short in each header, in the section table and in the fatbin section; a section past the end of the
    file; a fatbin section without the fatbin magic: one line, exit 2, for every command."""
    _, exe = pair
    data = exe.read_bytes()
    table = 0x80 + 4 + 20 + 240
    fatb = table + 40   # the .nv_fatb section's header
    at = struct.unpack_from("<I", data, fatb + 20)[0]
    fatbin_at = at + next(i for i in range(0, len(data) - at, 8) if data[at + i:at + i + 8] != bytes(8))
    past = bytearray(data)
    struct.pack_into("<I", past, fatb + 20, len(data) + 0x200)
    no_magic = bytearray(data)
    no_magic[fatbin_at:fatbin_at + 4] = b"\0\0\0\1"
    cases = {"coff": (data[:0x90], "damaged PE file: File Header missing"),
             "optional": (data[:0x120], "damaged PE file: its headers are cut short"),
             "table": (data[:table + 60], "damaged PE file: its headers are cut short"),
             "section": (data[:fatbin_at + 100], "damaged PE file: section .nv_fatb (file bytes"),
             "past": (bytes(past), "runs past the end of the file"),
             "magic": (bytes(no_magic), f".nv_fatb: no fatbin magic 0xBA55ED50 at byte {fatbin_at:#x}")}
    for name, (damaged, words) in cases.items():
        path = tmp_path / f"{name}.exe"
        path.write_bytes(damaged)
        for line in _each_command(capsys, path):
            assert line.startswith(f"mscred: error: {path}") and words in line, (name, line)


def test_mangled_headers_never_escape_as_an_internal_error(pair):
    """Every file cut short, and headers with bytes changed at random (seeded): read, or refused with an
    InputError (the CLI's one line), never another exception."""
    data = pair[1].read_bytes()
    rng = random.Random(20261203)
    cuts = [data[:n] for n in range(0, 0x400, 5)] + [data[:n] for n in range(0x400, len(data), 4099)]
    assert_only_input_errors(data, "x.exe", rng, cuts, lambda: rng.randrange(0x3C, 0x280))


def assert_only_input_errors(data: bytes, name: str, rng: random.Random, cuts: list[bytes], pick_at) -> None:
    """``find_images`` of each of ``cuts`` and of 400 copies of ``data`` with 1-4 bytes changed at ``pick_at()``
    (seeded by ``rng``) reads, or raises an InputError; any other exception fails the test (also test_sass_coff)."""
    variants = list(cuts)
    for _ in range(400):
        mangled = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            at = pick_at()   # (before the value: the seeded sequence the tests were written with)
            mangled[at] = rng.randrange(256) if rng.random() < 0.8 else 0xFF
        variants.append(bytes(mangled))
    for variant in variants:
        try:
            find_images(variant, name)
        except InputError:
            pass


def test_a_cubin_is_never_a_pe(pair):
    with pytest.raises(InputError, match=r"^app.exe: a Windows PE file \(executable or DLL\), not a cubin: its "
                                         r"cubins are in its .nv_fatb section"):
        Cubin(pair[1].read_bytes(), "app.exe")


def test_the_json_of_inspect_names_the_pe_section(pair, capsys):
    code, out, err = run_cli(capsys, "inspect", pair[1], "--json")
    assert code == 0, err
    (row,) = json.loads(out)
    assert row["image"].startswith(f"{pair[1]}:.nv_fatb[cubin sm_90 @ 0x") and row["cubin"] == 2
    assert row["kernel"] == "_Z4testPi"
