"""Find and run the CUDA tools: nvcc and ptxas to build cubins, nvdisasm/cuobjdump to read them.

Where each tool is looked for, in order:
  nvcc            $MSCRED_NVCC, PATH, $CUDA_HOME/bin, /usr/local/cuda/bin
  ptxas (old GPUs) $MSCRED_PTXAS, the ``nvidia-cuda-nvcc-cu12`` wheel (``nvidia/cuda_nvcc/bin/ptxas``), PATH
  nvdisasm, cuobjdump  PATH, $CUDA_HOME/bin, the ``nvidia-cuda-nvdisasm``/``-cuobjdump`` wheels, Triton's copy
                   (``triton/backends/nvidia/bin``)

CUDA 13's nvcc no longer builds sm_50..sm_72. For those, :func:`compile_cubin` lets nvcc write PTX for the
oldest architecture it knows, retargets the PTX header (``.target sm_50``, a ``.version`` the older ptxas accepts)
and assembles it with a CUDA 12 ptxas. This is sound for kernels that use no instruction newer than the target
(ptxas rejects the PTX otherwise, and the error is reported).
"""
from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from mscred.errors import InputError
from mscred.sass.isa import sm_number

# Highest PTX ISA version each CUDA 12 release's ptxas accepts (CUDA 12.x release notes).
PTX_ISA_OF_CUDA12 = {0: "8.0", 1: "8.1", 2: "8.2", 3: "8.3", 4: "8.4", 5: "8.5", 6: "8.5", 8: "8.7", 9: "8.8"}


def _which(name: str, extra_dirs: list[Path]) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for d in extra_dirs:
        candidate = d / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def _cuda_dirs() -> list[Path]:
    dirs = []
    if os.environ.get("CUDA_HOME"):
        dirs.append(Path(os.environ["CUDA_HOME"]) / "bin")
    dirs += [Path("/usr/local/cuda/bin")] + sorted(Path("/usr/local").glob("cuda-*/bin"), reverse=True)
    return dirs


def _wheel_dirs(*packages: str) -> list[Path]:
    """``bin`` folders of installed NVIDIA wheels (``nvidia/<package>/bin``) and of Triton's bundled tools."""
    dirs = []
    try:
        import nvidia  # namespace package of the nvidia-* wheels

        for root in getattr(nvidia, "__path__", []):
            dirs += [Path(root) / p / "bin" for p in packages]
    except ImportError:
        pass
    try:
        import importlib.util

        spec = importlib.util.find_spec("triton")
        if spec is not None and spec.submodule_search_locations:
            dirs.append(Path(list(spec.submodule_search_locations)[0]) / "backends" / "nvidia" / "bin")
    except (ImportError, ValueError):
        pass
    return dirs


@functools.lru_cache(maxsize=None)
def find_tool(name: str) -> str | None:
    """Path of ``nvcc``, ``ptxas12`` (a CUDA 12 ptxas), ``nvdisasm`` or ``cuobjdump``, or None."""
    if name == "nvcc":
        return os.environ.get("MSCRED_NVCC") or _which("nvcc", _cuda_dirs())
    if name == "ptxas12":
        if os.environ.get("MSCRED_PTXAS"):
            return os.environ["MSCRED_PTXAS"]
        for d in _wheel_dirs("cuda_nvcc"):
            candidate = d / "ptxas"
            if candidate.is_file() and tool_release(str(candidate)).startswith("12."):
                return str(candidate)
        found = _which("ptxas", _cuda_dirs())
        return found if found and tool_release(found).startswith("12.") else None
    if name in ("nvdisasm", "cuobjdump"):
        return _which(name, _cuda_dirs() + _wheel_dirs(f"cuda_{name}"))
    raise ValueError(name)


@functools.lru_cache(maxsize=None)
def tool_release(path: str) -> str:
    """``"13.0"`` from ``<tool> --version`` ("Cuda compilation tools, release 13.0, V13.0.88")."""
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""
    m = re.search(r"release (\d+\.\d+)", out)
    return m.group(1) if m else ""


@functools.lru_cache(maxsize=None)
def nvcc_archs(nvcc: str) -> tuple[int, ...]:
    """SM numbers this nvcc builds real code for (``nvcc --list-gpu-code``)."""
    out = subprocess.run([nvcc, "--list-gpu-code"], capture_output=True, text=True, timeout=60).stdout
    return tuple(sorted({int(m) for m in re.findall(r"sm_(\d+)", out)}))


def _run(cmd: list[str], what: str) -> None:
    # errors="replace": a compiler message quoting a source line that is not UTF-8 is still reported.
    proc = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=300)
    if proc.returncode != 0:
        lines = [ln for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
        first = next((ln for ln in lines if "error" in ln.lower()), lines[0] if lines else "no message")
        raise InputError(f"{what} failed: {first.strip()}")


def compile_cubin(source: Path, arch: str, defines: dict[str, str] | None = None,
                  extra: list[str] | None = None) -> bytes:
    """Compile one CUDA source file to a cubin for ``arch`` and return its bytes.

    Parameters
    ----------
    source : Path
        A ``.cu`` file.
    arch : str
        ``sm_50`` .. ``sm_120a``.
    defines : dict
        Preprocessor definitions (``{"VALUE": "0xcc"}`` -> ``-DVALUE=0xcc``): how probe fills a template.
    """
    nvcc = find_tool("nvcc")
    if nvcc is None:
        raise InputError("nvcc not found (set MSCRED_NVCC or put the CUDA toolkit's bin on PATH)")
    sm = sm_number(arch)
    flags = [f"-D{k}={v}" for k, v in (defines or {}).items()] + list(extra or [])
    with tempfile.TemporaryDirectory(prefix="mscred-sass-") as tmp:
        out = Path(tmp) / "out.cubin"
        supported = nvcc_archs(nvcc)
        if sm in supported or not supported:  # an nvcc without --list-gpu-code: let it decide
            _run([nvcc, "-cubin", f"-arch={arch}", *flags, "-o", str(out), str(source)], f"nvcc -arch={arch}")
            return out.read_bytes()
        if sm > min(supported):
            # Only the architectures nvcc dropped (older than its oldest) go to a CUDA 12 ptxas; a newer one that
            # nvcc does not know (a typo, or a GPU newer than this toolkit) no older ptxas knows either.
            raise InputError(f"nvcc {tool_release(nvcc)} cannot build {arch} (it builds "
                             f"{', '.join(f'sm_{n}' for n in supported)})")
        ptxas = find_tool("ptxas12")
        if ptxas is None:
            raise InputError(f"nvcc {tool_release(nvcc)} cannot build {arch} and no CUDA 12 ptxas was found "
                             f"(pip install nvidia-cuda-nvcc-cu12, or set MSCRED_PTXAS)")
        oldest = min(supported)
        ptx = Path(tmp) / "out.ptx"
        _run([nvcc, "-ptx", f"-arch=compute_{oldest}", *flags, "-o", str(ptx), str(source)],
             f"nvcc -ptx -arch=compute_{oldest}")
        text = retarget_ptx(ptx.read_text(), sm, tool_release(ptxas))
        ptx.write_text(text)
        _run([ptxas, f"-arch=sm_{sm}", "-o", str(out), str(ptx)], f"ptxas {tool_release(ptxas)} -arch=sm_{sm}")
        return out.read_bytes()


def retarget_ptx(text: str, sm: int, ptxas_release: str) -> str:
    """Rewrite a PTX module's ``.target`` to ``sm_<sm>`` and its ``.version`` to one the older ptxas reads."""
    major, _, minor = ptxas_release.partition(".")
    version = PTX_ISA_OF_CUDA12.get(int(minor or 0), "8.0") if major == "12" else None
    text = re.sub(r"^\.target\s+sm_\d+\w*", f".target sm_{sm}", text, count=1, flags=re.M)
    if version is not None:
        text = re.sub(r"^\.version\s+\d+\.\d+", f".version {version}", text, count=1, flags=re.M)
    return text


def disassemble(cubin: bytes, where: str = "a cubin") -> dict[str, dict[int, str]] | None:
    """``{kernel: {offset: "MOV R5, 0xcc"}}`` from nvdisasm, or None when no nvdisasm reads this cubin (``where``:
    how to name it when nvdisasm does not finish)."""
    found = disassemble_with_labels(cubin, where)
    return found[0] if found is not None else None


def disassemble_with_labels(cubin: bytes, where: str = "a cubin"
                            ) -> tuple[dict[str, dict[int, str]], dict[str, dict[str, int]]] | None:
    """``disassemble``'s instructions and, per kernel, the offsets of nvdisasm's branch labels (``.L_x_3`` ->
    0x1ac0: branches print ``BRA `(.L_x_3)``), from one nvdisasm run; None when no nvdisasm reads this cubin."""
    proc = _nvdisasm(cubin, where)
    if proc is None or proc.returncode != 0:
        return None  # e.g. CUDA 13's nvdisasm refuses sm_50 ("deprecated")
    return parse_disassembly(proc.stdout), parse_labels(proc.stdout)


def nvdisasm_error(cubin: bytes, where: str = "a cubin") -> str:
    """The first line nvdisasm complains with about ``cubin`` ("" when it reads it, or when there is no nvdisasm)."""
    proc = _nvdisasm(cubin, where)
    if proc is None or proc.returncode == 0:
        return ""
    lines = (proc.stderr or proc.stdout).strip().splitlines()
    return lines[0].strip() if lines else f"exit code {proc.returncode}"


def nvdisasm_timeout(size: int) -> float:
    """Seconds nvdisasm gets for a cubin of ``size`` bytes: a minute, and half a minute per MiB (it reads a few MiB
    of code a second; a damaged cubin can make it loop without end)."""
    return 60.0 + 30.0 * size / (1 << 20)


def disassemble_with_lines(cubin: bytes, where: str = "a cubin"):
    """``disassemble_with_labels``' two answers and, per kernel, each instruction's source location as the cubin's
    line table gives it (``parse_line_info``), from one ``nvdisasm -c -gi`` run; None when no nvdisasm reads this
    cubin. A cubin without a line table gives no locations (the instructions still come)."""
    proc = _nvdisasm(cubin, where, ("-gi",))
    if proc is None or proc.returncode != 0:
        return None
    return parse_disassembly(proc.stdout), parse_labels(proc.stdout), parse_line_info(proc.stdout)


def _nvdisasm(cubin: bytes, where: str = "a cubin", flags: tuple[str, ...] = ()):
    """``nvdisasm -c`` (and ``flags``) run on ``cubin`` (the CompletedProcess), or None without an nvdisasm;
    InputError naming ``where`` when it does not finish (``nvdisasm_timeout``)."""
    nvdisasm = find_tool("nvdisasm")
    if nvdisasm is None:
        return None
    timeout = nvdisasm_timeout(len(cubin))
    with tempfile.TemporaryDirectory(prefix="mscred-sass-") as tmp:
        path = Path(tmp) / "in.cubin"
        path.write_bytes(cubin)
        # Latin-1, as pyelftools decodes the cubin's names: a damaged (non-UTF-8) byte in a name nvdisasm prints
        # cannot fail the decoding, and a kernel's name here stays the one the reader gives it (Kernel.name).
        try:
            return subprocess.run([nvdisasm, "-c", *flags, str(path)], capture_output=True, text=True,
                                  encoding="latin-1", timeout=timeout)
        except subprocess.TimeoutExpired:
            raise InputError(f"{where}: nvdisasm gave no answer in {timeout:.0f} s (a damaged cubin can make it "
                             f"loop); nothing disassembled") from None


_LINE = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
_FUNC = re.compile(r"^\s*\.text\.(\S+):")
_SECTION = re.compile(r'^\s*\.section\s+"?([^",\s]+)')
_LABEL = re.compile(r"^\s*(\.L\w+):")


def _kernel_lines(text: str):
    """Each line of nvdisasm's output with the kernel whose code section holds it (None outside one), and whether
    the line starts that kernel's code.

    The kernel is named after the ``.section .text.<kernel>,...`` line where there is one: that is the section
    header's name, the one the reader finds the code by (``.text.<Kernel.name>``). The ``.text.<kernel>:`` label
    under it comes from the section's symbol, whose name is stored apart and can differ in a damaged file (the
    kernel's instructions were then filed under a name no kernel has); it names the kernel only without a
    ``.section`` line above it."""
    kernel, from_section = None, False
    for line in text.splitlines():
        m = _SECTION.match(line)
        if m:
            name = m.group(1)
            kernel = name[len(".text."):] if name.startswith(".text.") else None
            from_section = kernel is not None
            yield kernel, line, kernel is not None
            continue
        m = _FUNC.match(line)
        if m and not from_section:
            kernel = m.group(1)
            yield kernel, line, True
            continue
        yield kernel, line, False


def parse_disassembly(text: str) -> dict[str, dict[int, str]]:
    """Group nvdisasm's ``/*0020*/  MOV R5, 0xcc ;`` lines by the kernel whose code section they are in."""
    out: dict[str, dict[int, str]] = {}
    for kernel, line, starts in _kernel_lines(text):
        if kernel is None:
            continue
        current = out.setdefault(kernel, {})
        m = None if starts else _LINE.match(line)
        if m:
            current[int(m.group(1), 16)] = " ".join(m.group(2).split())
    return out


# nvdisasm -gi's location comments: '//## File "k.cu", line 6', or for code inlined from another function
# '//## File "k.cu", line 1 inlined at "k.cu", line 6' followed by the caller's own line(s).
_LOCATION = re.compile(r'^\s*//## File "(.*?)", line (\d+)')


def parse_line_info(text: str) -> dict[str, dict[int, tuple[tuple[str, int], ...]]]:
    """Per kernel, each instruction's source location from ``nvdisasm -gi``'s comments: a tuple of (file, line),
    innermost first -- where the instruction's code was written, then each call site it was inlined into, the
    kernel's own line last. nvdisasm writes a location when it changes (a run of comment lines, one per level of
    inlining), so an instruction without one before it keeps the one above; a kernel's code starts with none."""
    out: dict[str, dict[int, tuple[tuple[str, int], ...]]] = {}
    chain: list[tuple[str, int]] = []
    current: tuple[tuple[str, int], ...] = ()
    for kernel, line, starts in _kernel_lines(text):
        if starts or kernel is None:
            chain, current = [], ()
            continue
        m = _LOCATION.match(line)
        if m:
            chain.append((m.group(1), int(m.group(2))))
            continue
        m = _LINE.match(line)
        if m:
            if chain:
                current, chain = tuple(chain), []
            if current:
                out.setdefault(kernel, {})[int(m.group(1), 16)] = current
    return out


def parse_labels(text: str) -> dict[str, dict[str, int]]:
    """Per kernel, each ``.L_x_N:`` label line of nvdisasm's output -> the offset of the instruction after it."""
    out: dict[str, dict[str, int]] = {}
    pending: list[str] = []
    for kernel, line, starts in _kernel_lines(text):
        if starts or kernel is None:
            pending = []
            continue
        current = out.setdefault(kernel, {})
        m = _LABEL.match(line)
        if m:
            pending.append(m.group(1))
            continue
        m = _LINE.match(line)
        if m and pending:
            for label in pending:
                current[label] = int(m.group(1), 16)
            pending = []
    return out


def demangle(names: list[str]) -> dict[str, str]:
    """``{mangled: readable}`` through ``c++filt`` when it is installed; names map to themselves otherwise."""
    tool = shutil.which("c++filt")
    if not tool or not names:
        return {n: n for n in names}
    # errors="replace": a name with a damaged byte is shown with a replacement character, not a UnicodeDecodeError.
    proc = subprocess.run([tool], input="\n".join(names) + "\n", capture_output=True, text=True, errors="replace",
                          timeout=60)
    lines = proc.stdout.splitlines()
    if proc.returncode != 0 or len(lines) != len(names):
        return {n: n for n in names}
    return dict(zip(names, lines))
