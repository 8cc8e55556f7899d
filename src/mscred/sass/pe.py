"""Find the fatbins of a Windows PE file: an ``.exe`` or ``.dll`` that nvcc built with MSVC's linker.

nvcc on Windows emits the same fatbin containers as on Linux, in sections of the same names, but a PE image keeps
at most 8 characters of a section name (the PE/COFF specification: "Executable images do not use a string table
and do not support section names longer than 8 characters. Long names in object files are truncated if they are
emitted to an executable file"). So ``.nv_fatbin`` is ``.nv_fatb`` there (what tools that read nvcc's DLLs, e.g.
the ``fixNvPe.py`` script shipped with NVIDIA's kaolin, look for), and ``__nv_relfatbin`` (relocatable device
code) is ``__nv_rel``. ``.nvFatBi`` (``.nvFatBinSegment``) holds the 24-byte wrapper the runtime registers, a
pointer to a fatbin rather than one, and is not read.

The sections' bytes are stored as they are in the file (the loader maps them; no relocation touches a fatbin),
so a cubin inside is found, and patched, at a plain file offset, as in an ELF file. pefile (the ``sass`` extra)
reads the headers; :func:`is_pe` needs nothing but the first bytes.
"""
from __future__ import annotations

import struct

from mscred.errors import InputError

PE_FATBIN_SECTIONS = (".nv_fatb", "__nv_rel")
_CHECKSUM_AT = 4 + 20 + 64  # PE signature, COFF header, then CheckSum at byte 64 of the optional header (PE32 and +)


def is_pe(head: bytes) -> bool:
    """Whether ``head`` (a file's first bytes) starts a PE file: an ``MZ`` header whose e_lfanew, at byte 0x3c,
    points at ``PE\\0\\0`` within ``head`` (linkers put it near 0x80). Text that happens to start with "MZ" is not."""
    if not head.startswith(b"MZ") or len(head) < 0x40:
        return False
    pe_at = int.from_bytes(head[0x3C:0x40], "little")
    return head[pe_at:pe_at + 4] == b"PE\0\0"


def _pefile():
    try:
        import pefile
    except ImportError as err:  # pefile is the `sass` extra, as pyelftools
        raise InputError("mscred sass needs pefile to read Windows PE files: pip install 'mscred[sass]'") from err
    return pefile


def fatbin_sections(data: bytes, where: str) -> list[tuple[str, int, int]]:
    """(name, file offset, size) of each fatbin section of the PE file ``data``, in section-table order.

    Raises
    ------
    InputError
        The headers do not parse (a file cut short, a damaged header), or a fatbin section runs past the end of
        the file.
    """
    pefile = _pefile()
    # The section table's end, from the COFF header (NumberOfSections at byte 6, SizeOfOptionalHeader at 20):
    # pefile reads a table or optional header cut short as far as it goes, with a warning (the file would read
    # as one "without device code"), or fails inside a section header with words that do not say so.
    pe_at = int.from_bytes(data[0x3C:0x40], "little")
    if len(data) >= pe_at + 24:
        count, optional = struct.unpack_from("<H12xH", data, pe_at + 6)
        table_end = pe_at + 4 + 20 + optional + 40 * count
        if table_end > len(data):
            raise InputError(f"{where}: damaged PE file: its headers are cut short (the section table ends at byte "
                             f"{table_end:#x}, the file has {len(data)} bytes)")
    try:
        pe = pefile.PE(data=data, fast_load=True)
    except pefile.PEFormatError as err:
        raise InputError(f"{where}: damaged PE file: {' '.join(str(err.value).split())[:200]}") from None
    found = []
    for section in pe.sections:
        name = section.Name.rstrip(b"\0").decode("latin-1")
        if name not in PE_FATBIN_SECTIONS or not section.SizeOfRawData:  # (0: uninitialised data, as SHT_NOBITS)
            continue
        # Where the loader reads it: PointerToRawData, rounded down to 512 bytes when the file alignment is at
        # least that (a linker's output is aligned: the number itself). And the bytes it holds: VirtualSize,
        # unless the file stores fewer (the rest is zeros in memory) or it is 0 (some linkers leave it so).
        offset = section.get_PointerToRawData_adj()
        virtual = section.Misc_VirtualSize
        size = min(section.SizeOfRawData, virtual) if virtual else section.SizeOfRawData
        if offset + size > len(data):
            raise InputError(f"{where}: damaged PE file: section {name} (file bytes {offset:#x} to "
                             f"{offset + size:#x}) runs past the end of the file ({len(data)} bytes)")
        found.append((name, offset, size))
    return found


def checksum(data: bytes | bytearray) -> int:
    """The PE checksum of ``data``, a PE file whose headers reach its CheckSum field (as Windows'
    CheckSumMappedFile computes it): the 16-bit little-endian words summed with end-around carry, the CheckSum
    field left out, plus the file's length. numpy, not a Python loop: a CUDA DLL may be a gigabyte."""
    import numpy as np

    at = int.from_bytes(data[0x3C:0x40], "little") + _CHECKSUM_AT
    even = len(data) & ~1
    total = int(np.frombuffer(memoryview(data)[:even], dtype="<u2").sum(dtype=np.uint64))
    total += data[even] if even < len(data) else 0  # (an odd last byte: the low half of a word padded with 0)
    # Less the CheckSum field's 4 bytes, each the low or high half of its word (e_lfanew need not be even).
    total -= sum(data[i] << (8 * (i & 1)) for i in range(at, at + 4))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return (total + len(data)) & 0xFFFFFFFF


def refresh_checksum(original: bytes, patched: bytearray) -> None:
    """Set ``patched``'s CheckSum to its new value when ``original``'s was set and right: linkers write 0 unless
    asked (``/RELEASE``), and the loader checks it only for drivers and DLLs loaded at boot, but a set one that
    no longer matches the bytes is a file changed behind its header's back. A checksum that was already wrong is
    left as it was."""
    at = int.from_bytes(original[0x3C:0x40], "little") + _CHECKSUM_AT
    if at + 4 > len(original):
        return
    stored = struct.unpack_from("<I", original, at)[0]
    if stored and stored == checksum(original):
        struct.pack_into("<I", patched, at, checksum(patched))
