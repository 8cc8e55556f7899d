#!/usr/bin/env bash
# The resident ConvLSTM kernel's machine code now against a commit's (sm_90a, CPU only: nvcc and `mscred sass`):
# what a change did to the registers, loads, stores and MMAs of code not yet run on a GPU.
#   bash benchmarks/resident_sass_diff.sh REV [FLAGS...]   (repository root; FLAGS: -D switches of the build now)
# Prints `mscred sass diff` of REV's default build against the working tree's build with FLAGS, and the working
# tree's ptxas resource lines.
set -euo pipefail
REV=$1; shift
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
SRC=src/mscred/ops/resident_lstm
mkdir -p "$W/old"
for f in $(git ls-tree --name-only "$REV" "$SRC/" | grep -E '\.(cu|h)$'); do git show "$REV:$f" > "$W/old/$(basename "$f")"; done
NVCC=(nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -DMSCRED_SM90A)  # as cuda_target(9, 0) builds
"${NVCC[@]}" -I"$W/old" -cubin -o "$W/old.cubin" "$W/old/resident_lstm.cu"
"${NVCC[@]}" "$@" -I"$SRC" -Xptxas -v -cubin -o "$W/new.cubin" "$SRC/resident_lstm.cu" 2>&1 | grep -E "registers|spill"
echo "== mscred sass diff: $REV (default build) -> working tree${*:+ ($*)}"
.venv/bin/mscred sass diff "$W/old.cubin" "$W/new.cubin"
