"""`mscred info MODEL_DIR [--json]`: what a saved model is, read and checked as `detect` would load it."""
from __future__ import annotations

import json

import click

from mscred.cli.params import NamedPath


def model_summary(model) -> dict:
    """A loaded model's description: its sensors, the settings that differ from the defaults, how it scores and
    flags, and its training history (JSON types)."""
    from mscred.config import MSCREDConfig

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
            "changed_settings": changed}


@click.command()
@click.argument("model_dir", type=NamedPath(file_okay=False, hint="give the model's folder"))
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout, for scripts.")
def info(model_dir, as_json) -> None:
    """Describe the model in MODEL_DIR: sensors, window settings, score and threshold, training history, and the
    settings that differ from the defaults. The model is loaded and checked as `detect` loads it (a damaged one is
    exit 2, naming the damage), so a 0 exit says `detect` can use it."""
    from pathlib import Path

    from mscred.detector import CONFIG_FILE, MSCRED, WEIGHTS_FILE

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
    lines.append("settings    " + (", ".join(f"{k}={v}" for k, v in changed.items()) if changed else "the defaults"))
    click.echo("\n".join(lines))
