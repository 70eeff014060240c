#!/bin/bash
# gpu_check.sh: issue 9's one-command verification on a GPU host, also
# runnable on a CPU-only machine (the GPU parts are skipped, saying so).
#
#   LIBTORCH_HOME=$(python3 -c 'import torch,os;print(os.path.dirname(torch.__file__))') \
#     tools/gpu_check.sh [--build-dir DIR] [--quick] [--quantize BIN] [--no-bench]
#
# 1. CMake + Ninja build (find_package(Torch) at LIBTORCH_HOME, else the
#    system LibTorch) of quantd-quantize and the bench binaries.
# 2. The engine's test suite on cuda:0 when the build has a GPU backend and
#    the engine can run on one; otherwise says why it is skipped.
# 3. The benches (fake-quant bandwidth, GPTQ per layer, block forward, model
#    load); each prints its own ratios against a baseline of the same run.
# 4. The stories260K agreement check with quantd-quantize: --device cpu vs
#    --device cuda:0, identical artifact sha256 and |ppl difference| <= 1e-4.
#
# Logs go to the build dir; stdout gets a markdown report for
# docs/performance.md (date, device, command, tables).
#
#   --build-dir DIR   CMake build folder (default cmake-build, in .bazelignore and .gitignore)
#   --quantize BIN    use this quantd-quantize and skip the build (e.g. Bazel's)
#   --no-bench        skip the benches (and their build)
#   --no-tests        skip the Bazel test suite
#   --quick           small bench sizes (a smoke run, not figures to publish)
# Exit status: 0 when every part that ran passed (skipped parts do not fail).
set -u -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ARGS_SHOWN="$*"
BUILD_DIR="$ROOT/cmake-build"
QUANTIZE=""
BENCH=1
TESTS=1
QUICK=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) BUILD_DIR="$2"; shift 2 ;;
    --quantize) QUANTIZE="$2"; shift 2 ;;
    --no-bench) BENCH=0; shift ;;
    --no-tests) TESTS=0; shift ;;
    --quick) QUICK=1; shift ;;
    -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
    *) echo "gpu_check.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$BUILD_DIR"
LOG="$BUILD_DIR/gpu_check-logs"
mkdir -p "$LOG"
FAILED=0
say() { echo "$*" >&2; }

# --- Environment ------------------------------------------------------------
GPU_NAME=""
if command -v nvidia-smi >/dev/null 2>&1; then
  GPU_NAME="$(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null | head -1)"
elif command -v rocm-smi >/dev/null 2>&1; then
  GPU_NAME="$(rocm-smi --showproductname 2>/dev/null | grep -m1 -i 'card series' | sed 's/.*: *//')"
fi
CPU_NAME="$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //')"
NCPU="$(nproc)"

echo "## quantd gpu_check — $(date -u '+%Y-%m-%d %H:%M UTC')"
echo
echo "- command: \`${LIBTORCH_HOME:+LIBTORCH_HOME=$LIBTORCH_HOME }tools/gpu_check.sh${ARGS_SHOWN:+ $ARGS_SHOWN}\`"
echo "- host: $(hostname), ${NCPU} CPU cores (${CPU_NAME:-unknown CPU})"
echo "- GPU: ${GPU_NAME:-none found (no nvidia-smi / rocm-smi)}"
echo "- commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"

# --- 1. Build ----------------------------------------------------------------
BENCHES=()
for b in //worker/quant:fake_quant_bench //worker/algo:gptq_bench \
         //worker/models:blockwise_forward_bench //worker/models:model_load_bench; do
  pkg="${b#//}"; pkg="${pkg%%:*}"; name="${b##*:}"
  grep -q "name = \"$name\"" "$ROOT/$pkg/BUILD" 2>/dev/null && BENCHES+=("$b")
done
BACKEND="unknown"
if [ -z "$QUANTIZE" ]; then
  ROOTS="//worker/cli:quantd-quantize"
  TARGETS=(quantd-quantize)
  if [ "$BENCH" = 1 ]; then
    for b in "${BENCHES[@]}"; do ROOTS="$ROOTS;$b"; TARGETS+=("${b##*:}"); done
  fi
  say "gpu_check: configuring CMake in $BUILD_DIR"
  start=$(date +%s)
  if ! cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja "-DQUANTD_CMAKE_ROOTS=$ROOTS" \
      ${LIBTORCH_HOME:+"-DLIBTORCH_HOME=$LIBTORCH_HOME"} >"$LOG/cmake.log" 2>&1; then
    echo; echo "**CMake configure failed** (see $LOG/cmake.log):"; echo '```'; tail -20 "$LOG/cmake.log"; echo '```'
    exit 1
  fi
  if ! ninja -C "$BUILD_DIR" "${TARGETS[@]}" >"$LOG/build.log" 2>&1; then
    echo; echo "**Build failed** (see $LOG/build.log):"; echo '```'; tail -30 "$LOG/build.log"; echo '```'
    exit 1
  fi
  BUILD_SECONDS=$(( $(date +%s) - start ))
  BACKEND="$(sed -n 's/.*quantd: LibTorch \(.*\)$/\1/p' "$LOG/cmake.log" | head -1)"
  QUANTIZE="$BUILD_DIR/quantd-quantize"
  echo "- LibTorch: ${BACKEND:-unknown}"
  echo "- CMake + Ninja build: ${BUILD_SECONDS} s (${TARGETS[*]})"
else
  echo "- quantd-quantize: $QUANTIZE (prebuilt; CMake build skipped)"
fi

# A GPU run needs a GPU, a LibTorch with its backend, and an engine that
# accepts the device: quantd-quantize answers the last two itself.
GPU_OK=0
GPU_WHY=""
if [ -z "$GPU_NAME" ]; then
  GPU_WHY="no GPU on this host"
else
  probe="$("$QUANTIZE" --model /nonexistent --scheme w_int8_per_channel_sym --no-eval \
            --device cuda:0 --data-dir "$LOG/probe" 2>&1)"
  if echo "$probe" | grep -q 'CPU-only\|FEATURE_NOT_BUILT\|UNIMPLEMENTED'; then
    GPU_WHY="$(echo "$probe" | head -1)"
  else
    GPU_OK=1
  fi
fi

# --- 2. Engine tests against this LibTorch -------------------------------------
# The unit tests are Bazel targets; with LIBTORCH_HOME exported, Bazel's
# libtorch wrapper links that LibTorch (--config=cuda / rocm adds the GPU
# backend), so this is the engine's suite compiled and run against 2.x.
echo
echo "### Engine tests against this LibTorch"
echo
if [ "$TESTS" = 0 ]; then
  echo "skipped (--no-tests)"
elif command -v bazel >/dev/null 2>&1; then
  config=()
  case "$BACKEND" in *"backend cuda"*) config=(--config=cuda) ;; *"backend rocm"*) config=(--config=rocm) ;; esac
  if bazel test --symlink_prefix=/ "${config[@]}" //worker/common/... //worker/quant/... \
      //worker/algo/... //worker/models/... //worker/pipeline/... //worker/cli/... \
      >"$LOG/tests.log" 2>&1; then
    echo "passed: $(grep -c ' PASSED ' "$LOG/tests.log") test targets ${config[*]} (log: $LOG/tests.log)"
  else
    echo "**FAILED** (log: $LOG/tests.log)"; FAILED=1
  fi
  if [ "$GPU_OK" = 1 ]; then
    echo "(the tests choose their own device: CPU)"
  else
    echo "on cuda:0: skipped: ${GPU_WHY}"
  fi
else
  echo "skipped: the unit tests are Bazel targets and this host has no bazel"
fi

# --- 3. Benches ----------------------------------------------------------------
run_bench() {  # name, args...
  local name="$1"; shift
  local bin="$BUILD_DIR/$name"
  [ -x "$bin" ] || { echo "($name not built)"; return; }
  echo
  echo "#### $name $*"
  echo
  echo '```'
  if ! "$bin" "$@" 2>&1 | tee "$LOG/$name.log"; then FAILED=1; echo "(exit status non-zero)"; fi
  echo '```'
}
echo
echo "### Benches (CPU; each ratio is against a baseline measured in the same run)"
if [ "$BENCH" = 1 ] && [ "$BUILD_DIR/quantd-quantize" = "$QUANTIZE" ]; then
  if [ "$QUICK" = 1 ]; then
    run_bench fake_quant_bench --iters=3
    run_bench gptq_bench --tokens=256 --layers=512x512
    run_bench blockwise_forward_bench --tokens=64 --iters=1 --hidden=512 --intermediate=1376 --heads=8 --kv_heads=8
    run_bench model_load_bench --layers=1 --hidden=512 --intermediate=1376 --vocab=4096 --dir="$LOG/ckpt"
  else
    run_bench fake_quant_bench
    run_bench gptq_bench
    run_bench blockwise_forward_bench
    run_bench model_load_bench --dir="$LOG/ckpt"
  fi
  echo
  echo "GPU benches: skipped (${GPU_WHY:-the benches have no device selection yet; they measure the CPU})."
else
  echo
  echo "skipped (--no-bench or a prebuilt quantd-quantize)"
fi

# --- 4. stories260K agreement -------------------------------------------------
MODEL="$ROOT/models/stories260K"
TEXT="$ROOT/tests/data/tinystories-sample.txt"
run_job() {  # device, outdir -> prints "sha256 ppl seconds" or fails
  local device="$1" out="$2" start end
  rm -rf "$out"
  start=$(date +%s.%N)
  "$QUANTIZE" --model "$MODEL" --scheme w_int4_per_channel_sym --calib "$TEXT" --calib-samples 8 \
    --calib-seq-len 128 --eval "$TEXT" --eval-windows 20 --output "$out" --data-dir "$LOG/data" \
    --device "$device" -o json >"$out.json" 2>"$out.err" || return 1
  end=$(date +%s.%N)
  tail -1 "$out.json" | python3 -c '
import json, sys
job = json.load(sys.stdin)
m = job["result"]["metrics"]
print(job["result"]["artifacts"][0]["sha256"], m["floatPerplexity"]["perplexity"],
      m["quantizedPerplexity"]["perplexity"], "%.2f" % (float(sys.argv[2]) - float(sys.argv[1])))
' "$start" "$end"
}
echo
echo "### stories260K agreement (w_int4_per_channel_sym, 20 windows)"
echo
echo "| device | artifact sha256 | float ppl | quantized ppl | wall s |"
echo "|---|---|---|---|---|"
if cpu=$(run_job cpu "$LOG/agree-cpu"); then
  read -r cpu_sha cpu_fppl cpu_qppl cpu_s <<<"$cpu"
  echo "| cpu | \`${cpu_sha:0:16}…\` | $cpu_fppl | $cpu_qppl | $cpu_s |"
  if python3 -c "import sys; sys.exit(0 if abs($cpu_fppl - 4.8374) <= 1e-3 else 1)"; then :; else
    echo; echo "**CPU float perplexity $cpu_fppl is not the golden 4.8374**"; FAILED=1
  fi
else
  echo "| cpu | **failed** (see $LOG/agree-cpu.err) | | | |"; FAILED=1
fi
if [ "$GPU_OK" = 1 ]; then
  if gpu=$(run_job cuda:0 "$LOG/agree-gpu"); then
    read -r gpu_sha gpu_fppl gpu_qppl gpu_s <<<"$gpu"
    echo "| cuda:0 | \`${gpu_sha:0:16}…\` | $gpu_fppl | $gpu_qppl | $gpu_s |"
    echo
    if [ "$gpu_sha" = "${cpu_sha:-}" ] && python3 -c "import sys; sys.exit(0 if abs($gpu_qppl - $cpu_qppl) <= 1e-4 and abs($gpu_fppl - $cpu_fppl) <= 1e-4 else 1)"; then
      echo "agreement: identical codes (sha256), perplexity within 1e-4"
    else
      echo "**agreement FAILED**: sha256 or perplexity differ"; FAILED=1
    fi
  else
    echo "| cuda:0 | **failed** (see $LOG/agree-gpu.err) | | | |"; FAILED=1
  fi
else
  echo
  echo "cuda:0 run skipped: $GPU_WHY"
fi
echo
[ "$FAILED" = 0 ] && echo "result: every part that ran passed" || echo "result: **FAILURES** (logs in $LOG)"
exit "$FAILED"
