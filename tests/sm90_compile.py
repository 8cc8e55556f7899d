"""Compile Triton kernels for the H200 (sm_90) on a machine without a GPU, and read what they ask of it.

The CPU suite runs the kernels under Triton's interpreter, which checks no hardware limit: a tile whose shared
memory exceeds the H200's 227 KB passes every interpreted test and fails only on the device (OutOfResources; the
small conv's float32 weight gradient did, benchmarks/results/small_conv_confirm/). Triton's compiler, though, builds
for a named target without a driver (``ASTSource`` + ``GPUTarget``), and the compiled kernel's metadata holds the
shared memory its launch will request. The compiler runs in a process of its own with TRITON_INTERPRET=0 (the
test process interprets); one process compiles a list of configurations. That process stays up for the test session
and serves every later compile under the same environment (a process per compile spent ~3 s importing torch and
Triton each time, 18 times in the suite); a test that changed the environment gets a process of its own.

``shared_bytes(module, kernel, configs)`` -> the shared memory of each configuration, in bytes;
``sass(module, kernel, config)`` -> the machine code of one, as nvdisasm (from the Triton wheel) prints it;
``compiled_code`` -> that listing with the registers per thread and the shared memory. A
configuration is a dict as ``mscred.sass.triton_build`` types a kernel's arguments (``mscred sass triton``'s
compile, run here in the serving process): ``constants``, ``pointers``, ``floats``, ``aligned``, and the compile
options ``num_warps``, ``num_stages``, ``maxnreg``.
"""
from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import subprocess
import sys
import tempfile
from pathlib import Path

from mscred.ops.triton.runtime import HOPPER_SHARED_MEMORY  # noqa: F401 (the tests compare with it here)

ROOT = Path(__file__).resolve().parents[1]


def shared_bytes(module: str, kernel: str, configs: list[dict]) -> list[int]:
    """Shared memory (bytes) of ``module.kernel`` compiled for sm_90 with each of ``configs``, in order."""
    return json.loads(_in_compiler_process("_compile_all", module, kernel, json.dumps(configs)))


def sass(module: str, kernel: str, config: dict) -> str:
    """The sm_90 machine code of ``module.kernel`` compiled with ``config`` (nvdisasm's listing)."""
    return json.loads(_in_compiler_process("_listing_of", module, kernel, json.dumps(config)))["listing"]


def compiled_code(module: str, kernel: str, config: dict) -> dict:
    """{"listing": nvdisasm's listing, "registers": per thread, "shared": bytes} of ``module.kernel`` compiled for
    sm_90 with ``config`` (the registers as cuobjdump -res-usage reads them from the cubin)."""
    return json.loads(_in_compiler_process("_code_of", module, kernel, json.dumps(config)))


def _in_compiler_process(function: str, module: str, kernel: str, argument: str) -> str:
    """``function(module, kernel, argument)``'s answer (a JSON string), from a process that compiles (does not
    interpret)."""
    env = {**os.environ, "TRITON_INTERPRET": "0"}
    env.pop("PYTEST_CURRENT_TEST", None)  # pytest's per-test name: not a setting the compile reads
    key = (os.getcwd(), tuple(sorted(env.items())))
    compiler = _COMPILERS.get(key)
    if compiler is None or compiler.poll() is not None:  # none yet, or it died: a new one
        if compiler is not None:
            compiler.close()
        compiler = _COMPILERS[key] = _Compiler(env)
    return compiler.ask(function, module, kernel, argument)


class _Compiler:
    """A compiling process (``_serve``): one JSON request a line in, one JSON answer a line out."""

    def __init__(self, env: dict[str, str]):
        program = (f"import sys; sys.path[:0] = {[str(ROOT / 'tests'), str(ROOT / 'src')]!r}; import sm90_compile; "
                   "sm90_compile._serve()")
        self.stderr = tempfile.TemporaryFile()  # a file, not a pipe: nobody reads it until something fails
        self.proc = subprocess.Popen([sys.executable, "-c", program], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.stderr, env=env, text=True)

    def poll(self):
        return self.proc.poll()

    def ask(self, function: str, module: str, kernel: str, argument: str, timeout: float = 600) -> str:
        failed = f"compiling {module}.{kernel} for sm_90 failed"
        try:
            self.proc.stdin.write(json.dumps([function, module, kernel, argument]) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass  # it died: said below, with its stderr
        if not select.select([self.proc.stdout], [], [], timeout)[0]:
            self.close(kill=True)
            raise RuntimeError(f"{failed}: no answer in {timeout:.0f} s")
        line = self.proc.stdout.readline()
        if not line:
            self.stderr.seek(0)
            said = self.stderr.read().decode(errors="replace")
            self.close(kill=True)
            raise RuntimeError(f"{failed}:\n{said[-3000:]}")
        answer = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"{failed}:\n{answer['error'][-3000:]}")
        return answer["answer"]

    def close(self, kill: bool = False) -> None:
        if self.proc.poll() is None:
            if kill:
                self.proc.kill()
            else:
                self.proc.stdin.close()  # its loop ends
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):  # a killed process's stdin: nothing left to flush, or no reader
                pipe.close()
        self.stderr.close()


_COMPILERS: dict[tuple, _Compiler] = {}


@atexit.register
def _close_compilers() -> None:
    for compiler in _COMPILERS.values():
        compiler.close()


def _serve() -> None:
    """The compiling process: answers ``[function, module, kernel, argument]`` lines until its stdin closes."""
    import traceback

    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # whatever else is printed (Triton's, a tool's) goes to stderr, not between the answers
    for line in sys.stdin:
        function, module, kernel, argument = json.loads(line)
        try:
            answer = {"answer": globals()[function](module, kernel, argument)}
        except Exception:  # the caller raises it, with this traceback
            answer = {"error": traceback.format_exc()}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


def _compile(module: str, kernel: str, config: dict):
    """The product's compile (``mscred sass triton``'s), in this process, for sm_90."""
    from mscred.sass.triton_build import _compile as compile_for

    return compile_for(module, kernel, config, 90, strict=False)


def _compile_all(module: str, kernel: str, configs_json: str) -> str:
    return json.dumps([_compile(module, kernel, config).metadata.shared for config in json.loads(configs_json)])


def _code_of(module: str, kernel: str, config_json: str, registers: bool = True) -> str:
    import re
    import tempfile

    import triton

    compiled = _compile(module, kernel, json.loads(config_json))
    tools = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    code = dict(shared=compiled.metadata.shared)
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(compiled.asm["cubin"])
        f.flush()
        code["listing"] = subprocess.run([str(tools / "nvdisasm"), "-c", f.name], capture_output=True, text=True,
                                         check=True).stdout
        if registers:  # cuobjdump: ~0.7 s a run, of no use to sass()
            usage = subprocess.run([str(tools / "cuobjdump"), "-res-usage", f.name], capture_output=True, text=True,
                                   check=True).stdout
            code["registers"] = int(re.search(r"REG:(\d+)", usage).group(1))
    return json.dumps(code)


def _listing_of(module: str, kernel: str, config_json: str) -> str:
    return _code_of(module, kernel, config_json, registers=False)
