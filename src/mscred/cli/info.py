"""`mscred info MODEL_DIR [--json]`: what a saved model is, read and checked as `detect` would load it; of a fleet's
folder, a line per entity's model."""
from __future__ import annotations

import json

import click

from mscred.cli.params import NamedPath


def model_summary(model) -> dict:
    """A loaded model's description: its sensors, the settings that differ from the defaults, how it scores and
    flags, and its training history (JSON types)."""
    from mscred.config import MSCREDConfig
    from mscred.data.reading import Reading

    settings, defaults = model.config_.to_dict(), MSCREDConfig().to_dict()
    changed = {f"{section}.{name}": value for section, fields in settings.items() for name, value in fields.items()
               if value != defaults[section][name] and name not in ("n_sensors", "n_scales")}
    history = getattr(model, "history_", [])
    last = history[-1] if history else {}
    return {"sensors": list(model.sensors_), "n_sensors": len(model.sensors_),
            "windows": list(model.config_.signature.windows), "gap": model.config_.signature.gap,
            "steps": model.config_.signature.steps, "min_rows": model.min_rows,
            "score": model.config_.score.method, "threshold_rule": model.config_.score.threshold,
            "threshold": model.threshold_, "theta": model.theta_ or None,
            "epochs_trained": len(history), "train_loss": last.get("train_loss"), "val_loss": last.get("val_loss"),
            "changed_settings": changed,
            "reads_data_with": Reading.of_model(model.config_.train).options(),
            "rate_sensors": list(model.config_.train.rate_sensors), "rates_per_second": model.rates_per_second}


@click.command()
@click.argument("model_dir", type=NamedPath(file_okay=False, hint="give the model's folder, or a fleet's"))
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout, for scripts.")
def info(model_dir, as_json) -> None:
    """Describe the model in MODEL_DIR: sensors, window settings, score and threshold, training history, and the
    settings that differ from the defaults. The model is loaded and checked as `detect` loads it (a damaged one is
    exit 2, naming the damage), so a 0 exit says `detect` can use it.

    Given a fleet's folder (what `mscred fleet --out` wrote, or a folder of model folders), a line per entity's
    model, each loaded and checked the same way; a damaged one's line names the damage and the exit is 1."""
    from pathlib import Path

    from mscred.detector import CONFIG_FILE, MSCRED, WEIGHTS_FILE

    models = _fleet_models(Path(model_dir), CONFIG_FILE)
    if models:
        _fleet_info(model_dir, models, as_json)
        return
    model = MSCRED.load(model_dir, device="cpu")
    # (read again for what the model object does not keep: load has checked the file)
    written_by = json.loads((Path(model_dir) / CONFIG_FILE).read_text())["mscred_version"]
    summary = {"mscred_version": written_by, **model_summary(model)}
    if as_json:
        click.echo(json.dumps({"model": str(model_dir), **summary}))
        return
    sensors = summary["sensors"]
    shown = ", ".join(sensors[:8]) + (f", ... ({len(sensors) - 8} more)" if len(sensors) > 8 else "")
    theta = f"; theta {', '.join(f'{t:.3g}' for t in summary['theta'])}" if summary["theta"] else ""
    lines = [f"{model_dir}: an mscred model, written by mscred {written_by} ({WEIGHTS_FILE} checked)",
             f"sensors     {summary['n_sensors']}: {shown}",
             f"windows     {', '.join(map(str, summary['windows']))} rows, gap {summary['gap']}, {summary['steps']} "
             f"steps: a window needs {summary['min_rows']} rows",
             f"scoring     {summary['score']}{theta}; threshold {summary['threshold']:.4g} "
             f"({summary['threshold_rule']})"]
    if summary["epochs_trained"]:
        lines.append(f"trained     {summary['epochs_trained']} epoch(s); last train loss "
                     f"{summary['train_loss']:.4g}, val loss {summary['val_loss']:.4g}")
    changed = summary["changed_settings"]
    if summary["reads_data_with"]:
        lines.append(f"reads data  as {summary['reads_data_with']} (kept from train; detect, watch and calibrate "
                     "read the model's data so)")
    if summary["rate_sensors"]:
        per = {True: "second of the rows' times", False: "row (trained on rows without times)",
               None: "second where the rows have times, per row where not"}[summary["rates_per_second"]]
        lines.append(f"rates       {', '.join(summary['rate_sensors'])}: counters given to the network as their "
                     f"increase per {per}")
    lines.append("settings    " + (", ".join(f"{k}={v}" for k, v in changed.items()) if changed else "the defaults"))
    click.echo("\n".join(lines))


def _fleet_models(folder, config_file: str) -> dict:
    """The model folders by entity when ``folder`` is a fleet's (no model of its own, model folders in it or in its
    ``models/``); empty otherwise, so that a folder of neither gets `MSCRED.load`'s message."""
    from mscred.errors import InputError
    from mscred.fleet_detect import model_folders

    if (folder / config_file).is_file() or not folder.is_dir():
        return {}
    try:
        return model_folders(folder)
    except InputError:
        return {}


def _fleet_info(folder, models: dict, as_json: bool) -> None:
    """A line per entity's model (or its JSON object), each loaded as `detect` loads it; exit 1 if any is damaged."""
    from mscred.cli.main import one_line
    from mscred.detector import MSCRED
    from mscred.errors import InputError, PartlyDone

    rows = []
    for entity, path in models.items():
        try:
            rows.append({"entity": entity, "model": str(path), **model_summary(MSCRED.load(path, device="cpu"))})
        except InputError as err:   # (a damaged model is this entity's line, not the fleet's end)
            rows.append({"entity": entity, "model": str(path), "error": one_line(err)})
    damaged = sum("error" in row for row in rows)
    if as_json:
        click.echo(json.dumps({"fleet": str(folder), "models": rows}))
    else:
        width = max(len(row["entity"]) for row in rows)
        click.echo(f"{folder}: a fleet of {len(rows)} model(s){f', {damaged} damaged' if damaged else ''}")
        for row in rows:
            if "error" in row:
                click.echo(f"{row['entity']:<{width}}  damaged: {row['error']}")
                continue
            trained = (f"; {row['epochs_trained']} epoch(s), val loss {row['val_loss']:.4g}"
                       if row["epochs_trained"] else "")
            click.echo(f"{row['entity']:<{width}}  {row['n_sensors']} sensors; threshold {row['threshold']:.4g} "
                       f"({row['score']}, {row['threshold_rule']}){trained}")
    if damaged:
        raise PartlyDone(f"{damaged} of {len(rows)} models damaged")
