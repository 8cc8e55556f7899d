#!/usr/bin/env bash
# One device call (~8 min): the GPU test suite on the commit that made the warpgroup-MMA resident kernel the default
# (results/resident_wgmma/), and the whole model with it once more -> results/final_wgmma/. Since 2026-12-01 the
# steps are gpu_suite_and_model.sh's (the same: resident build, suite without the im2col build checks, one model
# run); this name is kept for the result folder that quotes it.
exec env NAME=final_wgmma bash benchmarks/gpu_suite_and_model.sh
