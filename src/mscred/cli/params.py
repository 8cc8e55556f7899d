"""Parameter types the commands share: numbers that must be finite, seeds every random generator accepts."""
from __future__ import annotations

import math

import click


class FiniteFloatRange(click.FloatRange):
    """``click.FloatRange`` that also refuses nan and inf (which pass its comparisons: nan compares false to every
    bound), so that e.g. ``--beta nan`` is a usage error instead of a NaN threshold in the output."""

    name = "finite float range"

    def convert(self, value, param, ctx):
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number


# torch.manual_seed takes a 64-bit integer; a larger one failed deep inside ("Overflow when unpacking long long").
class _Seed(click.IntRange):
    """An integer from 0 to 2**63 - 1; help and errors say "0<=x<2**63" rather than the 19-digit upper bound."""

    def _describe_range(self) -> str:
        return "0<=x<2**63"


SEED = _Seed(0, 2 ** 63 - 1)


def non_empty_path(hint: str):
    """A click callback refusing a path given as "" (an unset shell variable), which click reads as ".", the current
    folder: ``generate ''`` replaced its files there without a word. ``hint`` says what to give instead."""
    def check(ctx, param, value):
        if value == "":
            raise click.BadParameter(f"an empty path: {hint}", ctx=ctx, param=param)
        return value
    return check
