#!/usr/bin/env bash
# Builds one libFuzzer target with clang++ and runs it for a bounded time on
# its seed corpus (see fuzz.bzl). Runs in the test's runfiles root, so
# includes resolve against the workspace layout.
#
# Args: --seconds=N --max_len=N --fuzzer=CC --corpus=FILE [--dict=FILE]
#       [--copt=FLAG]... [--linkopt=FLAG]... SRC...
set -euo pipefail

seconds=15
max_len=1048576
fuzzer=""
corpus_file=""
dict=""
copts=()
linkopts=()
sources=()
for arg in "$@"; do
  case "$arg" in
    --seconds=*) seconds="${arg#*=}" ;;
    --max_len=*) max_len="${arg#*=}" ;;
    --fuzzer=*) fuzzer="${arg#*=}" ;;
    --corpus=*) corpus_file="${arg#*=}" ;;
    --dict=*) dict="${arg#*=}" ;;
    --copt=*) copts+=("${arg#*=}") ;;
    --linkopt=*) linkopts+=("${arg#*=}") ;;
    *.cc) sources+=("$arg") ;;
    *) ;;  # headers: present in the runfiles, included from there
  esac
done

out="${TEST_TMPDIR:-$(mktemp -d)}"
artifacts="${TEST_UNDECLARED_OUTPUTS_DIR:-$out}"
bin="$out/fuzzer"

start=$(date +%s)
# -O0: the sanitizer build of nlohmann/json dominates the test time, and
# fuzzing throughput is ample without optimisation.
clang++ -std=c++17 -O0 -gline-tables-only -fno-omit-frame-pointer \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -I. "${copts[@]}" "$fuzzer" "${sources[@]}" "${linkopts[@]}" -o "$bin"
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
