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
# 5. With --e2e, the end-to-end jobs at Llama-3-8B shapes (below).
# 6. With --parity, tools/transformers_parity.py: quantd's float forward and
#    a W8 RTN job's export against Hugging Face Transformers, per
#    architecture (needs transformers in python3); its table is written to
#    docs/transformers_parity.md.
#
# Logs go to the build dir (gpu_check-logs/, with a copy of the report in
# report.md); stdout gets a markdown report for docs/performance.md (date,
# device, command, tables) and, as they happen, the e2e jobs' block lines.
#
#   --build-dir DIR   CMake build folder (default cmake-build, in .bazelignore and .gitignore)
#   --quantize BIN    use this quantd-quantize and skip the build (e.g. Bazel's)
#   --make-checkpoint BIN  make_random_checkpoint for --e2e with --quantize
#                     (default: the one beside BIN, or Bazel's layout's
#                     ../models/make_random_checkpoint from BIN's folder)
#   --no-bench        skip the benches (and their build)
#   --no-tests        skip the engine tests
#   --quick           small bench sizes (a smoke run, not figures to publish)
#   --no-cpu-bench    skip the CPU benches (a GPU host's report needs only the GPU ones)
#   --e2e             also the end-to-end jobs at Llama-3-8B shapes: a random
#                     bf16 checkpoint (hidden 4096, 14336, 32/8 heads, vocab
#                     128256; --e2e-blocks of its blocks), W4 (uint4 asym)
#                     group 128, GPTQ then RTN; wall time, peak GPU memory,
#                     peak host RSS, each block line echoed as it comes, the
#                     extrapolation to 32 blocks, GPU busy over the block
#                     loop, the disk's cold read bandwidth beside the RTN job
#   --e2e-blocks N    blocks of the e2e checkpoint (default 32; same shapes and
#                     per-block work with fewer, e.g. 4 for a short window):
#                     reported as "measured N of 32 blocks; extrapolated to
#                     32: X s", labelled an extrapolation when N < 32 or a
#                     job was stopped by --budget-s
#   --e2e-samples N   calibration samples of 2048 tokens for the RTN job of
#                     --e2e (default 16; 0 skips it)
#   --e2e-gptq-samples N  the same for the GPTQ job (default 16; 0 skips it);
#                     it runs first, being the figure the anchor compares with
#   --e2e-offload     also the GPTQ job with --activation-offload host, its
#                     peak GPU memory beside the formula's (one block's
#                     float weights + one Hessian + one sub-batch)
#   --e2e-device D    the e2e jobs' device (default cuda:0); cpu runs them
#                     without a GPU (a rehearsal: GPU figures say n/a)
#   --e2e-shape S     8b (default) or small (hidden 256, intermediate 896, 4/2
#                     heads, vocab 512: a CPU rehearsal of the e2e part)
#   --no-drop-cache   do not drop the page cache before the disk read and the
#                     RTN job (by default dropped when root can write
#                     /proc/sys/vm/drop_caches)
#   --budget-s S      wall-clock budget of the whole script from its start: a
#                     part starts only with its minimum left (build 60 s,
#                     engine tests 60 s, each bench group 60 s, agreement
#                     30 s, e2e checkpoint 30 s, each e2e job 35 s) and says
#                     "skipped: budget" otherwise; builds, tests, benches and
#                     e2e jobs run under timeout with 25 s kept in reserve for
#                     the report and the archive. A job so stopped is reported
#                     "stopped by --budget-s after K of N blocks", not failed
#   --log-archive FILE  write a tar.gz of the logs (no checkpoints, outputs,
#                     scratch or *.safetensors; each text log's last 2000
#                     lines, at most 1 MiB) and print its size: a few MiB
#   --no-agreement    skip the stories260K CPU/GPU agreement jobs
#   --only-tests LIST   run only these engine tests (comma-separated names,
#                     e.g. gptq_test,device_agreement_test)
#   --only-benches LIST  build and run only these benches (e.g. gptq_bench)
#   --e2e-calib-dtypes LIST  the GPTQ e2e job once per calibration compute
#                     dtype (comma-separated float32, bfloat16; default
#                     float32), labelled gptq / gptq-bf16; the offload job
#                     uses the first
#   --e2e-activations M  --activation-offload M for the GPTQ and RTN e2e
#                     jobs (auto, host, device; default auto: host memory
#                     when they need over half the GPU's free memory)
#   --e2e-eval-windows N  the RTN e2e job also evaluates perplexity on N
#                     windows of n_ctx 2048 (default 0: no evaluation)
#   --parity          also build dump_logits and run part 6
#   --deps FILE       unpack tools/gpu_deps_bundle.sh's archive (the Debian
#                     gRPC / protobuf / Abseil / ... the build needs) into a
#                     private prefix: for GPU hosts without those packages
#
# The engine tests are the CMake-built test binaries of ENGINE_TESTS below,
# run with QUANTD_TEST_DEVICE=cuda:0 when the GPU path is usable (tests that
# know no device run on the CPU against this LibTorch).
# Exit status: 0 when every part that ran passed (skipped parts and parts
# stopped by --budget-s do not fail).
set -u -o pipefail
# Decimal points in the figures whatever the host's locale.
export LC_NUMERIC=C

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ARGS_SHOWN="$*"
BUILD_DIR="$ROOT/cmake-build"
QUANTIZE=""
MAKE_CKPT=""
BENCH=1
TESTS=1
AGREEMENT=1
QUICK=0
DEPS=""
CPU_BENCH=1
E2E=0
PARITY=0
E2E_SAMPLES=16
E2E_GPTQ_SAMPLES=16
E2E_BLOCKS=32
E2E_SHAPE=8b
E2E_DEVICE=cuda:0
E2E_OFFLOAD=0
ONLY_TESTS=""
ONLY_BENCHES=""
E2E_CALIB_DTYPES=float32
E2E_EVAL_WINDOWS=0
E2E_ACTIVATIONS=auto
DROP_CACHE=1
BUDGET=0
ARCHIVE=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) BUILD_DIR="$2"; shift 2 ;;
    --quantize) QUANTIZE="$2"; shift 2 ;;
    --make-checkpoint) MAKE_CKPT="$2"; shift 2 ;;
    --no-bench) BENCH=0; shift ;;
    --no-tests) TESTS=0; shift ;;
    --no-agreement) AGREEMENT=0; shift ;;
    --quick) QUICK=1; shift ;;
    --deps) DEPS="$2"; shift 2 ;;
    --no-cpu-bench) CPU_BENCH=0; shift ;;
    --e2e) E2E=1; shift ;;
    --parity) PARITY=1; shift ;;
    --e2e-samples) E2E_SAMPLES="$2"; shift 2 ;;
    --e2e-gptq-samples) E2E_GPTQ_SAMPLES="$2"; shift 2 ;;
    --e2e-blocks) E2E_BLOCKS="$2"; shift 2 ;;
    --e2e-shape) E2E_SHAPE="$2"; shift 2 ;;
    --e2e-device) E2E_DEVICE="$2"; shift 2 ;;
    --e2e-offload) E2E_OFFLOAD=1; shift ;;
    --only-tests) ONLY_TESTS="$2"; shift 2 ;;
    --only-benches) ONLY_BENCHES="$2"; shift 2 ;;
    --e2e-calib-dtypes) E2E_CALIB_DTYPES="$2"; shift 2 ;;
    --e2e-eval-windows) E2E_EVAL_WINDOWS="$2"; shift 2 ;;
    --e2e-activations) E2E_ACTIVATIONS="$2"; shift 2 ;;
    --no-drop-cache) DROP_CACHE=0; shift ;;
    --budget-s) BUDGET="$2"; shift 2 ;;
    --log-archive) ARCHIVE="$2"; shift 2 ;;
    # The header's comment, up to the first line that is not one.
    -h|--help) awk 'NR > 1 && !/^#/ {exit} NR > 1' "$0"; exit 0 ;;
    *) echo "gpu_check.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
case "$E2E_ACTIVATIONS" in auto|host|device) ;; *) echo "gpu_check.sh: --e2e-activations: '$E2E_ACTIVATIONS' is not auto, host or device" >&2; exit 2 ;; esac
for d in ${E2E_CALIB_DTYPES//,/ }; do
  case "$d" in float32|bfloat16) ;; *) echo "gpu_check.sh: --e2e-calib-dtypes: '$d' is not float32 or bfloat16" >&2; exit 2 ;; esac
done
for v in "$E2E_SAMPLES" "$E2E_GPTQ_SAMPLES" "$E2E_BLOCKS" "$BUDGET" "$E2E_EVAL_WINDOWS"; do
  [[ "$v" =~ ^[0-9]+$ ]] || { echo "gpu_check.sh: not a whole number: $v" >&2; exit 2; }
done
[ "$E2E_BLOCKS" -ge 1 ] || { echo "gpu_check.sh: --e2e-blocks must be at least 1" >&2; exit 2; }
case "$E2E_SHAPE" in
  8b) SHAPE_ARGS=(--hidden=4096 --intermediate=14336 --heads=32 --kv_heads=8 --vocab=128256)
      SHAPE_FORMULA=4096,14336,32,8 CKPT_NAME=llama3-8b-random ;;
  # The ratios of 8B (intermediate 3.5 x hidden, 2 query heads per KV head)
  # at hidden 256; 896, not 688, so that group 128 divides down_proj's width.
  small) SHAPE_ARGS=(--hidden=256 --intermediate=896 --heads=4 --kv_heads=2 --vocab=512)
         SHAPE_FORMULA=256,896,4,2 CKPT_NAME=small-random ;;
  *) echo "gpu_check.sh: --e2e-shape must be 8b or small" >&2; exit 2 ;;
esac
if [ -n "$ARCHIVE" ]; then
  dir="$(cd "$(dirname "$ARCHIVE")" 2>/dev/null && pwd)" ||
    { echo "gpu_check.sh: no folder for --log-archive $ARCHIVE" >&2; exit 2; }
  ARCHIVE="$dir/$(basename "$ARCHIVE")"
fi
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

# --- Budget -----------------------------------------------------------------
# SECONDS counts from the script's start. Every part asks budget_ok with its
# minimum before starting; what runs gets `timeout $(budget_cap DEFAULT)`,
# which keeps RESERVE seconds for the report, the extrapolation and the log
# archive (0, no limit, for a DEFAULT of 0 without --budget-s).
RESERVE=25
MIN_BUILD=60 MIN_TESTS=60 MIN_BENCH=60 MIN_AGREE=30 MIN_CKPT=30 MIN_E2E_JOB=35
budget_left() { echo $(( BUDGET - SECONDS )); }
budget_ok() {  # minimum seconds
  [ "$BUDGET" = 0 ] || [ "$(budget_left)" -ge "$1" ]
}
budget_cap() {  # default limit in seconds (0: none)
  if [ "$BUDGET" = 0 ]; then echo "$1"; return; fi
  local c=$(( $(budget_left) - RESERVE ))
  [ "$c" -lt 1 ] && c=1
  if [ "$1" != 0 ] && [ "$1" -lt "$c" ]; then echo "$1"; else echo "$c"; fi
}
# True when a command run under timeout $cap was stopped by the budget
# (timeout's 124 or, after --kill-after, 137) rather than by its own limit.
stopped_by_budget() {  # exit status, cap used, own default limit
  [ "$BUDGET" != 0 ] && { [ "$1" = 124 ] || [ "$1" = 137 ]; } && { [ "$3" = 0 ] || [ "$2" -lt "$3" ]; }
}
skipped_budget() { echo "skipped: budget ($(budget_left) s of --budget-s $BUDGET left, $1 s needed)"; }

# --- The report's copy and the log archive ------------------------------------
# stdout also goes to $LOG/report.md (for the archive: a device's captured
# output may keep only its tail). finish runs on every exit: the result
# line, then the archive once tee has written everything before it.
exec 3>&1
exec > >(tee "$LOG/report.md" >&3)
TEE_PID=$!
BG_PIDS=()
write_archive() {
  local stage="$BUILD_DIR/gpu_check-archive" n=0 f name
  rm -rf "$stage" && mkdir -p "$stage/gpu_check-logs" || return 1
  # The top level's files only: the folders are checkpoints, artifacts,
  # scratch and data.
  for f in "$LOG"/*; do
    [ -f "$f" ] || continue
    name="$(basename "$f")"
    case "$name" in *.safetensors|*.bin|*.pt|*.gguf|*.onnx) continue ;; esac
    if grep -Iq . "$f" 2>/dev/null || [ ! -s "$f" ]; then
      tail -n 2000 "$f" | tail -c 1048576 >"$stage/gpu_check-logs/$name"
    elif [ "$(stat -c %s "$f")" -le 1048576 ]; then
      cp "$f" "$stage/gpu_check-logs/$name"
    else
      continue
    fi
    n=$((n + 1))
  done
  tar -C "$stage" -czf "$ARCHIVE" gpu_check-logs || return 1
  rm -rf "$stage"
  echo "$n"
}
finish() {
  local rc=$?
  trap - EXIT
  local pid
  for pid in "${BG_PIDS[@]}"; do kill "$pid" 2>/dev/null; done
  [ "$rc" != 0 ] && FAILED=1
  echo
  [ "$FAILED" = 0 ] && echo "result: every part that ran passed" || echo "result: **FAILURES** (logs in $LOG)"
  exec >&3
  wait "$TEE_PID" 2>/dev/null
  if [ -n "$ARCHIVE" ]; then
    local n
    if n="$(write_archive)"; then
      echo "log archive: $ARCHIVE, $(( ($(stat -c %s "$ARCHIVE") + 1023) / 1024 )) KiB ($n files, each text log's last 2000 lines)" |
        tee -a "$LOG/report.md"
    else
      echo "log archive: **could not write $ARCHIVE**" | tee -a "$LOG/report.md"
    fi
  fi
  exit "$FAILED"
}
trap finish EXIT
trap 'echo; echo "gpu_check: terminated by a signal"; exit 143' TERM INT

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
if [ -n "$ONLY_TESTS" ]; then
  kept=()
  for t in "${ENGINE_TESTS[@]}"; do
    [[ ",$ONLY_TESTS," == *",${t##*:},"* ]] && kept+=("$t")
  done
  ENGINE_TESTS=("${kept[@]}")
fi

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
  [ -z "$ONLY_BENCHES" ] || [[ ",$ONLY_BENCHES," == *",$name,"* ]] || continue
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
  if [ "$PARITY" = 1 ]; then
    ROOTS="$ROOTS;//worker/models:dump_logits"; TARGETS+=(dump_logits)
  fi
  if [ "$BENCH" = 1 ]; then
    for b in "${BENCHES[@]}"; do ROOTS="$ROOTS;$b"; TARGETS+=("${b##*:}"); done
  fi
  if ! budget_ok "$MIN_BUILD"; then
    echo "- CMake + Ninja build: $(skipped_budget "$MIN_BUILD"); nothing else can run"
    exit 0
  fi
  say "gpu_check: configuring CMake in $BUILD_DIR"
  start=$(date +%s)
  if ! cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja "-DQUANTD_CMAKE_ROOTS=$ROOTS" "${DEPS_CMAKE[@]}" \
      ${LIBTORCH_HOME:+"-DLIBTORCH_HOME=$LIBTORCH_HOME"} >"$LOG/cmake.log" 2>&1; then
    echo; echo "**CMake configure failed** (see $LOG/cmake.log):"; echo '```'; tail -20 "$LOG/cmake.log"; echo '```'
    exit 1
  fi
  # -k 0: a test that fails to build is reported below; quantd-quantize must build.
  cap=$(budget_cap 0)
  timeout --signal=TERM --kill-after=15 "$cap" ninja -C "$BUILD_DIR" -k 0 "${TARGETS[@]}" >"$LOG/build.log" 2>&1
  rc=$?
  if stopped_by_budget "$rc" "$cap" 0; then
    echo "- CMake + Ninja build: stopped by --budget-s after $(( $(date +%s) - start )) s (see $LOG/build.log); nothing else can run"
    exit 0
  fi
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

# The end-to-end jobs' device: a GPU that passed the probe above, or the
# CPU (a rehearsal of this part on any host).
E2E_OK=0
E2E_WHY=""
if [ "$E2E" = 1 ]; then
  if [ "$E2E_DEVICE" = cpu ] || [ "$GPU_OK" = 1 ]; then
    E2E_OK=1
  else
    E2E_WHY="$GPU_WHY"
  fi
  if [ -n "$MAKE_CKPT" ]; then :
  elif [ "$BUILD_DIR/quantd-quantize" = "$QUANTIZE" ]; then MAKE_CKPT="$BUILD_DIR/make_random_checkpoint"
  elif [ -x "$(dirname "$QUANTIZE")/make_random_checkpoint" ]; then MAKE_CKPT="$(dirname "$QUANTIZE")/make_random_checkpoint"
  else MAKE_CKPT="$(dirname "$QUANTIZE")/../models/make_random_checkpoint"
  fi
  if [ "$E2E_OK" = 1 ] && [ ! -x "$MAKE_CKPT" ]; then
    E2E_OK=0; E2E_WHY="no make_random_checkpoint at $MAKE_CKPT (--make-checkpoint BIN)"
  fi
fi

# The end-to-end checkpoint is written on the host's cores while the engine
# tests keep the GPU busy; the benches wait for it, so that it does not
# share the cores with their host-side work. Its folder names its block
# count, and it is written under another name first: a 4-block and a
# 32-block checkpoint never mix, and an interrupted one is never used.
CKPT="$LOG/${CKPT_NAME}-${E2E_BLOCKS}blocks"
CKPT_PID=""
CKPT_START=$(date +%s)
CKPT_CAP=0
if [ "$E2E_OK" = 1 ] && [ ! -e "$CKPT/config.json" ]; then
  if budget_ok "$MIN_CKPT"; then
    rm -rf "$CKPT.partial" "$LOG/make_random_checkpoint.seconds" "$LOG/make_random_checkpoint.stopped"
    CKPT_CAP=$(budget_cap 0)
    ( timeout --signal=TERM --kill-after=15 "$CKPT_CAP" "$MAKE_CKPT" --out="$CKPT.partial" \
        --layers="$E2E_BLOCKS" "${SHAPE_ARGS[@]}" --dtype=bf16 >"$LOG/make_random_checkpoint.log" 2>&1
      rc=$?
      if stopped_by_budget "$rc" "$CKPT_CAP" 0; then touch "$LOG/make_random_checkpoint.stopped"; exit 1; fi
      [ "$rc" = 0 ] && cp "$ROOT/models/stories260K/tokenizer.model" "$CKPT.partial/" &&
        mv "$CKPT.partial" "$CKPT" &&
        echo $(( $(date +%s) - CKPT_START )) >"$LOG/make_random_checkpoint.seconds" ) &
    CKPT_PID=$!
    BG_PIDS+=("$CKPT_PID")
  else
    E2E_OK=0; E2E_WHY="checkpoint $(skipped_budget "$MIN_CKPT")"
  fi
fi
wait_for_checkpoint() {
  [ -n "$CKPT_PID" ] || return 0
  if ! wait "$CKPT_PID"; then
    if [ -e "$LOG/make_random_checkpoint.stopped" ]; then
      E2E_OK=0; E2E_WHY="checkpoint generation stopped by --budget-s"
    else
      echo; echo "**checkpoint generation failed** (see $LOG/make_random_checkpoint.log)"; FAILED=1
      E2E_OK=0; E2E_WHY="checkpoint generation failed"
    fi
  fi
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
elif ! budget_ok "$MIN_TESTS"; then
  skipped_budget "$MIN_TESTS"
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
    if ! budget_ok $((RESERVE + 10)); then echo "| $t | skipped: budget |"; continue; fi
    cap=$(budget_cap 600)
    (cd "$ROOT" && TEST_SRCDIR="$SRCDIR" QUANTD_TEST_DEVICE="$TEST_DEVICE" \
          timeout "$cap" "$BUILD_DIR/$name" >"$LOG/$name.log" 2>&1)
    rc=$?
    if [ "$rc" = 0 ]; then
      echo "| $t | passed: $(grep -m1 -o '[0-9]* tests\? from [0-9]* test suites\? ran' "$LOG/$name.log") |"
    elif stopped_by_budget "$rc" "$cap" 600; then
      echo "| $t | stopped by --budget-s after $cap s |"
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
  if ! budget_ok $((RESERVE + 10)); then echo "skipped: budget"; return; fi
  local cap rc
  cap=$(budget_cap 0)
  echo '```'
  timeout --signal=TERM --kill-after=15 "$cap" "$bin" "$@" 2>&1 | tee "$LOG/$name.log"
  rc=$?
  if stopped_by_budget "$rc" "$cap" 0; then echo "(stopped by --budget-s)"
  elif [ "$rc" != 0 ]; then FAILED=1; echo "(exit status non-zero)"; fi
  echo '```'
}
wait_for_checkpoint
if [ "$BENCH" = 1 ] && [ "$BUILD_DIR/quantd-quantize" = "$QUANTIZE" ] && [ "$GPU_OK" = 1 ]; then
  echo
  echo "### Benches on cuda:0 (each ratio is against a baseline measured in the same run)"
  if ! budget_ok "$MIN_BENCH"; then
    echo; skipped_budget "$MIN_BENCH"
  elif [ "$QUICK" = 1 ]; then
    run_bench fake_quant_bench --device=cuda:0 --iters=3
    run_bench gptq_bench --device=cuda:0 --tokens=8192 --layers=4096x4096
    run_bench squared_error_bench --device=cuda:0 --melems=16
  else
    run_bench fake_quant_bench --device=cuda:0
    # GPTQ's time does not depend on the tokens; the accumulation scales
    # linearly ("scaled" columns), so a quarter of the reference's suffices.
    run_bench gptq_bench --device=cuda:0 --tokens=65536 --layers=4096x4096,14336x4096,4096x14336
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
  if ! budget_ok "$MIN_BENCH"; then
    echo; skipped_budget "$MIN_BENCH"
  elif [ "$QUICK" = 1 ]; then
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
# Prints "sha256 ppl seconds"; returns 1 when the job failed, 2 when
# --budget-s stopped it.
run_job() {  # device, outdir
  local device="$1" out="$2" start end cap rc
  rm -rf "$out"
  start=$(date +%s.%N)
  cap=$(budget_cap 0)
  timeout --signal=TERM --kill-after=15 "$cap" \
    "$QUANTIZE" --model "$MODEL" --scheme w_int4_per_channel_sym --calib "$TEXT" --calib-samples 8 \
    --calib-seq-len 128 --eval "$TEXT" --eval-windows 20 --output "$out" --data-dir "$LOG/data" \
    --device "$device" -o json >"$out.json" 2>"$out.err"
  rc=$?
  stopped_by_budget "$rc" "$cap" 0 && return 2
  [ "$rc" = 0 ] || return 1
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
elif ! budget_ok "$MIN_AGREE"; then
  echo
  echo "### stories260K agreement: $(skipped_budget "$MIN_AGREE")"
else
  echo
  echo "### stories260K agreement (w_int4_per_channel_sym, 20 windows)"
  echo
  echo "| device | artifact sha256 | float ppl | quantized ppl | wall s |"
  echo "|---|---|---|---|---|"
  cpu=$(run_job cpu "$LOG/agree-cpu")
  rc=$?
  if [ "$rc" = 2 ]; then
    echo "| cpu | stopped by --budget-s | | | |"
  elif [ "$rc" = 0 ]; then
    read -r cpu_sha cpu_fppl cpu_qppl cpu_s <<<"$cpu"
    echo "| cpu | \`${cpu_sha:0:16}…\` | $cpu_fppl | $cpu_qppl | $cpu_s |"
    if python3 -c "import sys; sys.exit(0 if abs($cpu_fppl - 4.8374) <= 1e-3 else 1)"; then :; else
      echo; echo "**CPU float perplexity $cpu_fppl is not the golden 4.8374**"; FAILED=1
    fi
  else
    echo "| cpu | **failed** (see $LOG/agree-cpu.err) | | | |"; FAILED=1
    show_crash "$LOG/agree-cpu.err"
  fi
  if [ "$GPU_OK" = 1 ] && [ "$rc" = 2 ]; then
    echo
    echo "cuda:0 run skipped: budget"
  elif [ "$GPU_OK" = 1 ] && ! budget_ok $((RESERVE + 10)); then
    echo
    echo "cuda:0 run $(skipped_budget $((RESERVE + 10)))"
  elif [ "$GPU_OK" = 1 ]; then
    gpu=$(run_job cuda:0 "$LOG/agree-gpu")
    rc=$?
    if [ "$rc" = 2 ]; then
      echo "| cuda:0 | stopped by --budget-s | | | |"
    elif [ "$rc" = 0 ]; then
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
# --- 5. End to end (tools/gpu_check_e2e.sh) -------------------------------------
# shellcheck source=tools/gpu_check_e2e.sh
source "$ROOT/tools/gpu_check_e2e.sh"

# --- 6. Parity with Transformers --------------------------------------------------
if [ "$PARITY" = 1 ]; then
  echo
  echo "## Parity with Transformers"
  echo
  DUMP="$(dirname "$QUANTIZE")/dump_logits"
  [ -x "$DUMP" ] || DUMP="$(dirname "$QUANTIZE")/../models/dump_logits"  # Bazel's layout
  if ! python3 -c 'import transformers' 2>/dev/null; then
    echo "skipped: python3 has no transformers"
  elif [ ! -x "$DUMP" ]; then
    echo "skipped: no dump_logits beside $QUANTIZE"
  elif ! python3 "$ROOT/tools/transformers_parity.py" --dump-logits "$DUMP" \
        --quantize "$QUANTIZE" --report "$ROOT/docs/transformers_parity.md" >"$LOG/parity.log" 2>&1; then
    sed -n '/^| architecture/,$p' "$LOG/parity.log"; tail -5 "$LOG/parity.log"
    echo "**parity FAILED** (see $LOG/parity.log)"; FAILED=1
  else
    sed -n '/^| architecture/,$p' "$LOG/parity.log"
  fi
fi

exit "$FAILED"
