"""Read a cubin (the ELF file nvcc/ptxas write for one GPU architecture): kernels, their code and attributes.

A cubin's ELF header has machine 190 (EM_CUDA). Each kernel ``K`` owns a few sections:
  ``.text.K``         its machine code (see :mod:`mscred.sass.isa` for the instruction layout)
  ``.nv.info.K``      its attributes: parameter layout, exit offsets, CUDA API version, ...
  ``.nv.constant0.K`` its parameter constant bank (size = 0x160/0x210 reserved bytes + parameters)
  ``.nv.shared.K``    its static shared memory (NOBITS, size only)
and the global ``.nv.info`` holds per-kernel register counts and stack/frame sizes.
"""
from __future__ import annotations

import contextlib
import io
import struct
from dataclasses import dataclass, field
from functools import cached_property

from mscred.errors import InputError
from mscred.sass.isa import Instruction, instruction_bits, split_instructions
from mscred.sass.nvinfo import (ATTRIBUTE_NAMES, PER_SYMBOL, Attribute, NvInfoError, Param, kernel_params,
                                parse_nvinfo)
from mscred.sass.pe import PE_FATBIN_SECTIONS, is_pe
from mscred.sass.toolchain import demangle


class AmbiguousKernel(InputError):
    """A kernel name that fits several kernels of one cubin (the message names them)."""

EM_CUDA = 190
STO_CUDA_ENTRY = 0x10  # st_other bit that marks a __global__ function (a kernel) rather than a device function


def _elffile(data: bytes, where: str):
    try:
        from elftools.elf.elffile import ELFFile
    except ImportError as err:  # pragma: no cover - pyelftools is the `sass` extra
        raise InputError("mscred sass needs pyelftools: pip install 'mscred[sass]'") from err
    if data[:4] != b"\x7fELF":
        if is_pe(data[:8192]):  # (the commands read one through mscred.sass.pe; a cubin itself is never one)
            raise InputError(f"{where}: a Windows PE file (executable or DLL), not a cubin: its cubins are in its "
                             f"{PE_FATBIN_SECTIONS[0]} section, which mscred.sass.fatbin.cubins reads")
        raise InputError(f"{where}: not an ELF file (no \\x7fELF magic)")
    header = 64 if data[4:5] == b"\x02" else 52  # ELF64 / ELF32 header size
    if len(data) < header:  # (pyelftools: "expected 2, found 0")
        raise InputError(f"{where}: damaged ELF file: its header is cut short ({len(data)} of {header} bytes)")
    with damaged_elf(where):
        return ELFFile(io.BytesIO(data))


@contextlib.contextmanager
def damaged_elf(where: str):
    """pyelftools reads sections lazily: a truncated or corrupt file fails wherever it is first read (a section
    past the end, a header that does not parse), and the ``.nv.info`` records are parsed as they are read. Any such
    failure inside is bad input naming ``where``."""
    from elftools.common.exceptions import ELFError
    try:
        yield
    except (ELFError, EOFError, struct.error, NvInfoError, OverflowError) as err:
        # (OverflowError: a header's offset past 2**63, which the stream cannot seek to)
        why = "an offset or size out of range" if isinstance(err, OverflowError) else " ".join(str(err).split())[:200]
        raise InputError(f"{where}: damaged ELF file: {why}") from None


def _arch_specific(sections: dict) -> bool:
    """Whether the cubin was built for an architecture-specific target (sm_90a, sm_100a): record 0x09 of its
    ``.nv.compat`` section is 1 there and 0 for sm_90 / sm_100 / sm_100f (ptxas of CUDA 13; cuobjdump prints the
    "a" from it). The section has ``.nv.info``'s record layout (``parse_nvinfo``); the names are not .nv.info's."""
    compat = sections.get(".nv.compat")
    if compat is None:
        return False
    try:
        records = parse_nvinfo(compat.data(), ".nv.compat")
    except NvInfoError:
        # Only the "a" of the name depends on it: the kernels and their code still read, so a damaged .nv.compat
        # names the cubin sm_90 rather than refusing the whole file.
        return False
    code_9 = ATTRIBUTE_NAMES.get(0x09, "0x09")
    return any(r.name == code_9 and r.fmt == 2 and r.value == 1 for r in records)


@dataclass
class Kernel:
    """One kernel (a ``__global__`` function) of a cubin.

    Attributes
    ----------
    name : str
        The symbol name, mangled as in the binary (``_Z4testPi``).
    code : bytes
        The ``.text.<name>`` section.
    code_offset : int
        File offset of that section inside the cubin bytes (add the cubin's own offset for a host file).
    registers : int
        Registers per thread (EIATTR_REGCOUNT, or the section's sh_info high byte).
    shared_bytes, const_bytes : int
        Static shared memory, and the size of the parameter constant bank ``.nv.constant0.<name>``.
    frame_bytes, min_stack_bytes, max_stack_bytes : int
        Local-memory frame (spills and local arrays) and call-stack sizes.
    params : list of Param
        Parameter ordinal/offset/size from EIATTR_KPARAM_INFO.
    attributes : list of Attribute
        All records of ``.nv.info.<name>``.
    """

    name: str
    sm: int
    code: bytes
    code_offset: int
    registers: int = 0
    shared_bytes: int = 0
    const_bytes: int = 0
    frame_bytes: int = 0
    min_stack_bytes: int = 0
    max_stack_bytes: int = 0
    params: list[Param] = field(default_factory=list)
    attributes: list[Attribute] = field(default_factory=list)

    @cached_property
    def instructions(self) -> list[Instruction]:
        return split_instructions(self.code, self.sm)

    @property
    def instruction_bits(self) -> int:
        return instruction_bits(self.sm)

    def attribute(self, name: str) -> Attribute | None:
        return next((a for a in self.attributes if a.name == name), None)


class Cubin:
    """A parsed cubin.

    Parameters
    ----------
    data : bytes
        The whole cubin file.
    where : str
        How to name it in messages (a path, or ``path[fatbin entry 2]``).
    """

    def __init__(self, data: bytes, where: str = "cubin"):
        self.data = bytes(data)
        self.where = where
        elf = _elffile(self.data, where)
        self.kernels: dict[str, Kernel] = {}
        with damaged_elf(where):
            if elf["e_machine"] != "EM_CUDA" and elf.header["e_machine"] != EM_CUDA:
                raise InputError(f"{where}: ELF file for {elf['e_machine']}, not a cubin (EM_CUDA)")
            flags = elf.header["e_flags"]
            # Up to CUDA 12 (ELF ABI version 7) the SM number sits in bits 0..7 and 16..23; from CUDA 13
            # (ABI version 8) in bits 8..15. Bits 16..23 are zero in the new layout, which tells them apart.
            self.sm = (flags >> 16) & 0xFF or (flags >> 8) & 0xFF
            self.abi_version = elf.header["e_ident"]["EI_ABIVERSION"]
            self.e_flags = flags
            sections = {s.name: s for s in elf.iter_sections()}
            self.arch_specific = _arch_specific(sections)
            self._read(elf, sections)

    @property
    def arch(self) -> str:
        """``sm_90``, or ``sm_90a`` for an architecture-specific build (as cuobjdump names it)."""
        return f"sm_{self.sm}{'a' if self.arch_specific else ''}"

    def _read(self, elf, sections: dict) -> None:
        from elftools.elf.sections import SymbolTableSection

        symtab = elf.get_section_by_name(".symtab")
        if symtab is not None and not isinstance(symtab, SymbolTableSection):  # (no iter_symbols: AttributeError)
            raise InputError(f"{self.where}: damaged ELF file: its .symtab section is of type {symtab['sh_type']}, "
                             f"not a symbol table")
        symbols = list(symtab.iter_symbols()) if symtab is not None else []
        globals_by_index: dict[str, list[Attribute]] = {}
        if ".nv.info" in sections:
            for attr in parse_nvinfo(sections[".nv.info"].data(), ".nv.info"):
                if attr.name in PER_SYMBOL and len(attr.words()) >= 2:
                    index, value = attr.words()[:2]
                    if index < len(symbols):
                        globals_by_index.setdefault(symbols[index].name, []).append(
                            Attribute(attr.name, attr.fmt, value))
        raw_symtab = symtab.data() if symtab is not None else b""
        entsize = symtab["sh_entsize"] if symtab is not None else 24
        for index, sym in enumerate(symbols):
            # pyelftools splits st_other into visibility and bits 5..7; STO_CUDA_ENTRY is bit 4 of the raw byte.
            st_other = raw_symtab[index * entsize + 5] if index * entsize + 5 < len(raw_symtab) else 0
            if sym["st_info"]["type"] != "STT_FUNC" or not st_other & STO_CUDA_ENTRY:
                continue
            name = sym.name
            text = sections.get(f".text.{name}")
            if text is None:
                continue
            kernel = Kernel(name=name, sm=self.sm, code=text.data(), code_offset=text["sh_offset"])
            # ptxas also stores the register count in the top byte of the code section's sh_info.
            kernel.registers = text["sh_info"] >> 24
            for attr in globals_by_index.get(name, []):
                if attr.name == "REGCOUNT":
                    kernel.registers = int(attr.value)
                elif attr.name == "FRAME_SIZE":
                    kernel.frame_bytes = int(attr.value)
                elif attr.name == "MIN_STACK_SIZE":
                    kernel.min_stack_bytes = int(attr.value)
                elif attr.name == "MAX_STACK_SIZE":
                    kernel.max_stack_bytes = int(attr.value)
            info = sections.get(f".nv.info.{name}")
            if info is not None:
                kernel.attributes = parse_nvinfo(info.data(), f".nv.info.{name}")
                kernel.params = kernel_params(kernel.attributes)
            shared = sections.get(f".nv.shared.{name}")
            if shared is not None:
                kernel.shared_bytes = shared["sh_size"]
            const0 = sections.get(f".nv.constant0.{name}")
            if const0 is not None:
                kernel.const_bytes = const0["sh_size"]
            self.kernels[name] = kernel

    def kernel(self, name: str) -> Kernel:
        """Find a kernel by its mangled name, by a plain name that one mangled name contains (``test``), or by a
        piece of its demangled name as ``sass inspect`` prints it (``scale<4>``: templates have no plain name of
        their own). A name that fits several kernels is refused with their names."""
        if name in self.kernels:
            return self.kernels[name]
        hits = [k for k in self.kernels.values() if _plain_name(k.name) == name]
        if not hits:
            readable = demangle(list(self.kernels))
            hits = [k for k in self.kernels.values() if name in readable.get(k.name, k.name) and
                    readable.get(k.name, k.name) != k.name]
        if len(hits) == 1:
            return hits[0]
        # Named as inspect prints them (demangled, what -k takes a piece of), the mangled name where c++filt is absent.
        readable = demangle(list(self.kernels))
        known = ", ".join(sorted(readable.values())) or "none"
        if len(hits) > 1:
            names = "; ".join(readable.get(k.name, k.name) for k in hits)
            raise AmbiguousKernel(f"{self.where}: kernel name {name!r} is ambiguous: {names}")
        raise InputError(f"{self.where}: no kernel {name!r} (kernels: {known})")


def _plain_name(mangled: str) -> str:
    """``_Z4testPi`` -> ``test``; ``_ZN2ns3fooEv`` -> ``foo``; an unmangled (extern "C") name is returned as is."""
    if not mangled.startswith("_Z"):
        return mangled
    rest = mangled[2:]
    nested = rest.startswith("N")
    if nested:
        rest = rest[1:]
    last = mangled
    while rest and rest[0].isdigit():
        digits = ""
        while rest and rest[0].isdigit():
            digits, rest = digits + rest[0], rest[1:]
        last, rest = rest[:int(digits)], rest[int(digits):]
        if not nested:
            break
    return last


def arch_specific(data: bytes) -> bool:
    """Whether the cubin ``data`` is an architecture-specific build (sm_90a; ``_arch_specific``); False when it
    does not parse (the error is reported where the cubin is read for its kernels)."""
    try:
        with damaged_elf("cubin"):
            return _arch_specific({s.name: s for s in _elffile(data, "cubin").iter_sections()})
    except InputError:
        return False


def is_cubin(data: bytes) -> bool:
    """True when ``data`` is an ELF file for EM_CUDA (machine 190 at byte 18, little-endian)."""
    return data[:4] == b"\x7fELF" and len(data) > 20 and int.from_bytes(data[18:20], "little") == EM_CUDA
