"""`mscred sass triton SOURCE KERNEL -c NAME=VALUE ...`: a Triton kernel compiled for a named GPU, here and now (a
CPU-only machine too), and what its machine code asks of that GPU, as `mscred sass inspect` reports a cubin's."""
from __future__ import annotations

import json
from pathlib import Path

import click

from mscred.cli.params import NamedPath
from mscred.cli.sass import _arch, _needs_stdout, _output_file
from mscred.errors import InputError


def _named_values(pairs, option: str) -> dict:
    """NAME=VALUE pairs as a dict of their texts; a pair without '=' or a name given twice refused."""
    values = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise InputError(f"{option} {pair!r}: expected NAME=VALUE")
        if name.strip() in values:
            raise InputError(f"{option} {name.strip()}: given twice")
        values[name.strip()] = value.strip()
    return values


def _constant(name: str, text: str):
    """A constexpr's value: an int (as Python writes it: 128, 0x80), a float, True/False, a string in quotes
    (``'tf32'``: tl.dot's input_precision, kept as the string), or a Triton type ('tl.bfloat16', kept as text for
    the compiling process)."""
    if text in ("True", "False"):
        return text == "True"
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return {"string": text[1:-1]}
    if text.startswith("tl."):
        return text
    for kind in (lambda t: int(t, 0), float):
        try:
            return kind(text)
        except ValueError:
            continue
    raise InputError(f"-c {name}={text}: not an int, float, True/False, 'string' in quotes or tl.<type>")


@click.command(name="triton")
@click.argument("source", type=NamedPath(dir_okay=False, hint="give a module name or a .py file"))
@click.argument("kernel")
@click.option("--constant", "-c", "constants", multiple=True, metavar="NAME=VALUE",
              help="A tl.constexpr argument's value (every one needs one): 128, 0.5, True, tl.bfloat16, "
                   "'tf32' (a string, in quotes).")
@click.option("--pointer", "-p", "pointers", multiple=True, metavar="NAME=TYPE",
              help="A pointer argument's Triton type, e.g. x_ptr=*bf16 [*fp32 for arguments named *_ptr].")
@click.option("--float", "floats", multiple=True, metavar="NAME", help="A float scalar argument [int32].")
@click.option("--aligned", multiple=True, metavar="NAME",
              help="An int argument the launch sees divisible by 16 (Triton specialises it: strides whose loads then "
                   "vectorise).")
@click.option("--warps", type=click.IntRange(min=1), default=4, show_default=True, help="num_warps.")
@click.option("--stages", type=click.IntRange(min=1), default=3, show_default=True, help="num_stages.")
@click.option("--maxnreg", type=click.IntRange(min=1), default=None, help="Registers a thread at most.")
@click.option("--arch", default="sm_90", show_default=True, callback=_arch, help="The GPU to compile for.")
@click.option("--out", "-o", default=None, type=NamedPath(dir_okay=False), help="Write the cubin here.")
@click.option("--keep", default=None, type=NamedPath(file_okay=False, hint="give a folder name"),
              help="Write every stage into this folder: KERNEL.ttir, .ttgir, .llir, .ptx and .cubin.")
@click.option("--top", default=8, show_default=True, type=click.IntRange(min=0),
              help="Most frequent instructions shown (0: none).")
@click.option("--loops", is_flag=True, help="Also the kernel's loops: range, size, their instruction mix.")
@click.option("--lines", "by_line", type=click.IntRange(min=0), default=None, metavar="N",
              help="Also the kernel's instructions per line of its Python source, as `sass lines` reports them "
                   "(the N lines with the most; 0: all).")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON object: inspect's, the launch's shared memory (and with --lines, every line).")
def triton_cmd(source, kernel, constants, pointers, floats, aligned, warps, stages, maxnreg, arch, out, keep, top,
               loops, by_line, as_json):
    """Compile KERNEL, a @triton.jit function of SOURCE (a module, e.g. mscred.ops.triton.bias_act, or a .py
    file), for --arch on this machine (no GPU needed: Triton's compiler and its ptxas build for a named target),
    and report its machine code as `sass inspect` does: registers, spills (local memory), the shared memory a
    launch requests, the instruction mix (HGMMA, 16-byte loads, ...). Arguments are typed as a launch would
    specialise them: -c for each tl.constexpr, pointers by -p (or *fp32 when named *_ptr), --float scalars, other
    scalars int32. With -o / --keep the cubin (and the stages) can go on to `sass diff`, `dump` and `patch`."""
    from mscred.atomic import atomic_path
    from mscred.sass.inspect import format_summaries, inspect_file
    from mscred.sass.triton_build import STAGES, build

    import importlib.util

    if importlib.util.find_spec("triton") is None:
        raise InputError("sass triton compiles with Triton, which is not installed here: pip install 'mscred[gpu]' "
                         "(Triton's Linux wheels carry their compiler and ptxas; no GPU needed)")
    _needs_stdout()
    _output_file(out, "--out")
    config = {"constants": {name: _constant(name, text) for name, text in _named_values(constants, "-c").items()},
              "pointers": _named_values(pointers, "-p"), "floats": list(floats), "aligned": list(aligned),
              "num_warps": warps, "num_stages": stages, "maxnreg": maxnreg}
    number = int(arch[3:].rstrip("abf"))   # (sm_90a's features are sm_90's for Triton's target)
    built = build(source, kernel, config, arch=number)
    cubin = built["cubin"]
    if out:
        with atomic_path(out, what="the cubin") as tmp:
            tmp.write_bytes(cubin)
    if keep:
        with atomic_path(keep, owned=[f"{kernel}.{stage}" for stage in (*STAGES, "cubin")],
                         what="the stages' folder") as tmp:
            tmp.mkdir()
            (tmp / f"{kernel}.cubin").write_bytes(cubin)
            for stage in STAGES:
                if built.get(stage):
                    (tmp / f"{kernel}.{stage}").write_text(built[stage])
    rows = inspect_file(cubin, f"{kernel}.cubin", None, None, loops)
    report = None
    if by_line is not None:
        from mscred.sass.lines import format_report, line_report
        report = line_report(cubin, rows[0].name, rows[0].arch, f"{kernel}.cubin")
    said = (f"{kernel} for {arch} (num_warps {warps}, num_stages {stages}"
            f"{f', maxnreg {maxnreg}' if maxnreg else ''}): a launch requests {built['shared']} bytes of shared "
            "memory")
    if as_json:
        click.echo(json.dumps({"kernel": kernel, "arch": arch, "num_warps": warps, "num_stages": stages,
                               "maxnreg": maxnreg, "launch_shared_bytes": built["shared"],
                               "cubin": str(out) if out else None,
                               "inspect": [row.to_json() for row in rows],
                               **({"lines": report.to_json()} if report else {})}, indent=2))
        return
    click.echo(format_summaries(rows, top))
    if report:
        click.echo(format_report(report, by_line, show_all="--lines 0"))
    click.echo(said + (f"; wrote {out}" if out else "") + (f"; stages in {Path(keep)}" if keep else ""))
