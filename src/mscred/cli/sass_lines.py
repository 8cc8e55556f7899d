"""`mscred sass lines PATH -k KERNEL`: a kernel's instructions counted per source line, from its cubin's line
table (``mscred.sass.lines``)."""
from __future__ import annotations

import json

import click

from mscred.cli.params import NamedPath
from mscred.cli.sass import _BINARY, _arch, _needs_stdout, _pick_cubin


@click.command(name="lines")
@click.argument("path", type=_BINARY)
@click.option("--kernel", "-k", required=True,
              help="Kernel name: mangled, plain or a piece of the demangled name; NAME#N: the one in cubin N "
                   "(numbered from 1 in file order, as `kernels` shows).")
@click.option("--arch", default=None, callback=_arch, help="Pick the cubin for this architecture, e.g. sm_90.")
@click.option("--top", default=25, show_default=True, type=click.IntRange(min=0),
              help="Source lines shown, most instructions first (0: all).")
@click.option("--mix", default=3, show_default=True, type=click.IntRange(min=0),
              help="Most frequent instructions shown per line (0: none).")
@click.option("--order", type=click.Choice(["count", "source"]), default="count", show_default=True,
              help="Rows by instructions, or in source order (file, then line).")
@click.option("--source-dir", "source_dirs", multiple=True,
              type=NamedPath(file_okay=False, exists=True, hint="give a folder"),
              help="Where to look for source files the line table names but that are not where it says (another "
                   "machine's build): by the longest tail of their path, then by name. Repeatable.")
@click.option("--annotate", is_flag=True,
              help="Print the source files instead, each line with its instructions (and those in loops) in the "
                   "margin, from the first line with code to the last.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object: totals and every line.")
def lines_cmd(path, kernel, arch, top, mix, order, source_dirs, annotate, as_json):
    """Which source lines a kernel's machine code came from: its instructions counted per line of the CUDA C++ or
    Triton source, with how many sit inside loops and which instructions they are, read from the cubin's line
    table (nvcc -lineinfo or -G; Triton writes one by default). Code inlined from a helper counts at the helper's
    line, with the kernel's line it was inlined into beside it. No GPU needed."""
    from mscred.sass.lines import format_annotated, format_report, line_report

    _needs_stdout()
    image, cubin, k = _pick_cubin(path, kernel, arch)
    report = line_report(cubin.data, k.name, image.arch, image.where, tuple(source_dirs), order)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
    elif annotate:
        click.echo(format_annotated(report, tuple(source_dirs)))
    else:
        click.echo(format_report(report, top, mix))
