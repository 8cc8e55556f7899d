"""Find the cubins inside a host executable, shared library or object file (its fatbin), or in a ``.fatbin`` file.

nvcc links device code into the host ELF's ``.nv_fatbin`` section (``__nv_relfatbin`` for relocatable device
code; in a Windows PE file ``.nv_fatb`` and ``__nv_rel``, :mod:`mscred.sass.pe`; in a COFF object either name,
:mod:`mscred.sass.coff`). That section holds one or more
fat binaries back to back, each::

    u32 magic 0xBA55ED50, u16 version (1), u16 header size (16), u64 size of the entries that follow

and each entry (cubin or PTX) starts with a header::

    u16 kind (1 PTX, 2 ELF cubin), u16 version, u32 header size, u64 payload size,
    u32 compressed size, u32 (unknown), u16 minor, u16 major, u32 arch (e.g. 90),
    u32 name offset, u32 name length, u64 flags, u64 (zero), u64 uncompressed size

Flags: 0x1 64-bit, 0x2 debug, 0x10 Linux, 0x1000/0x2000 NVIDIA's LZ4-style compression, 0x8000 zstd.
CUDA 13 compresses PTX by default (zstd), and cubins too in some builds: relocatable device code
(``-rdc=true``) has zstd cubins by default, and ``-Xfatbin -compress-all`` compresses every entry; ``nvcc
--no-compress`` compresses nothing. Compressed cubins are read (LZ4-style always; zstd when the ``zstandard``
module is installed) but cannot be patched in place: :func:`find_images` marks them, and ``sass patch`` refuses
them with that reason.
"""
from __future__ import annotations

import os
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mscred.errors import InputError
from mscred.sass import coff
from mscred.sass.cubin import AmbiguousKernel, Cubin, Kernel, _elffile, arch_specific, damaged_elf, is_cubin
from mscred.sass.pe import PE_FATBIN_SECTIONS, fatbin_sections, is_pe

FATBIN_MAGIC = 0xBA55ED50
FATBIN_SECTIONS = (".nv_fatbin", "__nv_relfatbin", ".nvFatBinSegment_data")
KIND_NAMES = {1: "ptx", 2: "cubin", 4: "cubin-old"}
FLAG_LZ = 0x1000 | 0x2000
FLAG_ZSTD = 0x8000


@dataclass
class Image:
    """One device-code image found in a file.

    Attributes
    ----------
    kind : str
        "cubin" or "ptx".
    arch : str
        ``sm_90`` etc. (from the fatbin entry header, or the cubin itself).
    file_offset : int or None
        Where the image's bytes start in the file; None when it is stored compressed (not patchable in place).
    data : bytes or None
        The (decompressed) payload; None when it could not be decompressed (see ``note``).
    note : str
        Why ``data`` or ``file_offset`` is missing, or "" when all is well.
    number : int or None
        A cubin's number in its file: every cubin entry counted from 1 in file order, readable or not and whatever
        ``arch`` keeps (``find_images``), so that ``-k NAME#N`` names the same cubin on every machine (one without
        the ``zstandard`` module included); None for PTX.
    """

    kind: str
    arch: str
    file_offset: int | None
    data: bytes | None
    where: str
    compression: str = ""
    note: str = ""
    number: int | None = None

    def cubin(self) -> Cubin:
        if self.kind != "cubin":
            raise InputError(f"{self.where}: a {self.kind} image, not a cubin")
        if self.data is None:
            raise InputError(f"{self.where}: {self.note}")
        return Cubin(self.data, self.where)


def lz_decompress(src: bytes, size: int) -> bytes:
    """Decompress NVIDIA's fatbin LZ4-style stream into ``size`` bytes.

    Sequences of: a token byte (high nibble = literal count, low nibble + 4 = match length; a nibble of 15 is
    extended by following bytes while they are 255), the literals, then a 2-byte little-endian back offset.
    """
    out = bytearray()
    pos = 0
    while pos < len(src) and len(out) < size:
        token = src[pos]
        pos += 1
        literals = token >> 4
        if literals == 15:
            while pos < len(src):
                more = src[pos]
                pos += 1
                literals += more
                if more != 255:
                    break
        out += src[pos:pos + literals]
        pos += literals
        if len(out) >= size or pos + 2 > len(src):
            break
        back = src[pos] | (src[pos + 1] << 8)
        pos += 2
        match = (token & 15) + 4
        if (token & 15) == 15:
            while pos < len(src):
                more = src[pos]
                pos += 1
                match += more
                if more != 255:
                    break
        if back == 0 or back > len(out):
            raise ValueError(f"bad back-reference {back} at output byte {len(out)}")
        start = len(out) - back
        for k in range(match):  # byte by byte: a match may overlap the bytes it produces
            out.append(out[start + k])
    return bytes(out[:size])


def _decompress(payload: bytes, flags: int, size: int) -> tuple[bytes | None, str, str]:
    """Return (data or None, compression name, note)."""
    if flags & FLAG_ZSTD:
        try:
            import zstandard
        except ImportError:
            return None, "zstd", "compressed with zstd; install the 'zstandard' package to read it"
        if size >= 1 << 32:  # (a damaged header: an OverflowError, or a buffer of that size, in zstandard)
            return None, "zstd", f"compressed entry claims {size} bytes uncompressed: a damaged entry header"
        try:
            return zstandard.ZstdDecompressor().decompress(payload, max_output_size=max(size, 1)), "zstd", ""
        except zstandard.ZstdError as err:
            # One damaged entry (often a PTX one) must not make the file's other, readable cubins unreadable.
            return None, "zstd", f"compressed entry could not be decompressed: {' '.join(str(err).split())[:200]}"
    if flags & FLAG_LZ:
        try:
            return lz_decompress(payload, size), "lz", ""
        except ValueError as err:
            return None, "lz", f"compressed entry could not be decompressed: {err}"
    return payload, "", ""


def parse_fatbin(blob: bytes, base: int, where: str) -> list[Image]:
    """Parse the fat binaries in ``blob`` (which starts at file offset ``base``).

    Fat binaries are 8-byte aligned within a section, with zero padding between them.
    """
    images: list[Image] = []
    pos = 0
    while pos < len(blob):
        if blob[pos:pos + 8] == bytes(len(blob[pos:pos + 8])):  # padding between (or after) fat binaries
            pos += 8
            continue
        if pos + 16 > len(blob):
            # A file cut short inside a header would otherwise read as a fatbin without entries: "no kernels".
            raise InputError(f"{where}: fatbin header at byte {base + pos:#x} cut short ({len(blob) - pos} of 16 "
                             f"bytes)")
        magic, _version, header_size, size = struct.unpack_from("<IHHQ", blob, pos)
        if magic != FATBIN_MAGIC:
            raise InputError(f"{where}: no fatbin magic 0xBA55ED50 at byte {base + pos:#x}")
        entry = pos + header_size
        end = entry + size
        if end > len(blob):
            raise InputError(f"{where}: fatbin at byte {base + pos:#x} claims {size} bytes, only "
                             f"{len(blob) - entry} left")
        while entry + 64 <= end:
            (kind, _ver, ehs, esize, csize, _u, _minor, _major, arch, _no, _nl, flags, _z,
             usize) = struct.unpack_from("<HHIQIIHHIIIQQQ", blob, entry)
            if ehs == 0:
                raise InputError(f"{where}: fatbin entry at byte {base + entry:#x} has a zero header size")
            payload_at = entry + ehs
            if payload_at + esize > end:
                # A damaged header: its payload would be read from past the fatbin (reported as "not a cubin" at
                # a file byte the file does not have), and the next entry cannot be found.
                raise InputError(f"{where}: fatbin entry at byte {base + entry:#x} runs past the fatbin's end "
                                 f"(header {ehs} + payload {esize} bytes, {end - entry} left)")
            compressed = bool(flags & (FLAG_LZ | FLAG_ZSTD))
            raw = blob[payload_at:payload_at + (csize if compressed and csize else esize)]
            data, comp, note = _decompress(raw, flags, usize) if compressed else (raw, "", "")
            if kind == 2 and data is not None and not is_cubin(data):
                data, note = None, note or "payload is not a cubin"
            # The entry header gives 90 for sm_90 and sm_90a alike; the cubin's .nv.compat tells them apart, and a
            # PTX entry's own ".target sm_90a" line.
            label = f"sm_{arch}" + ("a" if kind == 2 and data is not None and arch_specific(data) else "")
            if kind == 1 and data is not None:
                target = re.search(rb"^\s*\.target\s+(sm_\d+[a-z]?)", data, re.MULTILINE)
                label = target.group(1).decode() if target else label
            tag = f"{where}[{KIND_NAMES.get(kind, kind)} {label} @ {base + payload_at:#x}]"
            images.append(Image(kind=KIND_NAMES.get(kind, str(kind)), arch=label,
                                file_offset=None if compressed else base + payload_at, data=data,
                                where=tag, compression=comp, note=note))
            entry = payload_at + esize
        pos = end
    return images


def find_images(data: bytes, where: str, arch: str | None = None) -> list[Image]:
    """All device-code images of a file: itself if it is a cubin, else the entries of its fatbins; with ``arch``
    only those for that architecture.

    Raises
    ------
    InputError
        Not an ELF or PE file nor a fatbin, one without device code, or ``arch`` given and no cubin for it (named
        with the ones there are: an --arch that matches nothing would otherwise read as "no kernels").
    """
    images = _all_images(data, where)
    if arch is None:
        return images
    check_has_cubins(images, where)  # PTX only: said so, rather than "no cubin for sm_90 (the file has none)"
    present = sorted({image.arch for image in images if image.kind == "cubin"})
    if arch not in present:
        ptx = " (and PTX for it, which holds no machine code)" if any(
            image.kind == "ptx" and image.arch == arch for image in images) else ""
        raise InputError(f"{where}: no cubin for {arch}{ptx} (the file has {', '.join(present)})")
    return [image for image in images if image.arch == arch]


def check_format(head: bytes, where: str) -> None:
    """InputError when a file that starts with ``head`` (its first bytes: 8 KiB decide) is none of the kinds the
    commands read (ELF: cubin, object, executable, shared library; Windows PE: executable, DLL; Windows COFF
    object; fatbin; static library), said as what it is where that is known (empty, PTX text): checked on the
    first bytes, before a large file of something else is read."""
    if not head:
        raise InputError(f"{where}: an empty file (0 bytes)")
    if head.startswith((b"\x7fELF", AR_MAGIC)) or head[:4] == struct.pack("<I", FATBIN_MAGIC) or is_pe(head):
        return
    if coff.is_coff(head):
        return
    if head.startswith(b"!<thin>\n"):
        raise InputError(f"{where}: a thin archive (its members are files elsewhere); give the object files")
    ptx_target = ptx_text_target(head)
    if ptx_target is not None:
        target = ptx_target or "sm_NN"
        raise InputError(f"{where}: PTX text (.target {ptx_target or '?'}), not machine code (SASS): assemble it "
                         f"with ptxas -arch={target} -o {Path(where).stem}.cubin {where}, or compile the .cu with "
                         f"nvcc -cubin -arch={target}")
    raise InputError(f"{where}: not an ELF file (no \\x7fELF magic), nor a fatbin, static library, Windows PE file "
                     f"or COFF object file")


def check_input(path: str | os.PathLike, pipes: bool = True) -> None:
    """InputError unless ``path`` names a file the commands can read: not missing, a folder or a device, and (a
    regular file) of a kind they read (``check_format`` on its first bytes); ``pipes``: a named pipe (``<(cat
    x.cubin)``, ``/dev/stdin``) passes unread. What a command with several inputs calls before reading any."""
    p = Path(path)
    if p.is_dir():
        raise InputError(f"{path}: is a folder, not a file")
    if not p.exists():
        raise InputError(f"{path}: no such file{' (a broken symbolic link)' if p.is_symlink() else ''}")
    if pipes and p.is_fifo():
        return
    if not p.is_file():
        raise InputError(f"{path}: not a regular file (a device, socket or pipe); give a cubin, object file, "
                         f"library or executable")
    with open(p, "rb") as f:
        check_format(f.read(8192), str(path))


def read_input(path: str | os.PathLike, pipes: bool = True) -> bytes:
    """The bytes of the file ``path`` names, or InputError saying why not (``check_input``: checked on its first
    bytes, before a large file of another kind is read whole)."""
    check_input(path, pipes)
    data = Path(path).read_bytes()
    check_format(data[:8192], str(path))  # (a pipe's first bytes, read only now)
    return data


def _all_images(data: bytes, where: str) -> list[Image]:
    """The file's images, its cubins numbered (``Image.number``) in file order, the unreadable ones included."""
    images = _file_images(data, where)
    for number, image in enumerate((image for image in images if image.kind == "cubin"), 1):
        image.number = number
    return images


def _file_images(data: bytes, where: str) -> list[Image]:
    check_format(data[:8192], where)
    if is_cubin(data):
        cubin = Cubin(data, where)
        return [Image("cubin", cubin.arch, 0, data, where)]
    if len(data) >= 4 and struct.unpack_from("<I", data)[0] == FATBIN_MAGIC:
        images = parse_fatbin(data, 0, where)
        if not images:
            raise InputError(f"{where}: fatbin without entries (no cubin, no PTX)")
        return images
    if data.startswith(AR_MAGIC):
        return _archive_images(data, where)
    if is_pe(data[:8192]):
        return _pe_images(data, where)
    if coff.is_coff(data[:8192]):
        images = _coff_images(data, 0, where)
        if not images:
            names = coff.COFF_FATBIN_SECTIONS
            raise InputError(f"{where}: a Windows COFF object file without device code (no {names[0]} or "
                             f"{names[2]} section holding a fatbin)")
        return images
    images = _elf_images(data, 0, where)
    if not images:
        raise InputError(f"{where}: ELF file without device code (no cubin, no {FATBIN_SECTIONS[0]} section)")
    return images


def _elf_images(data: bytes, base: int, where: str) -> list[Image]:
    """The images of the fatbin sections of the host ELF file ``data``, which starts at file byte ``base``."""
    elf = _elffile(data, where)
    images: list[Image] = []
    with damaged_elf(where):
        sections = [(s.name, s["sh_type"], s["sh_offset"], s["sh_size"]) for s in elf.iter_sections()]
    for name, kind, offset, size in sections:
        if name in FATBIN_SECTIONS and kind != "SHT_NOBITS":
            images += parse_fatbin(data[offset:offset + size], base + offset, f"{where}:{name}")
    return images


def _pe_images(data: bytes, where: str) -> list[Image]:
    """The images of the fatbin sections of the Windows PE file ``data`` (``.nv_fatb``, ``__nv_rel``: the ELF
    names cut to 8 characters), at their file bytes, as an ELF file's."""
    images: list[Image] = []
    sections = fatbin_sections(data, where)
    for name, offset, size in sections:
        images += parse_fatbin(data[offset:offset + size], offset, f"{where}:{name}")
    if not images:
        held = (f"its {' and '.join(name for name, _, _ in sections)} section holds no fatbin" if sections
                else f"no cubin, no {PE_FATBIN_SECTIONS[0]} section")
        raise InputError(f"{where}: a Windows PE file (executable or DLL) without device code ({held})")
    return images


def _coff_images(data: bytes, base: int, where: str) -> list[Image]:
    """The images of the fatbin sections of the COFF object ``data`` (an ``.obj``; its sections' full names, or
    the 8-character ones), which starts at file byte ``base``, at their file bytes, as an ELF object's."""
    images: list[Image] = []
    for name, offset, size in coff.fatbin_sections(data, where):
        images += parse_fatbin(data[offset:offset + size], base + offset, f"{where}:{name}")
    return images


AR_MAGIC = b"!<arch>\n"
# The members of an MSVC library that are tables, not objects: the linker members (two named "/") and those of
# ARM64EC/ARM64X libraries; "//" (the long names) is read apart.
_TABLE_MEMBERS = ("/", "/SYM64/", "__.SYMDEF", "__.SYMDEF SORTED", "/<ECSYMBOLS>/", "/<HYBRIDMAP>/")


def _archive_images(data: bytes, where: str) -> list[Image]:
    """The images of every ELF or COFF member of a static library (``nvcc -lib``, ``ar``; MSVC's ``lib``), each
    named ``lib.a(member.o)`` and placed at its file byte in the archive, so that a member's cubin can be patched in
    the library itself."""
    images: list[Image] = []
    kinds = {"ELF": 0, "COFF": 0, "other": 0}   # what the members were, for a library without device code
    for name, start, size in _archive_members(data, where):
        member = data[start:start + size]
        if is_cubin(member):
            images.append(Image("cubin", Cubin(member, f"{where}({name})").arch, start, member, f"{where}({name})"))
            kinds["ELF"] += 1
        elif member[:4] == b"\x7fELF":
            images += _elf_images(member, start, f"{where}({name})")
            kinds["ELF"] += 1
        elif coff.is_coff(member[:8192]):
            images += _coff_images(member, start, f"{where}({name})")
            kinds["COFF"] += 1
        else:   # (an import library's entries, an MSVC /GL object: no fatbin section to read)
            kinds["other"] += 1
    if not images:
        read = [f"{count} {kind} object{'s' if count > 1 else ''}" for kind, count in kinds.items()
                if count and kind != "other"]
        other = (f"{kinds['other']} member{'s' if kinds['other'] > 1 else ''} of another kind (an import entry, "
                 f"an MSVC /GL object), not read" if kinds["other"] else "")
        held = "; ".join(part for part in (", ".join(read) + (" without a cubin or a fatbin section" if read else ""),
                                           other) if part)
        raise InputError(f"{where}: static library without device code ({held or 'no members'})")
    return images


def _archive_members(data: bytes, where: str):
    """(name, data offset, size) of each member of an ``ar`` archive (GNU and BSD long names), skipping the symbol
    and long-name tables."""
    pos, long_names = len(AR_MAGIC), b""
    while pos + 60 <= len(data):
        header = data[pos:pos + 60]
        try:
            size = int(header[48:58].decode("ascii"))
        except (UnicodeDecodeError, ValueError):
            raise InputError(f"{where}: damaged static library: no member header at byte {pos:#x}") from None
        if header[58:60] != b"`\n":
            raise InputError(f"{where}: damaged static library: no member header at byte {pos:#x}")
        if pos + 60 + size > len(data):
            raise InputError(f"{where}: damaged static library: member at byte {pos:#x} runs past the end of the file")
        start, raw = pos + 60, header[:16].decode("latin-1").rstrip()
        pos = start + size + (size & 1)  # members are 2-byte aligned
        if raw == "//":
            long_names = data[start:start + size]
            continue
        if raw in _TABLE_MEMBERS:
            continue
        if raw.startswith("#1/") and raw[3:].isdigit():  # BSD: the name is the first bytes of the data
            length = int(raw[3:])
            yield data[start:start + length].rstrip(b"\0").decode("latin-1"), start + length, size - length
            continue
        if raw.startswith("/") and raw[1:].isdigit():  # GNU and MSVC: an offset into the long-name table
            # GNU ends a long name with "/\n", MSVC with a NUL
            raw = re.split(b"[\n\0]", long_names[int(raw[1:]):], maxsplit=1)[0].decode("latin-1")
        yield raw.removesuffix("/"), start, size
    if pos < len(data) and data[pos:].strip(b"\n"):
        raise InputError(f"{where}: damaged static library: {len(data) - pos} bytes after the last member")


def normalize_arch(arch: str | None) -> str | None:
    """``--arch`` as the images name architectures: "90a", "SM_90A" and "sm_90a" are "sm_90a"."""
    if arch is None:
        return None
    text = arch.strip().lower()
    return text if text.startswith("sm_") else f"sm_{text}"


def unreadable_cubins(images: list[Image]) -> list[Image]:
    """The cubin images of ``images`` that could not be read (each ``note`` says why)."""
    return [image for image in images if image.kind == "cubin" and image.data is None]


def ptx_only(images: list[Image], where: str) -> str | None:
    """When ``images`` hold PTX and no cubin: what to say (the file holds no machine code, the driver compiles the
    PTX when it loads it, and the nvcc flags that would have put SASS beside it, for the PTX's own architecture);
    else None."""
    if not images or any(image.kind == "cubin" for image in images):
        return None
    archs = sorted({image.arch for image in images}, key=lambda a: (len(a), a))
    sm = archs[-1] if re.fullmatch(r"sm_\d+[a-z]?", archs[-1]) else "sm_90"
    return (f"{where}: no cubin, only PTX ({', '.join(archs)}): no machine code (SASS) to read, the driver compiles "
            f"the PTX when it loads it; build SASS into it with nvcc -arch={sm} (or -gencode "
            f"arch={sm.replace('sm_', 'compute_')},code={sm})")


def check_has_cubins(images: list[Image], where: str) -> None:
    """InputError when ``images`` hold PTX only (``ptx_only``): a command that needs a kernel's machine code would
    otherwise say "no kernel 'test'" as if the name were wrong, and inspect "no kernels" as if the file had none."""
    message = ptx_only(images, where)
    if message is not None:
        raise InputError(message)


_PTX_DIRECTIVE = re.compile(rb"^[ \t]*\.(version|target)[ \t]+(\S+)", re.MULTILINE)


def ptx_text_target(data: bytes) -> str | None:
    """For a PTX source file (``nvcc -ptx``: text with ``.version`` and ``.target`` directives near its start), the
    ``.target`` architecture ("" when it has none); None for anything else."""
    head = data[:8192]
    if b"\0" in head:
        return None
    found = {m.group(1): m.group(2).decode("ascii", "replace") for m in _PTX_DIRECTIVE.finditer(head)}
    if b"version" not in found:
        return None
    return found.get(b"target", "").split(",")[0]


def check_readable(images: list[Image]) -> None:
    """InputError naming why, when ``images`` hold cubins and not one of them could be read (zstd without the
    ``zstandard`` module, a damaged entry): the commands would otherwise report "no kernels", as if the file had
    none."""
    cubin_images = [image for image in images if image.kind == "cubin"]
    skipped = unreadable_cubins(images)
    if cubin_images and len(skipped) == len(cubin_images):
        more = f" (and {len(skipped) - 1} more unreadable cubins)" if len(skipped) > 1 else ""
        raise InputError(f"{skipped[0].where}: {skipped[0].note}{more}")


def cubins(data: bytes, where: str, arch: str | None = None) -> list[tuple[Image, Cubin]]:
    """The readable cubins of a file (optionally only those for ``arch``: InputError if it has none), each with
    its image; InputError when it has cubins but none is readable (``check_readable``)."""
    images = find_images(data, where, arch)
    check_readable(images)
    return [(image, image.cubin()) for image in images if image.kind == "cubin" and image.data is not None]


# --- one kernel among several cubins --------------------------------------------------------------------------------

def kernel_selector(text: str) -> tuple[str, int | None]:
    """-k's ``NAME#N`` as (NAME, N): the kernel NAME in the file's cubin number N (``Image.number``: every cubin
    entry from 1 in file order, readable or not, whatever --arch keeps); a ``text`` without '#' as (text, None). The
    one way to pick between kernels of one mangled name in one file (two translation units' static kernels, an
    -rdc=true executable's linked and relocatable cubins), which --arch, the name and the instruction's offset or
    words cannot tell apart. No symbol name holds a '#'."""
    if "#" not in text:
        return text, None
    name, _, number = text.rpartition("#")
    if not name or not re.fullmatch(r"[1-9][0-9]*", number):
        raise InputError(f"-k {text!r}: after '#' give the number of the cubin that holds the kernel, from 1 in "
                         f"file order as `mscred sass kernels` numbers them (e.g. {name or 'test'}#2)")
    return name, int(number)


def kernel_in_cubins(images: list[Image], name: str
                     ) -> tuple[list[tuple[Image, Cubin, Kernel]], list[tuple[Image, AmbiguousKernel]]]:
    """Each readable cubin of ``images`` in which ``name`` names one kernel (``Cubin.kernel``), in file order, with
    it; and each cubin in which ``name`` fits several kernels, with its refusal."""
    found, ambiguous = [], []
    for image in images:
        if image.kind != "cubin" or image.data is None:
            continue
        cubin = image.cubin()
        try:
            found.append((image, cubin, cubin.kernel(name)))
        except AmbiguousKernel as err:
            ambiguous.append((image, err))
        except InputError:   # not in this cubin
            continue
    return found, ambiguous


def _numbers(images: list[Image]) -> str:
    """"#2", "#2 and #5", "#2, #5 and #7"."""
    tags = [f"#{image.number}" for image in images]
    return " and ".join(tags) if len(tags) < 3 else f"{', '.join(tags[:-1])} and {tags[-1]}"


def numbered_cubin(images: list[Image], text: str, where: str, holders: list[Image], arch: str | None = None,
                   refuse: Callable[[Image], InputError | None] | None = None) -> Image | None:
    """The cubin that ``-k NAME#N`` picks: the one of ``images`` (a file's, those of ``arch`` when given) whose
    ``number`` is N; None for a NAME without '#'. The one selection of dump, run, patch, inspect and diff.

    ``holders`` are the images in which NAME names a kernel (as the command reads -k), for the messages;
    ``refuse``: the command's own refusal of cubin N, readable or not, or None (patch: a compressed one).

    Raises
    ------
    InputError
        No cubin numbered N (among those of ``arch``); cubin N could not be read (the line says why: its ``note``,
        e.g. ``install the 'zstandard' package``); NAME names no kernel of cubin N. Each with the numbers of the
        cubins NAME is in.
    """
    name, number = kernel_selector(text)
    if number is None:
        return None
    numbered = [image for image in images if image.kind == "cubin"]
    holders = [image for image in numbered if any(image is held for held in holders)]
    held = f"; {name!r} is in {_numbers(holders)}" if holders else ""
    image = next((image for image in numbered if image.number == number), None)
    if image is None:
        count = len(numbered)
        if arch is not None:
            scope = f"{arch}'s cubins are {_numbers(numbered)}, numbered among all of the file's in file order"
        else:
            scope = (f"the file has {count} cubin{'s' if count != 1 else ''}, "
                     f"{f'#1 to #{count}' if count > 1 else '#1'} in file order")
        raise InputError(f"{where}: -k {text!r}: no cubin #{number}{' for ' + arch if arch else ''} ({scope}{held})")
    refusal = refuse(image) if refuse is not None else None
    if refusal is not None:
        raise refusal
    if image.data is None:
        raise InputError(f"{where}: -k {text!r}: cubin #{number} ({image.where}) could not be read: {image.note}")
    if not any(image is held for held in holders):
        skipped = unreadable_cubins(images)
        unread = (f"; {len(skipped)} cubin{'s' if len(skipped) > 1 else ''} could not be read "
                  f"({_numbers(skipped)}: {skipped[0].note})" if skipped else "")
        raise InputError(f"{where}: -k {text!r}: cubin #{number} ({image.where}) holds no kernel {name!r}{held}"
                         f"{unread}")
    return image


def numbered_kernel(found: list[tuple[Image, Cubin, Kernel]], ambiguous: list[tuple[Image, AmbiguousKernel]],
                    images: list[Image], text: str, where: str, arch: str | None = None,
                    refuse: Callable[[Image], InputError | None] | None = None
                    ) -> list[tuple[Image, Cubin, Kernel]]:
    """``found`` (``kernel_in_cubins``) narrowed to the one in the cubin ``-k NAME#N`` numbers
    (``numbered_cubin``, which refuses a number that picks none); all of it without a number. A name that fits
    several kernels of that cubin is refused with their names."""
    image = numbered_cubin(images, text, where, [i for i, _, _ in found] + [i for i, _ in ambiguous], arch, refuse)
    if image is None:
        return found
    for other, err in ambiguous:
        if other is image:
            raise err
    return [entry for entry in found if entry[0] is image]


def several_cubins(found: list[tuple[Image, Cubin, Kernel]], name: str, where: str) -> InputError:
    """The refusal of a kernel ``name`` found in several cubins, with the one way to pick that tells them apart:
    --arch for builds of several architectures, the mangled name for two translation units' kernels of one plain
    name (anonymous-namespace kernels of a library's members), and ``NAME#N`` (the cubins' numbers in the file) for
    kernels of one mangled name in one architecture (static kernels of two units, an -rdc=true executable's linked
    and relocatable cubins)."""
    archs, names, count = {i.arch for i, _, _ in found}, {k.name for _, _, k in found}, len(found)
    if len(archs) == count or len(names) == count:
        listed = "; ".join(f"{i.where}: {k.name}" for i, _, k in found)
        how = "pass --arch" if len(archs) == count else "name it by its mangled name"
    else:
        listed = "; ".join(f"#{i.number} {i.where}: {k.name}" for i, _, k in found)
        picks = [f"-k '{name}#{i.number}'" for i, _, _ in found]
        how = f"pick one by its cubin's number in file order, {', '.join(picks[:-1])} or {picks[-1]}"
    return InputError(f"{where}: kernel {name!r} is in {count} cubins ({listed}); {how}")
