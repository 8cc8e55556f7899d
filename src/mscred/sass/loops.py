"""The loops of a kernel's machine code, and what each one executes per iteration.

A loop is a backward branch: ``@!P0 BRA `(.L_x_3)`` at 0x6980 whose label sits before it (0x3b00) closes the
range 0x3b00..0x6980; branches back to the same head are one loop (the furthest one ends it). Loops nest by
containment. For each loop: its instructions, those outside the loops nested in it ("own": what one iteration of
this loop issues besides its inner loops, if no branch inside skips any), its depth and its own instruction mix.

Why: a kernel's instruction count per launch is mostly its loops' bodies times their trip counts, and the static
mix of the whole kernel hides which loop holds what. Reading the loops of conv1's first halo kernel showed its
staging loops (~750 of ~1,100 instructions per tile) where the source suggested a cheap K loop
(``docs/kernel-experiments.md``).
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from mscred.sass.patch import _mnemonic

_TARGET_LABEL = re.compile(r"`\((\.L\w+)\)")
_TARGET_ADDRESS = re.compile(r"\b0x([0-9a-fA-F]+)\b")


@dataclass
class Loop:
    start: int          # offset of the loop head (the branch target)
    end: int            # offset of the backward branch
    instructions: int   # instructions in start..end
    own: int            # of those, outside the loops nested in this one
    depth: int          # 1 for an outermost loop
    mix: Counter = field(default_factory=Counter)  # mnemonics of the own instructions

    def to_json(self) -> dict:
        return {"start": self.start, "end": self.end, "instructions": self.instructions, "own": self.own,
                "depth": self.depth, "mix": dict(self.mix.most_common())}


def _target(text: str, labels: dict[str, int]) -> int | None:
    """The offset a branch jumps to: nvdisasm's label, or an absolute address as cuobjdump prints it."""
    m = _TARGET_LABEL.search(text)
    if m:
        return labels.get(m.group(1))
    m = _TARGET_ADDRESS.search(text.split(None, 2)[-1] if text.startswith("@") else text)
    return int(m.group(1), 16) if m else None


def find_loops(asm: dict[int, str], labels: dict[str, int] | None = None) -> list[Loop]:
    """Loops of one kernel from its disassembly (``{offset: "@P0 BRA `(.L_x_1)"}``) and label offsets, outermost
    first, then by address."""
    ends: dict[int, int] = {}  # head -> furthest backward branch to it
    for offset, text in asm.items():
        if not _mnemonic(text).startswith("BRA"):
            continue
        target = _target(text, labels or {})
        # target == offset: the BRA-to-itself that pads the code after the last EXIT, not a loop
        if target is not None and target < offset:
            ends[target] = max(ends.get(target, offset), offset)
    spans = sorted(ends.items(), key=lambda se: (se[0], -se[1]))
    offsets = sorted(asm)
    loops = []
    for start, end in spans:
        inside = [o for o in offsets if start <= o <= end]
        inner = [(s, e) for s, e in spans if (s, e) != (start, end) and start <= s and e <= end]
        own = [o for o in inside if not any(s <= o <= e for s, e in inner)]
        depth = sum(1 for s, e in spans if s <= start and end <= e)  # itself included
        loops.append(Loop(start, end, len(inside), len(own), depth, Counter(_mnemonic(asm[o]) for o in own)))
    return sorted(loops, key=lambda lp: (lp.depth, lp.start))


def format_loops(loops: list[Loop], top: int = 6) -> list[str]:
    """One line per loop, indented by depth: range, sizes and the most frequent own instructions."""
    lines = []
    for lp in sorted(loops, key=lambda lp: lp.start):
        mix = "  ".join(f"{op} {n}" for op, n in lp.mix.most_common(top))
        # Local-memory accesses in a loop are spills or a stack array in the hot path: always shown.
        local = sum(n for op, n in lp.mix.items() if op.split(".")[0] in ("LDL", "STL"))
        mix += f"  (LDL/STL {local})" if local and not any(op.split(".")[0] in ("LDL", "STL")
                                                            for op, _ in lp.mix.most_common(top)) else ""
        nested = f", {lp.own} outside inner loops" if lp.own != lp.instructions else ""
        # No mix (--top 0, or no instruction outside inner loops): no dangling ": " at the end of the line.
        mix = f": {mix.strip()}" if mix.strip() else ""
        lines.append(f"        {'  ' * (lp.depth - 1)}loop {lp.start:#06x}-{lp.end:#06x}: {lp.instructions} "
                     f"instructions{nested}{mix}")
    return lines
