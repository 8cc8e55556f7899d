"""Find the fatbins of a Windows COFF object file: an ``.obj`` that nvcc built with MSVC (``nvcc -c``), alone or as
a member of a static library (``.lib``, an ``ar`` archive, read by :mod:`mscred.sass.fatbin`).

An object file has no DOS stub and no PE signature: a 20-byte COFF file header (Machine, NumberOfSections,
TimeDateStamp, PointerToSymbolTable, NumberOfSymbols, SizeOfOptionalHeader, Characteristics), then 40-byte
section headers, the sections' bytes, the symbol table (18 bytes a symbol) and the string table right after it
(a 4-byte size that counts itself, then NUL-terminated names). ``/bigobj`` objects (MSVC, for more than 65279
sections) start with a 56-byte header of their own instead (0x0000 0xFFFF, version 2, Machine, a class GUID,
32-bit NumberOfSections) and 20-byte symbols. Unlike an image, an object keeps a section's whole name: one longer
than 8 characters is written ``/N``, N the decimal offset of the name in the string table (``//`` and base-64
digits past 9,999,999, as LLVM writes them). So nvcc's ``.nv_fatbin`` may be ``.nv_fatbin`` here, cut to
``.nv_fatb`` only by the linker that makes a PE image of it (:mod:`mscred.sass.pe`); both are read, and
``__nv_relfatbin`` / ``__nv_rel`` alike.

A section's bytes sit at PointerToRawData as they are (no rounding, unlike an image), so a cubin inside is found,
and patched, at a plain file offset. No third-party parser: pefile reads images, not objects.
"""
from __future__ import annotations

import struct

from mscred.errors import InputError
from mscred.sass.pe import PE_FATBIN_SECTIONS

# The ELF names (what nvcc's fatbin.c asks for) and the 8-character ones an image, or a tool that cut them, has.
COFF_FATBIN_SECTIONS = (".nv_fatbin", "__nv_relfatbin") + PE_FATBIN_SECTIONS
MACHINES = {0x8664: "x64", 0xAA64: "ARM64", 0x14C: "x86"}
# /bigobj's class GUID {D1BAA1C7-BAEE-4BA9-AF20-FAF66AA4DCB8}, as the file stores it
BIGOBJ_CLASS = bytes.fromhex("c7a1bad1eebaa94baf20faf66aa4dcb8")
_EXECUTABLE_OR_DLL = 0x0002 | 0x2000   # Characteristics an image has and an object never
_UNINITIALIZED = 0x80                 # IMAGE_SCN_CNT_UNINITIALIZED_DATA: no bytes in the file (as SHT_NOBITS)
# A section header after its 8-byte name: VirtualSize, VirtualAddress, SizeOfRawData, PointerToRawData,
# PointerToRelocations, PointerToLinenumbers, NumberOfRelocations, NumberOfLinenumbers, Characteristics
_SECTION = "<IIIIIIHHI"
_BASE64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def _header(head: bytes) -> tuple[int, int, int, int, int, int] | None:
    """(Machine, NumberOfSections, section table offset, PointerToSymbolTable, NumberOfSymbols, symbol size) of
    a plain or /bigobj COFF object header at the start of ``head``, when its fixed fields say it is one; else
    None."""
    if head[:4] == b"\0\0\xff\xff":   # an anonymous object: /bigobj, or an import entry or /GL object (not read)
        if len(head) < 56 or head[12:28] != BIGOBJ_CLASS or struct.unpack_from("<H", head, 4)[0] < 2:
            return None
        machine, = struct.unpack_from("<H", head, 6)
        count, symbols_at, symbols = struct.unpack_from("<III", head, 44)
        return (machine, count, 56, symbols_at, symbols, 20) if machine in MACHINES else None
    if len(head) < 20:
        return None
    machine, count, _, symbols_at, symbols, optional, flags = struct.unpack_from("<HHIIIHH", head)
    # An object has no optional header, and no image's flags: with Machine, 1 in about 10^9 of random headers.
    if machine not in MACHINES or optional or flags & _EXECUTABLE_OR_DLL:
        return None
    return machine, count, 20, symbols_at, symbols, 18


def is_coff(head: bytes) -> bool:
    """Whether ``head`` (a file's first bytes) starts a COFF object file of a known machine (x64, ARM64, x86):
    its header's fixed fields, and each section header ``head`` holds (a valid alignment, its bytes after the
    section table). ELF (\\x7fELF), PE (MZ) and text files never pass; the file's bounds are checked by
    :func:`fatbin_sections`, so that one cut short is refused as a damaged object, not as an unknown file."""
    header = _header(head)
    if header is None:
        return False
    _, count, table_at, symbols_at, _, _ = header
    table_end = table_at + 40 * count
    if not count or (symbols_at and symbols_at < table_end):
        return False
    for at in range(table_at, min(table_end, len(head) - 39), 40):
        _, _, raw_size, raw_at, _, _, _, _, flags = struct.unpack_from(_SECTION, head, at + 8)
        if (flags >> 20) & 0xF > 14 or (raw_size and not flags & _UNINITIALIZED and raw_at < table_end):
            return False   # (alignment codes run 1..14, 1 to 8192 bytes)
    return True


def _damaged(where: str, why: str) -> InputError:
    return InputError(f"{where}: damaged COFF object file: {why}")


def _string_table(data: bytes, symbols_at: int, symbols_end: int, where: str) -> bytes:
    """The string table after the symbol table (its size field included, as the offsets count it); b"" when
    the file ends with the symbol table (no long names to look up)."""
    if symbols_end > len(data):
        raise _damaged(where, f"its symbol table (bytes {symbols_at:#x} to {symbols_end:#x}) runs past the end of "
                              f"the file ({len(data)} bytes)")
    if symbols_end == len(data):
        return b""
    if symbols_end + 4 > len(data):
        raise _damaged(where, f"its string table's size at byte {symbols_end:#x} is cut short")
    size, = struct.unpack_from("<I", data, symbols_end)
    if size < 4 or symbols_end + size > len(data):
        raise _damaged(where, f"its string table (byte {symbols_end:#x}, {size} bytes) runs past the end of the "
                              f"file ({len(data)} bytes)")
    return data[symbols_end:symbols_end + size]


def _section_name(raw: bytes, strings: bytes, where: str) -> str:
    """A section header's name: 8 bytes, or ``/N`` (``//`` base 64) for a name in the string table."""
    text = raw.rstrip(b"\0").decode("latin-1")
    if not text.startswith("/") or len(text) == 1:
        return text
    digits = text[1:]
    if digits.startswith("/") and digits[1:] and all(c in _BASE64 for c in digits[1:]):
        offset = 0
        for c in digits[1:]:
            offset = offset * 64 + _BASE64.index(c)
    elif digits.isdigit() and digits.isascii():
        offset = int(digits)
    else:
        raise _damaged(where, f"section name {text!r} is neither a name nor /N, an offset in the string table")
    end = strings.find(b"\0", offset)
    if offset < 4 or end < 0:
        raise _damaged(where, f"section name {text!r} points outside its string table ({len(strings)} bytes)")
    return strings[offset:end].decode("latin-1")


def fatbin_sections(data: bytes, where: str) -> list[tuple[str, int, int]]:
    """(name, file offset, size) of each fatbin section of the COFF object ``data`` (``is_coff``), in
    section-table order; a section's name as the object writes it (``.nv_fatbin`` or ``.nv_fatb``).

    Raises
    ------
    InputError
        The header, section table, symbol or string table runs past the end of the file, a long name points
        nowhere, or a fatbin section's bytes run past the end of the file.
    """
    header = _header(data[:64])
    if header is None:  # (a caller that did not ask is_coff first)
        raise InputError(f"{where}: not a COFF object file (no x64, ARM64 or x86 object header)")
    _, count, table_at, symbols_at, symbols, symbol_size = header
    table_end = table_at + 40 * count
    if table_end > len(data):
        raise _damaged(where, f"its section table is cut short (it ends at byte {table_end:#x}, the file has "
                              f"{len(data)} bytes)")
    strings = b""
    if symbols_at:
        strings = _string_table(data, symbols_at, symbols_at + symbol_size * symbols, where)
    found = []
    for at in range(table_at, table_end, 40):
        _, _, raw_size, raw_at, _, _, _, _, flags = struct.unpack_from(_SECTION, data, at + 8)
        name = _section_name(data[at:at + 8], strings, where)
        if name not in COFF_FATBIN_SECTIONS or not raw_size or flags & _UNINITIALIZED:
            continue
        if raw_at + raw_size > len(data):
            raise _damaged(where, f"section {name} (file bytes {raw_at:#x} to {raw_at + raw_size:#x}) runs past "
                                  f"the end of the file ({len(data)} bytes)")
        found.append((name, raw_at, raw_size))
    return found
