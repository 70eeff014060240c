#!/usr/bin/env bash
# Memory: a random-weight bf16 checkpoint of >= 4 GiB with Llama-7B block
# shapes runs a block-wise calibration-style pass plus an evaluation under an
# address-space limit (RLIMIT_AS) of less than half its size, and its peak
# RSS is reported. See docs/memory.md.
#
# Usage (Bazel passes the two binaries):
#   memory_test.sh MAKE_RANDOM_CHECKPOINT BLOCKWISE_MEMORY_CHECK
# Environment: QUANTD_MEMORY_LAYERS (10), QUANTD_MEMORY_AS_LIMIT_MB (2048),
# QUANTD_MEMORY_SAMPLES (2), QUANTD_MEMORY_SEQ_LEN (64).
set -euo pipefail

gen="$1"
check="$2"
layers="${QUANTD_MEMORY_LAYERS:-10}"
limit_mb="${QUANTD_MEMORY_AS_LIMIT_MB:-2048}"
samples="${QUANTD_MEMORY_SAMPLES:-2}"
seq_len="${QUANTD_MEMORY_SEQ_LEN:-64}"
dir="${TEST_TMPDIR:-/tmp}/llama7b-shaped-${layers}"
trap 'rm -rf "$dir"' EXIT

"$gen" --out="$dir" --layers="$layers" --dtype=bf16 --shard_mb=2048
out="$("$check" --model="$dir" --as_limit_mb="$limit_mb" --samples="$samples" \
  --seq_len="$seq_len" --eval_windows=1 --n_ctx="$seq_len")"
echo "$out"

field() { sed -n "s/.*\"$1\": \([0-9.a-z]*\).*/\1/p" <<<"$out"; }
ok="$(field ok)"
ckpt="$(field checkpoint_bytes)"
rss="$(field peak_rss_bytes)"
limit=$((limit_mb * 1024 * 1024))

fail() { echo "FAIL: $*" >&2; exit 1; }
[[ "$ok" == "true" ]] || fail "the block-wise run did not complete"
(( ckpt >= 4 * 1024 * 1024 * 1024 )) || fail "checkpoint is $ckpt bytes, below 4 GiB"
(( 2 * limit <= ckpt )) || fail "limit $limit is not below half the checkpoint ($ckpt)"
(( rss < limit )) || fail "peak RSS $rss exceeds the limit $limit"
echo "checkpoint $((ckpt >> 20)) MiB, RLIMIT_AS $((limit >> 20)) MiB, peak RSS $((rss >> 20)) MiB"
