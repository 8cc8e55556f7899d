"""io._nearest_floats (Python's nearest float64 of each text, for a pandas before 3.1 whose reading can be a unit in
the last place off) against the row-by-row ``float`` loop it replaced (``_old_nearest_floats``, kept here as the
oracle), on fresh random texts where rounding is hard: 17 significant digits, the exact midpoints between two
neighbouring floats (ties to even) written out in full, and texts one digit above or below a midpoint."""
import builtins
import sys
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from mscred.data import io


def _old_nearest_floats(texts, numbers):
    """io._nearest_floats before pyarrow read the plain texts: float() of each text pandas read, in a loop."""
    out = numbers.copy()
    for r in np.flatnonzero(np.isfinite(numbers)).tolist():
        try:
            out[r] = float(str(texts[r]).strip())
        except ValueError:
            pass
    return out


def _exact(value: Fraction) -> str:
    """A fraction whose denominator is a power of two as its exact decimal text."""
    places = value.denominator.bit_length() - 1
    digits = str(abs(value.numerator) * 5 ** places).rjust(places + 1, "0")
    return ("-" if value < 0 else "") + (f"{digits[:-places]}.{digits[-places:]}" if places else digits)


def _midpoints(rng, n: int) -> list[str]:
    """Exact midpoints between a float and the next one up (normal of any size, subnormal), the same a digit 1 far
    past the end (which rounds up), and one digit below (which rounds down)."""
    texts = []
    for _ in range(n):
        kind = rng.integers(3)
        if kind == 0:    # subnormal: up to ~750 significant digits
            x = float(rng.integers(1, 2 ** 52)) * 2.0 ** -1074
        else:
            x = float(rng.integers(2 ** 52, 2 ** 53)) * 2.0 ** int(rng.integers(-1020, 960) if kind == 1 else
                                                                    rng.integers(-80, -10))
        mid = _exact((Fraction(x) + Fraction(float(np.nextafter(x, np.inf)))) / 2)
        last = mid.rstrip("0")
        texts += [mid, mid + "0" * int(rng.integers(1, 30)) + "1", last[:-1] + str(int(last[-1]) - 1) + "9" * 25]
    return texts


def _hard_texts(rng, n: int) -> list[str]:
    """``n`` of each kind: 17 significant digits at any exponent, epoch seconds as time.time() and to the nanosecond,
    midpoints; in the forms Python writes and others (sign, '.5', '5.', exponent, ASCII blanks around)."""
    texts = [f"{rng.integers(10 ** 16, 10 ** 17)}e{rng.integers(-340, 300)}" for _ in range(n)]
    texts += [repr(t) for t in (1.7e9 + np.cumsum(rng.uniform(0.0009, 0.0011, n))).tolist()]
    texts += [f"1700000000.{k:09d}" for k in rng.integers(0, 10 ** 9, n).tolist()]
    texts += _midpoints(rng, n)
    out = []
    for text in texts:
        form = rng.integers(8)
        if form == 1:
            text = "-" + text
        elif form == 2:
            text = "+" + text
        elif form == 3 and text.startswith("0."):
            text = text[1:]
        elif form == 4 and "." in text and "e" not in text:   # the '.' moved into an exponent
            point = text.index(".")
            text = f"{text[:point]}{text[point + 1:]}E-{len(text) - point - 1}"
        elif form == 5:
            text = rng.choice(list(io._ASCII_BLANKS)) + text + rng.choice(["", " ", "\t", "\r\n"])
        out.append(text)
    return out


@pytest.mark.parametrize("seed", range(4))
def test_plain_floats_are_pythons_nearest_floats(seed):
    pytest.importorskip("pyarrow")
    texts = _hard_texts(np.random.default_rng(seed), 600)
    got = io._plain_floats(np.array(texts, dtype=object))
    want = np.array([float(t.strip()) for t in texts])
    assert not np.isnan(got).any()
    np.testing.assert_array_equal(got.view(np.uint64), want.view(np.uint64))   # (bit for bit: -0.0 too)


@pytest.mark.parametrize("text", [
    "1_000", "\u0661\u0662", "\x1f5", "5\x1c", "1.5\u00a0", "\u20035", "nan", "inf", "-Infinity", "0x10", "1.5e",
    "e5", ".", "+-1", "1 5", "1e5.0", "", " ", "1,5", "1.5d3", "5\n6",
])
def test_texts_not_plain_are_left_to_float(text):
    """Texts that float() reads otherwise than pyarrow (underscores, other scripts' digits and blanks, \\x1f that
    str.strip takes off and float() does not), or that are no decimal: NaN, for the loop."""
    pytest.importorskip("pyarrow")
    assert np.isnan(io._plain_floats(np.array([text, "1"], dtype=object))).tolist() == [True, False]


def _mixed(rng) -> tuple[np.ndarray, np.ndarray]:
    """Hard texts, texts only float() reads, texts nobody reads and values that are no text, with "pandas'
    reading" of them: a unit in the last place off, NaN (not read) or inf here and there."""
    texts = _hard_texts(rng, 100) + ["1_000", "\u0661\u0662", "\x1f5", "0x10", "1.5e", "x"]
    texts += [Decimal("0.1000000000000000055511151231257827"), 3, 2.5, b"7", np.str_("0.30000000000000004")]
    order = rng.permutation(len(texts))
    texts = np.array(texts, dtype=object)[order]
    numbers = np.nextafter(np.array([float(len(str(t))) for t in texts]), np.inf)
    numbers[rng.random(len(numbers)) < 0.1] = np.nan
    numbers[rng.random(len(numbers)) < 0.02] = np.inf
    return texts, numbers


@pytest.mark.parametrize("seed", range(3))
def test_nearest_floats_as_the_old_loop(monkeypatch, seed):
    """The same floats, bit for bit, as the loop: with pyarrow, without it, and with a text pyarrow cannot take (a
    lone surrogate, which no UTF-8 holds: every row then goes through the loop)."""
    texts, numbers = _mixed(np.random.default_rng(10 + seed))
    want = _old_nearest_floats(texts, numbers).view(np.uint64)
    np.testing.assert_array_equal(io._nearest_floats(texts, numbers).view(np.uint64), want)
    surrogate = texts.copy()
    surrogate[0] = "\ud8001"
    np.testing.assert_array_equal(io._nearest_floats(surrogate, numbers).view(np.uint64),
                                  _old_nearest_floats(surrogate, numbers).view(np.uint64))
    monkeypatch.setitem(sys.modules, "pyarrow", None)   # (import pyarrow: ImportError)
    assert io._plain_floats(texts) is None
    np.testing.assert_array_equal(io._nearest_floats(texts, numbers).view(np.uint64), want)


def test_only_texts_not_plain_go_through_the_loop(monkeypatch):
    """The plain texts are read at once (the loop took 0.54 s a million rows): float() sees only the others."""
    pytest.importorskip("pyarrow")
    seen = []
    monkeypatch.setattr(io, "float", lambda text: seen.append(text) or builtins.float(text), raising=False)
    texts = np.array(_hard_texts(np.random.default_rng(3), 50) + ["1_000", " \u0661\u0662 "], dtype=object)
    got = io._nearest_floats(texts, np.zeros(len(texts)))   # (as if pandas had read every one)
    assert seen == ["1_000", "\u0661\u0662"]
    assert got.tolist() == [float(t) for t in texts]


@pytest.mark.parametrize("form", ["csv", "semicolons", "blanks", "follower", "text column"])
def test_every_reading_path_gives_the_nearest_floats(tmp_path, form):
    """A CSV's 17-digit values read as Python's float() of their text, whatever the pandas and the path: pandas
    before 3.1 read about a third of them a unit in the last place off (its C parser's default converter, its
    python engine, to_numeric), so the same file scored differently there, and the follower's rows differed from
    the values written."""
    from mscred.data.follow import GrowingCsv

    values = np.random.default_rng(4).standard_normal((300, 3)) * 0.1
    texts = np.array([[repr(v) for v in row] for row in values.tolist()], dtype=object)
    lines = ["timestamp,s0,s1,s2"] + [",".join([str(t), *row]) for t, row in enumerate(texts.tolist())]
    if form == "text column":   # (an object column, as SCORES.csv's read without default NaNs can be)
        got = np.stack([io.coerce_float64(pd.Series(texts[:, j], dtype=object)) for j in range(3)], axis=1)
    elif form == "follower":
        path = tmp_path / "feed.csv"
        path.write_text("\n".join(lines[:101]) + "\n")
        follower = GrowingCsv(path)
        first = follower.poll()
        with open(path, "a") as handle:
            handle.write("\n".join(lines[101:]) + "\n")
        got = pd.concat([first, follower.poll()])[["s0", "s1", "s2"]].to_numpy()
        follower.close()
    else:
        separator, suffix = {"csv": (",", ".csv"), "semicolons": (";", ".csv"), "blanks": (" ", ".txt")}[form]
        path = tmp_path / f"table{suffix}"
        path.write_text("\n".join(line.replace(",", separator) for line in lines) + "\n")
        got = io.read_frame(path)[["s0", "s1", "s2"]].to_numpy()
    np.testing.assert_array_equal(got.view(np.uint64), values.view(np.uint64))
