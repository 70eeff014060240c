#!/usr/bin/env bash
# llama.cpp peer check of quantd's GGUF recipes (--gguf-type), through the
# public CLI (quantd-quantize) on stories260K and on a random checkpoint
# whose widths are multiples of 256 (stories260K's 64 and 172 only reach
# llama.cpp's fallback types):
#  1. llama.cpp's own quantizer (llama_model_quantize, node-llama-cpp's
#     libllama) makes the same recipe of quantd's F32 GGUF of the model; its
#     file must hold the same tensors, types and bytes as quantd's
#     (llama_quantize_check). Jobs with calibration data quantize with an
#     importance matrix and write it as imatrix.gguf; llama.cpp then
#     quantizes with that file and must again write the same bytes;
#  2. llama.cpp's perplexity of quantd's file on the job's evaluation windows
#     must be within 0.5% of the job's own (gguf_export_peer_check.mjs; every
#     stories260K file, five of the random model's);
#  3. on held-out text, stories260K's Q4_K_M and Q4_K_S files quantized
#     with the importance matrix must score a lower perplexity in llama.cpp
#     than those quantized without (Q5_K_M and Q3_K_M printed); the random
#     model's Q2_K and Q3_K_M files (real 2- and 3-bit K blocks) must be
#     closer to the float model (KL divergence) with it than without;
#  4. a recipe whose types cannot hold stories260K's 172-wide rows fails the
#     job with FAILED_PRECONDITION, as llama-quantize refuses the file.
set -euo pipefail
source "$(dirname "$0")/gguf_peer_setup.sh" gguf_recipe_peer

# Eight layers: llama.cpp's Q4_0 with an imatrix gives ffn_down of the first
# eighth Q4_1 (none of the other models has a whole eighth).
rand8="$out/random8"
worker/models/make_random_checkpoint --out="$rand8" --layers=8 --hidden=256 --intermediate=512 \
  --heads=4 --kv_heads=2 --vocab=512 --dtype=f32 --seed=8 >/dev/null
cp models/stories260K/tokenizer.model "$rand8/"

# llama_ftype numbers (llama.h) of the recipes checked.
declare -A FTYPE=([F32]=0 [F16]=1 [Q4_0]=2 [Q8_0]=7 [Q5_1]=9 [Q2_K]=10 [Q3_K_S]=11 [Q3_K_M]=12
                  [Q3_K_L]=13 [Q4_K_S]=14 [Q4_K_M]=15 [Q5_K_S]=16 [Q5_K_M]=17 [Q6_K]=18)
# Evaluation windows of 128 tokens: 24 where stories260K's perplexity with
# and without the imatrix is compared (and the random model's KL divergence),
# 4 elsewhere (there the perplexity only checks the file's computation in
# llama.cpp). The jobs take ~95 s of the test's ~110 s unloaded, llama.cpp's
# scoring ~13 s.
COMPARED="Q4_K_M Q4_K_S Q5_K_M Q3_K_M"
COMPARED_RANDOM="Q2_K Q3_K_M"
windows() {  # model recipe
  if [ "$1" = stories260K ] && [[ " $COMPARED " == *" $2 "* ]]; then echo 24;
  elif [ "$1" = random256 ] && [[ " $COMPARED_RANDOM " == *" $2 "* ]]; then echo 24;
  else echo 4; fi
}
# The random model's files llama.cpp scores (check 2); its others are only
# compared byte for byte (check 1), and by KL divergence (check 3).
SCORED_RANDOM="Q4_K_M Q6_K Q4_0+imatrix Q2_K Q3_K_M+imatrix"
scored() {  # model name
  [ "$1" = stories260K ] || { [ "$1" = random256 ] && [[ " $SCORED_RANDOM " == *" $2 "* ]]; }
}
# Whether a check reads the job's evaluation (perplexity, check 2, or KL
# divergence, check 3); the other jobs run with --no-eval (their files, all
# checks 1 and 4 read, do not depend on it).
evaluated() {  # model name
  scored "$1" "$2" || { [ "$1" = random256 ] && [[ " $COMPARED_RANDOM " == *" ${2%+imatrix} "* ]]; }
}
run_job() {  # model_dir model name recipe [eval|-] [imatrix]
  local args=(--model "$1" --gguf-type "$4" --format gguf --output "$out/$2/$3"
              --data-dir "$out/data" --threads 2 -o json)
  if [ "${5:-}" = eval ]; then
    args+=(--eval "$TEXT" --n-ctx 128 --eval-windows "$(windows "$2" "$4")")
  else
    args+=(--no-eval)
  fi
  if [ "${6:-}" = imatrix ]; then
    args+=(--calib "$CALIB" --calib-samples 64 --calib-seq-len 128)
  fi
  "$BIN" "${args[@]}" >"$out/$2/$3.json" 2>"$out/$2/$3.err"
}

for model in stories260K random256 random8; do
  dir=models/stories260K; [ "$model" = random256 ] && dir="$rand"; [ "$model" = random8 ] && dir="$rand8"
  mkdir -p "$out/$model"
  recipes="Q4_K_M Q4_K_S Q5_K_M Q5_K_S Q6_K Q3_K_M F16 Q4_K_M+imatrix Q4_K_S+imatrix"
  recipes+=" Q5_K_M+imatrix Q3_K_M+imatrix"
  if [ "$model" = random256 ]; then
    recipes="Q4_K_M Q4_K_S Q5_K_M Q5_K_S Q6_K Q8_0 Q4_0 Q5_1 Q2_K Q3_K_S Q3_K_M Q3_K_L"
    recipes+=" Q4_K_M+imatrix Q6_K+imatrix Q4_0+imatrix Q2_K+imatrix Q3_K_M+imatrix"
  fi
  [ "$model" = random8 ] && recipes="Q4_0+imatrix"
  run_job "$dir" "$model" F32 F32 || { cat "$out/$model/F32.err"; fail "$model F32 job"; }
  for n in 4 24; do
    tests/peers/eval_windows "$dir" "$TEXT" 128 "$n" >"$out/$model/windows$n.json"
  done
  for name in $recipes; do
    r="${name%+imatrix}"
    ev=- calib=() imatrix=()
    if evaluated "$model" "$name"; then ev=eval; fi
    if [ "$r" != "$name" ]; then calib=(imatrix) imatrix=("$out/$model/$name/imatrix.gguf"); fi
    run_job "$dir" "$model" "$name" "$r" "$ev" "${calib[@]}" ||
      { cat "$out/$model/$name.err"; fail "$model $name job"; }
    echo "== $model $name: llama_model_quantize of quantd's F32 GGUF vs quantd's $name"
    # llama.cpp logs every tensor it converts: kept aside unless it fails.
    tests/peers/llama_quantize_check "$libs" "$out/$model/F32/model.gguf" "${FTYPE[$r]}" \
      "$out/$model/$name/model.gguf" "$out/$model/llama-$name.gguf" "${imatrix[@]}" \
      2>"$out/$model/llama-$name.log" | tee "$out/$model/check-$name.txt" ||
      { cat "$out/$model/llama-$name.log"; fail "$model $name differs from llama.cpp's"; }
    if [ "$model" = random8 ]; then  # the rule this model is for: blk.0.ffn_down is Q4_1
      grep -q "^q4_1: 1 tensors identical" "$out/$model/check-$name.txt" ||
        fail "random8 $name: no Q4_1 ffn_down"
    fi
    # llama.cpp scores every stories260K file and five of the random model's
    # (its other files are byte-identical to llama.cpp's own, checked above).
    scored "$model" "$name" || continue
    add_to_manifest "$model" "$name" "$out/$model/windows$(windows "$model" "$r").json"
  done
done

# 4. Q8_0 has no fallback for 172-wide rows: the job fails before any work.
if run_job models/stories260K stories260K Q8_0 Q8_0; then fail "stories260K Q8_0 succeeded"; fi
"$PY" - "$out/stories260K/Q8_0.json" <<'PYEOF' || { cat "$out/stories260K/Q8_0.err"; fail "Q8_0 refusal"; }
import json, sys
job = json.loads([l for l in open(sys.argv[1]).read().splitlines() if l.strip()][-1])
err = job["error"]
assert job["state"] == "FAILED" and err["code"] == 9, (job["state"], err["code"])  # FAILED_PRECONDITION
assert "blk.0.ffn_down.weight: rows of 172 are not whole Q8_0 blocks of 32" in err["message"], err
fields = [v["field"] for d in err["details"] for v in d.get("fieldViolations", [])]
assert fields == ["blk.%d.ffn_down.weight" % i for i in range(5)], fields
print("stories260K Q8_0 refused as llama-quantize refuses it: " + err["message"])
PYEOF

node "$(readlink -f tests/peers/gguf_export_peer_check.mjs)" "$out/manifest.json" 0.005 \
  "$out/llama_ppl.json"
# 3. The importance matrix lowers llama.cpp's perplexity on held-out text.
"$PY" - "$out/llama_ppl.json" <<'PYEOF'
import json, sys
ppl = json.load(open(sys.argv[1]))
for recipe in ("Q4_K_M", "Q4_K_S", "Q5_K_M", "Q3_K_M"):  # COMPARED
    plain, weighted = ppl["stories260K " + recipe], ppl["stories260K " + recipe + "+imatrix"]
    print("stories260K %s in llama.cpp: %.5f without the imatrix, %.5f with it (%+.3f%%)"
          % (recipe, plain, weighted, 100 * (weighted / plain - 1)))
    # The 4-bit recipes (Q5_0 fallback blocks) gain; at 5 bits (Q5_1) and in
    # Q3_K_M (Q4_0 fallback blocks) these weights do not: printed only.
    if recipe in ("Q4_K_M", "Q4_K_S"):
        assert weighted < plain, recipe
PYEOF
# 3b. Real Q2_K / Q3_K blocks (the random model): the importance matrix
# brings the quantized model closer to the float one (the job's KL
# divergence on the same 24 windows; its blocks are llama.cpp's bytes).
"$PY" - "$out/random256" $COMPARED_RANDOM <<'PYEOF'
import json, sys
def kl(path):
    job = json.loads([l for l in open(path).read().splitlines() if l.strip()][-1])
    return job["result"]["metrics"]["klDivergenceMean"]
for recipe in sys.argv[2:]:
    plain, weighted = kl("%s/%s.json" % (sys.argv[1], recipe)), kl("%s/%s+imatrix.json" % (sys.argv[1], recipe))
    print("random256 %s, KL divergence from the float model: %.5f without the imatrix, %.5f with it"
          " (%+.2f%%)" % (recipe, plain, weighted, 100 * (weighted / plain - 1)))
    assert weighted < plain, recipe
PYEOF
