#!/bin/bash
# Runs tools/gpu_check.sh in its CPU-only mode and checks its report:
#   gpu_check_test.sh prebuilt  - with Bazel's quantd-quantize (no CMake build)
#   gpu_check_test.sh cmake     - the full CMake + Ninja build of quantd-quantize
#                                 from the source tree, then the same checks
# The stories260K CPU run must give the golden float perplexity 4.8374 on 20
# windows, and the GPU parts must be skipped with their reason. In prebuilt
# mode, also two CPU rehearsals of the e2e part at small shapes: one with a
# generous --budget-s (block lines echoed, the extrapolation, the disk read,
# the log archive), one with a budget that stops the GPTQ job (exit 0).
set -u
MODE="$1"
# The source tree: CMake builds from it, so the test resolves this file's
# runfiles symlink back to the checkout (the test reads the whole tree, which
# Bazel does not track: it is size large and tagged manual in cmake mode).
SELF="$(readlink -f "${TEST_SRCDIR}/quantd/cmake/bazel_sources.py")"
ROOT="$(dirname "$(dirname "$SELF")")"
[ -x "$ROOT/tools/gpu_check.sh" ] || { echo "FAIL: no tools/gpu_check.sh under $ROOT"; exit 1; }
TMP="${TEST_TMPDIR:-$(mktemp -d)}"
# The CMake build's source lists come from every BUILD file its binaries
# reach: the generator must read them all (a Bazel-only macro once broke it).
/usr/bin/python3 "$ROOT/cmake/bazel_sources.py" "$ROOT" "$TMP/bazel_targets.cmake" \
  //worker/cli:quantd-quantize //worker:quantd-worker ||
  { echo "FAIL: cmake/bazel_sources.py cannot read the BUILD files"; exit 1; }
grep -qx 'quantd_cc_binary(quantd-worker' "$TMP/bazel_targets.cmake" ||
  { echo "FAIL: no quantd-worker target generated"; exit 1; }
args=(--build-dir "$TMP/build" --no-bench --no-tests)
if [ "$MODE" = prebuilt ]; then
  args+=(--quantize "${TEST_SRCDIR}/quantd/worker/cli/quantd-quantize")
fi
start=$(date +%s)
"$ROOT/tools/gpu_check.sh" "${args[@]}" >"$TMP/report.md" 2>"$TMP/err.txt"
rc=$?
echo "gpu_check.sh ($MODE) took $(( $(date +%s) - start )) s"
cat "$TMP/report.md"
[ "$rc" -eq 0 ] || { cat "$TMP/err.txt"; tail -30 "$TMP/build/gpu_check-logs/"*.log 2>/dev/null; echo "FAIL: exit $rc"; exit 1; }
fail() { echo "FAIL: $*"; exit 1; }
grep -q '^## quantd gpu_check' "$TMP/report.md" || fail "report header"
row="$(grep '^| cpu |' "$TMP/report.md")" || fail "no cpu row"
fppl="$(echo "$row" | awk -F'|' '{print $4}' | tr -d ' ')"
/usr/bin/python3 -c "import sys; sys.exit(0 if abs($fppl - 4.8374) <= 1e-3 else 1)" || fail "float ppl $fppl"
if [ -z "$(command -v nvidia-smi)" ]; then
  grep -q '^cuda:0 run skipped: no GPU on this host$' "$TMP/report.md" || fail "GPU skip reason"
fi
grep -q '^result: every part that ran passed$' "$TMP/report.md" || fail "result line"
if [ "$MODE" = cmake ]; then
  grep -q '^- CMake + Ninja build: [0-9]* s (quantd-quantize)$' "$TMP/report.md" || fail "build line"
  grep -q '^- LibTorch: .*(backend cpu)$' "$TMP/report.md" || fail "LibTorch line"
  [ -x "$TMP/build/quantd-quantize" ] || fail "no CMake-built quantd-quantize"
fi
if [ "$MODE" = prebuilt ]; then
  # --help prints the whole header comment, down to the exit status.
  "$ROOT/tools/gpu_check.sh" --help | tail -1 | grep -q 'stopped by --budget-s do not fail' ||
    fail "--help does not end with the header's last line"
  e2e=(--quantize "${TEST_SRCDIR}/quantd/worker/cli/quantd-quantize"
       --make-checkpoint "${TEST_SRCDIR}/quantd/worker/models/make_random_checkpoint"
       --no-bench --no-tests --no-agreement --no-drop-cache
       --e2e --e2e-device cpu --e2e-shape small --e2e-blocks 2)
  # 1. Everything fits: GPTQ and RTN, 2 of 32 blocks each.
  start=$(date +%s)
  "$ROOT/tools/gpu_check.sh" --build-dir "$TMP/e2e" "${e2e[@]}" --e2e-gptq-samples 2 --e2e-samples 2 \
    --budget-s 600 --log-archive "$TMP/logs.tar.gz" >"$TMP/e2e.md" 2>"$TMP/e2e.err"
  rc=$?
  echo "e2e rehearsal took $(( $(date +%s) - start )) s"
  sed -n '/^### End to end/,$p' "$TMP/e2e.md"
  [ "$rc" -eq 0 ] || { cat "$TMP/e2e.err"; fail "e2e rehearsal: exit $rc"; }
  for job in gptq rtn; do
    grep -q "^- $job: \*\*extrapolation\*\*: measured 2 of 32 blocks; extrapolated to 32: [0-9.]* s " "$TMP/e2e.md" ||
      fail "no extrapolation line for $job"
    grep -q "^- $job: GPU busy n/a" "$TMP/e2e.md" || fail "no GPU busy line for $job"
  done
  [ "$(grep -c '^    block  [12]/2  .*  [0-9.]* s' "$TMP/e2e.md")" = 4 ] || fail "not 2 block lines per job in stdout"
  grep -q '^    quantd-quantize: peak host RSS' "$TMP/e2e.md" || fail "no quantd-quantize: line echoed"
  grep -q '^disk read: [0-9.]* GB of \*.safetensors in [0-9.]* s, [0-9.]* GB/s' "$TMP/e2e.md" || fail "no disk read line"
  grep -q '^- rtn: wall [0-9.]* s; reading the checkpoint at that bandwidth would take [0-9.]* s' "$TMP/e2e.md" ||
    fail "no RTN line against the disk read"
  grep -q '^| gptq | 2 x 2048 | [0-9.]* | n/a | [0-9.]* |$' "$TMP/e2e.md" || fail "gptq table row"
  [ -s "$TMP/logs.tar.gz" ] || fail "no log archive"
  size=$(stat -c %s "$TMP/logs.tar.gz")
  [ "$size" -lt $((4 << 20)) ] || fail "log archive of $size bytes"
  tar -tzf "$TMP/logs.tar.gz" | grep -q '^gpu_check-logs/report.md$' || fail "no report.md in the archive"
  ! tar -tzf "$TMP/logs.tar.gz" | grep -q 'safetensors\|/data/\|random-2blocks' || fail "checkpoint or data in the archive"
  grep -q '^log archive: .*logs.tar.gz, [0-9]* KiB' "$TMP/e2e.md" || fail "no archive size line"
  # 2. A budget that stops the GPTQ job (16 samples: tens of seconds on
  # the CPU, with about 45 - 25 s granted) and leaves too little for RTN.
  start=$(date +%s)
  "$ROOT/tools/gpu_check.sh" --build-dir "$TMP/e2e-stop" "${e2e[@]}" --e2e-gptq-samples 16 --e2e-samples 2 \
    --budget-s 45 >"$TMP/stop.md" 2>"$TMP/stop.err"
  rc=$?
  echo "stopped rehearsal took $(( $(date +%s) - start )) s"
  sed -n '/^### End to end/,$p' "$TMP/stop.md"
  [ "$rc" -eq 0 ] || { cat "$TMP/stop.err"; fail "stopped rehearsal: exit $rc"; }
  grep -q '^- gptq: \*\*stopped by --budget-s after [0-9]* of 2 blocks\*\*' "$TMP/stop.md" || fail "no budget stop"
  grep -q '^skipped: budget' "$TMP/stop.md" || fail "RTN not skipped by the budget"
  grep -q '^result: every part that ran passed$' "$TMP/stop.md" || fail "stopped rehearsal: result line"
fi
echo PASS
