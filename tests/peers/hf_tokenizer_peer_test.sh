#!/usr/bin/env bash
# Hugging Face tokenizer files peer check (Bazel sh_test): the tokenizer.json
# quantd makes for a GGUF's byte-level BPE vocabulary (Llama 3, GPT-2), read
# by @huggingface/tokenizers, gives Hugging Face's ids for llama.cpp's test
# texts. (The SentencePiece tokenizer.model is read by libsentencepiece in
# //worker/io/tokenizer:hf_tokenizer_files_test.)
set -euo pipefail
runfiles="${TEST_SRCDIR:-$PWD/..}/${TEST_WORKSPACE:-quantd}"
cd "$runfiles"
peers_dir="$(dirname "$(readlink -f tests/peers/package.json)")"
bash "$peers_dir/setup.sh"
out="${TEST_TMPDIR:-$(mktemp -d)}/hf-tokenizers"
args=()
for vocab in llama-bpe gpt-2; do
  gguf="tests/golden/tokenizers/ggml-vocab-$vocab.gguf"
  tests/peers/hf_tokenizer_files "$gguf" "$out/$vocab"
  args+=("$out/$vocab" "$gguf")
done
node "$(readlink -f tests/peers/hf_tokenizer_check.mjs)" "${args[@]}"
