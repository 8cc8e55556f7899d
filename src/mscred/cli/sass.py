"""`mscred sass`: read, probe, patch and run CUDA machine code (the reverse-engineering articles as a tool)."""
from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import click

from mscred.cli.params import NamedPath
from mscred.errors import InputError


def _int(text: str, what: str) -> int:
    """An option's integer, read as C reads a literal (``mscred.sass.literals``: 0xcc, 204, 0314 octal, 204u), as
    probe reads its values: a value probe took is taken here as written."""
    from mscred.sass.literals import c_integer
    return c_integer(text, what)


def _bits(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    lo, sep, hi = text.partition(":")
    if not sep:
        raise InputError(f"--bits {text!r}: expected LO:HI, e.g. 20:52")
    lo_i, hi_i = _int(lo, "--bits"), _int(hi, "--bits")
    if not 0 <= lo_i < hi_i <= 128:
        raise InputError(f"--bits {text!r}: need 0 <= LO < HI <= 128")
    return lo_i, hi_i


_ARCH = re.compile(r"sm_\d+[a-z]?")


def _arch(ctx, param, value: str | None) -> str | None:
    """--arch as the images name architectures ("90a" -> "sm_90a"); a value that names no architecture ("foo",
    "compute_90", "") is a usage error here, rather than "no cubin for sm_foo" or an nvcc failure later."""
    from mscred.sass.fatbin import normalize_arch
    arch = normalize_arch(value)
    if arch is not None and not _ARCH.fullmatch(arch):
        raise click.BadParameter(f"{value!r} is not a GPU architecture (e.g. sm_90, 90a, sm_120)")
    return arch


def _output_file(path: str | None, option: str) -> str | None:
    """``path`` for a file output, refused when it names a folder: one ending in a separator (``outdir/``: pathlib
    drops the slash and the write would create a file named ``outdir``), or an existing folder, or when a folder it
    needs above it is a file (``notes.txt/x``), refused here before the work (probe's compiles) rather than at the
    write. Missing folders above it are created at the write, as every mscred output's are."""
    from mscred.atomic import check_folders_above

    if path and path.endswith(tuple(sep for sep in (os.sep, os.altsep) if sep)):
        raise InputError(f"{option} {path}: a path ending in {path[-1]!r} names a folder; give a file name")
    if path and Path(path).is_dir():
        raise InputError(f"{option} {path}: is a folder; give a file name")
    if path:
        check_folders_above(path)
    return path


def _init_value(text: str) -> int:
    """--init: the int32 every word of a[] starts as, signed or unsigned (-1 and 0xffffffff are one value); a wider
    one was cut to its low 32 bits without a word."""
    value = _int(text, "--init")
    if not -(1 << 31) <= value < 1 << 32:
        raise InputError(f"--init {text}: does not fit in a 32-bit word (-2**31 .. 0xffffffff)")
    return value


def _read(path: str) -> bytes:
    from mscred.sass.fatbin import read_input
    return read_input(path)


def _check_inputs(*paths: str) -> None:
    """Every input checked (exists, a file, a kind the commands read) before the first is worked on: a typo in the
    second of two builds was found only after the first had been disassembled."""
    from mscred.sass.fatbin import check_input
    for path in paths:
        check_input(path)


def _needs_stdout() -> None:
    """Commands whose answer is what they print refuse a closed standard output (``>&-``): click drops the text
    without a word, so the answer was lost and the exit status said 0."""
    if sys.stdout is None or getattr(sys.stdout, "closed", False):
        raise InputError("standard output is closed: nothing to print the answer to (redirect it to a file)")


def _pick_cubin(path: str, kernel: str, arch: str | None):
    """The one readable cubin of ``path`` that holds ``kernel`` (optionally for ``arch``; ``NAME#N``: the one in
    cubin number N, ``fatbin.numbered_cubin``)."""
    from mscred.sass.fatbin import (check_has_cubins, check_readable, find_images, kernel_in_cubins, kernel_selector,
                                    numbered_kernel, several_cubins, unreadable_cubins)

    name, number = kernel_selector(kernel)   # (a bad number is refused before the file is read)
    images = find_images(_read(path), path, arch)
    check_has_cubins(images, path)
    found, ambiguous = kernel_in_cubins(images, name)
    if number is not None:   # that cubin's kernel, or why not (cubin N unreadable: what is missing)
        return numbered_kernel(found, ambiguous, images, kernel, path, arch)[0]
    check_readable(images)
    if not found and ambiguous:  # the name fits several kernels: say which, rather than "no kernel"
        raise ambiguous[0][1]
    if not found:
        # The kernel may be in a cubin that could not be read: say which and why, not only "no kernel".
        skipped = unreadable_cubins(images)
        unread = (f"; {len(skipped)} cubin{'s' if len(skipped) > 1 else ''} could not be read "
                  f"({skipped[0].where}: {skipped[0].note})" if skipped else "")
        raise InputError(f"{path}: no kernel {name!r} in any readable cubin{' for ' + arch if arch else ''}"
                         f"{unread}")
    if len(found) > 1:
        # --arch, the mangled name or NAME#N, whichever tells these apart ("pass --arch" said for two sm_90 cubins
        # could not help).
        raise several_cubins(found, name, path)
    return found[0]

# (the kinds of file every subcommand reads; an empty path would otherwise be read as the current folder)
_BINARY = NamedPath(hint="give a cubin, object file, library or executable")


@click.group()
def sass():
    """Read, probe, patch and run CUDA machine code (SASS) in cubins and executables."""


@sass.command()
@click.argument("path", type=_BINARY)
def kernels(path):
    """List the device-code images of PATH and their kernels (registers, parameters, code size)."""
    from mscred.sass.fatbin import find_images, ptx_only
    from mscred.sass.toolchain import demangle

    _needs_stdout()
    images = find_images(_read(path), path)
    for image in images:
        number = f"#{image.number} " if image.number is not None else ""   # (what -k NAME#N takes)
        where = [f"file byte {image.file_offset:#x}"] if image.file_offset is not None else []
        where += [f"compressed: {image.compression}"] if image.compression else []
        where += ["not patchable"] if image.file_offset is None else []
        kernels = list(image.cubin().kernels.values()) if image.kind == "cubin" and image.data is not None else None
        empty = " (no kernels)" if kernels == [] else ""
        click.echo(f"{number}{image.kind} {image.arch} ({', '.join(where)}){' ' + image.note if image.note else ''}"
                   f"{empty}")
        readable = demangle([k.name for k in kernels or []])
        for k in kernels or []:
            name = readable.get(k.name, k.name)
            params = "+".join(str(p.size) for p in k.params) or "0"
            # The code section's words, the NOP padding after the last instruction included (inspect counts
            # instructions without it); on sm_5x/6x one word in four is a control word, not an instruction.
            controls = sum(1 for insn in k.instructions if insn.control is not None and insn.offset % 32 == 8)
            click.echo(f"  {name}{f' [{k.name}]' if name != k.name else ''}: {k.registers} registers, params "
                       f"{params} B, shared {k.shared_bytes} B, local {k.frame_bytes} B, code "
                       f"{len(k.instructions)} x {k.instruction_bits}-bit words (padding included)"
                       f"{f' + {controls} control words' if controls else ''}")
    if ptx_only(images, path):  # listed (what the file holds), and said what that means for the other commands
        click.echo(f"note: {ptx_only(images, path)}", err=True)


@sass.command()
@click.argument("path", type=_BINARY)
@click.option("--kernel", "-k", required=True,
              help="Kernel name: mangled (_Z4testPi), plain (test) or a piece of the demangled name (scale<4>); "
                   "NAME#N: the one in cubin N (the file's cubins numbered from 1 in file order, as `kernels` "
                   "shows), for kernels of one mangled name in several cubins.")
@click.option("--arch", default=None, callback=_arch, help="Pick the cubin for this architecture, e.g. sm_90.")
def dump(path, kernel, arch):
    """Print a kernel's instruction words (each one number, most significant digit first: a 64-bit word as `xxd -e
    -g 8` shows it, a 128-bit one as its high half then its low half, which xxd prints the other way round) beside
    nvdisasm's text when available, with a line for each branch label (`.L_x_3:`) before the instruction it names."""
    from mscred.sass.toolchain import disassemble_with_labels

    _needs_stdout()
    image, cubin, k = _pick_cubin(path, kernel, arch)
    asm, labels = disassemble_with_labels(cubin.data, image.where) or ({}, {})
    asm, at = asm.get(k.name, {}), {}
    for label, offset in labels.get(k.name, {}).items():
        at.setdefault(offset, []).append(label)
    click.echo(f"{image.arch} {k.name}: code at file byte {image.file_offset + k.code_offset:#x}"
               if image.file_offset is not None else f"{image.arch} {k.name}")
    for insn in k.instructions:
        # Every bundle's control word, also one equal to the previous bundle's: the dump promises every word.
        if insn.control is not None and insn.offset % 32 == 8:
            click.echo(f"  {insn.offset - 8:#06x}: {insn.control:016x}   (control)")
        for label in sorted(at.get(insn.offset, [])):
            click.echo(f"{label}:")
        click.echo(f"  {insn.offset:#06x}: {insn.hex()}   {asm.get(insn.offset, '')}".rstrip())


@sass.command()
@click.option("--arch", required=True, callback=_arch,
              help="Target architecture: sm_50 (via a CUDA 12 ptxas), sm_75 .. sm_120, 90a.")
@click.option("--template", "-t", default="value", show_default=True,
              help="value (a[0] = VALUE), register (a[0] = one of eight live registers, or 0), article, "
                   "or a .cu file using the placeholder.")
@click.option("--values", default=None, help="Comma-separated substitutes for the placeholder "
                                             "(default: 0xcc,0xdecc,0x12345678,0x9abcdef1 / 0,v0,v3,v6).")
@click.option("--mode", type=click.Choice(["immediate", "register"]), default=None,
              help="What to locate (default: register for the register template, else immediate).")
@click.option("--kernel", "-k", default=None, help="Kernel to compare when the template has several.")
@click.option("--placeholder", default="VALUE", show_default=True, help="Macro the values are passed as (-D).")
@click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON.")
@click.option("--out", "-o", default=None, type=NamedPath(hint="give a file name"),
              help="Also write the JSON answer to this file.")
def probe(arch, template, values, mode, kernel, placeholder, as_json, out):
    """Compile variants of a kernel, diff their machine code, and report where the value or register sits."""
    from mscred.atomic import atomic_path
    from mscred.sass.probe import format_result, probe as run_probe, template_path

    out = _output_file(out, "--out")
    if not out:
        _needs_stdout()
    elif Path(out).resolve() == template_path(template).resolve():  # (the answer written over the user's kernel)
        raise InputError(f"--out {out}: is the template itself; give the answer another file name")
    # (--values '' is no values, refused by probe, not the defaults; equal values, as the compiler reads them, are
    # refused there too, before any compile)
    value_list = [v.strip() for v in values.split(",") if v.strip()] if values is not None else None
    result = run_probe(arch, template, value_list, kernel, mode, placeholder)
    answer = result.to_json()
    if out:
        with atomic_path(out) as tmp:
            tmp.write_text(json.dumps(answer, indent=2) + "\n")
    click.echo(json.dumps(answer) if as_json else format_result(result))


@sass.command()
@click.argument("path", type=_BINARY)
@click.option("--kernel", "-k", required=True,
              help="Kernel holding the instruction (mangled, plain or a piece of the demangled name); NAME#N: "
                   "the one in cubin N (numbered from 1 in file order, as `kernels` shows), for kernels of one "
                   "mangled name in several cubins.")
@click.option("--old", required=True, help="The field's current value, e.g. 0xcc (register: its number).")
@click.option("--new", required=True, help="The value to write, e.g. 0xdd.")
@click.option("--field", type=click.Choice(["immediate", "register"]), default="immediate", show_default=True)
@click.option("--bits", default=None, help="Field bits LO:HI (default: what probe found for the layout: "
                                           "immediate 20:52 / 32:64, register 0:8 / 32:40 on 64/128-bit).")
@click.option("--arch", default=None, callback=_arch, help="Only the cubin for this architecture.")
@click.option("--at", "at", default=None, help="Only the instruction at this byte offset in the kernel.")
@click.option("--instruction", default=None, help="Only instructions with this mnemonic prefix (needs nvdisasm).")
@click.option("--grep", default=None, help="Only instructions whose hex (as `sass dump` shows) contains this "
                                           "(spaces and a 0x per group, as cuobjdump -sass writes, ignored).")
@click.option("--output", "-o", default=None, type=NamedPath(hint="give a file name"),
              help="Output file (default: PATH.patched).")
@click.option("--in-place", is_flag=True, help="Replace PATH itself (atomically).")
def patch(path, kernel, old, new, field, bits, arch, at, instruction, grep, output, in_place):
    """Rewrite one instruction's immediate or register field in a cubin or an executable's fatbin."""
    from mscred.sass.patch import patch_file

    if in_place and output:
        raise InputError("--in-place and --output exclude each other")
    output = _output_file(output, "--output")
    if output and Path(output).resolve() == Path(path).resolve():   # (through a symlink too)
        raise InputError(f"--output {output}: is PATH itself; replacing the input is what --in-place is for")
    if not output and not in_place and Path(path + ".patched").is_dir():  # the default, refused before the work
        raise InputError(f"{path}.patched (the default output): is a folder; give the output a name with -o")
    r = patch_file(path, kernel, _int(old, "--old"), _int(new, "--new"), field, _bits(bits),
                   path if in_place else output, arch, _int(at, "--at") if at is not None else None,
                   instruction, grep)
    m = r.match
    click.echo(f"{m.describe()}: {field} bits [{r.bits[0]}, {r.bits[1]}) {_int(old, '--old'):#x} -> "
               f"{_int(new, '--new'):#x}")
    click.echo(f"  before {r.before.hex()}   {r.asm_before}".rstrip())
    click.echo(f"  after  {r.after.hex()}   {r.asm_after}".rstrip())
    click.echo(f"wrote {r.path_out}")


@sass.command()
@click.argument("path", type=_BINARY)
@click.option("--kernel", "-k", required=True,
              help="Kernel to launch; its parameters must all be pointers. NAME#N: the one in cubin N "
                   "(numbered from 1 in file order, as `kernels` shows), for kernels of one mangled name.")
@click.option("--arch", default=None, callback=_arch,
              help="Pick the cubin for this architecture (for executables/fatbins).")
@click.option("--words", default=1, show_default=True, type=click.IntRange(1, 1 << 20),
              help="int32 elements per buffer.")
@click.option("--init", default="0x1", show_default=True, help="Initial value of the output buffer a[] "
                                                              "(inputs get b[j] = j + 1).")
@click.option("--grid", default=1, show_default=True, type=click.IntRange(1, (1 << 31) - 1))  # gridDim.x's limit
@click.option("--block", default=1, show_default=True, type=click.IntRange(1, 1024))
@click.option("--backend", type=click.Choice(["auto", "driver", "cupy"]), default="auto", show_default=True)
def run(path, kernel, arch, words, init, grid, block, backend):
    """Load a cubin through the CUDA driver, launch KERNEL<<<grid, block>>> and print what it wrote."""
    from mscred.sass.run import run_cubin

    init_value = _init_value(init)  # (before the file is read: a bad option is named first)
    _needs_stdout()
    image, cubin, k = _pick_cubin(path, kernel, arch)
    buffers = run_cubin(cubin.data, k.name, words, init_value, grid, block, image.where, backend)
    out = buffers[0]
    if words == 1:
        click.echo(f"*a = {out[0]:x}")  # the articles' printf("*a = %x\n", *a)
    else:
        for j, v in enumerate(out):
            click.echo(f"a[{j}] = {v:x}")


@sass.command(name="inspect")
@click.argument("paths", nargs=-1, required=True, type=_BINARY)
@click.option("--arch", default=None, callback=_arch, help="Only cubins for this architecture.")
@click.option("--kernel", "-k", default=None,
              help="Only kernels whose name, mangled or as printed (demangled), contains this (in every cubin); "
                   "NAME#N: only those of cubin N (numbered from 1 in file order, as `kernels` shows and dump, "
                   "run and patch take it).")
@click.option("--top", default=8, show_default=True, type=click.IntRange(min=0),
              help="Most frequent instructions shown per kernel (0: none).")
@click.option("--loops", is_flag=True,
              help="Also each kernel's loops (backward branches): range, size, instructions outside inner loops, "
                   "their mix.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per kernel, in a list.")
def inspect_cmd(paths, arch, kernel, top, loops, as_json):
    """Registers, local memory, shared memory and instruction mix of every kernel in cubins/objects/libraries."""
    from mscred.sass.fatbin import kernel_selector
    from mscred.sass.inspect import format_summaries, inspect_file

    if kernel:
        kernel_selector(kernel)   # (a bad NAME#N is refused before any file is read)
    _needs_stdout()
    _check_inputs(*paths)
    per_path = [(path, inspect_file(_read(path), path, arch, kernel, loops)) for path in paths]
    rows = [row for _, found in per_path for row in found]
    if kernel and not rows:
        raise InputError(f"no kernel matching {kernel!r} in {', '.join(paths)}")
    if as_json:
        click.echo(json.dumps([r.to_json() for r in rows], indent=2))
    elif len(paths) == 1:
        click.echo(format_summaries(rows, top))
    else:  # one table per file, under its name: the rows of two builds of a kernel look alike
        click.echo("\n\n".join(f"== {path}\n{format_summaries(found, top)}" for path, found in per_path))


@sass.command(name="diff")
@click.argument("old", type=_BINARY)
@click.argument("new", type=_BINARY)
@click.option("--arch", default=None, callback=_arch, help="Only cubins for this architecture.")
@click.option("--kernel", "-k", default=None,
              help="Only kernels whose name, mangled or as printed (demangled), contains this; NAME#N: only those "
                   "of cubin N (numbered from 1 in file order, as `kernels` shows) on each side that holds NAME in "
                   "several cubins (a side holding it in one is read whole).")
@click.option("--top", default=8, show_default=True, type=click.IntRange(min=0),
              help="Mnemonics whose counts moved most, shown per kernel (0: none).")
@click.option("--loops", is_flag=True,
              help="Also compare each kernel's largest loop and tensor-core loop (instructions) and loop count.")
@click.option("--all", "show_same", is_flag=True, help="Also list the kernels whose summary did not change.")
@click.option("--code", "code_lines", type=click.IntRange(min=0), default=0, show_default=True,
              help="Show up to this many lines of each differing kernel's instruction diff (branch targets named "
                   "L1, L2, ... alike in both builds).")
@click.option("--lines", "source_lines", type=click.IntRange(min=0), default=0, show_default=True,
              help="Show up to this many source lines per differing kernel whose instructions moved most, with "
                   "their mnemonics' moves (both builds with a line table: nvcc -lineinfo, Triton's default; lines "
                   "matched by file name and number).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per kernel, in a list.")
def diff_cmd(old, new, arch, kernel, top, loops, show_same, code_lines, source_lines, as_json):
    """What a change did to the machine code: each kernel of NEW against the same kernel (mangled name and
    architecture, or the same function with trailing template arguments added or dropped) of OLD, in
    cubins/objects/libraries: registers, spills, shared memory, instructions, tensor / shared / global / local /
    barrier counts, the mnemonics that moved most; kernels added or removed; how many of the unchanged ones are the
    same to the instruction; with --code, the instruction diff of each kernel that differs."""
    from mscred.sass.diff import diff_summaries, format_diff
    from mscred.sass.fatbin import kernel_selector
    from mscred.sass.inspect import check_number_used, inspect_file

    if kernel:
        kernel_selector(kernel)   # (a bad NAME#N is refused before either file is read)
    _needs_stdout()
    _check_inputs(old, new)
    # NAME#N on each side that holds NAME in several cubins: two builds of one executable alike, or a lone cubin
    # (read whole) against the executable that links it with another unit's kernel of that name.
    by_line = source_lines > 0 or as_json
    before = inspect_file(_read(old), old, arch, kernel, loops, code=code_lines > 0, number_where_needed=True,
                          lines=by_line)
    after = inspect_file(_read(new), new, arch, kernel, loops, code=code_lines > 0, number_where_needed=True,
                         lines=by_line)
    if not before and not after:
        raise InputError(f"no kernel{' matching ' + repr(kernel) if kernel else ''} in {old} or {new}")
    check_number_used(kernel, [(old, before), (new, after)])
    diffs = diff_summaries(before, after)
    click.echo(json.dumps([d.to_json() for d in diffs], indent=2) if as_json
               else format_diff(diffs, top, show_same, code_lines, source_lines))


# `sass lines` and `sass triton` live in modules of their own (a report of its own; a compile, where the commands
# above read binaries); they use the helpers above, so they are imported once those exist.
from mscred.cli.sass_lines import lines_cmd  # noqa: E402
from mscred.cli.sass_triton import triton_cmd  # noqa: E402

sass.add_command(lines_cmd)
sass.add_command(triton_cmd)
