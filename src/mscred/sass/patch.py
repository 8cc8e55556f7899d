"""Rewrite one field of one instruction in a cubin, or in a cubin inside an executable's fatbin.

The articles' edit done safely: find the instruction whose field (immediate or register, at the bit range probe
found) holds the old value, insist that exactly one instruction matches, change the bits in a copy of the file,
read the copy back to check, and rename it into place (:func:`mscred.atomic.atomic_path`). Cubins stored
compressed in a fatbin (CUDA 13 does so by default for ``-rdc=true``) cannot be patched in place; they are refused
with that reason and the flag that avoids it (``nvcc --no-compress``).
"""
from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from mscred.atomic import atomic_path
from mscred.errors import InputError
from mscred.sass.cubin import Cubin, Kernel
from mscred.sass.fatbin import (Image, check_has_cubins, find_images, kernel_in_cubins, kernel_selector,
                                 numbered_kernel, read_input, several_cubins)
from mscred.sass.isa import KNOWN_FIELDS, Instruction, set_field
from mscred.sass.pe import is_pe, refresh_checksum
from mscred.sass.toolchain import disassemble, nvdisasm_error


@dataclass
class Match:
    """One instruction whose field holds the old value."""

    image: Image
    cubin: Cubin
    kernel: Kernel
    insn: Instruction
    file_offset: int  # of the instruction's first byte in the file

    def describe(self) -> str:
        return f"{self.image.arch} {self.kernel.name} +{self.insn.offset:#x} (file byte {self.file_offset:#x})"


@dataclass
class PatchResult:
    path_out: Path
    match: Match
    bits: tuple[int, int]
    before: Instruction
    after: Instruction
    asm_before: str = ""
    asm_after: str = ""


def _mnemonic(text: str) -> str:
    parts = text.split()
    if parts and parts[0].startswith("@"):  # predicate guard, e.g. "@!P0 MOV ..."
        parts = parts[1:]
    return parts[0] if parts else ""


def find_matches(data: bytes, where: str, kernel: str, bits: tuple[int, int] | None, field: str, old: int,
                 arch: str | None = None, at: int | None = None, instruction: str | None = None,
                 grep: str | None = None) -> tuple[list[Match], tuple[int, int]]:
    """Instructions of ``kernel`` in every patchable cubin of ``data`` whose field equals ``old`` (and that the
    selectors ``at``, ``instruction``, ``grep`` pick), with the bit range used."""
    found = _scan(data, where, kernel, bits, field, old, arch, at, instruction, grep)
    return found.matches, found.bits


@dataclass
class _Scan:
    matches: list[Match]    # hold the value and are selected
    ruled_out: list[Match]  # hold the value, ruled out by --at / --instruction / --grep
    bits: tuple[int, int]


def _scan(data: bytes, where: str, kernel: str, bits: tuple[int, int] | None, field: str, old: int,
          arch: str | None, at: int | None, instruction: str | None, grep: str | None) -> _Scan:
    """One pass over the kernel's instructions: those whose field holds ``old``, split into the ones the selectors
    pick and the ones they rule out (for the message when none is picked)."""
    images = find_images(data, where, arch)
    check_has_cubins(images, where)
    name, number = kernel_selector(kernel)
    found, ambiguous = kernel_in_cubins(images, name)
    if ambiguous and number is None:   # several kernels of one cubin fit: say which (as dump does), not "no kernel"
        raise ambiguous[0][1]
    found = numbered_kernel(found, ambiguous, images, kernel, where, arch, _compressed)   # (cubin N's, or why not)
    patchable = [image.arch for image, _, _ in found if image.file_offset is not None]
    if number is None and len(set(patchable)) < len(patchable):
        # Kernels of one architecture in several cubins (two units' static kernels of one mangled name, an
        # -rdc=true executable's linked and relocatable cubins): whichever held --old was patched, without the user
        # having chosen it, and where both held it no --at or --grep could tell them apart.
        raise several_cubins(found, name, where)
    in_cubin = {id(image): (cubin, k) for image, cubin, k in found}
    matches: list[Match] = []
    ruled_out: list[Match] = []
    seen_kernel = False
    compressed_with_kernel = []  # compressed (or unreadable) cubins that hold the kernel, or may
    used_bits = bits
    for image in images:
        if image.kind != "cubin":
            continue
        if image.data is None:
            if number is None:   # (NAME#N picked a readable cubin)
                compressed_with_kernel.append(image)
            continue
        if id(image) not in in_cubin:   # not in this cubin (or not the one NAME#N picks): look in the next
            continue
        cubin, k = in_cubin[id(image)]
        if image.file_offset is None:
            compressed_with_kernel.append(image)
            continue
        seen_kernel = True
        lo, hi = used_bits = bits or KNOWN_FIELDS[k.instruction_bits][field]
        if hi > k.instruction_bits:  # (the patched word would not fit its bytes: an OverflowError at the write)
            raise InputError(f"--bits {lo}:{hi}: past the end of {image.arch}'s {k.instruction_bits}-bit "
                             f"instructions (bits 0 to {k.instruction_bits})")
        if at is not None and (at % (k.instruction_bits // 8) or not 0 <= at < len(k.code)):
            raise InputError(f"{image.where}: --at {at:#x} is not the start of an instruction of kernel {k.name!r} "
                             f"({len(k.code):#x} bytes of {k.instruction_bits // 8}-byte instructions)")
        if at is not None and k.instruction_bits == 64 and at % 32 == 0:
            raise InputError(f"{image.where}: --at {at:#x} is a control word of kernel {k.name!r}, not an "
                             f"instruction ({image.arch}: the first 8 bytes of each 32-byte bundle)")
        asm = None
        if instruction is not None:
            asm = (disassemble(cubin.data, image.where) or {}).get(k.name)
            if not asm:
                raise InputError(f"{image.where}: --instruction needs nvdisasm for {image.arch} (none found that "
                                 f"reads it); select the instruction with --at or --grep instead")
        digits = _hex_digits(grep) if grep is not None else None
        for insn in k.instructions:
            if insn.field(lo, hi) != old:
                continue
            selected = ((at is None or insn.offset == at)
                        and (digits is None or digits in insn.hex().replace(" ", ""))
                        and (asm is None or _mnemonic(asm.get(insn.offset, "")).startswith(instruction.upper())))
            (matches if selected else ruled_out).append(
                Match(image, cubin, k, insn, image.file_offset + k.code_offset + insn.offset))
    if not seen_kernel:
        packed = [image for image in compressed_with_kernel if image.compression]
        if packed:
            raise _compressed(packed[0])
        if compressed_with_kernel:  # unreadable for another reason (a payload that is not a cubin)
            raise InputError(f"{compressed_with_kernel[0].where}: {compressed_with_kernel[0].note}")
        scope = f" for {arch}" if arch else ""
        raise InputError(f"{where}: no kernel {name!r} in any cubin{scope}")
    return _Scan(matches, ruled_out, used_bits or (0, 0))


def _compressed(image: Image) -> InputError | None:
    """The refusal of a cubin stored compressed, readable or not (for want of zstandard: installing it would let the
    cubin be read, not patched); None for one stored as is."""
    if not image.compression:
        return None
    # Not only -Xfatbin -compress-all: CUDA 13 compresses -rdc=true cubins by default, so the flag that helps is the
    # one that turns compression off.
    return InputError(f"{image.where}: the cubin is stored compressed ({image.compression}), which cannot be "
                      f"patched in place; rebuild with nvcc --no-compress (CUDA 13 compresses -rdc=true cubins by "
                      f"default, -Xfatbin -compress-all all of them) to patch it")


def _check_selectors(old: int, new: int, instruction: str | None, grep: str | None) -> None:
    """InputError for values and selectors that can match nothing: a negative field value (``--old -1`` read as
    "no instruction holds -0x1"), a --grep that is not hex digits (it is compared with the instruction's hex, so it
    filtered everything out without a word) and an empty --instruction or --grep (which select every instruction)."""
    for value, option in ((old, "--old"), (new, "--new")):
        if value < 0:
            raise InputError(f"{option} {value}: a field holds an unsigned number; give its bits (0x... for a "
                             f"negative immediate's two's complement)")
    if instruction is not None and not instruction.strip():
        raise InputError("--instruction '': give a mnemonic (prefix), e.g. STG")
    if grep is not None and not re.fullmatch(r"[0-9a-f]+", _hex_digits(grep)):
        raise InputError(f"--grep {grep!r}: give hex digits of the instruction as `sass dump` prints it, e.g. eedd2")


def _hex_digits(grep: str) -> str:
    """--grep as the digits it is compared with: without spaces, and without the 0x of each group that cuobjdump
    -sass writes (``/* 0x000000ccff057435 */``), which would otherwise never match."""
    return "".join(group.removeprefix("0x") for group in grep.lower().split())


def _ruled_out(ruled_out: list[Match], at: int | None, instruction: str | None, grep: str | None) -> str:
    """For "no instruction has ...": the selectors given (--at, --instruction, --grep) and the instructions that
    hold the value without them, so that a selector that ruled out the one instruction is seen as the cause."""
    given = [f"{option} {value if option != '--at' else hex(value)}" for option, value in
             (("--at", at), ("--instruction", instruction), ("--grep", grep)) if value is not None]
    if not given:
        return ""
    held = (", ".join(f"{m.image.arch} +{m.insn.offset:#x}" for m in ruled_out[:6]) +
            (", ..." if len(ruled_out) > 6 else ""))
    return f" among those {' and '.join(given)} select{f' (without them: {held})' if ruled_out else ''}"


def patch_file(path: str | os.PathLike, kernel: str, old: int, new: int, field: str = "immediate",
               bits: tuple[int, int] | None = None, out: str | os.PathLike | None = None,
               arch: str | None = None, at: int | None = None, instruction: str | None = None,
               grep: str | None = None) -> PatchResult:
    """Change ``field`` of the one instruction of ``kernel`` that holds ``old`` to ``new``; write ``out``.

    Parameters
    ----------
    path : path
        A cubin, or a host executable / shared library / object file / fatbin holding cubins (ELF, or a Windows
        .exe / .dll).
    kernel : str
        As ``Cubin.kernel`` takes it; ``NAME#N``: the kernel in the file's cubin number N (every cubin from 1, in
        file order, readable or not), which a name in several cubins of one architecture needs
        (``fatbin.numbered_cubin``).
    field : str
        "immediate" or "register"; with ``bits`` None, the bit range comes from ``isa.KNOWN_FIELDS``.
    bits : (lo, hi)
        Bit range ``[lo, hi)`` of the field (bit 0 = least significant bit of the instruction word).
    out : path
        Output file; default ``<path>.patched``. Pass ``path`` itself to patch in place (still atomic).
    arch, at, instruction, grep :
        Narrow the search: one architecture, one byte offset in the kernel, a mnemonic prefix (needs nvdisasm),
        or a hex substring of the instruction as ``sass dump`` prints it (the articles' ``grep eedd2``).
    """
    if field not in ("immediate", "register"):
        raise InputError(f"field {field!r}: use immediate or register")
    _check_selectors(old, new, instruction, grep)
    kernel_selector(kernel)   # (a bad NAME#N is refused before the file is read)
    src = Path(path)
    data = read_input(src, pipes=False)  # (a pipe has no file to copy or replace)
    scan = _scan(data, str(src), kernel, bits, field, old, arch, at, instruction, grep)
    matches, (lo, hi) = scan.matches, scan.bits
    for value, option in ((old, "--old"), (new, "--new")):
        if value >> (hi - lo):  # the field's bits cannot hold it: not "no instruction has it", nor a file's fault
            raise InputError(f"{option} {value} (= {value:#x}): does not fit in the {hi - lo}-bit field, bits "
                             f"[{lo}, {hi})")
    if not matches:
        raise InputError(f"{src}: no instruction of kernel {kernel!r} has {field} bits [{lo}, {hi}) = {old:#x}"
                         f"{_ruled_out(scan.ruled_out, at, instruction, grep)}")
    if len(matches) > 1:
        # Grouped by cubin and kernel, each named once: "sm_90 _Z4testPi +0x40, +0x90 (file bytes 0x..., 0x...)".
        groups: dict[tuple[str, str], list[Match]] = {}
        for m in matches:
            groups.setdefault((m.image.arch, m.kernel.name), []).append(m)
        listed = "; ".join(f"{arch} {name} " + ", ".join(f"+{m.insn.offset:#x}" for m in found[:6]) +
                           (", ..." if len(found) > 6 else "") +
                           f" (file bytes {', '.join(f'{m.file_offset:#x}' for m in found[:6])})"
                           for (arch, name), found in groups.items())
        # Two translation units' kernels of one plain name (a library's anonymous-namespace kernels) differ in
        # their mangled names, which -k takes.
        by_name = ", or -k with the mangled name" if len({name for _, name in groups}) > 1 else ""
        raise InputError(f"{src}: {field} bits [{lo}, {hi}) = {old:#x} found {len(matches)} times ({listed}); "
                         f"narrow it with --arch, --at, --instruction or --grep{by_name}")
    m = matches[0]
    word = set_field(m.insn.word, lo, hi, new)  # (fits: checked above)
    size = m.insn.bits // 8
    patched = bytearray(data)
    patched[m.file_offset:m.file_offset + size] = word.to_bytes(size, "little")
    if is_pe(data[:8192]):  # a Windows PE's fatbin is patched in place as an ELF's; its header checksum follows
        refresh_checksum(data, patched)
    target = Path(out) if out is not None else src.with_name(src.name + ".patched")
    if target.is_symlink():  # write through a link (e.g. --in-place on one): the file it names gets the patch
        target = target.resolve()
    after = Instruction(m.insn.offset, m.insn.bits, word, m.insn.control)
    # Read the patched bytes back through the same parser before anything is written: the cubin at the same file
    # byte (not the kernel found by name again, which may be in several cubins), its instruction at the same offset.
    again = next((image for image in find_images(bytes(patched), str(target))
                  if image.kind == "cubin" and image.file_offset == m.image.file_offset), None)
    cubin_after = again.cubin() if again is not None and again.data is not None else None
    kernel_after = cubin_after.kernels.get(m.kernel.name) if cubin_after is not None else None
    insn_after = next((insn for insn in kernel_after.instructions if insn.offset == m.insn.offset),
                      None) if kernel_after is not None else None
    if insn_after is None or insn_after.word != word or insn_after.field(lo, hi) != new:
        raise InputError(f"{src}: the patched copy does not read back as expected; nothing written")
    result = PatchResult(target, m, (lo, hi), m.insn, after)
    asm_before = (disassemble(m.cubin.data, m.image.where) or {}).get(m.kernel.name, {})
    if asm_before:
        # Where nvdisasm reads the original, the patched instruction must still be an instruction: bits that are
        # not that field (e.g. the control bits 105..127 taken for an immediate) can make an undefined encoding.
        patched_where = f"{target} (patched)"
        asm_after = (disassemble(cubin_after.data, patched_where) or {}).get(m.kernel.name, {})
        if m.insn.offset not in asm_after:
            why = " ".join((nvdisasm_error(cubin_after.data, patched_where) or "the instruction is missing").split())
            raise InputError(f"{src}: the patched instruction at +{m.insn.offset:#x} does not disassemble ({why}); "
                             f"are bits [{lo}, {hi}) its {field} field? nothing written")
        result.asm_before = asm_before.get(m.insn.offset, "")
        result.asm_after = asm_after[m.insn.offset]
    with atomic_path(target) as tmp:
        tmp.write_bytes(bytes(patched))
        os.chmod(tmp, stat.S_IMODE(src.stat().st_mode))  # an executable stays executable
    return result
