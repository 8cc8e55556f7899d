"""benchmarks/cell_kernel_sass.py's reading of a listing and its occupancy arithmetic, and bias_act_sass.py's
load-width count, on synthetic inputs (the compiled kernels themselves are checked in
tests/test_ops_triton_convlstm.py)."""
from __future__ import annotations

import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bias_act_sass  # noqa: E402
import cell_kernel_sass as cks  # noqa: E402

LISTING = """
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/                   S2R R0, SR_CTAID.X ;
.L_x_0:
        /*0020*/                   LDG.E.64 R2, desc[UR4][R4.64] ;
        /*0030*/                   MUFU.TANH R3, R2 ;
        /*0040*/              @P0 BRA `(.L_x_0) ;
        /*0050*/                   EXIT ;
.L_x_1:
        /*0060*/                   BRA `(.L_x_1);
"""


def test_instructions_and_the_tile_loop():
    assert len(cks.instructions(LISTING)) == 7
    assert cks.loop_instructions(LISTING) == 3  # the load, the tanh and the branch back


def test_the_closing_branch_to_itself_is_not_a_loop():
    without_loop = LISTING.replace("@P0 BRA `(.L_x_0)", "ISETP.NE.AND P0, PT, R0, RZ, PT")
    assert cks.loop_instructions(without_loop) == 0


def test_blocks_per_sm_by_registers_and_warps():
    assert cks.blocks_per_sm(56, 4) == 9    # 56 x 32 x 4 = 7,168 registers a block
    assert cks.blocks_per_sm(79, 4) == 6    # rounded up to 80 a thread
    assert cks.blocks_per_sm(128, 8) == 2
    assert cks.blocks_per_sm(32, 4) == 16   # by registers 16, and 64 warps / 4
    assert cks.blocks_per_sm(16, 4) == 16   # the 64-warp limit, not the registers' 32


def test_launched_programs_one_wave_only_where_the_grid_holds_more():
    """``convlstm.one_wave`` on the H200's 132 SMs, as cell_kernel_sass.py reports the launches."""
    from mscred.ops.triton.convlstm import one_wave

    def launched_programs(grid, per_sm):
        return math.prod(one_wave(grid, per_sm, cks.SMS)[0])

    assert launched_programs((1800, 1), 6) == 792   # level 1's backward: 6 x 132
    assert launched_programs((900, 1), 6) == 792    # level 2's
    assert launched_programs((256, 2), 6) == 512    # level 3's fits: 396 a channel block
    assert launched_programs((3600, 1), 0) == 3600  # the forward keeps its grid


def test_shared_memory_ops_with_predicates():
    code = ["STS.128 [R4], R16", "@!P0 LDS.128 R20, [R14]", "LDSM.16.M88 R15, [R0]", "LDG.E.64 R2, desc[UR4][R6.64]",
            "BAR.SYNC.DEFER_BLOCKING 0x0", "@P1 LDS R3, [R2]"]
    assert cks.shared_memory_ops(code) == 4


def test_global_load_bytes_by_width():
    code = ["@P2 LDG.E.64 R8, desc[UR4][R18.64]", "@!P1 LDG.E.128 R4, desc[UR4][R22.64]", "LDG.E R3, desc[UR4][R2.64]",
            "STG.E.64 desc[UR4][R4.64], R8", "LDS.128 R20, [R14]"]
    assert bias_act_sass.global_load_bytes(code) == 8 + 16 + 4
