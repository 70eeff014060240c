#!/bin/bash
# Runs tools/gpu_check.sh in its CPU-only mode and checks its report:
#   gpu_check_test.sh prebuilt  - with Bazel's quantd-quantize (no CMake build)
#   gpu_check_test.sh cmake     - the full CMake + Ninja build of quantd-quantize
#                                 from the source tree, then the same checks
# The stories260K CPU run must give the golden float perplexity 4.8374 on 20
# windows, and the GPU parts must be skipped with their reason.
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
echo PASS
