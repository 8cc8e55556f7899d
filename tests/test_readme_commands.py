"""Every `mscred ...` command line in the code blocks of the README and `docs/sass.md` names a command that exists
and only options that command takes: the tours are what users copy, and an option renamed in the code must not live
on there."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = (ROOT / "README.md", ROOT / "docs" / "sass.md")


def _command_lines(doc: Path) -> list[str]:
    """The `mscred` invocations of the README's code blocks (after a pipe too), comments and [optional] brackets
    dropped, continuation lines (`\\`) joined."""
    blocks = re.findall(r"^```[a-z]*\n(.*?)^```", doc.read_text(), flags=re.S | re.M)
    out = []
    for block in blocks:
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split("  #", 1)[0].split(" # ", 1)[0].strip().removeprefix("$ ")
            at = 0 if line.startswith("mscred ") else line.find("| mscred ") + 2   # (a command, or a pipe's end)
            if at == 1:
                continue
            out.append(line[at:].split(" && ")[0].replace("[", "").replace("]", "").strip())
    return out


def _resolve(argv: list[str]) -> tuple[click.Command, list[str]]:
    """The (sub)command ``argv`` names and the words after it."""
    from mscred.cli.main import cli

    command, ctx, rest = cli, click.Context(cli), argv
    while isinstance(command, click.Group) and rest and not rest[0].startswith("-"):
        sub = command.get_command(ctx, rest[0])
        assert sub is not None, f"no command {rest[0]!r} in `mscred {' '.join(argv)}`"
        command, rest = sub, rest[1:]
    return command, rest


def _options(command: click.Command) -> set[str]:
    names = set()
    for param in command.params:
        if isinstance(param, click.Option):
            names.update(param.opts + param.secondary_opts)
    return names | {"-h", "--help"}


LINES = {doc: _command_lines(doc) for doc in DOCS}


def test_the_docs_show_commands():
    assert len(LINES[DOCS[0]]) >= 25 and len(LINES[DOCS[1]]) >= 10, LINES   # the tours at least


def _check(line: str) -> None:
    argv = shlex.split(line)[1:]
    command, rest = _resolve(argv)
    known = _options(command)
    for word in rest:
        if word.startswith("-") and word != "-":
            option = word.split("=", 1)[0]
            assert option in known, f"`{line}`: {command.name} has no option {option} (it has {sorted(known)})"


@pytest.mark.parametrize("line", [line for lines in LINES.values() for line in lines])
def test_each_readme_command_and_option_exists(line):
    _check(line)


@pytest.mark.parametrize("line", ["mscred detect model/ d.csv --out s.csv --no-such-option",
                                  "mscred sass no-such-command x.cubin",
                                  "mscred sass lines x.cubin -k k --anotate"])
def test_the_check_refuses_what_does_not_exist(line):
    with pytest.raises(AssertionError):
        _check(line)
