"""How SASS instruction words are laid out in a kernel's ``.text.<name>`` section, per GPU generation.

Two layouts exist for the architectures that current tools build:

* sm_5x / sm_6x (Maxwell, Pascal): 64-bit instructions in bundles of 32 bytes. The first 64-bit word of every
  bundle is a *control word* (stall counts, barriers, yield hints of the three instructions after it); the next
  three words are instructions. This is the layout the articles dumped with ``xxd -e -g 8``.
* sm_7x and later (Volta .. Blackwell): 128-bit instructions, each carrying its own control bits in the high
  bits (bits 105..127: stall, yield, write/read barriers, wait mask, reuse).

Bit numbering everywhere in this package: bit 0 is the least significant bit of the little-endian instruction word
read as one integer (``int.from_bytes(raw, "little")``): each 8-byte group as ``xxd -e`` prints it.
"""
from __future__ import annotations

from dataclasses import dataclass

# Bits 105..127 of a 128-bit instruction hold scheduling control (stall 105-108, yield 109, write barrier 110-112,
# read barrier 113-115, wait mask 116-121, reuse 122-125). They change when neighbouring code changes, so
# comparisons of instructions across compiler runs mask them out.
CONTROL_MASK_128 = ((1 << 128) - 1) ^ ((1 << 105) - 1)


@dataclass(frozen=True)
class Instruction:
    """One machine instruction of a kernel.

    Attributes
    ----------
    offset : int
        Byte offset of the instruction in the kernel's code (what nvdisasm prints as ``/*0020*/``).
    bits : int
        Width of the instruction word: 64 or 128.
    word : int
        The instruction word as an unsigned integer (little-endian read).
    control : int or None
        sm_5x/6x only: the control word of the bundle this instruction belongs to.
    """

    offset: int
    bits: int
    word: int
    control: int | None = None

    def field(self, lo: int, hi: int) -> int:
        """Return bits ``[lo, hi)`` of the word."""
        return (self.word >> lo) & ((1 << (hi - lo)) - 1)

    def hex(self) -> str:
        """The word as one number, most significant digit first: a 64-bit word as ``xxd -e -g 8`` shows it; a
        128-bit one (sm_7x+) as its high 64-bit half, a space, its low half -- xxd prints the halves the other way
        round (low half first), so that bit 127 reads leftmost here as in the bit numbering above."""
        if self.bits == 64:
            return f"{self.word:016x}"
        return f"{self.word >> 64:016x} {self.word & ((1 << 64) - 1):016x}"


def sm_number(arch: str | int) -> int:
    """``"sm_90a"`` / ``"90"`` / ``90`` -> 90."""
    if isinstance(arch, int):
        return arch
    digits = "".join(ch for ch in str(arch).lower().removeprefix("sm_").removeprefix("compute_") if ch.isdigit())
    if not digits:
        raise ValueError(f"not a GPU architecture: {arch!r}")
    return int(digits)


def instruction_bits(sm: int) -> int:
    """Instruction width of an architecture: 64 before Volta (sm_70), 128 from it on."""
    if sm < 50:
        # Kepler's 64-bit words with one control word per seven instructions: no current tool emits them.
        raise ValueError(f"sm_{sm}: architectures before sm_50 are not supported")
    return 64 if sm < 70 else 128


def split_instructions(code: bytes, sm: int) -> list[Instruction]:
    """Split a kernel's code into instructions (control words of sm_5x/6x are attached, not listed).

    Parameters
    ----------
    code : bytes
        Contents of the ``.text.<kernel>`` section; its length is a multiple of 32 (sm_5x/6x) or 16 bytes.
    sm : int
        The architecture number, e.g. 50 or 90.
    """
    width = instruction_bits(sm)
    out: list[Instruction] = []
    if width == 128:
        for off in range(0, len(code) - len(code) % 16, 16):
            out.append(Instruction(off, 128, int.from_bytes(code[off:off + 16], "little")))
        return out
    # sm_5x/6x: [control, insn, insn, insn] per 32-byte bundle.
    for base in range(0, len(code) - len(code) % 32, 32):
        control = int.from_bytes(code[base:base + 8], "little")
        for k in range(1, 4):
            off = base + 8 * k
            out.append(Instruction(off, 64, int.from_bytes(code[off:off + 8], "little"), control))
    return out


def comparable(insn: Instruction) -> int:
    """The word without its scheduling-control bits, for matching instructions across compiler runs."""
    return insn.word & ~CONTROL_MASK_128 if insn.bits == 128 else insn.word


def set_field(word: int, lo: int, hi: int, value: int) -> int:
    """Return ``word`` with bits ``[lo, hi)`` replaced by ``value`` (which must fit)."""
    width = hi - lo
    if value < 0 or value >= (1 << width):
        raise ValueError(f"value {value:#x} does not fit in bits [{lo}, {hi})")
    mask = ((1 << width) - 1) << lo
    return (word & ~mask) | (value << lo)


# Fields that `mscred sass probe` found, per instruction layout, for the articles' kernels. `sass patch` uses them
# as defaults; tests/test_sass_probe.py re-derives them with the compilers so that a change shows up as a failure.
#   immediate: the 32-bit constant of the MOV-like instruction of `a[0] = VALUE` (MOV32I on sm_5x, MOV/IMAD.MOV
#              or HFMA2.MMA on sm_7x+);
#   register:  the source register of the store `STG [a], R` (the articles' "eedX200000070Y0R" low byte on sm_5x).
KNOWN_FIELDS: dict[int, dict[str, tuple[int, int]]] = {
    64: {"immediate": (20, 52), "register": (0, 8)},
    128: {"immediate": (32, 64), "register": (32, 40)},
}
