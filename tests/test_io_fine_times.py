"""The exact order of timestamps written finer than float64 (io._exact_order), against the pairwise Decimal
comparison it replaced (``_old_order``, kept here as the oracle) on fresh random texts of every form Decimal reads."""
from decimal import Decimal, InvalidOperation, localcontext

import numpy as np
import pandas as pd
import pytest

from mscred.data import io
from mscred.errors import InputError


def _old_order(exact, bad):
    """io.check_time_order's comparison before the keys: each tied pair as two _exact_numbers, in a Python loop."""
    bad = np.array([r for r in bad if not io._exact_number(exact[r + 1]) > io._exact_number(exact[r])],
                   dtype=np.int64)
    equal = bool(len(bad)) and io._exact_number(exact[bad[0] + 1]) == io._exact_number(exact[bad[0]])
    return bad, equal


def _outcome(fn, *args):
    try:
        bad, equal = fn(*args)
    except Exception as exc:   # (the old comparison's errors are part of the behaviour to keep)
        return type(exc).__name__
    return bad.tolist(), equal


# Blanks str.strip drops; pandas does not read a number after \x1f
_BLANKS = (" ", "\t", " \n", "\r\n", "\x0b", "\x1f")


def _text(rng, value: Decimal, blanks: tuple[str, ...] = _BLANKS) -> str:
    """``value`` written in one of the forms Decimal reads: sign, leading/trailing zeros, exponent, '.5', '5.',
    ``blanks`` around, very long."""
    with localcontext(prec=200):   # (Decimal's 28 digits would round 1e30 + 1e-21)
        return _written(rng, value, blanks)


def _written(rng, value: Decimal, blanks: tuple[str, ...]) -> str:
    sign, body = ("-" if value < 0 else rng.choice(["", "", "+"])), abs(value)
    style = rng.integers(6)
    if style == 1:                                     # exponent: the mantissa shifted by e digits
        e = int(rng.integers(-25, 26))
        mant = format(body.scaleb(-e), "f")
        text = mant + rng.choice(["e", "E"]) + (rng.choice(["", "+"]) if e >= 0 else "-") + \
            f"{abs(e):0{int(rng.integers(1, 4))}d}"
    else:
        text = format(body, "f")
        if style == 2:                                 # zeros that change nothing
            text = "0" * int(rng.integers(1, 4)) + text + ("" if "." in text else ".") + "0" * int(rng.integers(4))
        elif style == 3 and text.startswith("0."):
            text = text[1:]                            # .5
        elif style == 3 and "." not in text:
            text += "."                                # 5.
        elif style == 4:                               # beyond the keys' width: left to _exact_number
            text = "0" * int(rng.integers(40, 80)) + text + ("" if "." in text else ".") + "0" * 10
    text = sign + text
    if rng.random() < 0.1:
        text = rng.choice(blanks) + text + rng.choice(("",) + blanks)
    return text


def _values(rng, n: int, base: int) -> list[Decimal]:
    """Close values (many equal, some decreasing, some of the other sign or zero) around ``base``."""
    steps = rng.choice([-2, -1, 0, 0, 1, 1, 1, 3], size=n)
    units = Decimal(1).scaleb(-int(rng.integers(0, 22)))
    with localcontext(prec=200):
        values = [Decimal(base) + int(k) * units for k in np.cumsum(steps)]
    return [-v if rng.random() < 0.03 else v for v in values]


@pytest.mark.parametrize("block", [io._KEY_BLOCK, 7])
@pytest.mark.parametrize("seed", range(12))
def test_order_matches_the_pairwise_decimals(monkeypatch, seed, block):
    monkeypatch.setattr(io, "_KEY_BLOCK", block)   # (7: rows and pairs in many blocks)
    rng = np.random.default_rng(seed)
    base = int(rng.choice([0, 1, 7, 1_700_000_000, 10 ** 30]))
    texts = np.array([_text(rng, v) for v in _values(rng, 400, base)], dtype=object)
    for bad in (np.arange(len(texts) - 1), np.sort(rng.choice(len(texts) - 1, 50, replace=False))):
        assert _outcome(io._exact_order, texts, bad) == _outcome(_old_order, texts, bad)
    # most texts take the keys, not the Decimal loop
    assert io._decimal_keys(texts)[3].mean() > 0.7


@pytest.mark.parametrize("seed", range(6))
def test_keys_order_as_decimal(seed):
    """Every pair of texts the keys take (``fast``) orders as its Decimals do, by the keys and by _exact_order."""
    rng = np.random.default_rng(100 + seed)
    texts = np.array([_text(rng, v) for v in _values(rng, 300, int(rng.choice([0, 3, 1_700_000_000])))]
                     + ["0", "-0", "+0.000e5", ".0", "0.", "1", "1.0", "1e0", "10e-1", "0.1E1", "-1", "-1e-0"],
                     dtype=object)
    sign, adj, digits, fast = io._decimal_keys(texts)
    k = np.flatnonzero(fast)
    assert len(k) > 0.7 * len(texts)
    i, j = np.repeat(k, 40), rng.choice(k, 40 * len(k))
    exact = [Decimal(t.strip()) for t in texts]
    want = np.array([(exact[b] > exact[a]) - (exact[b] < exact[a]) for a, b in zip(i, j)])
    assert (want == 0).sum() > 0.01 * len(want) and (want < 0).sum() > 0.1 * len(want)
    keys = [(int(x), bytes(d)) for x, d in zip(adj, digits)]     # (as Python tuples: the order as written)
    magnitude = [(keys[b] > keys[a]) - (keys[b] < keys[a]) for a, b in zip(i, j)]
    got = np.where(sign[i] != sign[j], np.sign(sign[j].astype(int) - sign[i]), sign[i] * np.array(magnitude))
    np.testing.assert_array_equal(got, want)
    # the same pairs through _exact_order, as rows 2m, 2m + 1 (those not increasing come back)
    pairs = np.stack([texts[i], texts[j]], axis=1).ravel()
    bad, equal = io._exact_order(pairs, np.arange(0, len(pairs), 2))
    np.testing.assert_array_equal(bad // 2, np.flatnonzero(want <= 0))
    assert equal == (want[bad[0] // 2] == 0)


@pytest.mark.parametrize("text, fast", [
    ("1700000000.000000001", True), ("  +1.5e3\t", True), ("-0", True), (".5", True), ("5.", True),
    ("1e", False), ("e5", False), (".", False), ("+", False), ("+-1", False), ("1.2.3", False), ("1e5.0", False),
    ("12e5.0", False), ("1 2", False), ("1_000", False), ("Infinity", False), ("nan", False), ("\u0661\u0662", False),
    ("1\x00", False), ("1e0000000000000005", False), ("1e000000000000005", True), ("1" * 65, False), ("1" * 64, True),
    ("", False), (" ", False), ("0x10", False), ("1.5\u00a0", False),
])
def test_which_texts_take_the_keys(text, fast):
    assert bool(io._decimal_keys(np.array([text, "1"], dtype=object))[3][0]) is fast


@pytest.mark.parametrize("text, plain", [
    ("1700000000.000000001", True), ("-0012.50", True), ("+.5", True), ("5.", True), ("0", True), ("-0.0", True),
    ("1.5e3", False), (" 1.5", False), ("1.5\t", False), ("1_0", False), ("1" * 65, False),
])
def test_plain_texts_take_the_string_keys(text, plain):
    """Times as they are written (no blank, no exponent) take _plain_keys' whole-text operations; the character
    matrix of _other_keys is the slow way."""
    values = np.array([text, "1"], dtype=object)
    width = max(1, min(len(text), io._KEY_CHARS))
    ascii_ = values.astype(f"S{width}")
    lens = np.array([len(text), 1])
    got = io._plain_keys(ascii_, ascii_.view(np.uint8).reshape(-1, width), lens)
    assert bool(got[3][0]) is plain
    if plain:   # the keys of the character matrix (adj and digits are a zero's sign's only)
        other = io._other_keys(ascii_.view(np.uint8).reshape(-1, width), lens)
        assert [k[0] for k in got[:3 if got[0][0] else 1]] == [k[0] for k in other[:3 if got[0][0] else 1]]


@pytest.mark.parametrize("pair", [
    ["1", "1_000"], ["1_000", "1_000.0"], ["Infinity", "1e308"], ["-Infinity", "-1"], ["\u0661\u0662", "12"],
    ["12", "\u0661\u0662"], ["1" * 80, "1" * 79 + "2"], ["1" * 80, "1" * 80 + ".0"], [1, "1.0"], [2.5, "2.50"],
    [Decimal("3.1"), "3.10"], [np.float64(0.5), ".5"], ["nan", "1"], ["1", "NaN"], ["sNaN", "1"], ["1x", "2"],
])
def test_awkward_values_behave_as_before(pair):
    """Texts the keys do not take (underscores, Infinity, Arabic-Indic digits, over 64 characters, NaN, text Decimal
    does not read) and values that are no text (read as str(value)) get the old answer, errors included."""
    texts = np.array(["0"] + pair + ["0"], dtype=object)
    bad = np.arange(3)
    assert _outcome(io._exact_order, texts, bad) == _outcome(_old_order, texts, bad)


def test_an_error_raises_at_the_first_pair_that_raised():
    """The old loop compared the pairs in row order: the first pair that fails decides the error."""
    texts = np.array(["1", "NaN", "2", "1x", "3"], dtype=object)
    with pytest.raises(InvalidOperation):
        io._exact_order(texts, np.arange(4))
    with pytest.raises(ValueError):
        io._exact_order(texts, np.array([2, 3]))


def _messages(monkeypatch, frame: pd.DataFrame) -> tuple[str, str, bool]:
    """table_from_frame's message (or "accepted") now and with the old comparison, and whether it compared texts."""
    def message():
        try:
            io.table_from_frame(frame)
        except InputError as err:
            return str(err)
        return "accepted"

    calls, real = [], io._exact_order
    with monkeypatch.context() as patch:
        patch.setattr(io, "_exact_order", lambda texts, bad: calls.append(len(bad)) or real(texts, bad))
        new = message()
        patch.setattr(io, "_exact_order", _old_order)
        old = message()
    return new, old, bool(calls)


@pytest.mark.parametrize("seed", range(8))
def test_messages_and_rows_as_before(monkeypatch, seed):
    """table_from_frame on fine times, sorted, with a pair swapped, a row repeated (as written or in another form)
    or a run reversed: the same message, row and all, as with the old comparison."""
    rng = np.random.default_rng(200 + seed)
    n = 3000
    ns = np.cumsum(rng.integers(0 if seed % 2 else 1, 5, n))
    values = [Decimal(1_700_000_000) + Decimal(int(k)).scaleb(-9) for k in ns]
    times = [_text(rng, v, _BLANKS[:-1]) if seed >= 4 else f"{v:.9f}" for v in values]
    r = int(rng.integers(1, n - 1))
    cases = [list(times)]
    cases.append(times[:r] + [times[r + 1], times[r]] + times[r + 2:])
    cases.append(times[:r] + [times[r - 1]] + times[r + 1:])
    cases.append(times[:r] + [format(values[r - 1].scaleb(-3), "f") + "e3"] + times[r + 1:])
    cases.append(times[:r] + times[r:r + 20][::-1] + times[r + 20:])
    for case in cases:
        frame = pd.DataFrame({"timestamp": np.array(case, dtype=object), "s": np.zeros(n)})
        new, old, compared = _messages(monkeypatch, frame)
        assert new == old and compared
    swapped = _messages(monkeypatch, pd.DataFrame({"timestamp": np.array(cases[1], dtype=object), "s": np.zeros(n)}))
    assert f"row {r + 2}: timestamp" in swapped[0] or seed % 2   # (strictly increasing times: the swap is the first)


def test_ns_epoch_csv(tmp_path):
    """The case that was slow: a CSV of epoch seconds to the nanosecond, read with load_table."""
    n = 5000
    times = [f"1700000000.{k:09d}" for k in range(n)]
    path = tmp_path / "ns.csv"
    pd.DataFrame({"timestamp": times, "s": np.arange(n) % 7}).to_csv(path, index=False)
    assert list(io.load_table(path).index) == times
    swapped = list(times)
    swapped[4000], swapped[4001] = swapped[4001], swapped[4000]
    pd.DataFrame({"timestamp": swapped, "s": np.arange(n) % 7}).to_csv(path, index=False)
    with pytest.raises(InputError, match=r"row 4002: timestamp '1700000000.000004000' is earlier than the row "
                                         r"before's '1700000000.000004001'"):
        io.load_table(path)
    repeated = list(times)
    repeated[3001] = repeated[3000]
    pd.DataFrame({"timestamp": repeated, "s": np.arange(n) % 7}).to_csv(path, index=False)
    with pytest.raises(InputError, match=r"row 3002: timestamp '1700000000.000003000' repeats the row before"):
        io.load_table(path)


def test_pandas_float_rounding_probe_matches_its_version():
    """pandas reads decimal text to the nearest float64 from 3.1 on (fast_float); 3.0.6 read '1700000000.0010273'
    a unit in the last place off, which the order check's float keys must not inherit."""
    major, minor = (int(v) for v in pd.__version__.split(".")[:2])
    assert io.pandas_rounds_floats() == ((major, minor) >= (3, 1))


def test_nearest_floats_mend_a_converter_one_unit_off(monkeypatch, tmp_path):
    """On a pandas whose converter is a unit off (3.0: its keys then need not round monotonically), the keys are
    Python's nearest floats: a swapped pair of fine times whose pandas keys looked increasing is refused, and a CSV of
    epoch seconds as time.time() writes them keeps float64 values equal to float(text)."""
    text = "1700000000.0010273"
    off = np.nextafter(float(text), 0.0)
    assert io._nearest_floats(np.array([text, "x", " 5 "], dtype=object), np.array([off, np.nan, 5.0])).tolist()[::2] \
        == [float(text), 5.0]
    monkeypatch.setattr(io, "pandas_rounds_floats", lambda: False)
    times = ["+0001700000000.0000034910", "+0.1700000000000003488e10"]   # decreasing; both read 1.7e9 + 3.5e-6
    frame = pd.DataFrame({"timestamp": np.array(["1700000000.000003"] + times, dtype=object), "s": np.zeros(3)})
    with pytest.raises(InputError, match="row 3: timestamp"):
        io.table_from_frame(frame)
    seconds = (1_700_000_000 + np.cumsum(np.random.default_rng(1).uniform(0.0009, 0.0011, 500))).tolist()
    path = tmp_path / "t.csv"
    pd.DataFrame({"timestamp": [repr(t) for t in seconds], "a": np.arange(500) % 7}).to_csv(path, index=False)
    table = io.load_table(path)
    assert table.index.dtype == np.float64 and table.index.tolist() == seconds
