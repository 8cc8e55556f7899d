"""What a change did to the machine code: two builds' kernels side by side.

Each kernel of the new build is matched with the kernel of the same mangled name and architecture in the old one
(or, failing that, with the one old kernel of the same function whose template arguments are its own with some
trailing ones added or dropped, or a bool one written as the int of the same value: a probe or a variant switch
added or retyped), and compared on what ``mscred.sass.inspect`` reads: registers, local frame (spills), shared
memory, instructions, the instruction groups (tensor-core ops, shared / global / local traffic, barriers), the
mnemonics whose counts moved most, with loops the largest loop's size, whether the instruction streams are the same
to the instruction (``code_digest``) and, when asked, their diff (``code_lines``). The question it answers is the one each kernel edit raises before any
GPU time is spent: did the loop get shorter, did a spill appear, did the 16-byte loads survive.
"""
from __future__ import annotations

import difflib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from mscred.sass.inspect import GROUPS, KernelSummary, stable_name

# The groups shown, in order, with their labels (mscred.sass.inspect.GROUPS defines them).
SHOWN_GROUPS = (("tensor", "tensor"), ("shared", "shared ld/st"), ("global", "global ld/st"), ("ldg128", "LDG.128"),
                ("local", "LDL/STL"), ("barrier", "barriers"))


@dataclass
class KernelDiff:
    """One kernel in the old and the new build (``None`` on the side it is missing from)."""

    arch: str
    name: str
    readable: str
    old: KernelSummary | None
    new: KernelSummary | None
    was: str | None = None  # the old kernel's demangled name, when it was matched by its template arguments

    @property
    def status(self) -> str:
        if self.old is None:
            return "added"
        if self.new is None:
            return "removed"
        return "changed" if _fingerprint(self.old) != _fingerprint(self.new) else "same"

    @property
    def identical(self) -> bool | None:
        """Whether both builds' instruction streams are the same to the instruction (None when not disassembled)."""
        if self.old is None or self.new is None or self.old.code_digest is None or self.new.code_digest is None:
            return None
        return self.old.code_digest == self.new.code_digest

    def mix_changes(self) -> list[tuple[str, int, int]]:
        """(mnemonic, old count, new count) for every mnemonic whose count moved, largest moves first."""
        old = self.old.mix if self.old else Counter()
        new = self.new.mix if self.new else Counter()
        moved = [(op, old.get(op, 0), new.get(op, 0)) for op in set(old) | set(new) if old.get(op, 0) != new.get(op, 0)]
        return sorted(moved, key=lambda m: (-abs(m[2] - m[1]), m[0]))

    def to_json(self) -> dict:
        def side(k: KernelSummary | None) -> dict | None:
            if k is None:
                return None
            out = {"registers": k.registers, "local_frame_bytes": k.frame_bytes, "shared_bytes": k.shared_bytes,
                   "instructions": k.instructions, "groups": k.groups if k.disassembler else None}
            if k.loops is not None:
                out["largest_loop"] = _largest_loop(k)
                out["tensor_loop"] = _tensor_loop(k)
                out["loops"] = len(k.loops)
            return out

        moved_lines = self.line_changes()
        return {"arch": self.arch, "kernel": self.name, "demangled": self.readable, "status": self.status,
                "was": self.was, "identical": self.identical, "old": side(self.old), "new": side(self.new),
                "mix_changes": [{"op": op, "old": a, "new": b} for op, a, b in self.mix_changes()],
                **({"line_changes": [c.to_json() for c in moved_lines]} if moved_lines is not None else {})}

    def line_changes(self) -> list["LineChange"] | None:
        """Per source line, the instructions each build made of it, for the lines whose count or mix moved,
        largest moves first; None unless both builds were read with their line tables (``inspect_file(...,
        lines=True)``). Lines are matched by file name and number (and the line they were inlined into), so two
        builds of one source compare line by line, whichever folder each was built in."""
        if self.old is None or self.new is None or self.old.lines is None or self.new.lines is None:
            return None
        old, new = _by_line(self.old.lines), _by_line(self.new.lines)
        out = []
        for key in set(old) | set(new):
            a, b = old.get(key), new.get(key)
            mix_a, mix_b = (a.mix if a else Counter()), (b.mix if b else Counter())
            if mix_a == mix_b:
                continue
            moved = {op: mix_b.get(op, 0) - mix_a.get(op, 0) for op in set(mix_a) | set(mix_b)
                     if mix_a.get(op, 0) != mix_b.get(op, 0)}
            source = (b or a).source
            edited = a is not None and b is not None and None not in (a.source, b.source) and a.source != b.source
            out.append(LineChange(key, sum(mix_a.values()), sum(mix_b.values()), moved, source, edited))
        return sorted(out, key=lambda c: (-abs(c.new - c.old), c.key))


@dataclass
class LineChange:
    """One source line's instructions in the old and the new build."""

    key: tuple  # (file name, line, and the file name and line it was inlined into, or None)
    old: int
    new: int
    moved: dict  # mnemonic -> new count minus old
    source: str | None
    edited: bool  # the line's text differs between the builds' sources (they are not one source)

    @property
    def label(self) -> str:
        name, line, into = self.key
        return f"{name}:{line}" + (f" (in {into[0]}:{into[1]})" if into else "")

    def to_json(self) -> dict:
        name, line, into = self.key
        return {"file": name, "line": line, "inlined_into": {"file": into[0], "line": into[1]} if into else None,
                "old": self.old, "new": self.new, "mix_changes": self.moved, "source": self.source,
                "source_edited": self.edited}


def _by_line(rows) -> dict:
    """LineRows by (file name, line, (file name, line) inlined into or None)."""
    out = {}
    for r in rows:
        into = (Path(r.called_from.file).name, r.called_from.line) if r.called_from else None
        out[(Path(r.place.file).name, r.place.line, into)] = r
    return out


def _fingerprint(k: KernelSummary) -> tuple:
    return (k.registers, k.frame_bytes, k.shared_bytes, k.instructions, tuple(sorted(k.mix.items())))


def _largest_loop(k: KernelSummary) -> int | None:
    return max((lp.instructions for lp in k.loops), default=None) if k.loops is not None else None


def _tensor_loop(k: KernelSummary) -> int | None:
    """Instructions of the loop whose own code holds the most tensor-core instructions (the MMA main loop, which
    the largest loop, usually an outer one, hides), the innermost on a tie; None without one."""
    def tensor(lp) -> int:
        return sum(n for op, n in lp.mix.items() if op.split(".")[0] in GROUPS["tensor"])
    best = max(k.loops or [], key=lambda lp: (tensor(lp), lp.depth), default=None)
    return best.instructions if best is not None and tensor(best) else None


def _split_at_depth_zero(text: str, sep: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    return parts + [text[start:].strip()]


def template_parts(readable: str) -> tuple[str, tuple[str, ...]] | None:
    """A demangled kernel name as (the function with its parameter list and without its template arguments, the
    template arguments), e.g. ``void ns::k<2, true>(float*)`` -> (``void ns::k(float*)``, (``2``, ``true``));
    None when it has no template argument list."""
    text = readable.strip()
    if not text.endswith(")"):
        return None
    depth = 0
    for i in range(len(text) - 1, -1, -1):  # the parameter list: the last parenthesised group at depth 0
        depth += {")": 1, "(": -1}.get(text[i], 0)
        if depth == 0:
            head, params = text[:i], text[i:]
            break
    else:
        return None
    if not head.endswith(">"):
        return None
    depth = 0
    for j in range(len(head) - 1, -1, -1):  # its template argument list
        depth += {">": 1, "<": -1}.get(head[j], 0)
        if depth == 0:
            return head[:j] + params, tuple(_split_at_depth_zero(head[j + 1:-1], ","))
    return None


_BOOL_VALUES = {"false": "0", "true": "1"}


def _args_related(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """One argument list continues the other: a strict prefix of it (a parameter added with a default), or the same
    values where a bool parameter became an integer one (``false`` -> ``0``, ``true`` -> ``1``), or both."""
    if a == b:
        return False
    a = tuple(_BOOL_VALUES.get(x, x) for x in a)
    b = tuple(_BOOL_VALUES.get(x, x) for x in b)
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    return long_[:len(short)] == short


def diff_summaries(old: list[KernelSummary], new: list[KernelSummary]) -> list[KernelDiff]:
    """Kernels matched by architecture and mangled name (anonymous namespaces made stable, ``stable_name``), then
    those left over by their template arguments (``template_parts``: the same function, one argument list continuing
    the other, ``_args_related``, one candidate on each side): the new build's in its order, then those it lost."""
    keys: dict[int, tuple[str, str, int]] = {}
    for side in (old, new):
        # The n-th kernel of an architecture and name pairs with the n-th of the other build: two translation units
        # (a library's members, an executable's objects) may each have an anonymous-namespace or static kernel of
        # one name, which stable_name makes equal; keyed by name alone, both new ones were compared with the last
        # old one (a library diffed with itself read "1 changed").
        seen: Counter = Counter()
        for k in side:
            name = (k.arch, stable_name(k.name))
            keys[id(k)] = (*name, seen[name])
            seen[name] += 1

    def key(k: KernelSummary) -> tuple[str, str, int]:
        return keys[id(k)]

    old_by_key = {key(k): k for k in old}
    new_keys = {key(k) for k in new}
    left_old = [k for k in old if key(k) not in new_keys]
    left_new = [k for k in new if key(k) not in old_by_key]

    parts = {id(k): template_parts(k.readable or "") for k in left_old + left_new}  # parsed once per kernel

    def candidates(k: KernelSummary, pool: list[KernelSummary]) -> list[KernelSummary]:
        mine = parts[id(k)]
        if mine is None:
            return []
        return [other for other in pool if other.arch == k.arch and parts[id(other)] is not None
                and parts[id(other)][0] == mine[0] and _args_related(mine[1], parts[id(other)][1])]

    renamed: dict[int, KernelSummary] = {}  # id of a new kernel -> the old kernel it continues
    for k in left_new:
        olds = candidates(k, left_old)
        if len(olds) == 1 and len(candidates(olds[0], left_new)) == 1:
            renamed[id(k)] = olds[0]
    taken = {id(o) for o in renamed.values()}

    out = []
    for k in new:
        before = old_by_key.get(key(k)) or renamed.get(id(k))
        was = (before.readable or before.name) if id(k) in renamed else None
        out.append(KernelDiff(k.arch, k.name, k.readable or k.name, before, k, was))
    out += [KernelDiff(k.arch, k.name, k.readable or k.name, k, None) for k in left_old if id(k) not in taken]
    return out


def _change(old: int | None, new: int | None, percent: bool = False) -> str:
    if old is None or new is None:
        return f"{'-' if old is None else old} -> {'-' if new is None else new}"
    if old == new:
        return f"{new}"
    text = f"{old} -> {new} ({new - old:+d}"
    if percent and old:
        text += f", {100.0 * (new - old) / old:+.1f}%"
    return text + ")"


def code_diff(d: KernelDiff, context: int = 3) -> list[str] | None:
    """The kernel's instructions, old against new, as a unified diff (``code_lines`` on both sides); [] when they
    read the same, None when either side was not disassembled with its code."""
    if d.old is None or d.new is None or d.old.code is None or d.new.code is None:
        return None
    return list(difflib.unified_diff(d.old.code, d.new.code, "old", "new", n=context, lineterm=""))[2:]


def format_diff(diffs: list[KernelDiff], top: int = 8, show_same: bool = False, code_lines: int = 0,
                source_lines: int = 0) -> str:
    """One block per kernel that differs (or every kernel, with show_same), then a count line. code_lines > 0: under
    each kernel whose instructions differ (the same counts included), their unified diff, at most that many lines.
    source_lines > 0: the source lines whose instructions moved most (``KernelDiff.line_changes``), that many."""
    if not diffs:
        return "no kernels"
    lines = []
    for d in diffs:
        if d.status == "same" and not show_same and not (code_lines > 0 and d.identical is False):
            continue  # with code_lines, a kernel of the same counts but other instructions is shown with its diff
        lines.append(f"{d.arch:7} {d.status:8} {d.readable}")
        if d.status == "same" and d.identical is False:
            lines.append("        the same counts, other instructions or order")
        if d.was:
            lines.append(f"        was {d.was}")
        if d.old is None or d.new is None:
            k = d.new or d.old
            lines.append(f"        registers {k.registers}  local {k.frame_bytes}  shared {k.shared_bytes}  "
                         f"instructions {k.instructions}")
            continue
        o, n = d.old, d.new
        lines.append(f"        registers {_change(o.registers, n.registers)}  local {_change(o.frame_bytes, n.frame_bytes)}"
                     f"  shared {_change(o.shared_bytes, n.shared_bytes)}  instructions "
                     f"{_change(o.instructions, n.instructions, percent=True)}")
        if o.disassembler and n.disassembler:
            lines.append("        " + "  ".join(f"{label} {_change(o.groups.get(g, 0), n.groups.get(g, 0))}"
                                                for g, label in SHOWN_GROUPS))
            moved = d.mix_changes()[:top]
            if moved:
                lines.append("        most changed: " + "  ".join(f"{op} {b - a:+d}" for op, a, b in moved))
        if o.loops is not None and n.loops is not None:
            lines.append(f"        largest loop {_change(_largest_loop(o), _largest_loop(n), percent=True)} "
                         f"instructions; loops {_change(len(o.loops), len(n.loops))}")
            mma_old, mma_new = _tensor_loop(o), _tensor_loop(n)
            if mma_old is not None and mma_new is not None:
                lines.append(f"        tensor-core loop {_change(mma_old, mma_new, percent=True)} instructions")
        lines += _format_line_changes(d, source_lines, top)
        shown = code_diff(d) if code_lines > 0 else None
        if shown:
            lines += ["        " + line for line in shown[:code_lines]]
            if len(shown) > code_lines:
                lines.append(f"        ... {len(shown) - code_lines} more lines of the instruction diff")
    counts = Counter(d.status for d in diffs)
    summary = ", ".join(f"{counts[s]} {s}" for s in ("changed", "added", "removed", "same") if counts[s])
    identical = sum(d.identical is True for d in diffs)
    if counts["same"] and any(d.identical is not None for d in diffs if d.status == "same"):
        summary += f" ({identical} identical to the instruction)"
    lines.append(summary)
    if not any(d.old is not None and d.old.disassembler for d in diffs):
        lines.append("(no nvdisasm reads these cubins: instruction mix not compared)")
    return "\n".join(lines)


def _format_line_changes(d: KernelDiff, shown: int, top: int) -> list[str]:
    """The source lines whose instructions moved most, ``shown`` of them, each with its mnemonics' moves (``top``)."""
    if shown <= 0:
        return []
    changes = d.line_changes()
    if changes is None:
        return ["        (no source lines: a build without a line table; nvcc -lineinfo)"]
    if not changes:
        return ["        every source line: the same instructions"]
    width = max(len(c.label) for c in changes[:shown])
    out = ["        by source line:"]
    for c in changes[:shown]:
        moves = "  ".join(f"{op} {n:+d}" for op, n in sorted(c.moved.items(), key=lambda m: (-abs(m[1]), m[0]))[:top])
        text = c.source or ""
        text = text if len(text) <= 60 else text[:57] + "..."
        out.append(f"          {c.label:<{width}}  {_change(c.old, c.new)}  {moves}  {text}".rstrip())
    if len(changes) > shown:
        out.append(f"          ... {len(changes) - shown} more lines changed")
    if any(c.edited for c in changes):
        out.append("          (the two sources differ at some of these lines: lines are matched by number)")
    return out
