"""Parameter types the commands share: numbers that must be finite, seeds every random generator accepts, counts
JSON keeps exactly, paths that are not empty, text encodings Python knows (and the --encoding option), and how a
table's cells are read beyond its format (column names, missing-value text, a long table's columns; the options of
the commands that read a model's data: mscred.data.reading)."""
from __future__ import annotations

import math

import click

from mscred.config import MAX_COUNT, MAX_SEED


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


SEED = _Seed(0, MAX_SEED)


class _Count(click.IntRange):
    """A count (epochs, windows, processes), from ``min`` to 2**53 (``MAX_COUNT``: JSON's portable integers, which
    config.json records); help and errors say "2**53" rather than the 16-digit bound. A --batch-size of 10**30 was
    accepted and clamped to the windows, and recorded in config.json as a number a reader of doubles rounds;
    --epochs 2**53 + 1 trained for ever and --nproc would have started that many processes."""

    def __init__(self, min: int = 1) -> None:   # noqa: A002 - click's name
        super().__init__(min, MAX_COUNT)

    def _describe_range(self) -> str:
        return f"{self.min}<=x<=2**53"


COUNT = _Count(1)


class NamedPath(click.Path):
    """``click.Path`` that refuses a path given as "" (an unset shell variable): click and pathlib read it as ".", the
    current folder, so ``generate ''`` replaced its files there and ``demo --out ''`` or ``fleet '' --out f`` ran on
    whatever the folder held, without a word. ``hint`` says what to give instead (by default from the kinds of path
    the parameter takes)."""

    def __init__(self, *args, hint: str | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.hint = hint or ("give a folder name ('.' for the current folder)" if not self.file_okay
                             else "give a file name" if not self.dir_okay else "give a file or folder name")

    def convert(self, value, param, ctx):
        if isinstance(value, str) and value == "":
            self.fail(f"an empty path: {self.hint}", param, ctx)
        if isinstance(value, str) and value == "-" and not self.file_okay:
            # ('-' is standard input or output on a command line; a folder cannot be either: `calibrate --out -`
            # wrote a model folder named '-')
            self.fail(f"'-' (standard input or output) for a folder: {self.hint}, './-' for one named '-'", param,
                      ctx)
        return super().convert(value, param, ctx)


class _Encoding(click.ParamType):
    """A text encoding Python decodes with (``mscred.data.io.csv_encoding``), refused as a usage error before any
    work (a detect with --encoding utf8x loaded the model first)."""

    name = "encoding"

    def convert(self, value, param, ctx):
        from mscred.data.io import csv_encoding   # (here, not at import: the CLI starts without pandas)
        from mscred.errors import InputError

        try:
            csv_encoding(value)
        except InputError as err:
            self.fail(str(err), param, ctx)
        return value


ENCODING = _Encoding()


class _ColumnName(click.ParamType):
    """A table's column name as the readers compare it: stripped of blanks, not empty, not 'label' (--time-column)."""

    name = "column name"

    def convert(self, value, param, ctx):
        name = str(value).strip()
        if not name:
            self.fail("an empty column name", param, ctx)
        if name == "label":
            self.fail("'label' is the ground truth's column, not a time", param, ctx)
        return name


COLUMN_NAME = _ColumnName()


class _MissingText(click.ParamType):
    """Text a table's cells hold for a missing value (--na-value): stripped of blanks, as cells compare, not empty
    (an empty cell is missing anyway)."""

    name = "text"

    def convert(self, value, param, ctx):
        text = str(value).strip()
        if not text:
            self.fail("an empty text (empty cells are missing values anyway)", param, ctx)
        return text


MISSING_TEXT = _MissingText()


class _LongColumns(click.ParamType):
    """--long SENSOR,VALUE: a long table's two columns, the one naming each row's sensor and the one holding its
    value, as two names (stripped, not empty, not the same, not 'label')."""

    name = "sensor,value"

    def convert(self, value, param, ctx):
        if isinstance(value, tuple):
            return value
        names = [name.strip() for name in str(value).split(",")]
        if len(names) != 2 or not all(names) or names[0] == names[1] or "label" in names:
            self.fail(f"{value!r}: expected two column names, SENSOR,VALUE (e.g. Tag,Value)", param, ctx)
        return tuple(names)


LONG_COLUMNS = _LongColumns()


class _Period(click.ParamType):
    """--resample PERIOD: a positive duration (10s, 1min, 1h) or number, checked as ``mscred.data.resample``
    reads it and kept as given (stripped)."""

    name = "period"

    def convert(self, value, param, ctx):
        from mscred.data.resample import parse_period
        from mscred.errors import InputError

        try:
            return parse_period(value).text
        except InputError as error:
            self.fail(str(error).split(": ", 1)[-1], param, ctx)


PERIOD = _Period()


class _TimeZone(click.ParamType):
    """--time-zone ZONE: an IANA time zone name known here (``mscred.data.time_zone.checked_zone``), stripped."""

    name = "zone"

    def convert(self, value, param, ctx):
        from mscred.data.time_zone import checked_zone
        from mscred.errors import InputError

        try:
            return checked_zone(str(value).strip())
        except InputError as error:
            self.fail(str(error).split(": ", 1)[-1], param, ctx)


TIME_ZONE = _TimeZone()


class _States(click.ParamType):
    """--states NAME=STATE,STATE,...: a column of text states and its states in order (``data.states``), checked as
    given (the text kept, as the model keeps it)."""

    name = "name=state,..."

    def convert(self, value, param, ctx):
        from mscred.data.states import parse_state_spec
        from mscred.errors import InputError

        try:
            parse_state_spec(value)
        except InputError as error:
            self.fail(str(error).removeprefix(f"--states {value!r}: "), param, ctx)
        return str(value)


STATES = _States()


class _ColumnNames(click.ParamType):
    """--sensors / --drop-columns NAME,NAME...: column or sensor names, comma-separated (the option repeatable too;
    ``column_names`` joins the repeats), each stripped, not empty, not 'label', none twice."""

    name = "names"

    def convert(self, value, param, ctx):
        if isinstance(value, tuple):
            return value
        names = [name.strip() for name in str(value).split(",")]
        if not all(names):
            self.fail(f"{value!r}: an empty name (names are comma-separated: a,b,c)", param, ctx)
        if "label" in names:
            self.fail("'label' is the ground truth's column, not a sensor's", param, ctx)
        return tuple(names)


COLUMN_NAMES = _ColumnNames()


def column_names(given: tuple, option: str) -> tuple[str, ...] | None:
    """A repeatable COLUMN_NAMES option's values as one tuple of names (None where not given); a name given twice is
    a usage error naming ``option``."""
    names = tuple(name for group in given for name in group)
    if not names:
        return None
    twice = [name for name in dict.fromkeys(names) if names.count(name) > 1]
    if twice:
        raise click.BadParameter(f"{twice[0]!r} given twice", param_hint=f"'{option}'")
    return names

# The commands that read the user's CSV tables (train, detect, evaluate, fleet) take it; the name as given
# reaches load_table, which decides.
encoding_option = click.option(
    "--encoding", type=ENCODING, default=None, metavar="TEXT",
    help="text encoding of CSV files (default UTF-8, a BOM allowed); e.g. cp1252 or latin-1 for files exported by "
         "Windows tools")

# The commands that read data for a trained model (detect, calibrate, watch, fleet-detect, fleet-watch): None there
# means the model's own train.time_column (train --time-column), resolved by the command once the model is loaded
# (mscred.data.reading.Reading.of_model), and --na-value adds to the model's train.na_values.
time_column_option = click.option(
    "--time-column", "time_column", type=COLUMN_NAME, default=None, metavar="NAME",
    help="the data's column holding each row's time [default: the model's: 'timestamp', or the name train was given "
         "with --time-column]")
time_zone_option = click.option(
    "--time-zone", "time_zone", type=TIME_ZONE, default=None, metavar="ZONE",
    help="the IANA time zone of the data's local times written without a UTC offset (e.g. Europe/Berlin) "
         "[default: the model's, as train was given it]")
long_option = click.option(
    "--long", "long_columns", type=LONG_COLUMNS, default=None, metavar="SENSOR,VALUE",
    help="the data is a long table, one value a row: SENSOR names each row's sensor, VALUE holds its value; made "
         "wide as it is read [default: the model's, as train was given it]")
drop_columns_option = click.option(
    "--drop-columns", "drop_columns", type=COLUMN_NAMES, multiple=True, metavar="NAME,...",
    help="columns of the data that are not sensors (a status text, a unit, a comment), left out wherever present, "
         "besides the model's (train --drop-columns)")
na_value_option = click.option(
    "--na-value", "na_values", type=MISSING_TEXT, multiple=True, metavar="TEXT",
    help="text that stands for a missing sensor value (e.g. 'Bad', 'I/O Timeout'; repeat for several), besides the "
         "model's (train --na-value) and empty cells; --missing decides what a missing value gets")
