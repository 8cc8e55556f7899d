"""Integers as C and C++ write them: the one reader of every number `mscred sass` takes.

``probe`` hands its values to the compiler as ``-DVALUE=<text>`` and then looks for the number the compiler made of
that text, so the two must read it alike: ``0314`` is octal 204, ``204u`` / ``0x10UL`` carry suffixes, ``1'000`` has
a C++14 digit separator, ``0b101`` is binary. The options of the other commands (``patch --old/--new/--at/--bits``,
``run --init``) read numbers the same way, so that a value probe took is taken by patch as written. What a compiler
would refuse (``08``: 8 is no octal digit; ``1_000`` and ``0o17``, Python's spellings, which nvcc reads as
user-defined literals) is refused here, with what to write instead.
"""
from __future__ import annotations

import re

from mscred.errors import InputError

# A sign (unary + or -, as `-DVALUE=-1` puts it before the literal), then a literal: hexadecimal, binary, octal (a
# leading 0, the literal 0 itself included) or decimal, with digit separators (') between digits only, and an
# integer suffix: u, l, ll, z (C++23) in either order with u, in one case for l/ll (lL is no suffix).
_LITERAL = re.compile(r"""
    (?P<sign>[+-]?)\s*
    (?:0[xX](?P<hex>[0-9a-fA-F](?:'?[0-9a-fA-F])*)
      |0[bB](?P<bin>[01](?:'?[01])*)
      |(?P<oct>0(?:'?[0-7])*)
      |(?P<dec>[1-9](?:'?[0-9])*))
    (?:[uU](?:ll|LL|[lLzZ])?|(?:ll|LL|[lLzZ])[uU]?)?
    """, re.VERBOSE)

EXAMPLES = "e.g. 204, 0xcc, 0314 (octal), 0b11001100, 204u"


def parse_c_integer(text: str) -> int | None:
    """The integer a C/C++ compiler reads from ``text`` (an optionally signed integer literal, surrounding
    whitespace ignored), or None when ``text`` is not one (a register name such as ``v3``, an expression, ``08``)."""
    found = _LITERAL.fullmatch(text.strip())
    if found is None:
        return None
    for group, base in (("hex", 16), ("bin", 2), ("oct", 8), ("dec", 10)):
        digits = found.group(group)
        if digits is not None:
            number = int(digits.replace("'", ""), base)
            return -number if found.group("sign") == "-" else number
    return None  # pragma: no cover - one of the groups always matches


def c_integer(text: str, what: str) -> int:
    """``parse_c_integer``, or InputError naming ``what`` (an option) and why the text is no integer literal."""
    number = parse_c_integer(text) if isinstance(text, str) else None
    if number is not None:
        return number
    raise InputError(f"{what} {text!r}: not an integer literal{_why(str(text).strip())} ({EXAMPLES})")


def _why(text: str) -> str:
    """What a compiler would say about a near miss, briefly."""
    body = text.lstrip("+-").strip().lower()
    if re.fullmatch(r"0[0-9']*[89][0-9']*", body):
        return ": a leading 0 makes it octal, whose digits are 0-7"
    if "_" in body and re.fullmatch(r"[0-9a-fx_]+", body):
        return f": C separates digits with ' ({body.replace('_', chr(39))}), not _"
    if re.fullmatch(r"0o[0-7]+", body):
        return f": C writes octal with a leading 0 ({body} is 0{body[2:]})"
    if text.startswith(("+-", "-+", "--", "++")):
        return ": one sign at most"
    return ""
