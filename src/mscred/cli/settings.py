"""`--set NAME=VALUE` of the training commands: any setting of ``mscred.config`` on the command line, by the names
``MSCRED(**settings)`` takes in Python (``gap=20``, ``windows=20,60,120``, ``train__lr=1e-3``).

The options cover what most runs change; the signature matrices' windows and gap (which must follow the data's
sampling rate: the paper's 10/30/60 rows are seconds at 1 Hz but hours at one row a minute), the learning rate, the
channels and the scoring details were Python-only. Each value is read by its setting's type; ``config_problem``
then checks it before any work, as it checks Python's."""
from __future__ import annotations

import typing
from typing import Any

import click

# Filled in from the data by fit: a value given would be replaced without a word.
FROM_DATA = {"n_sensors": "the data's sensor count", "n_scales": "the number of windows"}
_TRUE, _FALSE, _NONE = {"true", "yes", "on", "1"}, {"false", "no", "off", "0"}, {"none", "null", "auto"}


def read_value(text: str, kind) -> Any:
    """``text`` as a value of the type ``kind`` (a config field's annotation); ValueError when it is not one."""
    if typing.get_origin(kind) is typing.Union:   # Optional[X]: 'none' (or 'auto', 'null') for None
        if text.lower() in _NONE:
            return None
        kind = next(arg for arg in typing.get_args(kind) if arg is not type(None))
    if typing.get_origin(kind) is tuple:          # tuple[int, ...]: "10,30,60", brackets allowed
        if not text.strip("()[] "):               # "" or "[]": none (na_values' default)
            return ()
        items = [item.strip() for item in text.strip("()[] ").split(",")]
        if not all(items):
            raise ValueError(f"an empty item in {text!r}")
        return tuple(read_value(item, typing.get_args(kind)[0]) for item in items)
    if kind is bool:
        if text.lower() not in _TRUE | _FALSE:
            raise ValueError(text)
        return text.lower() in _TRUE
    if kind is int:
        return int(text)
    if kind is float:
        return float(text)
    return text


def describe(kind) -> str:
    """What ``read_value`` takes for ``kind``, for a message."""
    if typing.get_origin(kind) is typing.Union:
        inner = next(arg for arg in typing.get_args(kind) if arg is not type(None))
        return f"{describe(inner)} or 'none'"
    if typing.get_origin(kind) is tuple:
        return "a comma-separated list of " + {int: "integers", float: "numbers"}.get(typing.get_args(kind)[0], "items")
    return {bool: "true or false", int: "an integer", float: "a number"}.get(kind, "text")


class Setting(click.ParamType):
    """NAME=VALUE -> (name, value), the value read by the setting's type; a usage error (exit 2, one line) for an
    unknown name (with the nearest one), a value not of the type, or a setting that fit fills in from the data."""

    name = "name=value"

    def convert(self, value, param, ctx):
        if isinstance(value, tuple):
            return value
        from mscred.detector import SECTIONS, setting_field   # (here: the CLI starts without pandas)
        from mscred.errors import InputError

        name, sep, text = value.partition("=")
        name = name.strip()
        if not sep or not name:
            self.fail(f"{value!r}: expected NAME=VALUE (e.g. gap=20, windows=20,60,120, lr=1e-3)", param, ctx)
        try:
            section, field = setting_field(name)
        except InputError as err:
            self.fail(str(err), param, ctx)
        if field in FROM_DATA:
            self.fail(f"{name}: set by training from {FROM_DATA[field]}", param, ctx)
        kind = typing.get_type_hints(SECTIONS[section])[field]
        try:
            return name, read_value(text.strip(), kind)
        except ValueError:
            self.fail(f"{name}={text.strip()!r}: {section}.{field} takes {describe(kind)}", param, ctx)


SET_OPTION = click.option(
    "--set", "settings", type=Setting(), multiple=True, metavar="NAME=VALUE",
    help="Any setting of mscred.config, by the name MSCRED(...) takes in Python, e.g. --set windows=20,60,120 --set "
         "gap=20 --set lr=1e-3 (repeat it); each is checked before any work.")


def with_settings(overrides: dict[str, Any], settings: tuple[tuple[str, Any], ...]) -> dict[str, Any]:
    """The command's ``overrides`` (from its own options) with the ``--set`` ones added; one setting given both ways,
    or twice by --set, is a usage error rather than one of them dropped."""
    from mscred.detector import setting_field

    origin = {setting_field(key): "the command's own option" for key in overrides}
    merged = dict(overrides)
    for name, value in settings:
        field = setting_field(name)
        if field in origin:
            raise click.UsageError(f"--set {name}: {'.'.join(field)} is also given by {origin[field]}; give it once")
        origin[field] = f"--set {name}"
        merged[name] = value
    return merged
