#!/usr/bin/env bash
# Where `mscred train` / `detect` spend their wall time on a CUDA machine (the built-in data, 10 epochs, float32).
# The epochs take ~0.06 s each with the defaults, yet `mscred train` took 16 s (results/pending_checks/cli.log):
# this call finds the rest. Steps (<= ~200 s):
#   1. the bare costs: interpreter + `import torch`, CUDA context, `import mscred.cli.main`;
#   2. `mscred train` with the defaults once unprofiled (fills the Triton cache, as a user's first run does), then
#      under cProfile: defaults, and plain PyTorch (--backend reference --no-cuda-graphs); `mscred detect` profiled;
#   3. each profile printed: the top functions by cumulative time, then by own time.
# Writes $OUT/cli_profile/{profile.txt, *.prof}. Usage (repository root, CUDA machine): bash benchmarks/gpu_cli_profile.sh
set -uo pipefail
. benchmarks/device_env.sh
D="$OUT/cli_profile"; mkdir -p "$D"
M="python3 -m mscred.cli.main"
W=/tmp/cli_profile; rm -rf "$W"; mkdir -p "$W"
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
show() {  # a .prof file -> the top entries by cumulative and by own time
  python3 - "$1" <<'EOF'
import pstats, sys
stats = pstats.Stats(sys.argv[1])
stats.sort_stats("cumulative").print_stats(45)
stats.sort_stats("tottime").print_stats(25)
EOF
}
{
  bash benchmarks/machine_info.sh
  t=$(date +%s%N); python3 -c "import torch"; echo "python + import torch: $(ms "$t") ms"
  t=$(date +%s%N); python3 -c "import torch; torch.zeros(1, device='cuda'); torch.cuda.synchronize()"
  echo "python + import torch + CUDA context: $(ms "$t") ms"
  t=$(date +%s%N); python3 -c "import mscred.cli.main"; echo "python + import mscred.cli.main: $(ms "$t") ms"
  $M generate "$W/data" > /dev/null
  t=$(date +%s%N); timeout 120 $M train "$W/data/train.csv" --out "$W/m0" --quiet; echo "train (defaults, first run: Triton compiles) exit $? wall $(ms "$t") ms"
  for variant in defaults reference; do
    args=(); [ $variant = reference ] && args=(--backend reference --no-cuda-graphs)
    rm -rf "$W/m" "$W/m.checkpoints"
    t=$(date +%s%N)
    timeout 120 python3 -m cProfile -o "$D/train_$variant.prof" -m mscred.cli.main train "$W/data/train.csv" \
      --out "$W/m" --quiet "${args[@]}"
    echo "train ($variant, profiled) exit $? wall $(ms "$t") ms"
  done
  t=$(date +%s%N)
  timeout 60 python3 -m cProfile -o "$D/detect.prof" -m mscred.cli.main detect "$W/m0" "$W/data/test.csv" --out "$W/s.csv"
  echo "detect (profiled, model trained with the defaults) exit $? wall $(ms "$t") ms"
  for f in train_defaults train_reference detect; do
    echo "=================== $f"
    [ -f "$D/$f.prof" ] && show "$D/$f.prof"
  done
} > "$D/profile.txt" 2>&1
grep -E "ms$|exit|function calls" "$D/profile.txt"
