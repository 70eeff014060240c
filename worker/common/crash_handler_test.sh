#!/bin/bash
# The probe dies of SIGSEGV (exit 139, the signal re-raised) after printing
# the signal and a backtrace that names the crashing function.
set -u
PROBE="${TEST_SRCDIR}/quantd/worker/common/crash_handler_probe"
ERR="${TEST_TMPDIR:-/tmp}/probe.err"
ulimit -c 0
"$PROBE" 2>"$ERR"
rc=$?
cat "$ERR"
[ "$rc" -eq 139 ] || { echo "FAIL: exit $rc, want 139"; exit 1; }
grep -q '^crash_handler_probe: fatal signal 11 (Segmentation fault); backtrace:$' "$ERR" ||
  { echo "FAIL: no signal line"; exit 1; }
grep -q 'CrashInAFunctionWithAName' "$ERR" || { echo "FAIL: backtrace lacks the function"; exit 1; }
echo PASS
