#!/usr/bin/env bash
# Builds one libFuzzer target with clang++ and runs it for a bounded time on
# its seed corpus (see fuzz.bzl). Runs in the test's runfiles root, so
# includes resolve against the workspace layout.
#
# Args: SECONDS MAX_LEN FUZZER_CC CORPUS_FILE DICT COPTS LINKOPTS SRC...
set -euo pipefail

seconds="$1"
max_len="$2"
fuzzer="$3"
corpus_file="$4"
dict="$5"
copts="$6"
linkopts="$7"
shift 7

out="${TEST_TMPDIR:-$(mktemp -d)}"
artifacts="${TEST_UNDECLARED_OUTPUTS_DIR:-$out}"
bin="$out/fuzzer"

sources=()
# Filegroups arrive as one space-separated argument each.
# shellcheck disable=SC2068
for s in $@; do
  [[ "$s" == *.cc ]] && sources+=("$s")
done

start=$(date +%s)
# shellcheck disable=SC2086
# -O0: the sanitizer build of nlohmann/json dominates the test time, and
# fuzzing throughput is ample without optimisation.
clang++ -std=c++17 -O0 -gline-tables-only -fno-omit-frame-pointer \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -I. $copts "$fuzzer" "${sources[@]}" $linkopts -o "$bin"
echo "compiled in $(($(date +%s) - start)) s"

# libFuzzer adds interesting inputs to the corpus directory: use a copy.
corpus="$out/corpus"
mkdir -p "$corpus"
cp "$(dirname "$corpus_file")"/* "$corpus/"
echo "seed corpus: $(ls "$corpus" | wc -l) files, $(du -sb "$corpus" | cut -f1) bytes"

dict_flag=()
[[ -n "$dict" ]] && dict_flag=(-dict="$dict")

# -timeout: one input taking 10 s is a hang (a backtracking pattern, a
# recursion); -rss_limit_mb: 2 GiB is far above what any bounded parse of a
# 1 MiB input should need.
"$bin" -max_total_time="$seconds" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 \
  "${dict_flag[@]}" -artifact_prefix="$artifacts/" -print_final_stats=1 "$corpus"
echo "corpus after fuzzing: $(ls "$corpus" | wc -l) files, $(du -sb "$corpus" | cut -f1) bytes"
