# The environment every device script sets up, sourced from the repository root: `. benchmarks/device_env.sh`.
#   OUT                    where results go (the device tool's $OUT; benchmarks/results when run by hand), exported
#   PYTHONPATH=src         the checkout's package, not an installed one (and build/gpu_pydeps when carried)
#   PYTHONUNBUFFERED=1     logs in order when stdout and stderr share a file
#   TORCH_EXTENSIONS_DIR   where the im2col extension is built (kept between the scripts' processes)
# and `cache_bytecode`, for scripts whose timings include Python start-up: the device's Python sets
# PYTHONDONTWRITEBYTECODE=1, so every process recompiled mscred (cProfile: 6.5 s of a `mscred train` in compile(),
# results/cli_profile/); an installed package has its .pyc files, so let the run write them somewhere writable.
OUT=${OUT:-benchmarks/results}
export OUT PYTHONPATH=src PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=${TORCH_EXTENSIONS_DIR:-/tmp/torch_extensions}
# Pure-Python packages the device's Python lacks (pyelftools for the sass tests), when carried: gpu_pydeps.sh
if [ -d build/gpu_pydeps ]; then export PYTHONPATH=src:build/gpu_pydeps; fi

# bench_to_log DIR TIMEOUT_S SCRIPT [ARGS...]: the machine header, then `python3 SCRIPT ARGS --out DIR` under a time
# cap and its exit code, into DIR/bench_log.txt (the sweep scripts' step).
bench_to_log() {
  local dir=$1 limit=$2; shift 2
  mkdir -p "$dir"
  { bash benchmarks/machine_info.sh; timeout "$limit" python3 "$@" --out "$dir"; echo "exit $?"; } \
    > "$dir/bench_log.txt" 2>&1
}

# result_dir NAME: creates $OUT/NAME with the machine header in it (machine.txt) and prints its path.
result_dir() {
  local dir="$OUT/$1"
  mkdir -p "$dir"
  bash benchmarks/machine_info.sh > "$dir/machine.txt" 2>&1
  echo "$dir"
}

# pack_result NAME: $OUT/NAME packed as $OUT/NAME.tgz (after each step of a call, so that a call cut short still
# brings back what it measured; the tool returns $OUT's files).
pack_result() {
  (cd "$OUT" && tar czf "$1.tgz" "$1")
}

cache_bytecode() {
  echo "PYTHONDONTWRITEBYTECODE was '${PYTHONDONTWRITEBYTECODE:-}'"
  unset PYTHONDONTWRITEBYTECODE
  export PYTHONPYCACHEPREFIX=/tmp/mscred_pycache
}

# build_flag_sets MODULE VARIABLE DIR FLAGS...: the CUDA extension of mscred.ops.MODULE once per flag set (VARIABLE:
# its -D flags variable, "" the default build), all at once, each log in DIR/build_<n>.txt (n counting from 0), so
# that the tests and benchmarks after it find them built. BUILDERS names the module's build functions (default
# "_extension"), each flag set's in processes of their own: a builder other than _extension logs to
# DIR/build_<n><builder>.txt.
build_flag_sets() {
  local module=$1 variable=$2 dir=$3 i=0 builder log; shift 3
  for flags in "$@"; do
    for builder in ${BUILDERS:-_extension}; do
      log="$dir/build_$i.txt"; [ "$builder" = _extension ] || log="$dir/build_$i$builder.txt"
      env "$variable=$flags" timeout 240 python3 -c "from mscred.ops import $module; $module.$builder()" \
        > "$log" 2>&1 &
    done
    i=$((i + 1))
  done
  wait
}
# build_resident DIR FLAGS...: the resident ConvLSTM extension (MSCRED_RESIDENT_LSTM_FLAGS);
# build_conv_cell DIR FLAGS...: the conv + cell step extensions, the forward's and the backward's (MSCRED_CONV_CELL_FLAGS).
build_resident() { build_flag_sets resident_lstm MSCRED_RESIDENT_LSTM_FLAGS "$@"; }
build_conv_cell() { BUILDERS="_extension _backward" build_flag_sets conv_cell MSCRED_CONV_CELL_FLAGS "$@"; }

# bench_level DIR LABEL FLAGS SCRIPT PATHS: one per-level benchmark (bench_lstm_attention.py, bench_resident_lstm.py)
# with the resident kernel's build MSCRED_RESIDENT_LSTM_FLAGS=FLAGS ("" the default), timing PATHS (its --timed),
# into DIR/LABEL/ and DIR/LABEL_log.txt; its rows to the console.
bench_level() {
  local dir=$1 label=$2 flags=$3 script=$4 paths=$5
  MSCRED_RESIDENT_LSTM_FLAGS="$flags" timeout 100 python3 "benchmarks/$script" --timed "$paths" --out "$dir/$label" \
    > "$dir/${label}_log.txt" 2>&1
  echo "== $label (${flags:-default build}) at ${SECONDS}s"; grep -E "^\| (scoring|1,024|batch)" "$dir/$label"/*.md
}
