"""Every path a command takes refuses "" (an unset shell variable), which click and pathlib read as ".": `demo --out ''`
wrote its data, model and report into the current folder, `fleet '' --out f` trained on whatever that folder held."""
from __future__ import annotations

import click
import pytest

from mscred.cli.main import cli
from mscred.cli.params import NamedPath

from cli_helpers import run_cli


def _commands(group: click.Group, prefix=()):
    for name in group.list_commands(None):
        command = group.get_command(None, name)
        if isinstance(command, click.Group):
            yield from _commands(command, (*prefix, name))
        else:
            yield (*prefix, name), command


def _path_parameters():
    """(command words, parameter) for every parameter of every command that names a file or folder."""
    found = []
    for words, command in _commands(cli):
        for param in command.params:
            # (by name too: a path parameter declared without a path type is what this test is for; sass patch's
            # --old/--new are field values, its OLD/NEW arguments files)
            argument = isinstance(param, click.Argument) and param.name in {"path", "paths", "old", "new", "source"}
            option = isinstance(param, click.Option) and param.name in {"out", "output"}
            if isinstance(param.type, click.Path) or argument or option:
                found.append((words, param))
    return found


PATHS = _path_parameters()


def test_the_walk_finds_the_commands_paths():
    """(so that the tests below cannot pass by finding nothing)"""
    names = {(" ".join(words), param.name) for words, param in PATHS}
    assert {("train", "data"), ("train", "out"), ("detect", "model_dir"), ("detect", "out"), ("fleet", "source"),
            ("demo", "out"), ("evaluate", "scores_path"), ("generate", "out_dir"), ("sass dump", "path"),
            ("sass patch", "output")} <= names


@pytest.mark.parametrize("words,param", PATHS, ids=[f"{' '.join(w)}:{p.name}" for w, p in PATHS])
def test_every_path_parameter_refuses_an_empty_path(words, param):
    assert isinstance(param.type, NamedPath), f"{' '.join(words)} {param.name}: {type(param.type).__name__}"
    with pytest.raises(click.BadParameter, match="an empty path: give "):
        param.type.convert("", param, None)
    if not param.type.exists:   # (a name is still a name)
        assert param.type.convert("x", param, None) == "x"


FOLDERS = [(words, param) for words, param in PATHS if isinstance(param.type, NamedPath) and not param.type.file_okay]


@pytest.mark.parametrize("words,param", FOLDERS, ids=[f"{' '.join(w)}:{p.name}" for w, p in FOLDERS])
def test_a_folder_parameter_refuses_a_dash(words, param):
    """'-' is standard input or output on a command line, which no folder can be (`calibrate --out -` wrote a model
    folder named '-'); './-' names one."""
    with pytest.raises(click.BadParameter, match=r"'-' \(standard input or output\) for a folder: give .*'\./-'"):
        param.type.convert("-", param, None)
    if not param.type.exists:
        assert param.type.convert("./-", param, None) == "./-"


def test_the_folders_walk_finds_them():
    names = {(" ".join(words), param.name) for words, param in FOLDERS}
    assert {("train", "out"), ("calibrate", "out"), ("detect", "model_dir"), ("generate", "out_dir")} <= names


@pytest.mark.parametrize("argv,where", [
    (["demo", "--quick", "--out", ""], "--out"),
    (["fleet", "", "--out", "f"], "SOURCE"),
    (["fleet", "entities", "--out", ""], "--out"),
    (["train", "t.csv", "--out", ""], "--out"),
    (["detect", "", "t.csv", "--out", "s.csv"], "MODEL_DIR"),
    (["sass", "dump", "", "-k", "k"], "PATH"),
])
def test_an_empty_path_stops_the_command_before_it_writes(argv, where, tmp_path, capsys, monkeypatch):
    """Exit 2, one line naming the parameter, the current folder untouched."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.csv").write_text("a,b\n1,2\n")
    (tmp_path / "entities").mkdir()
    before = sorted(p.name for p in tmp_path.rglob("*"))
    code, out, err = run_cli(capsys, *argv)
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("mscred: error:") and "Traceback" not in err
    assert where in err and "an empty path" in err
    assert sorted(p.name for p in tmp_path.rglob("*")) == before
