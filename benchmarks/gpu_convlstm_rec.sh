#!/usr/bin/env bash
# One short device call for the implicit-GEMM recurrent ConvLSTM (ops/triton/convlstm_fused_rec.py): its tests
# (the GPU full-size rows, the training row, the small float64 / float32 / bf16 rows compiled for the GPU), then
# benchmarks/bench_convlstm_rec.py on levels 1 and 2 (bf16 and float32, inference; --train adds forward+backward).
# Writes $OUT/convlstm_rec_gpu.txt. At most 2 minutes (timeouts 50 s + 65 s; rows print as they finish, so a
# timeout keeps what was measured), most of it Triton compilation. PYTEST_K selects tests (pytest -k; default: the
# GPU rows, the one-dot and the training rows; "" runs all, ~40 kernel compilations), BENCH_ARGS replaces the
# bench arguments (default --train).
set -uo pipefail
OUT=${OUT:-benchmarks/results}
mkdir -p "$OUT"
export PYTHONPATH=src PYTHONUNBUFFERED=1
PY=${PY:-python3}
{
  date -u +%FT%TZ
  git rev-parse --short HEAD 2>/dev/null | sed 's/^/commit /'
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  timeout 50 $PY -m pytest -q -p no:cacheprovider -rfEs tests/test_ops_triton_convlstm_rec.py \
    -k "${PYTEST_K:-gpu or cuda_graph or one_dot or training}" 2>&1 | tail -25
  echo "pytest exit code ${PIPESTATUS[0]}"
  timeout 65 $PY benchmarks/bench_convlstm_rec.py ${BENCH_ARGS:---train} 2>&1
  echo "bench exit code $?"
} > "$OUT/convlstm_rec_gpu.txt" 2>&1
cat "$OUT/convlstm_rec_gpu.txt"
