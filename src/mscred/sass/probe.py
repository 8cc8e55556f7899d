"""Find where an instruction keeps an immediate or a register: compile variants of a kernel and diff the code.

The articles' method, automated. Immediate mode: compile ``a[0] = VALUE`` for several distinctive values, diff
the instruction words, and find the one instruction and bit position where every variant holds its own value
(``(word >> lo) & 0xffffffff == VALUE``). Register mode: compile a kernel whose store takes its data from a
register chosen by VALUE, plus a variant storing 0, which the compiler stores from the zero register RZ (255 on
sm_5x and later). The store instruction then differs between variants only inside one 8-bit field that reads
0xff in the RZ variant: that field is the register operand, and the other variants' values are their register
numbers. Neither mode needs a disassembler; when nvdisasm reads the architecture its text is shown beside the
answer as a check.
"""
from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from mscred.errors import InputError
from mscred.sass.cubin import Cubin, Kernel
from mscred.sass.isa import Instruction, comparable, instruction_bits, sm_number
from mscred.sass.literals import c_integer, parse_c_integer
from mscred.sass.toolchain import compile_cubin, disassemble

TEMPLATES = {"value": "value.cu", "register": "register.cu", "article": "article_test.cu"}
# Immediate mode: the articles' first value, one that spans 16 bits, and two that set bit 31 and bit 0 so that
# the bit range found is tight on both ends. All nonzero: 0 would be stored from RZ without any immediate.
DEFAULT_VALUES = {"value": ["0xcc", "0xdecc", "0x12345678", "0x9abcdef1"], "register": ["0", "v0", "v3", "v6"]}
REGISTER_BITS = 8  # R0..R254 plus RZ = 255 on sm_5x .. sm_12x
RZ = 0xFF


def template_path(name_or_path: str) -> Path:
    """A built-in template by name (value, register, article) or a user's .cu file."""
    if name_or_path in TEMPLATES:
        return Path(str(resources.files("mscred.sass") / "templates" / TEMPLATES[name_or_path]))
    path = Path(name_or_path)
    if path.is_dir():
        raise InputError(f"--template {name_or_path}: is a folder; give a .cu file (built-in: {', '.join(TEMPLATES)})")
    if not path.is_file():
        raise InputError(f"{name_or_path}: no such template file (built-in: {', '.join(TEMPLATES)})")
    return path


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_placeholder(template: Path, placeholder: str) -> None:
    """InputError, before any compile, when ``placeholder`` is no macro name (nvcc: "macro names must be
    identifiers") or ``template`` never mentions it (and includes no header of its own, which might): every variant
    would compile to the same code, reported after the compiles as values "not all found at one instruction"."""
    if not _IDENTIFIER.fullmatch(placeholder):
        raise InputError(f"--placeholder {placeholder!r}: not a C identifier (the macro the values are passed as, "
                         f"e.g. VALUE)")
    try:
        text = template.read_text(errors="replace")
    except OSError:
        return  # (nvcc reports what it cannot read)
    if re.search(r'^\s*#\s*include\s*"', text, re.MULTILINE):
        return  # (a header of its own may use it)
    if not re.search(rf"(?<![A-Za-z0-9_]){placeholder}(?![A-Za-z0-9_])", text):
        raise InputError(f"{template}: does not use {placeholder} (the placeholder the values are passed as "
                         f"-D{placeholder}=...); name the macro it uses with --placeholder")


@dataclass
class Variant:
    value: str
    kernel: Kernel
    cubin: bytes


@dataclass
class ProbeResult:
    """What probe found. ``to_json`` gives the issue's keys; the rest feeds the text report."""

    arch: str
    kernel: str
    instruction_bits: int
    offset: int
    immediate_bits: tuple[int, int] | None = None
    register_bits: tuple[int, int] | None = None
    words: list[tuple[str, Instruction]] = field(default_factory=list)  # (VALUE, the instruction) per variant
    register_values: dict[str, int] = field(default_factory=dict)      # VALUE -> register number (RZ = 255)
    differing_offsets: list[int] = field(default_factory=list)
    disassembly: dict[str, str] = field(default_factory=dict)          # VALUE -> nvdisasm text of the instruction

    def to_json(self) -> dict:
        out = {"arch": self.arch, "kernel": self.kernel, "instruction_bits": self.instruction_bits,
               "offset": self.offset,
               "immediate_bits": list(self.immediate_bits) if self.immediate_bits else None}
        if self.register_bits is not None:
            out["register_bits"] = list(self.register_bits)
        return out

    def layout(self) -> str:
        """The instruction as hex digits with V over immediate nibbles and R over register nibbles.

        The articles' notation: ``010VVVVVVVV7f00R`` for sm_50's MOV32I (R: a nibble of the register field).
        """
        word = self.words[0][1].word
        digits = []
        for nib in reversed(range(self.instruction_bits // 4)):
            lo, hi = 4 * nib, 4 * nib + 4

            def inside(bits):
                return bits is not None and bits[0] <= lo and hi <= bits[1]

            if inside(self.immediate_bits):
                digits.append("V")
            elif inside(self.register_bits):
                digits.append("R")
            else:
                digits.append(f"{(word >> lo) & 0xF:x}")
            if self.instruction_bits == 128 and nib == 16:
                digits.append(" ")
        return "".join(digits)


def compile_variants(template: Path, arch: str, values: list[str], kernel: str | None,
                     placeholder: str = "VALUE", jobs: int = 4) -> list[Variant]:
    """Compile ``template`` once per value (``-D<placeholder>=<value>``) and pick the kernel in each cubin."""
    def build(value: str) -> Variant:
        data = compile_cubin(template, arch, {placeholder: value})
        cubin = Cubin(data, f"{template.name} ({placeholder}={value}, {arch})")
        if kernel is not None:
            k = cubin.kernel(kernel)
        elif len(cubin.kernels) == 1:
            k = next(iter(cubin.kernels.values()))
        else:
            raise InputError(f"{template}: {len(cubin.kernels)} kernels ({', '.join(cubin.kernels)}); pass --kernel")
        return Variant(value, k, data)

    with ThreadPoolExecutor(max_workers=max(1, min(jobs, len(values)))) as pool:
        return list(pool.map(build, values))


def differing_offsets(variants: list[Variant]) -> list[int]:
    """Offsets of instructions whose words (without control bits) are not the same in every variant."""
    lists = [v.kernel.instructions for v in variants]
    n = min(len(x) for x in lists)
    out = [lists[0][i].offset for i in range(n) if len({comparable(x[i]) for x in lists}) > 1]
    longest = max(len(x) for x in lists)
    out += [lists[0][i].offset if i < len(lists[0]) else -1 for i in range(n, longest)]
    return out


def _immediate_value(text: str, width: int) -> int:
    """An immediate-mode value: an integer literal as the compiler reads it (``mscred.sass.literals``: 0314 is octal
    204, 204u and 0x10UL carry suffixes), from 1 to 2**width - 1. A negative one (-5) is stored as its two's
    complement, which never equals -5: it was reported as "not all found at one instruction" after the compiles."""
    value = c_integer(text, "probe value")
    if not 0 < value < 1 << width:
        raise InputError(f"probe value {text}: immediate mode needs values from 1 to 2**{width} - 1 (0x... for a "
                         f"negative number's two's complement)")
    return value


def find_immediate(variants: list[Variant], width: int = 32) -> tuple[int, int]:
    """The (offset, lo) where every variant's instruction holds its VALUE in bits ``[lo, lo + width)``."""
    common: set[tuple[int, int]] | None = None
    for v in variants:
        value = _immediate_value(v.value, width)
        hits = set()
        for insn in v.kernel.instructions:
            for lo in range(0, insn.bits - width + 1):
                if (insn.word >> lo) & ((1 << width) - 1) == value:
                    hits.add((insn.offset, lo))
        common = hits if common is None else common & hits
    if not common:
        raise InputError(f"{variants[0].kernel.name}: the values {', '.join(v.value for v in variants)} are not all "
                         f"found at one instruction and bit position (folded or split by the compiler?)")
    if len(common) > 1:
        where = ", ".join(f"offset {o:#x} bits [{lo}, {lo + width})" for o, lo in sorted(common))
        raise InputError(f"{variants[0].kernel.name}: the values sit in more than one place: {where}")
    return next(iter(common))


def _is_zero(value: str) -> bool:
    """The register template's anchor: 0 as the compiler reads it (0, 00, 0x0, 0u), stored from RZ."""
    return parse_c_integer(value) == 0


def value_key(value: str) -> object:
    """What a value means to the compiler: the integer of a C integer literal (0xcc, 204, 0314 (octal), 204u are one
    value), else the text itself (a register name such as v3)."""
    number = parse_c_integer(value)
    return value.strip() if number is None else number


def check_distinct(values: list[str]) -> None:
    """InputError when two values are one value to the compiler: equal variants compile to equal code, no bit
    differs, and the field would be "found" on the others alone."""
    spellings: dict[object, list[str]] = {}
    for value in values:
        spellings.setdefault(value_key(value), []).append(value)
    repeated = [" = ".join(dict.fromkeys(group)) for group in spellings.values() if len(group) > 1]
    if repeated:
        raise InputError(f"--values: {', '.join(repeated)} given more than once; the variants must differ")


def find_register(variants: list[Variant]) -> tuple[dict[str, int], int, dict[str, int]]:
    """({VALUE: offset}, lo, {VALUE: register}) of the store's source-register field in each register variant."""
    anchors = [v for v in variants if _is_zero(v.value)]
    others = [v for v in variants if not _is_zero(v.value)]
    if len(anchors) != 1 or len(others) < 2:
        raise InputError("register mode needs the value 0 (stored from RZ) and at least two register values, "
                         "e.g. --values 0,v0,v3,v6")
    anchor = anchors[0]
    common: dict[tuple[int, int], dict[str, tuple[int, int]]] | None = None
    for v in others:
        found: dict[tuple[int, int], tuple[int, int]] = {}
        for a in anchor.kernel.instructions:
            ca = comparable(a)
            for b in v.kernel.instructions:
                diff = ca ^ comparable(b)
                if diff == 0:
                    continue
                lowest, highest = (diff & -diff).bit_length() - 1, diff.bit_length() - 1
                if highest - lowest >= REGISTER_BITS:
                    continue
                for lo in range(max(0, highest - REGISTER_BITS + 1), lowest + 1):
                    if a.field(lo, lo + REGISTER_BITS) == RZ and b.field(lo, lo + REGISTER_BITS) != RZ:
                        found.setdefault((a.offset, lo), (b.offset, b.field(lo, lo + REGISTER_BITS)))
        if common is None:
            common = {key: {v.value: hit} for key, hit in found.items()}
        else:
            common = {key: {**seen, v.value: found[key]} for key, seen in common.items() if key in found}
    # The register operand must name a different register for different source values.
    common = {k: hits for k, hits in (common or {}).items() if len({r for _, r in hits.values()}) == len(hits)}
    if not common:
        raise InputError(f"{anchor.kernel.name}: no instruction differs between the variants in one register "
                         f"field only (is the template register-varying, with 0 among the values?)")
    if len(common) > 1:
        where = ", ".join(f"offset {o:#x} bits [{lo}, {lo + REGISTER_BITS})" for o, lo in sorted(common))
        raise InputError(f"{anchor.kernel.name}: the register field is ambiguous: {where}")
    (_, lo), hits = next(iter(common.items()))
    offsets = {value: off for value, (off, _) in hits.items()}
    registers = {value: reg for value, (_, reg) in hits.items()}
    registers[anchor.value] = RZ
    return offsets, lo, registers


def probe(arch: str, template: str = "value", values: list[str] | None = None, kernel: str | None = None,
          mode: str | None = None, placeholder: str = "VALUE", width: int = 32) -> ProbeResult:
    """Compile the variants and locate the immediate (mode "immediate") or register field (mode "register").

    Parameters
    ----------
    arch : str
        Target, e.g. ``sm_50`` (needs a CUDA 12 ptxas with CUDA 13) or ``sm_90``.
    template : str
        ``value`` (``a[0] = VALUE``, the default), ``register``, ``article``, or a path to a .cu file.
    values : list of str
        What to substitute for the placeholder; defaults per template (see DEFAULT_VALUES).
    mode : str
        "immediate" or "register"; default: "register" for the register template, else "immediate".
    """
    try:
        sm = sm_number(arch)
        instruction_bits(sm)  # rejects pre-Maxwell targets with a clear message
    except ValueError as err:  # (its message names the architecture)
        raise InputError(f"--arch: {err}") from None
    arch = f"sm_{sm}" if arch.lower().removeprefix("sm_").isdigit() else arch.lower()
    mode = mode or ("register" if template == "register" else "immediate")
    if values is None:
        values = DEFAULT_VALUES["register" if mode == "register" else "value"]
    values = [str(v) for v in values]  # (the Python API may pass numbers: 0xcc is "204" to the compiler too)
    if len(values) < 2:
        raise InputError("--values: probe needs at least two values to compare")
    check_distinct(values)
    if mode == "immediate":
        for value in values:  # refused before the compiles, not after them
            _immediate_value(value, width)
    source = template_path(template)
    check_placeholder(source, placeholder)
    variants = compile_variants(source, arch, values, kernel, placeholder)
    first = variants[0].kernel
    result = ProbeResult(arch=arch, kernel=first.name, instruction_bits=first.instruction_bits, offset=0,
                         differing_offsets=differing_offsets(variants))
    if mode == "immediate":
        offset, lo = find_immediate(variants, width)
        result.offset, result.immediate_bits = offset, (lo, lo + width)
        result.words = [(v.value, _at(v.kernel, offset)) for v in variants]
        shown = variants
    elif mode == "register":
        offsets, lo, registers = find_register(variants)
        shown = [v for v in variants if not _is_zero(v.value)]
        # The store may move between variants when the scheduler reorders; each keeps its own offset.
        result.offset, result.register_bits = offsets[shown[0].value], (lo, lo + REGISTER_BITS)
        result.register_values = registers
        result.words = [(v.value, _at(v.kernel, offsets[v.value])) for v in shown]
    else:
        raise InputError(f"probe mode {mode!r}: use immediate or register")
    for (value, insn), v in zip(result.words, shown):
        text = (disassemble(v.cubin) or {}).get(v.kernel.name, {})
        if insn.offset in text:
            result.disassembly[value] = text[insn.offset]
    return result


def _at(kernel: Kernel, offset: int) -> Instruction:
    for insn in kernel.instructions:
        if insn.offset == offset:
            return insn
    raise InputError(f"{kernel.name}: no instruction at offset {offset:#x} in this variant (code layout changed)")


def format_result(r: ProbeResult) -> str:
    """The text report: the diff the articles did by eye, then the answer."""
    layout = "64-bit words, one control word per three" if r.instruction_bits == 64 else "128-bit words"
    lines = [f"{r.arch}  kernel {r.kernel}  ({layout})",
             f"instructions that differ between variants: "
             f"{', '.join(f'{o:#06x}' for o in r.differing_offsets) or 'none'}"]
    for value, insn in r.words:
        extra = f"  R{r.register_values[value]}" if value in r.register_values else ""
        asm = f"   {r.disassembly[value]}" if value in r.disassembly else ""
        lines.append(f"  {insn.offset:#06x}: {insn.hex()}   VALUE={value}{extra}{asm}")
    if r.immediate_bits:
        lines.append(f"immediate: bits [{r.immediate_bits[0]}, {r.immediate_bits[1]}) of the instruction at byte "
                     f"offset {r.offset:#x}")
    if r.register_bits:
        lines.append(f"register:  bits [{r.register_bits[0]}, {r.register_bits[1]}) of the instruction at byte "
                     f"offset {r.offset:#x} (RZ = 255 in the VALUE=0 variant)")
    lines.append(f"layout:    {r.layout()}")
    return "\n".join(lines)
