"""Compile a Triton kernel for a named GPU on any machine, a CPU-only one included (``mscred sass triton``).

Triton's compiler builds for a target given by name (``ASTSource`` + ``GPUTarget``) without a driver or a GPU:
it lowers the kernel through its stages (TTIR, TTGIR, LLVM IR, PTX) and assembles the cubin with the ptxas its
wheel carries. What the kernel asks of the GPU then reads from the cubin (registers, spills, shared memory, the
instruction mix: ``mscred.sass.inspect``), before any device is at hand.

A kernel's arguments are typed as its launch would specialise them (``config``):
- ``constants``: the ``tl.constexpr`` arguments by name (ints, floats, bools; "tl.<type>" names a Triton type;
  {"string": text} a string, e.g. tl.dot's input_precision);
- ``pointers``: pointer arguments by name, as Triton types ("*bf16"); any other argument named ``*_ptr`` is
  "*fp32". Pointers are taken as 16-byte aligned, as the launch of a torch tensor's data pointer finds them;
- ``floats``: float scalar arguments; every other argument is an int32 scalar;
- ``aligned``: int arguments the launch sees divisible by 16 (strides whose loads then vectorise);
- ``num_warps``, ``num_stages``, ``maxnreg``: the compile options.

The compile runs in a process of its own (``build``: ``python -m mscred.sass.triton_build``) with the interpreter
off: under ``TRITON_INTERPRET=1`` (the CPU test suite's setting) a ``@triton.jit`` function is built for the
interpreter at import and cannot be compiled.
"""
from __future__ import annotations

import base64
import importlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from mscred.errors import InputError

STAGES = ("ttir", "ttgir", "llir", "ptx")   # the text stages kept beside the cubin (``--keep``)


def build(source: str, kernel: str, config: dict, arch: int = 90, timeout: float = 600) -> dict:
    """{"cubin": bytes, "shared": bytes of shared memory a launch requests, and each of
    ``STAGES``: text} of ``kernel`` in ``source`` (a module name or a .py file) compiled for sm_``arch``.
    InputError for what the caller gave wrong (no such module or kernel, an argument it does not have, a constexpr
    without a value) and for a kernel Triton does not compile, with its innermost error (``_cause``)."""
    request = json.dumps({"source": source, "kernel": kernel, "config": config, "arch": arch})
    # A cache of its own, empty: Triton's cache keys a kernel by its source text, not by its file, so the same
    # kernel in another file (or the file moved) came back with the first compile's line table, naming a path that
    # may since hold something else (`sass lines` then showed that file's text), and a user's cache gains nothing.
    with tempfile.TemporaryDirectory(prefix="mscred-triton-cache-") as cache:
        env = {**os.environ, "TRITON_INTERPRET": "0", "TRITON_CACHE_DIR": cache}
        try:
            done = subprocess.run([sys.executable, "-m", "mscred.sass.triton_build"], input=request, text=True,
                                  capture_output=True, env=env, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise InputError(f"{kernel}: Triton's compile took more than {timeout:.0f} s") from None
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        said = done.stderr.strip().splitlines()
        raise RuntimeError(f"compiling {kernel} in a child process failed: {said[-1] if said else done.returncode}")
    answer = json.loads(lines[-1])
    if "error" in answer:
        raise InputError(answer["error"])
    answer["cubin"] = base64.b64decode(answer["cubin"])
    return answer


def _kernel(source: str, kernel: str):
    """The ``@triton.jit`` function ``kernel`` of ``source``: a module name, or the path of a .py file."""
    from triton.runtime.jit import JITFunction

    if source.endswith(".py") or os.sep in source:
        path = Path(source)
        if not path.is_file():
            raise InputError(f"{source}: file not found")
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        sys.path.insert(0, str(path.parent))   # (its own imports of modules beside it)
        try:
            spec.loader.exec_module(module)
        except Exception as err:   # the user's file: said in one line, not as our traceback
            raise InputError(f"{source}: importing it failed: {type(err).__name__}: {err}") from None
    else:
        try:
            module = importlib.import_module(source)
        except ImportError as err:
            raise InputError(f"{source}: no module of that name here ({err}); give a module or a .py file") from None
    fn = getattr(module, kernel, None)
    if fn is None:
        found = sorted(name for name, value in vars(module).items() if isinstance(value, JITFunction))
        raise InputError(f"{source}: no kernel {kernel!r}; its @triton.jit functions: {', '.join(found) or 'none'}")
    if not isinstance(fn, JITFunction):
        raise InputError(f"{source}: {kernel} is not a @triton.jit function")
    return fn


def _source(fn, config: dict, strict: bool = True):
    """Triton's ``ASTSource`` of ``fn`` with its arguments typed by ``config`` (see the module). ``strict``: a name
    that is no argument of ``fn`` is refused (a typo would otherwise leave the argument typed by default); the
    tests' compiles share one config between kernels of different arguments and pass False."""
    import triton.language as tl
    from triton.compiler import ASTSource

    constants, pointers = config.get("constants", {}), config.get("pointers", {})
    floats, aligned = set(config.get("floats", ())), set(config.get("aligned", ()))
    names = set(fn.arg_names)
    for option, given in (("-c", constants), ("-p", pointers), ("--float", floats), ("--aligned", aligned)):
        unknown = sorted(set(given) - names)
        if unknown and strict:
            raise InputError(f"{fn.__name__}: {option} {', '.join(unknown)}: no such argument; its arguments: "
                             f"{', '.join(fn.arg_names)}")
    defaults = {param.name: param.default for param in fn.params if param.is_constexpr and param.has_default}
    constants = {**defaults, **constants}   # (a constexpr with a default takes it, as a launch without it does)
    missing = [fn.arg_names[i] for i in fn.constexprs if fn.arg_names[i] not in constants]
    if missing:
        raise InputError(f"{fn.__name__}: constexpr argument(s) without a value: {', '.join(missing)} "
                         "(give each with -c NAME=VALUE)")
    signature, constexprs, attrs = {}, {}, {}
    for i, name in enumerate(fn.arg_names):
        if name in constants:
            value = constants[name]
            if isinstance(value, str) and value.startswith("tl."):
                if not isinstance(getattr(tl, value[3:], None), tl.dtype):
                    raise InputError(f"{fn.__name__}: -c {name}={value}: not a Triton type")
                value = getattr(tl, value[3:])
            elif isinstance(value, dict):   # {"string": text}: a string constexpr ('tf32'), not a type's name
                value = value["string"]
            signature[name], constexprs[(i,)] = "constexpr", value
        elif name in pointers or name.endswith("_ptr"):
            signature[name] = pointers.get(name, "*fp32")
            attrs[(i,)] = [["tt.divisibility", 16]]
        else:
            signature[name] = "fp32" if name in floats else "i32"
            if name in aligned:
                attrs[(i,)] = [["tt.divisibility", 16]]
    return ASTSource(fn, signature, constexprs, attrs)


def _compile(source: str, kernel: str, config: dict, arch: int = 90, strict: bool = True):
    """Triton's compiled kernel (``CompiledKernel``: ``asm`` by stage, ``metadata``), in this process."""
    import triton
    from triton.backends.compiler import GPUTarget

    fn = _kernel(source, kernel)
    options = {key: config[key] for key in ("num_warps", "num_stages", "maxnreg") if config.get(key)}
    ast = _source(fn, config, strict)
    try:
        return triton.compile(ast, target=GPUTarget("cuda", arch, 32), options=options)
    except Exception as err:   # a CompilationError, ptxas refusing the target, ...: the user's kernel or target
        raise InputError(f"{kernel}: Triton did not compile it for sm_{arch}: {_cause(err)}") from None


def _cause(err: BaseException) -> str:
    """What made a compile fail, in one line: Triton wraps the error in a CompilationError per call level (each
    printing its source with a caret), so the innermost error's message, and where the innermost CompilationError
    points ("at LINE:COLUMN" of its function, with the function's first line)."""
    chain = [err]
    while chain[-1].__cause__ is not None or chain[-1].__context__ is not None:
        chain.append(chain[-1].__cause__ or chain[-1].__context__)
    located = [e for e in chain if type(e).__name__ == "CompilationError"]
    innermost = chain[-1]
    lines = [line.strip() for line in str(innermost).splitlines() if line.strip() and set(line.strip()) != {"^"}]
    message = f"{type(innermost).__name__}: {lines[-1] if lines else ''}"
    if located and located[-1] is not innermost:
        where = [line.strip() for line in str(located[-1]).splitlines() if line.strip()]
        if len(where) > 1 and where[0].startswith("at "):
            message += f" ({where[0].rstrip(':')} of {where[1].rstrip(':')})"
    return message


def _answer(request: dict) -> dict:
    compiled = _compile(request["source"], request["kernel"], request["config"], request["arch"])
    answer = {"cubin": base64.b64encode(compiled.asm["cubin"]).decode(), "shared": compiled.metadata.shared}
    for stage in STAGES:
        answer[stage] = compiled.asm.get(stage)
    return answer


def main() -> None:
    """The child process: one JSON request on stdin, one JSON answer line on stdout (all else on stderr)."""
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)   # whatever Triton or a tool prints goes to stderr, not into the answer
    request = json.loads(sys.stdin.read())
    try:
        answer = _answer(request)
    except InputError as err:
        answer = {"error": str(err)}
    answers.write(json.dumps(answer) + "\n")
    answers.flush()


if __name__ == "__main__":
    main()
