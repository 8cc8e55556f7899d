"""`mscred sass triton SOURCE KERNEL ...`: a Triton kernel compiled for sm_90 on this CPU machine, its machine code
reported as `sass inspect` reports a cubin's, the cubin and stages written for the other sass commands, and every
mistake in the call one line with exit 2."""
from __future__ import annotations

import json

import pytest

from cli_helpers import bad_input, run_cli

pytest.importorskip("triton", reason="sass triton compiles with Triton (the gpu or dev extra)")

# A kernel whose loop and tile are its constexprs: BLOCK sets the registers it needs, DOT whether it multiplies on
# tensor cores (HGMMA on sm_90).
KERNEL = '''
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, y_ptr, n, alpha, BLOCK: tl.constexpr, STEPS: tl.constexpr = 4):
    offs = tl.program_id(0) * BLOCK * STEPS + tl.arange(0, BLOCK)
    for step in range(STEPS):
        at = offs + step * BLOCK
        x = tl.load(x_ptr + at, mask=at < n)
        tl.store(y_ptr + at, (x * alpha).to(y_ptr.dtype.element_ty), mask=at < n)


@triton.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, DT: tl.constexpr):
    r = tl.arange(0, 64)
    a = tl.load(a_ptr + r[:, None] * 64 + r[None, :])
    b = tl.load(b_ptr + r[:, None] * 64 + r[None, :])
    tl.store(c_ptr + r[:, None] * 64 + r[None, :], tl.dot(a.to(DT), b.to(DT)))
'''


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    path = tmp_path_factory.mktemp("kernels") / "kernels.py"
    path.write_text(KERNEL)
    return path


def _compiled(capsys, *argv) -> dict:
    code, out, err = run_cli(capsys, "sass", "triton", *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def test_report_cubin_and_stages(tmp_path, source, capsys):
    cubin, stages = tmp_path / "scale.cubin", tmp_path / "stages"
    code, out, err = run_cli(capsys, "sass", "triton", source, "scale_kernel", "-c", "BLOCK=256", "-p",
                             "y_ptr=*bf16", "--float", "alpha", "-o", cubin, "--keep", stages, "--loops")
    assert code == 0, err
    assert "scale_kernel" in out and "sm_90" in out and "regs" in out
    assert out.splitlines()[-1].startswith("scale_kernel for sm_90 (num_warps 4, num_stages 3): a launch requests")
    assert sorted(p.suffix for p in stages.iterdir()) == [".cubin", ".llir", ".ptx", ".ttgir", ".ttir"]
    assert "ttg." in (stages / "scale_kernel.ttgir").read_text()   # (the layouts Triton chose are there to read)
    assert ".target sm_90" in (stages / "scale_kernel.ptx").read_text()
    assert cubin.read_bytes() == (stages / "scale_kernel.cubin").read_bytes()
    code, out, _ = run_cli(capsys, "sass", "kernels", cubin)   # the other sass commands read it
    assert code == 0 and "scale_kernel" in out


def test_the_compile_follows_the_arguments(source, capsys):
    """The constexprs and types given reach the compile: bf16 stores, a bigger tile's registers, tensor cores for a
    dot in bf16 (HGMMA), and STEPS' default when it is not given."""
    small = _compiled(capsys, source, "scale_kernel", "-c", "BLOCK=128", "--float", "alpha")["inspect"][0]
    large = _compiled(capsys, source, "scale_kernel", "-c", "BLOCK=4096", "--float", "alpha")["inspect"][0]
    assert large["registers"] > small["registers"]
    dot = _compiled(capsys, source, "dot_kernel", "-c", "DT=tl.bfloat16", "--warps", "4")
    assert dot["inspect"][0]["groups"]["tensor"] > 0 and dot["launch_shared_bytes"] > 0
    assert any(name.startswith("HGMMA") for name in dot["inspect"][0]["mix"])


def test_a_product_kernel(capsys):
    """A module name: mscred's own bias + SELU kernel, as the model launches it at level 1."""
    found = _compiled(capsys, "mscred.ops.triton.bias_act", "_bias_act_fwd_const_kernel", "-c", "HWO=900", "-c",
                      "WO=30", "-c", "SELU=True", "-c", "CDT=tl.float32", "-c", "BLOCK_P=128", "-c", "BLOCK_C=32",
                      "-c", "SHUFFLE=False", "-c", "BORDER=False", "-p", "y_ptr=*bf16", "-p", "o_ptr=*bf16")
    assert found["inspect"][0]["registers"] > 0 and found["inspect"][0]["local_frame_bytes"] == 0


@pytest.mark.parametrize("argv,names", [
    (["no_such_module_xyz", "k"], ["no_such_module_xyz: no module of that name"]),
    (["{source}", "nope"], ["no kernel 'nope'", "dot_kernel, scale_kernel"]),
    (["{source}", "scale_kernel"], ["constexpr argument(s) without a value: BLOCK"]),
    (["{source}", "scale_kernel", "-c", "BLOCK=128", "-c", "BLOK=2"], ["-c BLOK: no such argument"]),
    (["{source}", "scale_kernel", "-c", "BLOCK=big"], ["-c BLOCK=big: not an int"]),
    (["{source}", "scale_kernel", "-c", "BLOCK"], ["expected NAME=VALUE"]),
    (["{source}", "scale_kernel", "-c", "BLOCK=100"], ["Triton did not compile it for sm_90", "power of 2"]),
    (["{source}", "dot_kernel", "-c", "DT=tl.nothing"], ["-c DT=tl.nothing: not a Triton type"]),
    (["{source}", "dot_kernel", "-c", "DT=tl.bfloat16", "--arch", "gpu9"], ["is not a GPU architecture"]),
])
def test_mistakes_are_one_line(source, capsys, argv, names):
    line = bad_input(capsys, "sass", "triton", *[a.format(source=source) for a in argv], names=names)
    assert "Traceback" not in line
