#!/usr/bin/env bash
# README command 1: installs what is missing, builds quantd, starts it with an
# embedded SQLite store and one local worker, submits the bundled stories260K
# with int4 weights through quantctl, streams progress, and prints perplexity
# before and after quantization and where the artifact is.
#
#   bash tools/demo.sh [--scheme NAME] [--keep]
#
# --scheme picks another preset (default w_int4_per_channel_sym: stories260K's
# MLP width 172 is not a multiple of the per-group presets' 32 or 128).
# --keep leaves quantd running afterwards and prints how to reach it.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"

scheme=w_int4_per_channel_sym
keep=0
while [ $# -gt 0 ]; do
  case "$1" in
    --scheme) scheme="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    *) echo "usage: bash tools/demo.sh [--scheme NAME] [--keep]" >&2; exit 2 ;;
  esac
done

bash tools/install_deps.sh
bazel build //server:quantd //worker:quantd-worker //client:quantctl
BIN="$(bazel info bazel-bin 2>/dev/null)"

DATA="${QUANTD_DEMO_DIR:-$ROOT/demo-data}"
mkdir -p "$DATA"
rm -f "$DATA/port"
echo "== starting quantd (SQLite store in $DATA, one local worker)"
# Jobs may read the bundled model and texts; artifacts go to $DATA/artifacts/.
"$BIN/server/quantd" --listen=127.0.0.1:0 --port-file="$DATA/port" \
  --data-dir="$DATA" --store="sqlite://$DATA/quantd.db" \
  --allowed-uri-roots="file://$ROOT/models,file://$ROOT/tests/data" \
  --local-workers=1 --worker-binary="$BIN/worker/quantd-worker" \
  >"$DATA/quantd.log" 2>&1 &
QUANTD_PID=$!
stop_quantd() {
  if [ "$keep" = 0 ]; then kill "$QUANTD_PID" 2>/dev/null || true; wait "$QUANTD_PID" 2>/dev/null || true; fi
}
trap stop_quantd EXIT
for _ in $(seq 1 100); do
  [ -s "$DATA/port" ] && break
  kill -0 "$QUANTD_PID" 2>/dev/null || { cat "$DATA/quantd.log" >&2; exit 1; }
  sleep 0.1
done
export QUANTD_SERVER="$(head -n1 "$DATA/port")"
echo "== quantd is serving on $QUANTD_SERVER (log: $DATA/quantd.log)"

OUT="$DATA/artifacts/stories260K-$scheme-$(date +%Y%m%d-%H%M%S)"
echo "== submitting stories260K with $scheme"
"$BIN/client/quantctl/quantctl" submit \
  --model "file://$ROOT/models/stories260K" --scheme "$scheme" \
  --eval "file://$ROOT/tests/data/tinystories-sample.txt" \
  --output "file://$OUT" --label demo=true --wait

if [ "$keep" = 1 ]; then
  echo "== quantd keeps running (pid $QUANTD_PID): export QUANTD_SERVER=$QUANTD_SERVER"
fi
