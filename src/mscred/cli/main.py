"""`mscred` entry point: registers the commands and turns every user error into one line and exit code 2.

Each command lives in its own module of this package and is imported only when it is run, so `mscred --help`
stays fast and a command whose optional dependency is missing does not break the others.
"""
from __future__ import annotations

import importlib
import os
import sys

import click

# command name -> "module:attribute" of its click command, in the order `--help` lists them.
COMMANDS = {
    "demo": "mscred.cli.demo:demo",
    "generate": "mscred.cli.generate:generate",
    "train": "mscred.cli.train:train",
    "detect": "mscred.cli.detect:detect",
    "watch": "mscred.cli.watch:watch",
    "calibrate": "mscred.cli.calibrate:calibrate",
    "info": "mscred.cli.info:info",
    "inspect": "mscred.cli.inspect:inspect",
    "evaluate": "mscred.cli.evaluate:evaluate",
    "fleet": "mscred.cli.fleet:fleet",
    "fleet-detect": "mscred.cli.fleet_detect:fleet_detect",
    "fleet-watch": "mscred.cli.fleet_watch:fleet_watch",
    "env": "mscred.cli.env:env",
    "sass": "mscred.cli.sass:sass",
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use."""

    def list_commands(self, ctx):
        return list(COMMANDS)

    def get_command(self, ctx, name):
        target = COMMANDS.get(name)
        if target is None:
            return None
        module, attr = target.split(":")
        return getattr(importlib.import_module(module), attr)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="mscred")
def cli():
    """MSCRED anomaly detection for multivariate time series, and CUDA machine-code tools."""


def one_line(err: BaseException) -> str:
    """The message on one line: a name with a line break in it (a wrapped spreadsheet header) is shown as \\n."""
    return str(err).replace("\r", "\\r").replace("\n", "\\n")


class Terminated(BaseException):
    """SIGTERM (a supervisor, `kill`, `timeout`) raised in the main thread: like Ctrl-C, it unwinds the command so
    that its clean-up runs (temporary files of atomic writes, the ranks of --nproc), where the default action ended
    the process on the spot and left them behind."""


def _terminated(signum, frame):
    raise Terminated()


def main(argv: list[str] | None = None, *, group: click.Group | None = None, prog_name: str = "mscred") -> int:
    """Run the CLI; bad input exits with 2 and one line on stderr (a traceback only with MSCRED_DEBUG=1).
    ``group``/``prog_name``: another command group run the same way (``python -m mscred.distributed``)."""
    import signal

    try:
        previous = signal.signal(signal.SIGTERM, _terminated)
    except ValueError:  # not the main thread (an embedding application): leave its signal handling alone
        previous = None
    try:
        return _main(argv, group or cli, prog_name)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


# click >= 8.2 raises this for a group called without a command (standalone, it prints the help); 8.1 printed the
# help itself and exited through ctx.exit(): nothing to catch there.
NO_ARGS_IS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())


def _main(argv: list[str] | None, group: click.Group, prog_name: str) -> int:
    from mscred.errors import InputError, PartlyDone

    debug = os.environ.get("MSCRED_DEBUG") == "1"
    try:
        group.main(args=argv, prog_name=prog_name, standalone_mode=False)
    except Terminated:
        click.echo("mscred: terminated", err=True)
        return 143
    except click.exceptions.Abort:
        click.echo("mscred: aborted", err=True)
        return 130
    except click.exceptions.Exit as stop:
        return stop.exit_code
    except NO_ARGS_IS_HELP as err:
        # `mscred` (or a group) alone: its help, as click prints it standalone, not as an error line.
        click.echo(err.ctx.get_help())
        return 0
    except click.ClickException as err:
        # Usage errors (unknown option, missing argument, bad choice) are bad input too: one line, exit 2, with
        # where the command's options are listed.
        ctx = getattr(err, "ctx", None)
        hint = f" (see `{ctx.command_path} --help`)" if isinstance(err, click.UsageError) and ctx is not None else ""
        click.echo(f"mscred: error: {one_line(err.format_message())}{hint}", err=True)
        return 2
    except PartlyDone:  # the command has said what it did not do
        return 1
    except InputError as err:
        if debug:
            raise
        click.echo(f"mscred: error: {one_line(err)}", err=True)
        return 2
    except KeyboardInterrupt:
        click.echo("mscred: interrupted", err=True)
        return 130
    except OSError as err:
        # A path the user gave that cannot be read or written (an --out under a file, no permission, disk full):
        # bad input named by its path. One without a path is not the user's: an internal error below.
        if debug:
            raise
        if not err.filename:
            click.echo(f"mscred: internal error: {type(err).__name__}: {err} (set MSCRED_DEBUG=1 for a traceback)",
                       err=True)
            return 1
        what = "exists and is not a directory" if isinstance(err, FileExistsError) else (err.strerror or str(err))
        click.echo(f"mscred: error: {one_line(err.filename)}: {what}", err=True)
        return 2
    except Exception as err:  # noqa: BLE001 - the one place that turns failures into a line
        if debug:
            raise
        # torch's OutOfMemoryError (not imported here: the CLI starts without torch), also as a --nproc rank's
        # failure, which the launcher re-raises as "rank 1 failed: OutOfMemoryError: ..."
        if type(err).__name__ == "OutOfMemoryError" or (isinstance(err, RuntimeError)
                                                        and "failed: OutOfMemoryError: " in str(err)):
            click.echo("mscred: error: out of GPU memory: try --micro-batch (training: the same steps in less "
                       f"memory), a smaller --batch-size or fewer sensors ({one_line(str(err))[:160]})", err=True)
            return 1
        click.echo(f"mscred: internal error: {type(err).__name__}: {err} (set MSCRED_DEBUG=1 for a traceback)",
                   err=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
