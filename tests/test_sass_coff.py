"""`mscred sass` on Windows COFF object files (``nvcc -c`` with MSVC: ``.obj``) and static libraries of them (``.lib``).

There is no Windows nvcc here, so the tests write the objects themselves (``write_coff``: COFF header, section
table, section data, symbol table, string table) around the fatbin of the ELF executable test_sass_pe builds,
placed at the file byte it has in the ELF file, with the section named as an object may name it: ``.nv_fatbin``
through the string table ("/4"), or ``.nv_fatb`` in its 8 bytes. Every command must then answer for the object as
for the ELF file, file bytes included; a ``.lib`` (``write_lib``: MSVC's two linker members "/", the "//" long names
ending in NULs) as for its member, moved by the member's place in the library.
"""
from __future__ import annotations

import random
import struct

import pytest

pytest.importorskip("elftools", reason="pyelftools (the `sass` extra) is not installed")
pytest.importorskip("pefile", reason="pefile (the `sass` extra) is not installed")

from mscred.sass.coff import BIGOBJ_CLASS, is_coff  # noqa: E402
from mscred.sass.fatbin import find_images  # noqa: E402
from mscred.sass.probe import template_path  # noqa: E402

from test_audit_sass_cli import one_line_error  # noqa: E402
from test_sass_audit import run_cli  # noqa: E402
from test_sass_pe import (WRAPPER, _as_pe, _each_command, _elf_section,  # noqa: E402,F401 (pair: a fixture)
                          _nvcc, assert_only_input_errors, assert_patched_as_the_elf, pair)

TEXT = (".text$mn", b"\xc3" * 64, None)   # (MSVC's name for code: exactly 8 characters)


def write_coff(sections: list[tuple[str, bytes, int | None]], machine: int = 0x8664, bigobj: bool = False) -> bytes:
    """A COFF object file whose sections hold the given bytes, each with its section symbol (and the auxiliary
    record MSVC writes) in the symbol table, and the string table after it.

    ``sections``: (name, data, file byte or None) in file order; a name longer than 8 characters is written "/N"
    (N its offset in the string table), a file byte puts ``data`` there exactly (zeros before it), None right after
    the previous section. ``bigobj``: the /bigobj header (56 bytes, 20-byte symbols).
    """
    header_size, symbol_size = (56, 20) if bigobj else (20, 18)
    strings = bytearray(4)   # (the size field, set below: offsets count it)
    table, body = b"", b""
    start = header_size + 40 * len(sections)
    raw_at = start
    for name, data, at in sections:
        encoded = name.encode()
        if len(encoded) > 8:
            field = f"/{len(strings)}".encode()
            strings += encoded + b"\0"
        else:
            field = encoded
        place = raw_at if at is None else at
        assert place >= raw_at, "sections overlap"
        body += bytes(place - raw_at) + data
        # initialised read-only data, 8-byte aligned (0x40400040); code: 0x60500020
        flags = 0x60500020 if name.startswith(".text") else 0x40400040
        table += struct.pack("<8sIIIIIIHHI", field, 0, 0, len(data), place, 0, 0, 0, 0, flags)
        raw_at = place + len(data)
    symbols = b""
    for number, (name, data, _) in enumerate(sections, 1):
        # the section symbol: its name (the first 8 bytes: the string table holds long ones), value 0, section
        # number, type 0, storage class 3 (static), one auxiliary record (length, relocations, line numbers,
        # checksum, number, selection)
        field = name.encode().ljust(8, b"\0") if len(name) <= 8 else struct.pack("<II", 0, strings.index(name.encode()))
        number_field = struct.pack("<i" if bigobj else "<h", number)
        symbols += field + struct.pack("<I", 0) + number_field + struct.pack("<HBB", 0, 3, 1)
        symbols += struct.pack("<IHHIHB", len(data), 0, 0, 0, number, 0).ljust(symbol_size, b"\0")
    struct.pack_into("<I", strings, 0, len(strings))
    count = 2 * len(sections)
    if bigobj:
        header = struct.pack("<HHHHI16sIIIIIII", 0, 0xFFFF, 2, machine, 0, BIGOBJ_CLASS, 0, 0, 0, 0,
                             len(sections), raw_at, count)
    else:
        header = struct.pack("<HHIIIHH", machine, len(sections), 0, raw_at, count, 0, 0)
    return header + table + body + symbols + bytes(strings)


def _member_header(name: bytes, size: int) -> bytes:
    return b"%-16s%-12d%-6s%-6s%-8s%-10d`\n" % (name, 0, b"", b"", b"0", size)


def write_lib(members: list[tuple[str, bytes]]) -> tuple[bytes, list[int]]:
    """An MSVC static library of ``members`` (name, bytes), and the file byte of each member's data: the first
    linker member (big-endian offsets), the second (little-endian), the long-name member "//" (NUL-terminated
    names; a member's header says "/N"), then the members, 2-byte aligned. Each member defines one symbol."""
    symbols = [f"fatbinData_{i}".encode() for i in range(len(members))]
    names = b"".join(s + b"\0" for s in symbols)
    first_size = 4 + 4 * len(members) + len(names)
    second_size = 4 + 4 * len(members) + 4 + 2 * len(members) + len(names)
    long_names, headers = b"", []
    for name, _ in members:
        if len(name) > 15:
            headers.append(f"/{len(long_names)}".encode())
            long_names += name.encode() + b"\0"
        else:
            headers.append(name.encode() + b"/")
    pad = lambda n: n + (n & 1)  # noqa: E731
    at = 8 + 60 + pad(first_size) + 60 + pad(second_size) + 60 + pad(len(long_names))
    offsets = []
    for _, data in members:
        offsets.append(at)
        at += 60 + pad(len(data))
    first = struct.pack(f">I{len(members)}I", len(members), *offsets) + names
    second = (struct.pack(f"<I{len(members)}II", len(members), *offsets, len(members)) +
              struct.pack(f"<{len(members)}H", *range(1, len(members) + 1)) + names)
    out = b"!<arch>\n"
    for name, data in [(b"/", first), (b"/", second), (b"//", long_names)] + list(zip(headers, dict(members).values())):
        out += _member_header(name, len(data)) + data + b"\n" * (len(data) & 1)
    assert len(out) == at
    return out, [o + 60 for o in offsets]   # (the linker members point at the headers)


@pytest.fixture(scope="module")
def objects(pair, tmp_path_factory):
    """The ELF executable of test_sass_pe and COFF objects holding its fatbin at the same file byte: ``long``
    names the section ``.nv_fatbin`` (string table), ``short`` ``.nv_fatb``; beside a code section and the
    runtime's wrapper (``.nvFatBinSegment``, not a fatbin)."""
    elf, _ = pair
    d = tmp_path_factory.mktemp("sasscoff")
    fatbin, at = _elf_section(elf, ".nv_fatbin")
    made = {"elf": elf}
    for kind, name, wrapper in (("long", ".nv_fatbin", ".nvFatBinSegment"), ("short", ".nv_fatb", ".nvFatBi")):
        made[kind] = d / f"{kind}.obj"
        made[kind].write_bytes(write_coff([TEXT, (name, fatbin, at), (wrapper, WRAPPER, None)]))
    return made


def _as_obj(text: str, elf, obj, short: bool) -> str:
    return _as_pe(text, elf, obj) if short else text.replace(str(elf), str(obj))


def _fields(images):
    return [(i.kind, i.arch, i.data, i.compression, i.note, i.number) for i in images]


# --- the same answers as for the ELF file ---------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["long", "short"])
@pytest.mark.parametrize("command", [["kernels"], ["dump", "-k", "test"], ["inspect"], ["inspect", "--json"],
                                     ["inspect", "--loops", "-k", "test#2"]], ids=" ".join)
def test_the_object_reads_as_the_elf_file(objects, capsys, command, kind):
    elf, obj = objects["elf"], objects[kind]
    code, from_elf, err = run_cli(capsys, command[0], elf, *command[1:])
    assert code == 0, err
    code, from_obj, err = run_cli(capsys, command[0], obj, *command[1:])
    assert code == 0, err
    assert from_obj == _as_obj(from_elf, elf, obj, kind == "short")
    assert "_Z4testPi" in from_obj or "test(int*)" in from_obj


@pytest.mark.parametrize("kind, section", [("long", ".nv_fatbin"), ("short", ".nv_fatb")])
def test_the_python_api_finds_the_same_images(objects, kind, section):
    from_elf = find_images(objects["elf"].read_bytes(), "app")
    from_obj = find_images(objects[kind].read_bytes(), "app.obj")
    assert _fields(from_obj) == _fields(from_elf)
    assert [i.file_offset for i in from_obj] == [i.file_offset for i in from_elf]
    assert all(i.where.startswith(f"app.obj:{section}[") for i in from_obj)   # (the wrapper is not read)


@pytest.mark.parametrize("machine", [0x8664, 0xAA64, 0x14C])
def test_bigobj_and_every_machine(objects, machine):
    fatbin, at = _elf_section(objects["elf"], ".nv_fatbin")
    elf = find_images(objects["elf"].read_bytes(), "app")
    for bigobj in (False, True):
        data = write_coff([TEXT, (".nv_fatbin", fatbin, at)], machine=machine, bigobj=bigobj)
        assert is_coff(data)
        assert _fields(find_images(data, "big.obj")) == _fields(elf)


def test_diff_pairs_the_object_with_the_elf_file(objects, capsys):
    code, out, err = run_cli(capsys, "diff", objects["elf"], objects["long"])
    assert code == 0, err
    assert out.splitlines()[0].startswith("1 same")


def test_run_loads_the_same_cubin(objects, capsys, monkeypatch):
    import mscred.sass.run as run_module

    loaded = []
    monkeypatch.setattr(run_module, "run_cubin", lambda image, name, *a, **k: loaded.append((image, name)) or [[0xCC]])
    for path in (objects["elf"], objects["long"], objects["short"]):
        code, out, err = run_cli(capsys, "run", path, "-k", "test")
        assert (code, out) == (0, "*a = cc\n"), err
    assert loaded[0] == loaded[1] == loaded[2] and loaded[0][1] == "_Z4testPi"


@pytest.mark.parametrize("kind", ["long", "short"])
def test_patch_writes_the_same_bytes_in_the_object(objects, capsys, tmp_path, kind):
    """In place in the fatbin section, at the file byte of the ELF file's patch; nothing else changes."""
    assert_patched_as_the_elf(capsys, tmp_path, objects["elf"], objects[kind], ".obj")


# --- static libraries -----------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def library(objects, tmp_path_factory):
    """An MSVC .lib: a host-only object (short name), the kernel's object (a long name, from "//"), and an import
    library's entry (not an object: skipped)."""
    host = write_coff([TEXT, (".rdata", b"host", None)])
    kernel = objects["long"].read_bytes()
    entry = struct.pack("<HHHHIIHH", 0, 0xFFFF, 0, 0x8664, 0, 12, 0, 0) + b"f\0x.dll\0"
    lib = tmp_path_factory.mktemp("sasslib") / "kernels.lib"
    data, offsets = write_lib([("host.obj", host), ("C:\\build\\cuda\\kernel_module.obj", kernel),
                               ("x.dll", entry)])
    lib.write_bytes(data)
    return lib, offsets[1]


def test_a_library_reads_as_its_member(objects, library, capsys):
    lib, start = library
    from_lib, from_elf = find_images(lib.read_bytes(), str(lib)), find_images(objects["elf"].read_bytes(), "app")
    assert _fields(from_lib) == _fields(from_elf)
    assert [i.file_offset for i in from_lib] == [None if i.file_offset is None else start + i.file_offset
                                                 for i in from_elf]   # (None: compressed PTX)
    assert all(i.where.startswith(f"{lib}(C:\\build\\cuda\\kernel_module.obj):.nv_fatbin[") for i in from_lib)
    code, out, err = run_cli(capsys, "kernels", lib)
    assert code == 0 and "test(int*) [_Z4testPi]" in out, err


def test_patch_in_a_library(library, tmp_path, capsys):
    lib, _ = library
    out = tmp_path / "kernels.dd.lib"
    code, _, err = run_cli(capsys, "patch", lib, "-k", "test", "--old", "0xcc", "--new", "0xdd", "-o", out)
    assert code == 0, err
    before, after = lib.read_bytes(), out.read_bytes()
    assert len(before) == len(after) and sum(a != b for a, b in zip(before, after)) == 1
    code, text, err = run_cli(capsys, "dump", out, "-k", "test")
    assert code == 0 and "000000ddff057435" in text, err


def test_a_library_without_device_code_says_what_it_read(tmp_path, capsys):
    lib = tmp_path / "host.lib"
    entry = struct.pack("<HHHHIIHH", 0, 0xFFFF, 0, 0x8664, 0, 12, 0, 0) + b"f\0x.dll\0"
    lib.write_bytes(write_lib([("host.obj", write_coff([TEXT])), ("b.obj", write_coff([TEXT])), ("x.dll", entry)])[0])
    assert one_line_error(capsys, "kernels", lib) == (
        f"mscred: error: {lib}: static library without device code (2 COFF objects without a cubin or a fatbin "
        f"section; 1 member of another kind (an import entry, an MSVC /GL object), not read)")


# --- what is refused, in one line -----------------------------------------------------------------------------------

def test_an_object_without_device_code(tmp_path, capsys):
    plain = tmp_path / "host.obj"
    plain.write_bytes(write_coff([TEXT, (".nvFatBinSegment", WRAPPER, None)]))
    for line in _each_command(capsys, plain):
        assert line == (f"mscred: error: {plain}: a Windows COFF object file without device code (no .nv_fatbin or "
                        f".nv_fatb section holding a fatbin)")


def test_a_damaged_object_is_one_line(objects, tmp_path, capsys):
    """Cut short in the section table, in the fatbin section, in the symbol and string tables; a long name that
    points nowhere or is no number; a fatbin section without the fatbin magic: one line, exit 2, every command."""
    data = objects["long"].read_bytes()
    fatb = 20 + 40   # the .nv_fatbin section's header
    at = struct.unpack_from("<I", data, fatb + 20)[0]
    fatbin_at = at + next(i for i in range(0, len(data) - at, 8) if data[at + i:at + i + 8] != bytes(8))
    symbols_at, count = struct.unpack_from("<II", data, 8)
    strings_at = symbols_at + 18 * count

    def changed(offset: int, new: bytes) -> bytes:
        return data[:offset] + new + data[offset + len(new):]

    cases = {"table": (data[:70], "damaged COFF object file: its section table is cut short"),
             "cut": (data[:fatbin_at + 100], "damaged COFF object file: its symbol table (bytes"),
             "section": (changed(fatb + 16, struct.pack("<I", len(data))), "section .nv_fatbin (file bytes"),
             "symbols": (data[:symbols_at + 20], "its symbol table (bytes"),
             "strings": (data[:strings_at + 2], "its string table's size"),
             "size": (changed(strings_at, struct.pack("<I", 1 << 20)), "its string table (byte"),
             "nowhere": (changed(fatb, b"/999\0\0\0\0"), "section name '/999' points outside its string table"),
             "number": (changed(fatb, b"/4x\0\0\0\0\0"), "section name '/4x' is neither a name nor /N"),
             "magic": (changed(fatbin_at, b"\0\0\0\1"), f".nv_fatbin: no fatbin magic 0xBA55ED50 at byte "
                                                          f"{fatbin_at:#x}")}
    for name, (damaged, words) in cases.items():
        path = tmp_path / f"{name}.obj"
        path.write_bytes(damaged)
        for line in _each_command(capsys, path):
            assert line.startswith(f"mscred: error: {path}") and words in line, (name, line)


def test_a_header_cut_short_is_not_an_object(objects, tmp_path, capsys):
    path = tmp_path / "cut.obj"
    path.write_bytes(objects["long"].read_bytes()[:10])
    assert one_line_error(capsys, "kernels", path).endswith("nor a fatbin, static library, Windows PE file or COFF "
                                                            "object file")


def test_other_bytes_are_never_coff(objects, pair):
    """Random bytes (also behind a COFF machine number), an ELF file, a PE file, text: not taken for objects."""
    rng = random.Random(20261204)
    assert not is_coff(pair[0].read_bytes()[:8192]) and not is_coff(pair[1].read_bytes()[:8192])
    assert not is_coff(b"d\x86 is not an object file, just text that starts with those bytes" * 10)
    for machine in (b"", b"\x64\x86", b"\x64\xaa", b"\x4c\x01", b"\0\0\xff\xff"):
        for _ in range(3000):
            assert not is_coff(machine + rng.randbytes(200))


def test_mangled_headers_never_escape_as_an_internal_error(objects):
    data = objects["long"].read_bytes()
    symbols_at = struct.unpack_from("<I", data, 8)[0]
    rng = random.Random(20261204)
    cuts = [data[:n] for n in range(0, 0x200, 3)] + [data[:n] for n in range(symbols_at - 40, len(data))]
    assert_only_input_errors(data, "x.obj", rng, cuts,
                             lambda: rng.choice([rng.randrange(0, 0xA0), rng.randrange(symbols_at, len(data))]))


@pytest.mark.parametrize("names", [(".nv_fatbin", "__nv_relfatbin"), (".nv_fatb", "__nv_rel")])
def test_relocatable_device_code_in_an_object(tmp_path, capsys, names):
    """An -rdc=true build's relocatable cubins (ELF __nv_relfatbin) in the object's __nv_relfatbin section, whole or
    cut to __nv_rel: read, numbered in file order after the linked ones, as in the ELF file."""
    # (nvcc compresses the relocatable cubin with zstd: unread without the module, the kernel is in one readable
    # cubin and `dump -k test` is not ambiguous -- the GPU machine's Python has no zstandard)
    pytest.importorskip("zstandard", reason="the relocatable cubin is zstd-compressed (pip install zstandard)")
    elf = tmp_path / "rdc"
    _nvcc("-arch=sm_90", "-rdc=true", "-o", elf, template_path("article"))
    linked, _ = _elf_section(elf, ".nv_fatbin")
    relocatable, _ = _elf_section(elf, "__nv_relfatbin")
    obj = tmp_path / "rdc.obj"
    obj.write_bytes(write_coff([TEXT, (names[0], linked, None), (names[1], relocatable, None)]))
    from_obj = find_images(obj.read_bytes(), "rdc.obj")
    assert _fields(from_obj) == _fields(find_images(elf.read_bytes(), "rdc"))
    assert {i.where.split("[")[0] for i in from_obj} == {f"rdc.obj:{name}" for name in names}
    line = one_line_error(capsys, "dump", obj, "-k", "test")   # in both: the cubins' numbers pick one
    assert f"rdc.obj:{names[0]}[cubin sm_90" in line and f"rdc.obj:{names[1]}[cubin sm_90" in line, line
