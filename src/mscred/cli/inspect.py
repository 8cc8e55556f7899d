"""`mscred inspect DATA... [--json]`: what a table holds, read as `train` would read it, before any training -- its
rows and sensors, its times and how evenly they step, its missing values, the sensors that never change or whose
range a few glitches set, what the default windows span in time -- and the options that would read it better."""
from __future__ import annotations

import json
import shlex

import click

from mscred.cli.params import (COLUMN_NAME, COLUMN_NAMES, LONG_COLUMNS, MISSING_TEXT, PERIOD, STATES, TIME_ZONE,
                               NamedPath, column_names, encoding_option)


@click.command()
@click.argument("data", nargs=-1, required=True, type=NamedPath(exists=True))
@click.option("--time-column", "time_column", type=COLUMN_NAME, default=None, metavar="NAME",
              help="The column holding each row's time, where it is not named 'timestamp' (as train takes it).")
@click.option("--time-zone", "time_zone", type=TIME_ZONE, default=None, metavar="ZONE",
              help="The time zone of local times written without a UTC offset (as train takes it).")
@click.option("--na-value", "na_values", type=MISSING_TEXT, multiple=True, metavar="TEXT",
              help="Text that stands for a missing sensor value (repeatable; as train takes it).")
@click.option("--long", "long_columns", type=LONG_COLUMNS, default=None, metavar="SENSOR,VALUE",
              help="The data is a long table, one value a row (as train takes it).")
@click.option("--resample", "resample", type=PERIOD, default=None, metavar="PERIOD",
              help="Put the rows on a regular time grid first (as train takes it).")
@click.option("--sensors", "only_sensors", type=COLUMN_NAMES, multiple=True, metavar="NAME,...",
              help="Read only these sensors (as train takes it).")
@click.option("--drop-columns", "drop_columns", type=COLUMN_NAMES, multiple=True, metavar="NAME,...",
              help="Columns that are not sensors, left out wherever present (as train takes it).")
@click.option("--states", "states", type=STATES, multiple=True, metavar="NAME=STATE,...",
              help="A column of text states read as each state's position among them (repeatable; as train takes "
                   "it).")
@click.option("--model", "model_dir", type=NamedPath(exists=True, file_okay=False), default=None,
              help="Read DATA as this model reads its data (its time column, missing-value text, long table, "
                   "columns and time grid, the options above over them but --resample and --sensors), and say "
                   "whether its sensors are the model's and its rows enough for the model's windows: before "
                   "`detect`.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object a table on stdout, for scripts.")
@encoding_option
def inspect(data, time_column, time_zone, na_values, long_columns, resample, only_sensors, drop_columns, states,
            model_dir, as_json, encoding) -> None:
    """Describe each table of DATA (files, or folders of tables) as `mscred train` would read it with the same
    options: rows and sensors, the ground-truth rows, the times (first, last, usual step, how unevenly they step,
    the largest jump), missing values per sensor (which `train` refuses unless --missing interpolate), sensors that
    never change or have no value at all, sensors whose range a few extreme values set, what the windows (10, 30,
    60 rows, or --model's) span in time, and the options to try. Nothing is written; a table `train` could not read
    is exit 2 with its one line (after the lines of the tables before it)."""
    from mscred.config import SignatureConfig
    from mscred.data.profile import profile
    from mscred.data.reading import Reading
    from mscred.fleet import tables_given

    model = None
    only_sensors = column_names(only_sensors, "--sensors")
    drop_columns = column_names(drop_columns, "--drop-columns") or ()
    if model_dir is None:
        reading = Reading(time_column, tuple(na_values), long_columns, resample, only_sensors, drop_columns,
                          time_zone, states=tuple(states))
        signature = SignatureConfig()
    else:
        from mscred.detector import MSCRED

        for option, value, what in (("--resample", resample, "grid"), ("--sensors", only_sensors, "sensors"),
                                    ("--states", states or None, "states")):
            if value is not None:
                raise click.UsageError(f"{option}: with --model the data is read as the model reads it (its own "
                                       f"{what})")
        model = MSCRED.load(model_dir, device="cpu")
        reading = Reading.of_model(model.config_.train, time_column, na_values, long_columns, drop_columns,
                                   time_zone)
        signature = model.config_.signature
    needed = max(signature.windows) + (signature.steps - 1) * signature.gap
    for path in [table for given in data for table in tables_given(given, "to inspect")]:
        table, text_columns, state_like = _read_leaving_out_text(path, encoding, reading)
        found = profile(table, signature.windows, needed)
        if model is not None:
            found.update(_against(model, found, table))
        found["text_columns"] = text_columns
        found["state_columns"] = state_like
        # (train refuses both: a column of words, and a sensor with nothing to interpolate from; a column of a few
        # words may be a digital tag's states, which --states reads as numbers -- not with --model: the model's own)
        left_out = [c for c in text_columns if c not in state_like or model is not None] + found["empty"]
        if left_out:
            found["suggested_options"].insert(0, shlex.join(["--drop-columns", ",".join(left_out)]))
        if model is None:   # (after --drop-columns, before the rest)
            at = 1 if left_out else 0
            found["suggested_options"][at:at] = [shlex.join(["--states", f"{name}={','.join(names)}"])
                                                 for name, names in state_like.items()]
        click.echo(json.dumps(found) if as_json else _described(found))


def _read_leaving_out_text(path, encoding, reading):
    """(the table at ``path`` read with its missing values kept, the columns without a number in them that were left
    out to read it, those of them whose few words may be states: {name: the words sorted}): where ``train`` would
    refuse such a column (``TextColumnError``), ``inspect`` reads the table without it, to describe the rest and
    suggest --drop-columns, or --states (the file read once: ``read_raw_frame``)."""
    import dataclasses

    from mscred.data.io import KEEP, TIMESTAMP, load_table, read_raw_frame
    from mscred.data.states import suggested_states
    from mscred.errors import TextColumnError

    raw = read_raw_frame(path, encoding=encoding, time_name=reading.time_column or TIMESTAMP)
    left_out: list[str] = []
    while True:
        try:
            table = load_table(path, missing=KEEP, encoding=encoding, reading=reading, raw=raw)
            names = [str(c).strip() for c in raw.columns]
            states = {name: suggested_states(raw.iloc[:, names.index(name)], reading.na_values)
                      for name in left_out if names.count(name) == 1}
            return table, left_out, {name: list(found) for name, found in states.items() if found}
        except TextColumnError as error:
            if error.column in reading.drop_columns:   # (cannot happen: a column left out is not read; no loop)
                raise
            left_out.append(error.column)
            reading = dataclasses.replace(reading, drop_columns=(*reading.drop_columns, error.column))


def _against(model, found: dict, table) -> dict:
    """What ``profile`` says of a table, read for ``model``: its sensors against the model's (``""`` where they are
    the same), and the options a `detect` of it would need (the model fixes how the data is read; only the missing
    policy is detect's to change)."""
    from mscred.data.profile import missing_options
    from mscred.detector import sensor_difference

    difference = "" if table.positional else sensor_difference(model.sensors_, table.sensors)
    gappy = set(found["missing"]) - set(found["empty"]) - set(model.config_.train.hold_sensors)   # (held: filled)
    # (the policy alone: the sensors held are the model's, which detect takes as they are)
    suggest = missing_options(gappy, found["step_like"])[:1] if model.config_.train.missing == "error" else []
    return {"model_sensors": difference, "suggested_options": suggest}


# The lines naming columns of a kind: (``profile``'s key, the line's label, what they are)
_NAMED = (("text_columns", "text", "no number in it, left out here (train refuses it as a sensor)"),
          ("empty", "empty", "no value in any row (train refuses it: nothing to interpolate from)"),
          ("constant", "constant", "no signal"),
          ("step_like", "step-like", "a few values (a state, a step tag; --missing hold, or --hold NAME beside "
                                     "interpolation, keeps one between its records)"),
          ("counters", "counters", "only rise, resets aside (a counter, a totalizer?): its value leaves the training "
                                   "range as it grows; --rate NAME gives the model its rate"))


def _described(found: dict) -> str:
    """``profile``'s dict as lines for a person."""
    sensors = found["sensors"]
    shown = ", ".join(sensors[:8]) + (f", ... ({len(sensors) - 8} more)" if len(sensors) > 8 else "")
    label = f"; label: {found['label_rows']:,} anomalous rows" if found["label_rows"] is not None else ""
    read = f" (resampled from {found['resampled_from']:,})" if found["resampled_from"] is not None else ""
    lines = [f"{found['source']}: {found['rows']:,} rows{read} x {len(sensors)} sensors{label}",
             f"sensors     {shown}"]
    if found["first_time"] is None:
        lines.append("times       none (rows are numbered); windows count rows")
    else:
        lines.append(f"times       {found['first_time']} to {found['last_time']}, usual step {found['usual_step']}")
        uneven, jump = found["uneven_steps"], found["largest_jump"]
        if uneven:
            lines.append(f"            uneven: a tenth of the steps under {uneven['p10']}, a tenth over "
                         f"{uneven['p90']}")
        if jump:
            lines.append(f"            the largest jump {jump['step']} at row {jump['row']}")
    if found["window_spans"]:
        spans = ", ".join(f"{w} rows {span}" for w, span in found["window_spans"].items())
        lines.append(f"windows     {spans} at the usual step")
    missing = found["missing"]
    if missing:
        worst = sorted(missing.items(), key=lambda kv: -kv[1])
        more = ", ..." if len(worst) > 5 else ""
        lines.append(f"missing     {sum(missing.values()):,} values in {len(missing)} sensor(s): "
                     + ", ".join(f"{name} {n:,}" for name, n in worst[:5]) + more)
    else:
        lines.append("missing     none")
    for key, label, what in _NAMED:
        if found[key]:
            lines.append(f"{label:<12}{', '.join(found[key][:8])}: {what}")
    for extreme in found["extreme"][:3]:
        lines.append(f"extreme     {extreme['sensor']}: {extreme['value']:.4g} at row {extreme['row']} sets its range "
                     "(a glitch?)")
    if not found["enough_rows"]:
        lines.append(f"too short   {found['rows']} rows; a window needs {found['rows_needed']}")
    if found.get("model_sensors") is not None:
        lines.append("model       " + (f"other sensors: {found['model_sensors']}" if found["model_sensors"] else
                                      "its sensors, all of them"))
    reader = "train" if found.get("model_sensors") is None else "detect"
    lines.append("suggests    " + (" ".join(found["suggested_options"]) or f"nothing: {reader} reads it as it is"))
    return "\n".join(lines)
