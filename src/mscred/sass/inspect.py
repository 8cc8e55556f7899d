"""Per-kernel machine-code summary of a cubin, fatbin, object, executable or shared library.

What a kernel change should be checked against: registers per thread, local memory (the frame holds spills and
local arrays; LDL/STL count the accesses), static shared memory, parameter bytes, and the instruction mix —
tensor-core ops (HMMA on sm_70+, HGMMA = wgmma on sm_90), FFMA, 16-byte vector loads (``.128``), global/shared
traffic, barriers. Counts come from nvdisasm when one reads the architecture; the resource numbers come from the
cubin itself and need no tool.
"""
from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import dataclass, field

from mscred.errors import InputError
from mscred.sass.fatbin import (check_has_cubins, check_readable, find_images, kernel_selector, numbered_cubin,
                                unreadable_cubins)
from mscred.sass.loops import Loop, find_loops, format_loops
from mscred.sass.patch import _mnemonic
from mscred.sass.toolchain import demangle, disassemble_with_labels, disassemble_with_lines

# Instruction groups worth a column, by mnemonic prefix (the first word of the disassembly, modifiers included).
GROUPS = {
    "tensor": ("HGMMA", "HMMA", "IMMA", "DMMA", "QGMMA", "IGMMA", "BGMMA", "UTCHMMA", "UTCQMMA", "UTCIMMA"),
    "ffma": ("FFMA",),
    "ldg128": (),  # 16-byte global loads: LDG.*.128, and LDGSTS.*.128 (cp.async global -> shared); see below
    "global": ("LDG", "STG", "RED", "ATOMG"),
    "shared": ("LDS", "STS", "LDSM", "STSM"),
    "local": ("LDL", "STL"),
    "tma": ("UTMALDG", "UTMASTG", "UBLKCP"),
    "barrier": ("BAR", "SYNCS"),
}


@dataclass
class KernelSummary:
    """One kernel's resources and instruction counts (counts empty when no disassembler read it)."""

    image: str
    arch: str
    name: str
    registers: int
    frame_bytes: int
    stack_bytes: int
    shared_bytes: int
    param_bytes: int
    instructions: int
    mix: Counter = field(default_factory=Counter)
    groups: dict = field(default_factory=dict)
    disassembler: bool = False
    readable: str = ""  # demangled name
    loops: list[Loop] | None = None  # when asked for (and disassembled)
    code_digest: str | None = None  # the instruction stream's hash (code_digest below), when disassembled
    code: list[str] | None = None  # the instructions as code_lines writes them, when asked for (and disassembled)
    cubin: int | None = None  # the number of its cubin in the file (Image.number: what -k NAME#N takes)
    lines: list | None = None  # its instructions per source line (mscred.sass.lines.LineRow), when asked for and
    #                            the cubin has a line table

    def to_json(self) -> dict:
        return {"image": self.image, "cubin": self.cubin, "arch": self.arch, "kernel": self.name,
                "demangled": self.readable or self.name, "registers": self.registers,
                "local_frame_bytes": self.frame_bytes, "stack_bytes": self.stack_bytes,
                "shared_bytes": self.shared_bytes, "param_bytes": self.param_bytes,
                "instructions": self.instructions, "groups": self.groups if self.disassembler else None,
                "mix": dict(self.mix.most_common()) if self.disassembler else None,
                **({"loops": [lp.to_json() for lp in self.loops]} if self.loops is not None else {})}


_ANONYMOUS = re.compile(r"(\d+)(_GLOBAL__N_)")


def stable_name(mangled: str) -> str:
    """The mangled name with each anonymous namespace written as the ABI's plain ``12_GLOBAL__N_1``: nvcc names it
    after the translation unit and a hash (``41_GLOBAL__N__dc70bf10_9_im2col_cu_f5da5b4b``), which changes from one
    build of a file to the next, so the same kernel would not match itself."""
    out, pos = [], 0
    for m in _ANONYMOUS.finditer(mangled):
        if m.start() < pos:
            continue
        length = int(m.group(1))
        out.append(mangled[pos:m.start()] + "12_GLOBAL__N_1")
        pos = m.start(2) + length
    return "".join(out) + mangled[pos:]


_LABEL_USE = re.compile(r"\.L\w+")
_SYMBOL_USE = re.compile(r"`\((_Z\w+)\)")


def _code_offsets(text: dict[int, str]) -> list[int]:
    """The instructions' offsets in order, without the code section's trailing NOP padding (the section is padded to
    an alignment with NOPs after the last EXIT or branch)."""
    offsets = sorted(text)
    while offsets and _mnemonic(text[offsets[-1]]) == "NOP":
        offsets.pop()
    return offsets


def _stable_symbols(line: str) -> str:
    """A branch or return target written as a mangled name, with its anonymous namespaces made stable."""
    return _SYMBOL_USE.sub(lambda m: f"`({stable_name(m.group(1))})", line)


def code_digest(text: dict[int, str], labels: dict[str, int]) -> str:
    """A hash of a kernel's instructions in order, with branch labels written as the offsets they stand for
    (nvdisasm numbers its labels across the whole file, so another kernel added before this one renames them),
    symbols with their anonymous namespaces made stable (``stable_name``: a RET.REL names its own kernel) and the
    code section's trailing NOP padding left out: two builds whose kernel has the same digest run the same
    instructions on the same registers, to the instruction."""
    h = hashlib.sha1()
    for off in _code_offsets(text):
        line = _LABEL_USE.sub(lambda m: f"{labels[m.group(0)]:#x}" if m.group(0) in labels else m.group(0), text[off])
        h.update(f"{off:x} {_stable_symbols(line)}\n".encode())
    return h.hexdigest()


def code_lines(text: dict[int, str], labels: dict[str, int]) -> list[str]:
    """A kernel's instructions for reading side by side with another build's: without their offsets, each branch
    target named ``L1``, ``L2``, ... in the order of the offsets it stands for (so that two builds with the same
    branches name them alike, whatever nvdisasm numbered them) and written as a line of its own before the
    instruction it marks, symbols with their anonymous namespaces made stable, trailing NOP padding left out."""
    names = {label: f"L{i + 1}" for i, (label, _) in enumerate(sorted(labels.items(), key=lambda kv: kv[1]))}
    at = {}
    for label, off in labels.items():
        at.setdefault(off, []).append(names[label])
    out = []
    for off in _code_offsets(text):
        out += [f"{name}:" for name in sorted(at.get(off, []), key=lambda n: int(n[1:]))]
        out.append("    " + _stable_symbols(_LABEL_USE.sub(lambda m: names.get(m.group(0), m.group(0)), text[off])))
    return out


def _is_ldg128(op: str) -> bool:
    """A 16-byte global load: LDG or LDGSTS (cp.async) with a .128 modifier anywhere (LDG.E.128, LDG.E.128.CONSTANT
    of __ldg / const __restrict__, LDGSTS.E.BYPASS.128.ZFILL ...)."""
    name, *modifiers = op.split(".")
    return name in ("LDG", "LDGSTS") and "128" in modifiers


def _count_groups(mix: Counter) -> dict:
    out = {}
    for group, prefixes in GROUPS.items():
        out[group] = sum(n for op, n in mix.items()
                         if any(op == p or op.startswith(p + ".") for p in prefixes)
                         or (group == "ldg128" and _is_ldg128(op)))
    return out


def inspect_file(data: bytes, where: str, arch: str | None = None, kernel: str | None = None,
                 loops: bool = False, code: bool = False, number_where_needed: bool = False,
                 lines: bool = False) -> list[KernelSummary]:
    """Summaries of every kernel of every readable cubin in ``data`` (optionally one arch, and only kernels whose
    mangled or demangled name contains ``kernel``: the table shows demangled names, so a template instantiation
    can be picked as printed, e.g. ``conv_pipelined<2, 1, 8``); with ``loops``, each kernel's loops too
    (``mscred.sass.loops``); with ``code``, its instructions (``code_lines``); with ``lines``, its instructions
    per source line where the cubin has a line table (``mscred.sass.lines.line_rows``).

    ``kernel`` as ``NAME#N``: only the kernels NAME fits in the file's cubin number N (``fatbin.numbered_cubin``,
    as dump, run and patch pick it; refused when cubin N is missing, unreadable or holds none). With
    ``number_where_needed`` (one side of a diff, whose other side may be a lone cubin), a file in which NAME fits
    kernels of one cubin at most, all of its cubins readable, is read whole instead: it needs no number."""
    name, number = kernel_selector(kernel) if kernel else (None, None)   # (a bad number: before the file is read)
    images = find_images(data, where, arch)
    check_has_cubins(images, where)  # PTX only: said so, with how to get SASS, not shown as "no kernels"
    if number is None:
        check_readable(images)  # cubins that all failed to read are said so, not shown as "no kernels"
    picked = []
    for image in images:
        if image.kind != "cubin" or image.data is None:
            continue
        cubin = image.cubin()
        readable = demangle(list(cubin.kernels))
        chosen = [k for k in cubin.kernels.values()
                  if not name or name in k.name or name in readable.get(k.name, k.name)]
        if chosen:
            picked.append((image, cubin, readable, chosen))
    if number is not None and not (number_where_needed and len(picked) <= 1 and not unreadable_cubins(images)):
        image = numbered_cubin(images, kernel, where, [image for image, *_ in picked], arch)
        picked = [entry for entry in picked if entry[0] is image]
    out = []
    if lines:
        from mscred.sass.lines import SourceFiles, line_rows   # (here: that module imports this one)
        sources = SourceFiles(())
    for image, cubin, readable, chosen in picked:
        if lines:   # (one nvdisasm run either way: -gi adds the locations to the same listing)
            found = disassemble_with_lines(cubin.data, image.where)
            asm, labels, places = found if found is not None else ({}, {}, {})
        else:
            found = disassemble_with_labels(cubin.data, image.where)
            (asm, labels), places = found if found is not None else ({}, {}), {}
        for k in chosen:
            text = asm.get(k.name)
            mix = Counter(_mnemonic(text[off]) for off in _code_offsets(text)) if text else Counter()
            out.append(KernelSummary(
                image=image.where, arch=image.arch, name=k.name, registers=k.registers, frame_bytes=k.frame_bytes,
                stack_bytes=max(k.min_stack_bytes, k.max_stack_bytes), shared_bytes=k.shared_bytes,
                param_bytes=sum(p.size for p in k.params), instructions=sum(mix.values()) or len(k.instructions),
                mix=mix, groups=_count_groups(mix) if text else {}, disassembler=bool(text),
                readable=readable.get(k.name, k.name),
                loops=find_loops(text, labels.get(k.name, {})) if loops and text else None,
                code_digest=code_digest(text, labels.get(k.name, {})) if text else None,
                code=code_lines(text, labels.get(k.name, {})) if code and text else None, cubin=image.number,
                lines=(line_rows(text, labels.get(k.name, {}), places.get(k.name, {}), sources)
                       if lines and text else None)))
    return out


def check_number_used(kernel: str | None, sides: list[tuple[str, list[KernelSummary]]]) -> None:
    """InputError when ``-k NAME#N`` picked no kernel of cubin N in any of ``sides`` (each read with
    ``number_where_needed``, so that a side needing no number was read whole): a number that fits neither side
    would otherwise be dropped without a word."""
    name, number = kernel_selector(kernel) if kernel else (None, None)
    if number is None or any(r.cubin == number for _, rows in sides for r in rows):
        return
    held = "; ".join(f"{path}: {', '.join(sorted({f'#{r.cubin}' for r in rows}, key=lambda t: int(t[1:])))}"
                     for path, rows in sides if rows)
    names = " nor ".join(path for path, _ in sides)
    raise InputError(f"-k {kernel!r}: {'neither ' if len(sides) == 2 else ''}{names} holds {name!r} in cubin "
                     f"#{number}, and no side holds it in several cubins (it is in {held})")


def format_summaries(rows: list[KernelSummary], top: int = 8) -> str:
    """A table: one line per kernel, then its most frequent instructions."""
    if not rows:
        return "no kernels"
    lines = [f"{'arch':7} {'regs':>4} {'local':>6} {'shared':>7} {'params':>6} {'insns':>6} "
             f"{'tensor':>6} {'FFMA':>5} {'LDG128':>6} {'LDL/STL':>7}  kernel"]
    # A kernel of one architecture and mangled name in several cubins (two units' static kernels, an -rdc=true
    # executable's linked and relocatable cubins): each row says its cubin's number, which -k NAME#N takes.
    cubins_of: dict[tuple[str, str], set] = {}
    for r in rows:
        cubins_of.setdefault((r.arch, r.name), set()).add(r.cubin)
    for r in rows:
        tag = f"  (cubin #{r.cubin})" if len(cubins_of[(r.arch, r.name)]) > 1 and r.cubin is not None else ""
        g = r.groups
        col = (lambda key: f"{g.get(key, 0)}" if r.disassembler else "-")
        lines.append(f"{r.arch:7} {r.registers:>4} {r.frame_bytes:>6} {r.shared_bytes:>7} {r.param_bytes:>6} "
                     f"{r.instructions:>6} {col('tensor'):>6} {col('ffma'):>5} {col('ldg128'):>6} "
                     f"{col('local'):>7}  {r.readable or r.name}{tag}")
        if r.disassembler and top:
            lines.append("        " + "  ".join(f"{op} {n}" for op, n in r.mix.most_common(top)))
        if r.loops is not None:
            lines += format_loops(r.loops, top) or ["        no loops"]
    if not any(r.disassembler for r in rows):
        lines.append("(no nvdisasm reads these cubins: instruction mix not shown)")
    return "\n".join(lines)
