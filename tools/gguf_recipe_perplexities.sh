#!/usr/bin/env bash
# llama.cpp's perplexity of stories260K under every llama.cpp recipe that
# holds its rows, made three ways by quantd-quantize: without calibration
# data, with an importance matrix from calibration data (--calib), and with
# GPTQ on the recipe's blocks (--calib --algorithm gptq). Evaluation: the
# first 24 windows of 128 tokens of tests/data/tinystories-sample.txt;
# calibration: 64 windows of 128 tokens from its second half (held out).
# Prints a Markdown table; each perplexity is llama.cpp's (node-llama-cpp's
# bundled build), which gguf_export_peer_check.mjs also holds within 0.5% of
# the job's own.
#
#   tools/gguf_recipe_perplexities.sh [OUT_DIR]
#
# Needs tools/install_deps.sh and tests/peers/setup.sh (node-llama-cpp).
# About 14 minutes on 2 cores (30 jobs, then llama.cpp scoring 28 files).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-$(mktemp -d)}"
mkdir -p "$out"
bazel build //worker/cli:quantd-quantize //tests/peers:eval_windows >/dev/null 2>&1
BIN=bazel-bin/worker/cli/quantd-quantize
TEXT=tests/data/tinystories-sample.txt
PY=/usr/bin/python3
tail -c +100001 "$TEXT" >"$out/calib.txt"
bazel-bin/tests/peers/eval_windows models/stories260K "$TEXT" 128 24 >"$out/windows.json"
RECIPES="F16 Q6_K Q5_K_M Q5_K_S Q4_K_M Q4_K_S Q3_K_L Q3_K_M Q3_K_S Q2_K"
echo '{"models": []}' >"$out/manifest.json"
for r in $RECIPES; do
  for mode in plain imatrix gptq; do
    [ "$r" = F16 ] && [ "$mode" != plain ] && continue
    args=(--model models/stories260K --gguf-type "$r" --format gguf --output "$out/$r-$mode"
          --data-dir "$out/data" --threads 2 -o json --eval "$TEXT" --n-ctx 128 --eval-windows 24)
    [ "$mode" != plain ] && args+=(--calib "$out/calib.txt" --calib-samples 64 --calib-seq-len 128)
    [ "$mode" = gptq ] && args+=(--algorithm gptq)
    "$BIN" "${args[@]}" >"$out/$r-$mode.json" 2>"$out/$r-$mode.err"
    "$PY" - "$out" "$r-$mode" <<'PYEOF'
import json, sys
out, name = sys.argv[1:]
job = json.loads([l for l in open("%s/%s.json" % (out, name)).read().splitlines() if l.strip()][-1])
assert job["state"] == "SUCCEEDED", (name, job.get("error"))
m = job["result"]["metrics"]
manifest = json.load(open(out + "/manifest.json"))
manifest["models"].append({"name": name, "gguf": "%s/%s/model.gguf" % (out, name),
                           "engine_ppl": m["quantizedPerplexity"]["perplexity"],
                           "tokens": int(m["quantizedPerplexity"]["protocol"]["tokens"]),
                           "windows": json.load(open(out + "/windows.json")),
                           "float_ppl": m["floatPerplexity"]["perplexity"]})
json.dump(manifest, open(out + "/manifest.json", "w"))
PYEOF
  done
done
(cd tests/peers && node gguf_export_peer_check.mjs "$out/manifest.json" 0.005 "$out/llama_ppl.json") \
  >"$out/check.txt"
"$PY" - "$out" $RECIPES <<'PYEOF'
import json, os, sys
out, recipes = sys.argv[1], sys.argv[2:]
ppl = json.load(open(out + "/llama_ppl.json"))
manifest = json.load(open(out + "/manifest.json"))
size = {e["name"]: os.path.getsize(e["gguf"]) for e in manifest["models"]}
floats = {round(e["float_ppl"], 6) for e in manifest["models"]}
print("float model (quantd, F32): %s" % ", ".join("%.5f" % f for f in sorted(floats)))
print()
print("| recipe | file KiB | without calibration | imatrix | GPTQ |")
print("|---|---|---|---|---|")
for r in recipes:
    cells = []
    for mode in ("plain", "imatrix", "gptq"):
        key = "%s-%s" % (r, mode)
        cells.append("%.5f" % ppl[key] if key in ppl else "")
    print("| %s | %.1f | %s |" % (r, size[r + "-plain"] / 1024, " | ".join(cells)))
PYEOF
