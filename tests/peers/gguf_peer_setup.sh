# Sourced by the GGUF recipe peer tests (gguf_recipe_peer_test.sh,
# gguf_gptq_peer_test.sh) with the test's name: enters the runfiles, makes
# sure node-llama-cpp is installed, and sets up what both use:
#   out       a fresh directory for the test's files
#   BIN TEXT PY, fail MESSAGE
#   CALIB     calibration text held out from the evaluation: the second
#             half of the sample (the evaluation windows come from its
#             first 30 KB)
#   rand      a Llama of 256-multiple widths with stories260K's tokenizer
#             (vocab 512), so llama.cpp's K-quants apply
#   reads_back MODEL
#             the F32 GGUF $out/MODEL/F32/model.gguf given back as --model
#             scores the float perplexity of the job that wrote it
#             ($out/MODEL/F32.json), to 1e-5
#   f32_and_q4_k_m MODEL DIR
#             the F32 and Q4_K_M jobs of the checkpoint DIR, in the
#             manifest, and the Q4_K_M file checked against llama.cpp's
#   add_to_manifest MODEL NAME [WINDOWS]
#             adds $out/MODEL/NAME/model.gguf, with the job's perplexity
#             ($out/MODEL/NAME.json) and windows (WINDOWS, by default
#             $out/MODEL/windows.json), to $out/manifest.json for
#             gguf_export_peer_check.mjs
runfiles="${TEST_SRCDIR:-$PWD/..}/${TEST_WORKSPACE:-quantd}"
cd "$runfiles"
peers_dir="$(dirname "$(readlink -f tests/peers/package.json)")"
bash "$peers_dir/setup.sh"
libs="$peers_dir/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"
out="${TEST_TMPDIR:-$(mktemp -d)}/$1"
rm -rf "$out" && mkdir -p "$out"
BIN=worker/cli/quantd-quantize
TEXT=tests/data/tinystories-sample.txt
PY=/usr/bin/python3
fail() { echo "FAIL: $*" >&2; exit 1; }

CALIB="$out/calib.txt"
tail -c +100001 "$TEXT" >"$CALIB"

rand="$out/random256"
worker/models/make_random_checkpoint --out="$rand" --layers=4 --hidden=256 --intermediate=768 \
  --heads=4 --kv_heads=2 --vocab=512 --dtype=f32 --seed=7 >/dev/null
cp models/stories260K/tokenizer.model "$rand/"

echo '{"models": []}' >"$out/manifest.json"
add_to_manifest() {  # model name [windows]
  "$PY" - "$out/manifest.json" "$out/$1/$2.json" "$out/$1/$2/model.gguf" \
    "${3:-$out/$1/windows.json}" "$1 $2" <<'PYEOF'
import json, sys
manifest_path, run_path, gguf, windows_path, name = sys.argv[1:]
job = json.loads([l for l in open(run_path).read().splitlines() if l.strip()][-1])
assert job["state"] == "SUCCEEDED", job.get("state")
ppl = job["result"]["metrics"]["quantizedPerplexity"]
manifest = json.load(open(manifest_path))
manifest["models"].append({"name": name, "gguf": gguf, "engine_ppl": ppl["perplexity"],
                           "tokens": int(ppl["protocol"]["tokens"]),
                           "windows": json.load(open(windows_path))})
json.dump(manifest, open(manifest_path, "w"))
PYEOF
}

reads_back() {  # model
  "$BIN" --model "$out/$1/F32/model.gguf" --scheme w_int8_per_channel_sym --eval "$TEXT" \
    --n-ctx 128 --eval-windows 8 --output "$out/$1/from-gguf" --data-dir "$out/data" \
    --threads 2 -o json >"$out/$1/from-gguf.json" 2>"$out/$1/from-gguf.err" ||
    { cat "$out/$1/from-gguf.err"; fail "$1: its F32 GGUF as the model"; }
  "$PY" - "$1" "$out/$1/F32.json" "$out/$1/from-gguf.json" <<'PYEOF'
import json, sys
def ppl(path):
    job = json.loads([l for l in open(path).read().splitlines() if l.strip()][-1])
    return job["result"]["metrics"]["floatPerplexity"]["perplexity"]
a, b = ppl(sys.argv[2]), ppl(sys.argv[3])
print("%s float perplexity: checkpoint %.6f, its F32 GGUF as the model %.6f" % (sys.argv[1], a, b))
assert abs(b / a - 1) < 1e-5, (a, b)
PYEOF
}

# f32_and_q4_k_m MODEL DIR: the checkpoint DIR's evaluation windows, its F32
# and Q4_K_M GGUF jobs into $out/MODEL (both added to the manifest), and
# llama.cpp's own quantizer of the F32 file, which must give quantd's Q4_K_M
# file byte for byte (llama_quantize_check).
f32_and_q4_k_m() {
  mkdir -p "$out/$1"
  tests/peers/eval_windows "$2" "$TEXT" 128 8 >"$out/$1/windows.json"
  for recipe in F32 Q4_K_M; do
    "$BIN" --model "$2" --gguf-type "$recipe" --format gguf --output "$out/$1/$recipe" \
      --data-dir "$out/data" --threads 2 -o json --eval "$TEXT" --n-ctx 128 --eval-windows 8 \
      >"$out/$1/$recipe.json" 2>"$out/$1/$recipe.err" ||
      { cat "$out/$1/$recipe.err"; fail "$1 $recipe job"; }
    add_to_manifest "$1" "$recipe"
  done
  echo "== $1 Q4_K_M: llama_model_quantize of quantd's F32 GGUF vs quantd's Q4_K_M"
  tests/peers/llama_quantize_check "$libs" "$out/$1/F32/model.gguf" 15 \
    "$out/$1/Q4_K_M/model.gguf" "$out/$1/llama-Q4_K_M.gguf" 2>"$out/$1/llama.log" ||
    { cat "$out/$1/llama.log"; fail "$1 Q4_K_M differs from llama.cpp's"; }
}
