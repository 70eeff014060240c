#!/bin/bash
# gpu_check.sh: builds the engine with CMake and checks it on a GPU host, also
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
#   --no-tests        skip the engine tests
#   --quick           small bench sizes (a smoke run, not figures to publish)
#   --no-cpu-bench    skip the CPU benches (a GPU host's report needs only the GPU ones)
#   --e2e             also the end-to-end job at Llama-3-8B shapes on cuda:0: a
#                     random bf16 checkpoint (32 blocks, hidden 4096, 14336,
#                     32/8 heads, vocab 128256), W4 (uint4 asym) group 128, RTN
#                     then GPTQ; wall time, peak GPU memory, peak host RSS
#   --e2e-samples N   calibration samples of 2048 tokens for the RTN job of
#                     --e2e (default 16; 0 skips it)
#   --e2e-gptq-samples N  the same for the GPTQ job (default 16; 0 skips it);
#                     it runs first, being the figure the anchor compares with
#   --no-agreement    skip the stories260K CPU/GPU agreement jobs
#   --deps FILE       unpack tools/gpu_deps_bundle.sh's archive (the Debian
#                     gRPC / protobuf / Abseil / ... the build needs) into a
#                     private prefix: for GPU hosts without those packages
#
# The engine tests are the CMake-built test binaries of ENGINE_TESTS below,
# run with QUANTD_TEST_DEVICE=cuda:0 when the GPU path is usable (tests that
# know no device run on the CPU against this LibTorch).
# Exit status: 0 when every part that ran passed (skipped parts do not fail).
set -u -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ARGS_SHOWN="$*"
BUILD_DIR="$ROOT/cmake-build"
QUANTIZE=""
BENCH=1
TESTS=1
AGREEMENT=1
QUICK=0
DEPS=""
CPU_BENCH=1
E2E=0
E2E_SAMPLES=16
E2E_GPTQ_SAMPLES=16
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) BUILD_DIR="$2"; shift 2 ;;
    --quantize) QUANTIZE="$2"; shift 2 ;;
    --no-bench) BENCH=0; shift ;;
    --no-tests) TESTS=0; shift ;;
    --no-agreement) AGREEMENT=0; shift ;;
    --quick) QUICK=1; shift ;;
    --deps) DEPS="$2"; shift 2 ;;
    --no-cpu-bench) CPU_BENCH=0; shift ;;
    --e2e) E2E=1; shift ;;
    --e2e-samples) E2E_SAMPLES="$2"; shift 2 ;;
    --e2e-gptq-samples) E2E_GPTQ_SAMPLES="$2"; shift 2 ;;
    -h|--help) sed -n '2,39p' "$0"; exit 0 ;;
    *) echo "gpu_check.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$BUILD_DIR"
# Absolute: the compiler and loader paths below are used from other folders.
BUILD_DIR="$(cd "$BUILD_DIR" && pwd)"
LOG="$BUILD_DIR/gpu_check-logs"
mkdir -p "$LOG"
FAILED=0
say() { echo "$*" >&2; }
# The last lines of a failed run's log, with the crash handler's backtrace
# when it died of a signal.
show_crash() {  # log file
  echo
  echo '```'
  if grep -q 'fatal signal' "$1"; then sed -n '/fatal signal/,$p' "$1" | head -40; else tail -8 "$1"; fi
  echo '```'
}

if [ -n "$DEPS" ]; then
  PREFIX="$BUILD_DIR/deps"
  if [ ! -e "$PREFIX/.unpacked" ]; then
    mkdir -p "$PREFIX" && tar -C "$PREFIX" -xJf "$DEPS" && touch "$PREFIX/.unpacked" ||
      { echo "cannot unpack --deps $DEPS"; exit 1; }
  fi
  export PATH="$PREFIX/bin:$PATH"
  # -I, not CPLUS_INCLUDE_PATH: a pip LibTorch's include/ carries its own
  # (older) google/protobuf headers, and these must be found first.
  export CXXFLAGS="-I$PREFIX/include${CXXFLAGS:+ $CXXFLAGS}"
  export LIBRARY_PATH="$PREFIX/lib${LIBRARY_PATH:+:$LIBRARY_PATH}"
  export LD_LIBRARY_PATH="$PREFIX/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  DEPS_CMAKE=("-DQUANTD_GOOGLEAPIS_PROTO_DIR=$PREFIX/proto/googleapis"
              "-DQUANTD_GRPC_PROTO_DIR=$PREFIX/proto/grpc-proto")
else
  DEPS_CMAKE=()
fi
# The engine tests gpu_check builds with CMake and runs (their data is in the
# repository; TEST_SRCDIR points there).
ENGINE_TESTS=(//worker/quant:device_agreement_test //worker/common:device_test
              //worker/common:torch_compat_test //worker/pipeline:block_prefetcher_test
              //worker/quant:fake_quant_test //worker/quant:int_quant_test
              //worker/quant:fp8_test //worker/quant:mx_test //worker/algo:gptq_test
              //worker/models:llama_stories260k_test //worker/eval:perplexity_test
              //worker/pipeline:quantization_job_test //worker/pipeline:activation_placement_test
              //worker/common:squared_error_test)

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
         //worker/models:blockwise_forward_bench //worker/models:model_load_bench \
         //worker/common:squared_error_bench; do
  pkg="${b#//}"; pkg="${pkg%%:*}"; name="${b##*:}"
  grep -q "name = \"$name\"" "$ROOT/$pkg/BUILD" 2>/dev/null && BENCHES+=("$b")
done
BACKEND="unknown"
if [ -z "$QUANTIZE" ]; then
  ROOTS="//worker/cli:quantd-quantize"
  TARGETS=(quantd-quantize)
  if [ "$TESTS" = 1 ]; then
    for t in "${ENGINE_TESTS[@]}"; do ROOTS="$ROOTS;$t"; TARGETS+=("${t##*:}"); done
  fi
  if [ "$E2E" = 1 ]; then
    ROOTS="$ROOTS;//worker/models:make_random_checkpoint"; TARGETS+=(make_random_checkpoint)
  fi
  if [ "$BENCH" = 1 ]; then
    for b in "${BENCHES[@]}"; do ROOTS="$ROOTS;$b"; TARGETS+=("${b##*:}"); done
  fi
  say "gpu_check: configuring CMake in $BUILD_DIR"
  start=$(date +%s)
  if ! cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja "-DQUANTD_CMAKE_ROOTS=$ROOTS" "${DEPS_CMAKE[@]}" \
      ${LIBTORCH_HOME:+"-DLIBTORCH_HOME=$LIBTORCH_HOME"} >"$LOG/cmake.log" 2>&1; then
    echo; echo "**CMake configure failed** (see $LOG/cmake.log):"; echo '```'; tail -20 "$LOG/cmake.log"; echo '```'
    exit 1
  fi
  # -k 0: a test that fails to build is reported below; quantd-quantize must build.
  ninja -C "$BUILD_DIR" -k 0 "${TARGETS[@]}" >"$LOG/build.log" 2>&1
  if [ ! -x "$BUILD_DIR/quantd-quantize" ]; then
    echo; echo "**Build failed** (see $LOG/build.log):"; echo '```'; tail -30 "$LOG/build.log"; echo '```'
    exit 1
  fi
  BUILD_SECONDS=$(( $(date +%s) - start ))
  BACKEND="$(sed -n 's/.*quantd: LibTorch \(.*\)$/\1/p' "$LOG/cmake.log" | head -1)"
  QUANTIZE="$BUILD_DIR/quantd-quantize"
  echo "- LibTorch: ${BACKEND:-unknown}"
  echo "- CMake + Ninja build: ${BUILD_SECONDS} s (${TARGETS[*]})"
  echo "- fused CUDA fake-quant kernels: $(sed -n 's/.*quantd: fused CUDA fake-quant kernels: //p' "$LOG/cmake.log" | head -1)"
  # A pip LibTorch exports copies of some libstdc++ symbols; the binaries
  # must bind theirs to libstdc++ itself (cmake/QuantdBazel.cmake says why).
  first_needed="$(readelf -d "$QUANTIZE" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | head -1)"
  rm -f "$LOG"/ld-bindings.*
  LD_DEBUG=bindings LD_DEBUG_OUTPUT="$LOG/ld-bindings" "$QUANTIZE" --help >/dev/null 2>&1
  to_torch="$(cat "$LOG"/ld-bindings.* 2>/dev/null | grep 'binding file [^ ]*quantd-quantize ' |
              grep -E "normal symbol \`_Z(N|NK)?St" | grep -c ' to [^ ]*lib\(torch\|c10\)')"
  if [ "$first_needed" = "libstdc++.so.6" ] && [ "$to_torch" = 0 ]; then
    echo "- libstdc++ binding: quantd-quantize needs libstdc++ first; no std:: symbol binds to LibTorch"
  else
    echo "- libstdc++ binding: **first NEEDED is ${first_needed:-?}, $to_torch std:: symbols bind to LibTorch**"
    FAILED=1
  fi
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
  if echo "$probe" | grep -q 'CPU-only\|is not there\|FEATURE_NOT_BUILT\|UNIMPLEMENTED'; then
    GPU_WHY="$(echo "$probe" | head -1)"
  else
    GPU_OK=1
  fi
fi

# The end-to-end checkpoint is written on the host's cores while the engine
# tests keep the GPU busy; the benches wait for it, so that it does not
# share the cores with their host-side work.
CKPT="$LOG/llama3-8b-random"
CKPT_PID=""
CKPT_START=$(date +%s)
if [ "$E2E" = 1 ] && [ "$GPU_OK" = 1 ] && [ ! -e "$CKPT/config.json" ]; then
  ( "$BUILD_DIR/make_random_checkpoint" --out="$CKPT" --layers=32 --hidden=4096 \
      --intermediate=14336 --heads=32 --kv_heads=8 --vocab=128256 --dtype=bf16 \
      >"$LOG/make_random_checkpoint.log" 2>&1 &&
    cp "$ROOT/models/stories260K/tokenizer.model" "$CKPT/" &&
    echo $(( $(date +%s) - CKPT_START )) >"$LOG/make_random_checkpoint.seconds" ) &
  CKPT_PID=$!
fi
wait_for_checkpoint() {
  [ -n "$CKPT_PID" ] || return 0
  wait "$CKPT_PID" || { echo; echo "**checkpoint generation failed** (see $LOG/make_random_checkpoint.log)"; FAILED=1; }
  CKPT_PID=""
}

# --- 2. Engine tests against this LibTorch -------------------------------------
echo
echo "### Engine tests against this LibTorch"
echo
TEST_DEVICE=cpu
[ "$GPU_OK" = 1 ] && TEST_DEVICE=cuda:0
if [ "$TESTS" = 0 ]; then
  echo "skipped (--no-tests)"
else
  SRCDIR="$BUILD_DIR/srcdir"
  mkdir -p "$SRCDIR" && ln -sfn "$ROOT" "$SRCDIR/quantd"
  echo "QUANTD_TEST_DEVICE=$TEST_DEVICE (tests that take no device run on the CPU)"
  echo
  echo "| test | result |"
  echo "|---|---|"
  for t in "${ENGINE_TESTS[@]}"; do
    name="${t##*:}"
    if [ ! -x "$BUILD_DIR/$name" ]; then
      echo "| $t | **did not build** (see $LOG/build.log) |"; FAILED=1; continue
    fi
    if (cd "$ROOT" && TEST_SRCDIR="$SRCDIR" QUANTD_TEST_DEVICE="$TEST_DEVICE" \
          timeout 600 "$BUILD_DIR/$name" >"$LOG/$name.log" 2>&1); then
      echo "| $t | passed: $(grep -m1 -o '[0-9]* tests\? from [0-9]* test suites\? ran' "$LOG/$name.log") |"
    else
      echo "| $t | **FAILED** ($(grep -c '^\[  FAILED  \]' "$LOG/$name.log") failures; $LOG/$name.log) |"; FAILED=1
    fi
  done
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
wait_for_checkpoint
if [ "$BENCH" = 1 ] && [ "$BUILD_DIR/quantd-quantize" = "$QUANTIZE" ] && [ "$GPU_OK" = 1 ]; then
  echo
  echo "### Benches on cuda:0 (each ratio is against a baseline measured in the same run)"
  if [ "$QUICK" = 1 ]; then
    run_bench fake_quant_bench --device=cuda:0 --iters=3
    run_bench gptq_bench --device=cuda:0 --tokens=8192 --layers=4096x4096
    run_bench squared_error_bench --device=cuda:0 --melems=16
  else
    run_bench fake_quant_bench --device=cuda:0
    run_bench gptq_bench --device=cuda:0 --tokens=262144 --layers=4096x4096,14336x4096,4096x14336
    # 2 GiB per tensor: a block output's size at 8B shapes with 64 x 2048 tokens.
    run_bench squared_error_bench --device=cuda:0 --melems=512
  fi
fi
echo
echo "### Benches on the CPU (each ratio is against a baseline measured in the same run)"
if [ "$CPU_BENCH" = 0 ]; then
  echo
  echo "skipped (--no-cpu-bench)"
elif [ "$BENCH" = 1 ] && [ "$BUILD_DIR/quantd-quantize" = "$QUANTIZE" ]; then
  if [ "$QUICK" = 1 ]; then
    run_bench fake_quant_bench --iters=3
    run_bench gptq_bench --tokens=256 --layers=512x512
    run_bench blockwise_forward_bench --tokens=64 --iters=1 --hidden=512 --intermediate=1376 --heads=8 --kv_heads=8
    run_bench model_load_bench --layers=1 --hidden=512 --intermediate=1376 --vocab=4096 --dir="$LOG/ckpt"
    run_bench squared_error_bench --melems=4
  else
    run_bench fake_quant_bench
    run_bench gptq_bench
    run_bench blockwise_forward_bench
    run_bench model_load_bench --dir="$LOG/ckpt"
    run_bench squared_error_bench
  fi
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
if [ "$AGREEMENT" = 0 ]; then
  echo
  echo "### stories260K agreement: skipped (--no-agreement)"
else
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
    show_crash "$LOG/agree-cpu.err"
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
      show_crash "$LOG/agree-gpu.err"
    fi
  else
    echo
    echo "cuda:0 run skipped: $GPU_WHY"
  fi
fi
# --- 5. End to end at Llama-3-8B shapes ----------------------------------------
# Peak GPU memory is sampled from nvidia-smi every 0.2 s (all processes on
# the device: quantd-quantize is the only one); peak host RSS is the
# process's VmHWM, which quantd-quantize prints as it exits.
run_e2e() {  # label, samples, quantization args...
  local label="$1" samples="$2"; shift 2
  local out="$LOG/e2e-$label" smi="$LOG/e2e-$label.smi" start end peak rss
  rm -rf "$out"
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 >"$smi" 2>/dev/null &
  local smi_pid=$!
  start=$(date +%s.%N)
  "$QUANTIZE" --model "$CKPT" --calib "$ROOT/tests/data/tinyshakespeare.txt" --calib-samples "$samples" \
    --calib-seq-len 2048 --no-eval --format hf-quark --output "$out" --data-dir "$LOG/data" \
    --device cuda:0 "$@" >"$out.log" 2>&1
  local rc=$?
  end=$(date +%s.%N)
  kill "$smi_pid" 2>/dev/null; wait "$smi_pid" 2>/dev/null
  peak=$(sort -n "$smi" | tail -1)
  rss=$(sed -n 's/.*peak host RSS \([0-9.]*\) GiB.*/\1/p' "$out.log" | tail -1)
  # Where the blocks' time went: each block line ends in "S s" or "S s (A algo)".
  tr '\r' '\n' <"$out.log" | grep '^block ' | sed -n 's/.*  \([0-9.]*\) s\( (\([0-9.]*\) algo)\)\{0,1\}$/\1 \3/p' |
    awk '{n++; s+=$1; a+=$2} END {if (n) printf "%d blocks, %.1f s in all (%.1f s each), %.1f s of it in algorithms\n", n, s, s/n, a}' \
    >"$out.blocks"
  # The allocator's largest per-block peaks ("gpu L GiB (H held)"): live
  # tensors against what it held, next to the memory formula of docs/worker.md.
  tr '\r' '\n' <"$out.log" | grep '^block ' | sed -n 's/.*  gpu \([0-9.]*\) GiB (\([0-9.]*\) held).*/\1 \2/p' |
    awk '$1>l {l=$1} $2>h {h=$2} END {if (NR) printf "allocator peak per block %.1f GiB live, %.1f GiB held\n", l, h}' \
    >>"$out.blocks"
  if [ "$rc" = 0 ]; then
    printf "| %s | %s x 2048 | %.1f | %s | %s |\n" "$label" "$samples" \
      "$(python3 -c "print($end - $start)")" "$(python3 -c "print(round(${peak:-0} / 1024, 2))")" "${rss:-?}"
  else
    printf "| %s | %s x 2048 | **failed** (exit %s) after %.1f s; %s | %s | |\n" "$label" "$samples" "$rc" \
      "$(python3 -c "print($end - $start)")" "$out.log" "$(python3 -c "print(round(${peak:-0} / 1024, 2))")"
    FAILED=1
    show_crash "$out.log"
  fi
}
if [ "$E2E" = 1 ]; then
  echo
  echo "### End to end, Llama-3-8B shapes (random bf16 weights), W4 uint4 asym g128, cuda:0"
  echo
  if [ "$GPU_OK" != 1 ]; then
    echo "skipped: ${GPU_WHY}"
  else
    wait_for_checkpoint
    if [ -e "$LOG/make_random_checkpoint.seconds" ]; then
      echo "checkpoint: $(du -sh "$CKPT" | cut -f1) written in $(cat "$LOG/make_random_checkpoint.seconds") s"
    else
      echo "checkpoint: $(du -sh "$CKPT" | cut -f1), written by an earlier run"
    fi
    echo
    rm -f "$LOG"/e2e-*.blocks
    echo "| job | calibration | wall s | peak GPU GiB (device) | peak host RSS GiB |"
    echo "|---|---|---|---|---|"
    if [ "$E2E_GPTQ_SAMPLES" -gt 0 ]; then
      cat >"$LOG/w4_g128_gptq.json" <<'JSON'
{"global_quant_config": {"weight": {"dtype": "uint4", "qscheme": "per_group", "ch_axis": -1,
  "group_size": 128, "symmetric": false, "is_dynamic": false}},
 "exclude": ["lm_head"], "algo_config": [{"name": "gptq", "damp_percent": 0.01}]}
JSON
      run_e2e gptq "$E2E_GPTQ_SAMPLES" --config "$LOG/w4_g128_gptq.json"
    fi
    if [ "$E2E_SAMPLES" -gt 0 ]; then
      run_e2e rtn "$E2E_SAMPLES" --scheme w_uint4_per_group_asym --group-size 128
    fi
    echo
    for label in gptq rtn; do
      [ -s "$LOG/e2e-$label.blocks" ] && echo "- $label blocks: $(paste -sd ';' "$LOG/e2e-$label.blocks" | sed 's/;/; /g')"
    done
  fi
fi

echo
[ "$FAILED" = 0 ] && echo "result: every part that ran passed" || echo "result: **FAILURES** (logs in $LOG)"
exit "$FAILED"
