"""The reverse-engineering articles end to end on a GPU, with `mscred sass` doing the work. One device call.

1. Build the article's test program for the GPU's architecture, run it: ``*a = cc``.
2. `mscred sass patch` the constant to 0xdd inside the executable's fatbin, run the patched copy: ``*a = dd``.
3. The same on a cubin: build it, patch it, `mscred sass run` it (cuda-python driver, and CuPy).
4. The second article's edit: a store's source register, found by `sass probe --template register`, switched to
   another register; `sass run` shows the other value stored.
5. `sass probe` on this machine's nvcc, and `sass inspect` of a Triton matmul compiled here (HGMMA on sm_90).

Usage (device): ``PYTHONPATH=src python3 benchmarks/gpu_sass.py --out $OUT``. Writes sass_<gpu>.json and a log of
every command with its output; exits 1 if a check failed.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))  # the register step imports mscred in this process, not only in the CLI runs
TEMPLATES = ROOT / "src" / "mscred" / "sass" / "templates"
LOG: list[str] = []


def log(text: str) -> None:
    print(text, flush=True)
    LOG.append(text)


def sh(cmd: list[str], check: bool = True) -> str:
    """Run a command, log it and its output, return stdout+stderr."""
    log("$ " + " ".join(str(c) for c in cmd))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env, timeout=300)
    out = (proc.stdout + proc.stderr).rstrip()
    if out:
        log(out)
    if check and proc.returncode != 0:
        raise RuntimeError(f"exit {proc.returncode}: {' '.join(str(c) for c in cmd)}")
    return out


def mscred(*args) -> str:
    return sh([sys.executable, "-m", "mscred.cli.main", "sass", *args])


def step(results: dict, name: str, fn) -> None:
    log(f"\n## {name}")
    try:
        results[name] = fn()
    except Exception as err:  # noqa: BLE001 - every step reports, the run goes on
        log(traceback.format_exc())
        results[name] = {"error": f"{type(err).__name__}: {err}"}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument("--arch", default=None, help="default: the GPU's compute capability")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="gpu_sass_"))

    try:
        gpu = sh(["nvidia-smi", "--query-gpu=name,driver_version,compute_cap", "--format=csv,noheader"])
        name, driver, cap = [x.strip() for x in gpu.splitlines()[0].split(",")]
    except (OSError, RuntimeError):  # no GPU here: the build and patch steps still run, the launches fail
        name, driver, cap = "no GPU", "", "9.0"
    arch = args.arch or "sm_" + cap.replace(".", "")
    nvcc = sh(["nvcc", "--version"]).splitlines()[-2]
    results: dict = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                     "gpu": name, "driver": driver, "arch": arch, "nvcc": nvcc, "python": platform.python_version()}
    checks: dict[str, bool] = {}

    def executable():
        exe = work / "test"
        sh(["nvcc", f"-arch={arch}", "-o", exe, TEMPLATES / "article_test.cu"])
        before = sh([exe])
        patch = mscred("patch", exe, "--kernel", "test", "--old", "0xcc", "--new", "0xdd", "-o", work / "test.dd")
        after = sh([work / "test.dd"])
        checks["executable: *a = cc before"] = before.strip() == "*a = cc"
        checks["executable: *a = dd after the patch"] = after.strip() == "*a = dd"
        return {"before": before, "patch": patch, "after": after}

    def cubin():
        cub = work / "value.cubin"
        sh(["nvcc", "-cubin", f"-arch={arch}", "-o", cub, TEMPLATES / "value.cu"])
        plain = mscred("run", cub, "-k", "test")
        patch = mscred("patch", cub, "-k", "test", "--old", "0xcc", "--new", "0xdd", "-o", work / "value.dd.cubin")
        runs = {"unpatched": plain, "patch": patch}
        for backend in ("driver", "cupy"):
            try:
                runs[backend] = mscred("run", work / "value.dd.cubin", "-k", "test", "--backend", backend)
            except RuntimeError as err:
                runs[backend] = f"failed: {err}"
            checks[f"cubin: sass run --backend {backend} prints *a = dd"] = runs[backend].strip() == "*a = dd"
        checks["cubin: unpatched prints *a = cc"] = plain.strip() == "*a = cc"
        return runs

    def register():
        from mscred.sass.probe import probe

        r = probe(arch, template="register")
        cub = work / "register.cubin"
        sh(["nvcc", "-cubin", f"-arch={arch}", "-DVALUE=v3", "-o", cub, TEMPLATES / "register.cu"])
        before = mscred("run", cub, "-k", "test", "--words", "9")
        old, new = r.register_values["v3"], r.register_values["v6"]
        patch = mscred("patch", cub, "-k", "test", "--field", "register", "--bits",
                       f"{r.register_bits[0]}:{r.register_bits[1]}", "--old", str(old), "--new", str(new),
                       "--at", hex(dict(r.words)["v3"].offset), "-o", work / "register.v6.cubin")
        after = mscred("run", work / "register.v6.cubin", "-k", "test", "--words", "9")
        # b[j] = j + 1, so a[0] = v3 = b[3] = 4 before and v6 = b[6] = 7 after.
        checks["register: a[0] = 4 (v3) before"] = before.splitlines()[0].strip() == "a[0] = 4"
        checks["register: a[0] = 7 (v6) after switching the store's register"] = (
            after.splitlines()[0].strip() == "a[0] = 7")
        return {"probe": r.to_json(), "registers": r.register_values, "before": before, "patch": patch,
                "after": after}

    def probes():
        answer = json.loads(mscred("probe", "--arch", arch, "--json"))
        text = mscred("probe", "--arch", arch)
        return {"json": answer, "text": text}

    def inspect_triton():
        import torch
        import triton
        import triton.language as tl

        @triton.jit
        def matmul(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
            pm, pn = tl.program_id(0), tl.program_id(1)
            rm, rn, rk = pm * BM + tl.arange(0, BM), pn * BN + tl.arange(0, BN), tl.arange(0, BK)
            acc = tl.zeros((BM, BN), dtype=tl.float32)
            for k in range(0, K, BK):
                x = tl.load(a + rm[:, None] * K + (k + rk)[None, :])
                y = tl.load(b + (k + rk)[:, None] * N + rn[None, :])
                acc += tl.dot(x, y)
            tl.store(c + rm[:, None] * N + rn[None, :], acc)

        M = N = K = 512
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
        c = torch.empty(M, N, device="cuda", dtype=torch.float32)
        compiled = matmul[(M // 128, N // 128)](a, b, c, M, N, K, BM=128, BN=128, BK=64, num_warps=8)
        err = (c - (a.float() @ b.float())).abs().max().item()
        checks["triton matmul correct (max abs err < 0.05)"] = err < 0.05
        path = work / "triton_matmul.cubin"
        path.write_bytes(compiled.asm["cubin"])
        table = mscred("inspect", path)
        rows = json.loads(mscred("inspect", path, "--json"))
        return {"max_abs_err": err, "table": table, "rows": rows}

    step(results, "executable", executable)
    step(results, "cubin", cubin)
    step(results, "register", register)
    step(results, "probe", probes)
    step(results, "inspect_triton", inspect_triton)
    results["checks"] = checks
    log("\n## checks")
    for what, ok in checks.items():
        log(f"{'PASS' if ok else 'FAIL'}  {what}")
    tag = name.split()[-1].lower()
    (out / f"sass_{tag}.json").write_text(json.dumps(results, indent=2) + "\n")
    (out / f"sass_{tag}.log").write_text("\n".join(LOG) + "\n")
    failed = [k for k, ok in checks.items() if not ok] + [k for k, v in results.items()
                                                           if isinstance(v, dict) and "error" in v]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
