"""Which source lines a kernel's machine code came from: its instructions counted per line of CUDA C++ or Triton
Python, from the cubin's line table, with how many sit inside loops and which instructions they are.

Why: ``inspect`` says how many instructions a kernel or one of its loops issues; this says which lines of the
source they came from. conv1's halo kernel and weight-gradient kernel needed Nsight Compute's source page on the GPU
for that question (``docs/kernel-experiments.md``: staging loops, 605 of a loop's 1,538 instructions); the cubin
answers it alone, on a machine without a GPU. The table is there when the code was compiled with it: ``nvcc
-lineinfo`` (or ``-G``), and Triton by default (unless ``TRITON_DISABLE_LINE_INFO=1``).

Code inlined from another function (every ``__device__`` helper at -O3, every ``@triton.jit`` helper) is counted at
the line that wrote it, with the kernel's own line it was inlined into beside it: the helper's lines called from
two places are two rows.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from mscred.errors import InputError
from mscred.sass.inspect import _code_offsets
from mscred.sass.loops import find_loops
from mscred.sass.patch import _mnemonic
from mscred.sass.toolchain import disassemble_with_lines, find_tool, nvdisasm_error

SOURCE_WIDTH = 72   # characters of a source line shown in the table


@dataclass(frozen=True)
class Place:
    file: str
    line: int

    def short(self) -> str:
        return f"{Path(self.file).name}:{self.line}"


@dataclass
class LineRow:
    """The instructions of one source line (as inlined into one line of the kernel, when inlined)."""

    place: Place                   # where their code was written (the innermost location)
    called_from: Place | None      # the kernel's own line it was inlined into; None when written in the kernel
    instructions: int = 0
    in_loops: int = 0              # of those, inside a loop (a backward branch's range, ``mscred.sass.loops``)
    mix: Counter = field(default_factory=Counter)
    source: str | None = None      # the line's text, when its file was found

    def to_json(self) -> dict:
        return {"file": self.place.file, "line": self.place.line,
                "inlined_into": (None if self.called_from is None
                                 else {"file": self.called_from.file, "line": self.called_from.line}),
                "instructions": self.instructions, "in_loops": self.in_loops,
                "mix": dict(self.mix.most_common()), "source": self.source}


@dataclass
class LineReport:
    kernel: str
    arch: str
    instructions: int          # the kernel's, as ``inspect`` counts them (trailing NOP padding left out)
    located: int               # of those, with a source location
    in_loops: int
    rows: list[LineRow]

    def to_json(self) -> dict:
        return {"kernel": self.kernel, "arch": self.arch, "instructions": self.instructions,
                "located": self.located, "in_loops": self.in_loops, "lines": [r.to_json() for r in self.rows]}


def line_report(cubin: bytes, kernel: str, arch: str, where: str, source_dirs: tuple[str, ...] = (),
                order: str = "count") -> LineReport:
    """``kernel``'s instructions in ``cubin`` grouped by source line; ``order`` "count" (most instructions first)
    or "source" (by file, then line). A source file named by the line table is read where it says, else looked
    for under ``source_dirs`` (by the longest tail of its path, then by name). InputError when no nvdisasm reads
    the cubin, or when the kernel has no line table (with how to get one)."""
    found = disassemble_with_lines(cubin, where)
    if found is None:
        if find_tool("nvdisasm") is None:
            raise InputError("sass lines reads the line table with nvdisasm, which is not here: install the CUDA "
                             "toolkit, or Triton (its wheel carries one: pip install 'mscred[gpu]')")
        raise InputError(f"{where}: nvdisasm does not read this {arch} cubin ({nvdisasm_error(cubin, where)})")
    asm, labels, places = found
    text = asm.get(kernel, {})
    if not text:   # (a damaged cubin whose code section nvdisasm names otherwise: not "no line table")
        raise InputError(f"{where}: nvdisasm listed no instructions for {kernel}")
    rows = line_rows(text, labels.get(kernel, {}), places.get(kernel, {}), SourceFiles(source_dirs))
    if rows is None:
        raise InputError(f"{where}: {kernel} has no source-line table: compile with nvcc -lineinfo (or -G); Triton "
                         "writes one unless TRITON_DISABLE_LINE_INFO=1")
    if order == "source":
        rows.sort(key=lambda r: (r.place.file, r.place.line, str(r.called_from)))
    return LineReport(kernel=kernel, arch=arch, instructions=len(_code_offsets(text)),
                      located=sum(r.instructions for r in rows), in_loops=sum(r.in_loops for r in rows), rows=rows)


def line_rows(text: dict[int, str], labels: dict[str, int], located: dict[int, tuple], sources: SourceFiles
              ) -> list[LineRow] | None:
    """One kernel's instructions (``{offset: text}``, its branch labels, its locations from ``parse_line_info``)
    grouped by source line, most instructions first; None when none of them has a location (no line table)."""
    offsets = _code_offsets(text)
    if not any(o in located for o in offsets):
        return None
    looped = set()
    for lp in find_loops(text, labels):
        looped.update(o for o in offsets if lp.start <= o <= lp.end)
    rows: dict[tuple[Place, Place | None], LineRow] = {}
    for o in offsets:
        chain = located.get(o)
        if not chain:
            continue
        inner, outer = Place(*chain[0]), Place(*chain[-1])
        key = (inner, outer if len(chain) > 1 and outer != inner else None)
        row = rows.setdefault(key, LineRow(*key))
        row.instructions += 1
        row.in_loops += o in looped
        row.mix[_mnemonic(text[o])] += 1
    for row in rows.values():
        row.source = sources.line(row.place)
    return sorted(rows.values(), key=lambda r: (-r.instructions, r.place.file, r.place.line))


class SourceFiles:
    """Source lines by file, each file read once (None for a file not found or not text)."""

    def __init__(self, dirs: tuple[str, ...]):
        self.dirs = [Path(d) for d in dirs]
        self.files: dict[str, list[str] | None] = {}

    def _find(self, name: str) -> Path | None:
        """The file where the line table says, else under a source folder: the longest tail of its path found
        there first (a build machine's /home/ci/repo/src/k.cu under a checkout: src/k.cu), its name last."""
        path = Path(name)
        parts = path.parts[1:] if path.is_absolute() else path.parts
        candidates = [path] + [d.joinpath(*parts[i:]) for d in self.dirs for i in range(len(parts))]
        return next((c for c in candidates if c.is_file()), None)

    def text(self, name: str) -> list[str] | None:
        """The file's lines (None when it is not found or not readable)."""
        if name not in self.files:
            path = self._find(name)
            try:
                self.files[name] = path.read_text(errors="replace").splitlines() if path else None
            except OSError:
                self.files[name] = None
        return self.files[name]

    def line(self, place: Place) -> str | None:
        lines = self.text(place.file)
        if lines is None or not 1 <= place.line <= len(lines):
            return None
        return lines[place.line - 1].strip()


def _hunks(numbers: list[int], context: int, end: int) -> list[tuple[int, int]]:
    """The line ranges to print: each line number with ``context`` lines either side (within 1..end), ranges that
    touch or overlap merged."""
    out: list[tuple[int, int]] = []
    for n in numbers:
        lo, hi = max(1, n - context), min(end, n + context)
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def format_annotated(report: LineReport, source_dirs: tuple[str, ...] = (), context: int = 2) -> str:
    """Each source file of the report, its lines with the instructions they made in the margin (a helper's line
    summed over the places it was inlined into): the lines with code, ``context`` lines around each, the stretches
    between left out ("..."); the files by instructions, most first. A file not found is named with its lines'
    counts alone."""
    sources = SourceFiles(source_dirs)
    per_file: dict[str, dict[int, list[int]]] = {}
    for r in report.rows:
        counts = per_file.setdefault(r.place.file, {}).setdefault(r.place.line, [0, 0])
        counts[0] += r.instructions
        counts[1] += r.in_loops
    out = [f"{report.kernel} ({report.arch}): {report.instructions} instructions, {report.in_loops} in loops; "
           "per line: instructions, of them in loops"]
    for name, lines in sorted(per_file.items(), key=lambda kv: -sum(c[0] for c in kv[1].values())):
        text = sources.text(name)
        total = sum(c[0] for c in lines.values())
        out.append(f"\n== {name} ({total} instructions)")
        if text is None:
            out.append("  (not found: --source-dir DIR)")
            out += [f"  {n:>6} {lines[n][0]:>6} {lines[n][1]:>6}" for n in sorted(lines)]
            continue
        for i, (first, last) in enumerate(_hunks(sorted(n for n in lines if n <= len(text)), context, len(text))):
            if i:
                out.append("     ...")
            for n in range(first, last + 1):
                counts = lines.get(n)
                margin = f"{counts[0]:>6} {counts[1]:>6}" if counts else " " * 13
                out.append(f"  {n:>6} {margin} | {text[n - 1]}".rstrip())
        beyond = sorted(n for n in lines if n > len(text))
        if beyond:   # (Triton places a few instructions past a function's last line)
            out.append(f"  past the file's end: " + ", ".join(f"line {n}: {lines[n][0]}" for n in beyond))
    return "\n".join(out)


def format_report(report: LineReport, top: int = 25, mix: int = 3, show_all: str = "--top 0") -> str:
    """The report as a table: a header line, then one line per source line (``top`` of them; 0: all; ``show_all``:
    the option that shows all, named when some are left out)."""
    rows = report.rows if top == 0 else report.rows[:top]
    lines_of = len({r.place for r in report.rows})
    unlocated = report.instructions - report.located
    head = (f"{report.kernel} ({report.arch}): {report.instructions} instructions, {report.located} from "
            f"{lines_of} source line{'s' if lines_of != 1 else ''}"
            f"{f' ({unlocated} with no line)' if unlocated else ''}, {report.in_loops} in loops")
    where = [r.place.short() + (f" (in {r.called_from.short()})" if r.called_from else "") for r in rows]
    width = max([len("line")] + [len(w) for w in where])
    mixes = ["  ".join(f"{op} {n}" for op, n in r.mix.most_common(mix)) for r in rows]
    mix_width = max([len("instructions")] + [len(m) for m in mixes]) if mix else 0
    out = [head, f"  {'insns':>6} {'share':>6} {'loops':>6}  {'line':<{width}}"
                 + (f"  {'instructions':<{mix_width}}" if mix else "") + "  source"]
    for r, w, m in zip(rows, where, mixes):
        source = r.source if r.source is not None else "-"
        if len(source) > SOURCE_WIDTH:
            source = source[:SOURCE_WIDTH - 3] + "..."
        out.append(f"  {r.instructions:>6} {100 * r.instructions / report.instructions:>5.1f}% {r.in_loops:>6}  "
                   f"{w:<{width}}" + (f"  {m:<{mix_width}}" if mix else "") + f"  {source}".rstrip())
    if len(rows) < len(report.rows):
        rest = report.rows[len(rows):]
        out.append(f"  ... {len(rest)} more line{'s' if len(rest) != 1 else ''} "
                   f"({sum(r.instructions for r in rest)} instructions; {show_all} shows all)")
    return "\n".join(out)
