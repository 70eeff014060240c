#!/usr/bin/env bash
# llama.cpp peer check of GPTQ on a GGUF recipe (--gguf-type R --algorithm
# gptq): GPTQ quantizes with the recipe's own block types (the K-quant grid,
# and the 32-element types stories260K's rows fall back to), and the GGUF
# holds its blocks. Through the public CLI (quantd-quantize):
#  1. llama.cpp loads every GPTQ file and its perplexity is within 0.5% of
#     the job's own evaluation of the same blocks (gguf_export_peer_check.mjs);
#  2. on held-out text, stories260K's Q4_K_M, Q3_K_M and Q2_K files
#     quantized by GPTQ from calibration data score a lower perplexity in
#     llama.cpp than the recipe's files made without calibration data;
#  3. on a random checkpoint of 256-multiple widths (real Q2_K..Q6_K
#     blocks), GPTQ's Q4_K_M and Q2_K files are closer to the float model
#     (the job's KL divergence) than the importance-matrix files made from
#     the same calibration data;
#  4. a random GPT-2 (Conv1D weights stored [in, out]): the recipe's Q4_K_M
#     file is byte-identical to llama.cpp's own quantization of the job's
#     F32 export (llama_quantize_check), and GPTQ's Q4_K_M file loads in
#     llama.cpp with the job's perplexity and is closer to the float model.
set -euo pipefail
source "$(dirname "$0")/gguf_peer_setup.sh" gguf_gptq_peer

# A GPT-2 of 256-multiple widths, the same tokenizer.
gpt2="$out/gpt2"
mkdir -p "$gpt2"
"$PY" tests/peers/make_random_gpt2.py "$gpt2"
cp models/stories260K/tokenizer.model "$gpt2/"

run_job() {  # model_dir model recipe mode(plain|imatrix|gptq)
  local args=(--model "$1" --gguf-type "$3" --format gguf --output "$out/$2/$3-$4"
              --data-dir "$out/data" --threads 2 -o json)
  # The F32 file is only llama.cpp's quantizer's input: no check reads its
  # evaluation.
  if [ "$3" = F32 ]; then args+=(--no-eval); else
    args+=(--eval "$TEXT" --n-ctx 128 --eval-windows 24); fi
  case "$4" in
    imatrix) args+=(--calib "$CALIB" --calib-samples 64 --calib-seq-len 128) ;;
    gptq) args+=(--calib "$CALIB" --calib-samples 64 --calib-seq-len 128 --algorithm gptq) ;;
  esac
  "$BIN" "${args[@]}" >"$out/$2/$3-$4.json" 2>"$out/$2/$3-$4.err" ||
    { cat "$out/$2/$3-$4.err"; fail "$2 $3 $4 job"; }
  if [ "$4" = gptq ]; then
    grep -q "weights quantized by GPTQ on the recipe.s block types" "$out/$2/$3-$4.json" ||
      fail "$2 $3: the export does not say GPTQ wrote the blocks"
  fi
}


mkdir -p "$out/stories260K" "$out/random256" "$out/gpt2"
tests/peers/eval_windows models/stories260K "$TEXT" 128 24 >"$out/stories260K/windows.json"
tests/peers/eval_windows "$rand" "$TEXT" 128 24 >"$out/random256/windows.json"
tests/peers/eval_windows "$gpt2" "$TEXT" 128 24 >"$out/gpt2/windows.json"
for r in Q4_K_M Q3_K_M Q2_K; do
  for mode in plain gptq; do
    run_job models/stories260K stories260K "$r" "$mode"
    add_to_manifest stories260K "$r-$mode"
  done
done
for r in Q4_K_M Q2_K; do
  for mode in imatrix gptq; do run_job "$rand" random256 "$r" "$mode"; done
  add_to_manifest random256 "$r-gptq"
done

for r in F32 Q4_K_M; do run_job "$gpt2" gpt2 "$r" plain; done
run_job "$gpt2" gpt2 Q4_K_M gptq
echo "== gpt2 Q4_K_M: llama_model_quantize of quantd's F32 GGUF vs quantd's Q4_K_M"
tests/peers/llama_quantize_check "$libs" "$out/gpt2/F32-plain/model.gguf" 15 \
  "$out/gpt2/Q4_K_M-plain/model.gguf" "$out/gpt2/llama-Q4_K_M.gguf" 2>"$out/gpt2/llama.log" ||
  { cat "$out/gpt2/llama.log"; fail "gpt2 Q4_K_M differs from llama.cpp's"; }
add_to_manifest gpt2 Q4_K_M-plain
add_to_manifest gpt2 Q4_K_M-gptq

# 1. llama.cpp's perplexity of each file against the job's own.
node "$(readlink -f tests/peers/gguf_export_peer_check.mjs)" "$out/manifest.json" 0.005 \
  "$out/llama_ppl.json"
# 2. and 3.
"$PY" - "$out" <<'PYEOF'
import json, sys
out = sys.argv[1]
ppl = json.load(open(out + "/llama_ppl.json"))
for recipe in ("Q4_K_M", "Q3_K_M", "Q2_K"):
    plain, gptq = ppl["stories260K %s-plain" % recipe], ppl["stories260K %s-gptq" % recipe]
    print("stories260K %s in llama.cpp, held-out text: %.5f without calibration, %.5f with GPTQ"
          " (%+.2f%%)" % (recipe, plain, gptq, 100 * (gptq / plain - 1)))
    assert gptq < plain, recipe
def kl(path):
    job = json.loads([l for l in open(path).read().splitlines() if l.strip()][-1])
    return job["result"]["metrics"]["klDivergenceMean"]
for recipe in ("Q4_K_M", "Q2_K"):
    imatrix = kl("%s/random256/%s-imatrix.json" % (out, recipe))
    gptq = kl("%s/random256/%s-gptq.json" % (out, recipe))
    print("random256 %s, KL divergence from the float model: %.5f with the imatrix, %.5f with GPTQ"
          " (%+.1f%%)" % (recipe, imatrix, gptq, 100 * (gptq / imatrix - 1)))
    assert gptq < imatrix, recipe
plain, gptq = kl(out + "/gpt2/Q4_K_M-plain.json"), kl(out + "/gpt2/Q4_K_M-gptq.json")
print("gpt2 Q4_K_M, KL divergence from the float model: %.5f without calibration, %.5f with GPTQ"
      " (%+.1f%%)" % (plain, gptq, 100 * (gptq / plain - 1)))
assert gptq < plain
PYEOF
