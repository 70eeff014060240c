#!/bin/bash
# quantd-quantize end to end on stories260K: the JSON run's golden float
# perplexity (4.8374 on 20 windows), the artifact and its sha256, the text
# renderer's summary, and the refusals with their exit codes.
set -u
BIN="${TEST_SRCDIR}/quantd/worker/cli/quantd-quantize"
MODEL="${TEST_SRCDIR}/quantd/models/stories260K"
TEXT="${TEST_SRCDIR}/quantd/tests/data/tinystories-sample.txt"
TMP="${TEST_TMPDIR:-$(mktemp -d)}"
PY=/usr/bin/python3
fail() { echo "FAIL: $*" >&2; exit 1; }

# 1. JSON run: exit 0, events then the final Job on the last line.
"$BIN" --model "$MODEL" --scheme w_int4_per_channel_sym --calib "$TEXT" --calib-samples 8 \
  --calib-seq-len 128 --eval "$TEXT" --eval-windows 20 --output "$TMP/out" \
  --data-dir "$TMP/data" --threads 2 -o json >"$TMP/run.json" 2>"$TMP/run.err"
rc=$?
[ "$rc" -eq 0 ] || { cat "$TMP/run.err" "$TMP/run.json"; fail "json run exit $rc"; }
"$PY" - "$TMP/run.json" "$TMP/out" <<'PYEOF' || fail "json run checks"
import hashlib, json, os, sys
lines = [l for l in open(sys.argv[1]).read().splitlines() if l.strip()]
events = [json.loads(l) for l in lines[:-1]]
job = json.loads(lines[-1])
assert job["state"] == "SUCCEEDED", job.get("state")
m = job["result"]["metrics"]
fp = m["floatPerplexity"]
assert abs(fp["perplexity"] - 4.8374) <= 1e-3, fp
assert fp["protocol"]["windows"] == 20 and int(fp["protocol"]["tokens"]) == 5100, fp
qp = m["quantizedPerplexity"]["perplexity"]
assert qp != fp["perplexity"] and abs(qp / fp["perplexity"] - 1) < 0.5, qp
# Events: numbered from 1, RUNNING first, SUCCEEDED last, progress through
# the quantize stage, one block-metrics row per block of the 5.
assert [e["sequence"] for e in events] == [str(i + 1) for i in range(len(events))]
assert events[0]["state"] == "RUNNING" and events[-1]["state"] == "SUCCEEDED"
stages = {e["progress"].get("stage") for e in events if "progress" in e}
assert "QUANTIZE" in stages and "EVALUATE" in stages, stages
blocks = [e["blockMetrics"]["block"] for e in events if "blockMetrics" in e]
assert blocks == [1, 2, 3, 4, 5], blocks
# The artifact: HF fake-quantized safetensors under --output, sha256 as reported.
arts = job["result"]["artifacts"]
assert len(arts) == 1 and arts[0]["format"] == "HF_FAKE_QUANTIZED", arts
assert arts[0]["uri"] == "file://" + sys.argv[2], arts[0]["uri"]
main = os.path.join(sys.argv[2], "model.safetensors")
digest = hashlib.sha256(open(main, "rb").read()).hexdigest()
assert digest == arts[0]["sha256"], (digest, arts[0]["sha256"])
assert os.path.exists(os.path.join(sys.argv[2], "config.json"))
print("json run ok: float ppl %.4f, quantized %.4f" % (fp["perplexity"], qp))
PYEOF

# 2. Text run (no eval, to stay fast): progress on stderr, quantctl's summary on stdout.
"$BIN" --model "$MODEL" --scheme w_int8_per_channel_sym --no-eval --output "$TMP/out8" \
  --data-dir "$TMP/data" --threads 2 >"$TMP/text.out" 2>"$TMP/text.err"
rc=$?
[ "$rc" -eq 0 ] || { cat "$TMP/text.err" "$TMP/text.out"; fail "text run exit $rc"; }
grep -q '^state:      SUCCEEDED (attempt 1) on local$' "$TMP/text.out" || { cat "$TMP/text.out"; fail "text summary state"; }
grep -q '^quantize:   w_int8_per_channel_sym$' "$TMP/text.out" || fail "text summary scheme"
grep -q "^artifact:   HF_FAKE_QUANTIZED file://$TMP/out8 " "$TMP/text.out" || fail "text artifact line"
grep -q '^block  5/5 ' "$TMP/text.out" || fail "block metric rows"
grep -q 'QUANTIZE block 5/5' "$TMP/text.err" || { cat "$TMP/text.err"; fail "progress lines"; }
# No calibration data: no output error, not a -1 sentinel shown as one.
grep -q '^block output rel-mse: not measured: no calibration data$' "$TMP/text.out" ||
  { cat "$TMP/text.out"; fail "rel-mse not-measured line"; }
! grep -q 'rel-mse -' "$TMP/text.out" || { cat "$TMP/text.out"; fail "a negative rel-mse printed"; }
grep -q '^block  1/5   sqnr mean ' "$TMP/text.out" || { cat "$TMP/text.out"; fail "block row without rel-mse"; }

# 3. A bad scheme is refused before running, naming the field: exit 3.
"$BIN" --model "$MODEL" --scheme w_int5_nonsense --no-eval --output "$TMP/bad" \
  --data-dir "$TMP/data" >"$TMP/bad.out" 2>"$TMP/bad.err"
rc=$?
[ "$rc" -eq 3 ] || { cat "$TMP/bad.err"; fail "bad scheme exit $rc, want 3"; }
grep -q 'INVALID_ARGUMENT' "$TMP/bad.err" || { cat "$TMP/bad.err"; fail "bad scheme code"; }
grep -q 'spec.quantization.scheme' "$TMP/bad.err" || { cat "$TMP/bad.err"; fail "bad scheme field"; }
[ ! -e "$TMP/bad" ] || fail "bad scheme wrote an output"

# 4. A missing model: non-zero, the path named.
"$BIN" --model "$TMP/no-such-model" --scheme w_int8_per_channel_sym --no-eval \
  --output "$TMP/nm" --data-dir "$TMP/data" >"$TMP/nm.out" 2>"$TMP/nm.err"
rc=$?
[ "$rc" -ne 0 ] || fail "missing model exit 0"
cat "$TMP/nm.out" "$TMP/nm.err" | grep -q "$TMP/no-such-model" || { cat "$TMP/nm.out" "$TMP/nm.err"; fail "missing model path not named"; }

# 5. Usage errors: exit 2.
"$BIN" --scheme w_int8_per_channel_sym >/dev/null 2>"$TMP/u.err"
[ $? -eq 2 ] || fail "no --model exit, want 2"
grep -q -- '--model' "$TMP/u.err" || fail "usage names --model"

# 6. A GPU device on a CPU-only LibTorch is refused with the reason: exit 3.
"$BIN" --model "$MODEL" --scheme w_int8_per_channel_sym --no-eval --device cuda:0 \
  --data-dir "$TMP/data" >/dev/null 2>"$TMP/dev.err"
rc=$?
[ "$rc" -eq 3 ] || { cat "$TMP/dev.err"; fail "cuda:0 exit $rc, want 3"; }
grep -q 'CPU-only' "$TMP/dev.err" || { cat "$TMP/dev.err"; fail "cuda:0 message"; }
# 7. The token embedding (layer_type Embedding): quantized, named in the log,
#    and refused with hf_quark (exit 3, the format field named).
cat >"$TMP/emb.json" <<'JSON'
{"global_quant_config": {"weight": {"dtype": "int8", "qscheme": "per_channel", "ch_axis": 0,
  "symmetric": true, "is_dynamic": false}},
 "layer_type_quant_config": {"Embedding": {"weight": {"dtype": "int8", "qscheme": "per_channel",
  "ch_axis": 0, "symmetric": true, "is_dynamic": false}}}}
JSON
"$BIN" --model "$MODEL" --config "$TMP/emb.json" --no-eval --output "$TMP/emb" \
  --data-dir "$TMP/data" >"$TMP/emb.out" 2>"$TMP/emb.err"
rc=$?
[ "$rc" -eq 0 ] || { cat "$TMP/emb.err"; fail "embedding run exit $rc"; }
grep -q '^model.embed_tokens (Embedding): int8 per_channel(axis 0) sym, weight SQNR' "$TMP/emb.out" ||
  { cat "$TMP/emb.out"; fail "embedding log line"; }
"$BIN" --model "$MODEL" --config "$TMP/emb.json" --no-eval --format hf-quark \
  --output "$TMP/embq" --data-dir "$TMP/data" >/dev/null 2>"$TMP/embq.err"
rc=$?
[ "$rc" -eq 3 ] || { cat "$TMP/embq.err"; fail "embedding + hf_quark exit $rc, want 3"; }
grep -q 'spec.export.formats\[0\]' "$TMP/embq.err" || { cat "$TMP/embq.err"; fail "format field"; }

# 8. The progress bar on a terminal vs a pipe (python3's pty): with stdout
#    and stderr on a terminal it is redrawn in place and every bar line is
#    ended before the next output; with stdout piped (`| tee log`) it is
#    plain lines, so piped lines never land inside the bar.
"$PY" - "$BIN" "$MODEL" "$TMP" <<'PYEOF' || fail "progress on a pty vs a pipe"
import os, pty, re, subprocess, sys, threading
binary, model, tmp = sys.argv[1:4]
def run(stdout_tty, tag):
    cmd = [binary, "--model", model, "--scheme", "w_int8_per_channel_sym", "--no-eval",
           "--output", f"{tmp}/pty-{tag}", "--data-dir", f"{tmp}/data", "--threads", "2"]
    master, slave = pty.openpty()
    p = subprocess.Popen(cmd, stdout=slave if stdout_tty else subprocess.PIPE, stderr=slave)
    os.close(slave)
    piped = []
    if not stdout_tty:
        t = threading.Thread(target=lambda: piped.append(p.stdout.read()))
        t.start()
    term = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        term += chunk
    assert p.wait() == 0, (tag, term[-2000:])
    if not stdout_tty:
        t.join()
    os.close(master)
    return term, piped[0] if piped else b""
term, _ = run(True, "tty")
assert b"\r[" in term and b"\x1b[K" in term, term[-2000:]
# After each redraw comes the next redraw or the end of the line.
assert re.search(rb"\x1b\[K[^\r\n]", term) is None, term[-2000:]
assert b"\x1b[K\r\nstate: SUCCEEDED" in term, term[-2000:]
term, piped = run(False, "pipe")
assert b"\x1b[K" not in term and b"\r[" not in term, term[-2000:]
assert re.search(rb"\] +\d+% EXPORT\r\n", term), term[-2000:]
assert piped.startswith(b"state: RUNNING\n") and b"\x1b" not in piped, piped[:2000]
print("progress: in place on a terminal, plain lines with stdout piped")
PYEOF

# 9. GGUF: the tensors left in float are F32 unless --gguf-float-type says
#    otherwise, and the events say which tensors went to which type.
for t in default bf16; do
  flag=(); [ "$t" = default ] || flag=(--gguf-float-type "$t")
  "$BIN" --model "$MODEL" --scheme w_int8_per_channel_sym --no-eval --format gguf \
    --exclude '*down_proj' "${flag[@]}" --output "$TMP/gguf-$t" --data-dir "$TMP/data" \
    >"$TMP/gguf-$t.out" 2>"$TMP/gguf-$t.err"
  rc=$?
  [ "$rc" -eq 0 ] || { cat "$TMP/gguf-$t.err" "$TMP/gguf-$t.out"; fail "gguf $t exit $rc"; }
done
floats='6 float weights (model.embed_tokens.weight, model.layers.0.mlp.down_proj.weight, model.layers.1.mlp.down_proj.weight, model.layers.2.mlp.down_proj.weight, model.layers.3.mlp.down_proj.weight, model.layers.4.mlp.down_proj.weight)'
grep -qxF "gguf F32: $floats, 11 norms and biases" "$TMP/gguf-default.out" ||
  { cat "$TMP/gguf-default.out"; fail "gguf default F32 line"; }
grep -qxF "gguf Q8_0: 30 quantized weights" "$TMP/gguf-default.out" || fail "gguf Q8_0 line"
grep -qxF "gguf BF16: $floats" "$TMP/gguf-bf16.out" || { cat "$TMP/gguf-bf16.out"; fail "gguf BF16 line"; }
grep -qxF "gguf F32: 11 norms and biases" "$TMP/gguf-bf16.out" || fail "gguf bf16 F32 line"
# Without a GGUF export the flag would do nothing: refused, exit 3.
"$BIN" --model "$MODEL" --scheme w_int8_per_channel_sym --no-eval --gguf-float-type f16 \
  --output "$TMP/nogguf" --data-dir "$TMP/data" >/dev/null 2>"$TMP/nogguf.err"
rc=$?
[ "$rc" -eq 3 ] || { cat "$TMP/nogguf.err"; fail "--gguf-float-type without gguf exit $rc, want 3"; }
grep -q 'spec.export.gguf_float_type: applies to the GGUF export only' "$TMP/nogguf.err" ||
  { cat "$TMP/nogguf.err"; fail "gguf_float_type field"; }
# 10. What quantd says at CreateJob, quantd-quantize says too: a config key
#     that takes no effect and quark_online are warnings, and the job runs.
cat >"$TMP/online.json" <<'JSON'
{"quant_method": "quark_online",
 "global_quant_config": {"weight": {"dtype": "int8", "qscheme": "per_channel", "ch_axis": 0,
                                    "symmetric": true}},
 "softmax_quant_spec": {"dtype": "fp8_e4m3"}}
JSON
"$BIN" --model "$MODEL" --config "$TMP/online.json" --no-eval --output "$TMP/online" \
  --data-dir "$TMP/data" >"$TMP/online.out" 2>"$TMP/online.err"
rc=$?
[ "$rc" -eq 0 ] || { cat "$TMP/online.err" "$TMP/online.out"; fail "quark_online exit $rc"; }
grep -q "^warning: spec.quantization.quark_json.quant_method: 'quark_online' is read as 'quark'" \
  "$TMP/online.out" || { cat "$TMP/online.out"; fail "quark_online warning"; }
grep -q "^warning: spec.quantization.quark_json.softmax_quant_spec: not used by quantd" \
  "$TMP/online.out" || { cat "$TMP/online.out"; fail "softmax_quant_spec warning"; }
# 11. A GGUF file is a model (issue 20). The Q4_K_M recipe's GGUF, given back
#     as --model, is read block for block as the recipe job evaluated it: its
#     float perplexity is that job's quantized one. Its exports carry the
#     vocabulary as Transformers reads it, and a file that is not a GGUF is
#     refused naming the field.
"$BIN" --model "$MODEL" --gguf-type Q4_K_M --format gguf --eval "$TEXT" --eval-windows 20 \
  --output "$TMP/q4km" --data-dir "$TMP/data" --threads 2 -o json >"$TMP/q4km.json" 2>"$TMP/q4km.err"
rc=$?
[ "$rc" -eq 0 ] || { cat "$TMP/q4km.err"; fail "Q4_K_M recipe exit $rc"; }
"$BIN" --model "file://$TMP/q4km/model.gguf" --scheme w_int8_per_channel_sym --eval "$TEXT" \
  --eval-windows 20 --format hf-quark --format gguf --output "$TMP/fromgguf" \
  --data-dir "$TMP/data" --threads 2 -o json >"$TMP/fromgguf.json" 2>"$TMP/fromgguf.err"
rc=$?
[ "$rc" -eq 0 ] || { cat "$TMP/fromgguf.err"; fail "GGUF model exit $rc"; }
"$PY" - "$TMP/q4km.json" "$TMP/fromgguf.json" "$TMP/fromgguf" <<'PYEOF' || fail "GGUF model checks"
import json, os, sys
def job(path):
    return json.loads([l for l in open(path).read().splitlines() if l.strip()][-1])
recipe, gguf = job(sys.argv[1]), job(sys.argv[2])
assert gguf["state"] == "SUCCEEDED", gguf.get("error")
rq = recipe["result"]["metrics"]["quantizedPerplexity"]["perplexity"]
gf = gguf["result"]["metrics"]["floatPerplexity"]["perplexity"]
# The same weights and tokens; only the order of float32 sums may differ.
assert abs(gf / rq - 1) < 1e-5, (gf, rq)
formats = sorted(a["format"] for a in gguf["result"]["artifacts"])
assert formats == ["GGUF", "HF_QUARK"], formats
quark = os.path.join(sys.argv[3], "hf_quark")
assert sorted(os.listdir(quark)) == [".quantd-job", "config.json", "model.safetensors",
                                     "tokenizer.model", "tokenizer_config.json"], os.listdir(quark)
assert json.load(open(os.path.join(quark, "config.json")))["quantization_config"]["quant_method"] == "quark"
print("gguf model ok: float ppl %.4f = the recipe's quantized %.4f" % (gf, rq))
PYEOF
echo '{"not": "a gguf"}' >"$TMP/notes.gguf"
"$BIN" --model "$TMP/notes.gguf" --scheme w_int8_per_channel_sym --no-eval --output "$TMP/notgguf" \
  --data-dir "$TMP/data" >"$TMP/notgguf.out" 2>"$TMP/notgguf.err"
rc=$?
[ "$rc" -ne 0 ] || fail "a non-GGUF file ran"
grep -q "spec.model_uri: $TMP/notes.gguf is a file but neither a GGUF file nor a TorchScript archive" "$TMP/notgguf.out" ||
  { cat "$TMP/notgguf.out" "$TMP/notgguf.err"; fail "non-GGUF message"; }
[ ! -e "$TMP/notgguf" ] || fail "a non-GGUF file wrote an output"
# 12. Rope scaling that long-context checkpoints use (issue 20): stories260K
#     with YaRN in its config.json runs GPTQ and exports hf-quark and GGUF
#     (llama.cpp's rope.scaling keys), the float perplexity moves with the
#     frequencies (it was trained without YaRN); a YaRN attention factor
#     llama.cpp would not compute is refused for gguf at once, naming it.
mkdir -p "$TMP/yarn"
cp "$MODEL/model.safetensors" "$MODEL/tokenizer.model" "$TMP/yarn/"
"$PY" - "$MODEL/config.json" "$TMP/yarn/config.json" <<'PYEOF'
import json, sys
c = json.load(open(sys.argv[1]))
c["rope_scaling"] = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}
json.dump(c, open(sys.argv[2], "w"))
PYEOF
"$BIN" --model "$TMP/yarn" --scheme w_int4_per_channel_sym --algorithm gptq --calib "$TEXT" \
  --calib-samples 8 --calib-seq-len 128 --eval "$TEXT" --eval-windows 20 --format hf-quark \
  --format gguf --output "$TMP/yarnout" --data-dir "$TMP/data" --threads 2 -o json \
  >"$TMP/yarn.json" 2>"$TMP/yarn.err"
rc=$?
[ "$rc" -eq 0 ] || { cat "$TMP/yarn.err"; fail "YaRN job exit $rc"; }
"$PY" - "$TMP/yarn.json" "$TMP/yarnout" <<'PYEOF' || fail "YaRN job checks"
import json, math, os, struct, sys
job = json.loads([l for l in open(sys.argv[1]).read().splitlines() if l.strip()][-1])
assert job["state"] == "SUCCEEDED", job.get("error")
m = job["result"]["metrics"]
fp, qp = m["floatPerplexity"]["perplexity"], m["quantizedPerplexity"]["perplexity"]
assert math.isfinite(fp) and abs(fp / 4.8374 - 1) > 0.01, fp
assert abs(qp / fp - 1) < 0.5, (fp, qp)
cfg = json.load(open(os.path.join(sys.argv[2], "hf_quark", "config.json")))
assert cfg["rope_scaling"]["rope_type"] == "yarn", cfg.get("rope_scaling")
gguf = open(os.path.join(sys.argv[2], "gguf", "model.gguf"), "rb").read(65536)
assert b"llama.rope.scaling.type" in gguf and b"yarn" in gguf, "no yarn metadata"
assert b"llama.rope.scaling.original_context_length" in gguf, "no original context"
print("yarn ok: float ppl %.4f (plain 4.8374), GPTQ %.4f; GGUF with rope.scaling" % (fp, qp))
PYEOF
"$PY" - "$TMP/yarn/config.json" <<'PYEOF'
import json, sys
c = json.load(open(sys.argv[1]))
c["rope_scaling"]["attention_factor"] = 1.5
json.dump(c, open(sys.argv[1], "w"))
PYEOF
"$BIN" --model "$TMP/yarn" --scheme w_int8_per_channel_sym --no-eval --format gguf \
  --output "$TMP/yarngguf" --data-dir "$TMP/data" >"$TMP/yarngguf.out" 2>"$TMP/yarngguf.err"
rc=$?
[ "$rc" -eq 3 ] || { cat "$TMP/yarngguf.out" "$TMP/yarngguf.err"; fail "YaRN to gguf exit $rc"; }
grep -q "gguf cannot hold LlamaForCausalLM: llama.cpp's YaRN takes beta_fast 32" \
  "$TMP/yarngguf.out" "$TMP/yarngguf.err" || { cat "$TMP/yarngguf.out" "$TMP/yarngguf.err"; fail "YaRN gguf message"; }

# 13. Phi-3 / Phi-4-mini (issue 20): fused qkv_proj and gate_up_proj,
#     partial rotary. GPTQ, AWQ and SmoothQuant each run on the fused Linears
#     as the single layers they are, and the hf-quark export keeps Phi-3's
#     names with one weight_scale per fused layer; rotation is refused at
#     once, naming the algorithm.
PHI3="$TMP/phi3"
"${TEST_SRCDIR}/quantd/worker/models/make_random_checkpoint" --out="$PHI3" --arch=phi3 \
  --layers=2 --hidden=256 --heads=4 --kv_heads=2 --intermediate=512 --vocab=512 --dtype=f32 \
  --partial_rotary_factor=0.75 --seed=9 >/dev/null || fail "phi3 checkpoint"
cp "$MODEL/tokenizer.model" "$PHI3/"
for algo in gptq awq smoothquant; do
  "$BIN" --model "$PHI3" --scheme w_int4_per_group_sym --algorithm "$algo" --calib "$TEXT" \
    --calib-samples 8 --calib-seq-len 128 --eval "$TEXT" --eval-windows 8 --n-ctx 128 \
    --format hf-quark --output "$TMP/phi3-$algo" --data-dir "$TMP/data" --threads 2 -o json \
    >"$TMP/phi3-$algo.json" 2>"$TMP/phi3-$algo.err" || { cat "$TMP/phi3-$algo.err"; fail "phi3 $algo"; }
done
"$PY" - "$TMP" <<'PYEOF' || fail "phi3 checks"
import json, math, os, struct, sys
tmp = sys.argv[1]
for algo in ("gptq", "awq", "smoothquant"):
    lines = [l for l in open(os.path.join(tmp, "phi3-%s.json" % algo)).read().splitlines() if l.strip()]
    job = json.loads(lines[-1])
    assert job["state"] == "SUCCEEDED", (algo, job.get("error"))
    m = job["result"]["metrics"]
    fp, qp = m["floatPerplexity"]["perplexity"], m["quantizedPerplexity"]["perplexity"]
    assert math.isfinite(qp) and abs(qp / fp - 1) < 0.05, (algo, fp, qp)
    blocks = [json.loads(l)["blockMetrics"] for l in lines[:-1] if "blockMetrics" in json.loads(l)]
    names = sorted(l["name"] for b in blocks for l in b["layers"])
    assert names[:2] == ["model.layers.0.mlp.down_proj", "model.layers.0.mlp.gate_up_proj"], names
    path = os.path.join(tmp, "phi3-" + algo, "model.safetensors")
    raw = open(path, "rb").read()
    header = json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])
    qkv = "model.layers.0.self_attn.qkv_proj."
    # One fused Linear: 512 rows (q 256, k 128, v 128) of 256 inputs, two
    # groups of 128 each (packed int4 codes: 8 to an int32).
    w, scale = header[qkv + "weight"]["shape"], header[qkv + "weight_scale"]["shape"]
    assert w[0] * w[1] * 8 == 512 * 256 and scale[0] * scale[1] == 512 * 2, (w, scale)
    assert not any(".q_proj." in k or ".gate_proj." in k for k in header), sorted(header)
    print("phi3 %s ok: float ppl %.4f, quantized %.4f" % (algo, fp, qp))
PYEOF
"$BIN" --model "$PHI3" --scheme w_int4_per_channel_sym --algorithm rotation --calib "$TEXT" \
  --no-eval --output "$TMP/phi3-rot" --data-dir "$TMP/data" >"$TMP/phi3-rot.out" 2>"$TMP/phi3-rot.err"
rc=$?
[ "$rc" -eq 3 ] || { cat "$TMP/phi3-rot.out" "$TMP/phi3-rot.err"; fail "phi3 rotation exit $rc"; }
grep -q "spec.quantization.algorithms\[0\]: rotation folds its Hadamard matrices" \
  "$TMP/phi3-rot.out" "$TMP/phi3-rot.err" || { cat "$TMP/phi3-rot.out" "$TMP/phi3-rot.err"; fail "phi3 rotation message"; }
# 14. Gemma 2 / Gemma 3 (issue 20): (1 + weight) sandwich norms, soft-capping,
#     sliding layers, Gemma 3's q/k norms. GPTQ (both), AWQ and SmoothQuant
#     (Gemma 3: scales fold into the (1 + weight) norms) run and hf-quark
#     keeps Gemma's names; --target vllm is refused at once (gguf:
#     gguf_gemma_peer_test).
for arch in gemma2 gemma3; do
  GEM="$TMP/$arch"
  "${TEST_SRCDIR}/quantd/worker/models/make_random_checkpoint" --out="$GEM" --arch="$arch" \
    --layers=2 --hidden=256 --heads=4 --kv_heads=2 --head_dim=64 --intermediate=512 \
    --vocab=512 --dtype=f32 --tied --seed=9 >/dev/null || fail "$arch checkpoint"
  cp "$MODEL/tokenizer.model" "$GEM/"
  algos="gptq awq smoothquant"
  [ "$arch" = gemma2 ] && algos=gptq  # the norms and folds are gemma3's too
  for algo in $algos; do
    "$BIN" --model "$GEM" --scheme w_int4_per_group_sym --algorithm "$algo" --calib "$TEXT" \
      --calib-samples 8 --calib-seq-len 128 --eval "$TEXT" --eval-windows 8 --n-ctx 128 \
      --format hf-quark --output "$TMP/$arch-$algo" --data-dir "$TMP/data" --threads 2 -o json \
      >"$TMP/$arch-$algo.json" 2>"$TMP/$arch-$algo.err" ||
      { cat "$TMP/$arch-$algo.err"; fail "$arch $algo"; }
  done
  "$BIN" --model "$GEM" --scheme w_fp8_a_fp8 --no-eval --format hf-quark \
    --target vllm --output "$TMP/$arch-refused" --data-dir "$TMP/data" \
    >"$TMP/$arch-refused.out" 2>"$TMP/$arch-refused.err"
  rc=$?
  [ "$rc" -eq 3 ] || { cat "$TMP/$arch-refused.out" "$TMP/$arch-refused.err"; fail "$arch refusals exit $rc"; }
  grep -q "spec.export.target: target vllm: quantd's vLLM checkers" "$TMP/$arch-refused.out" \
    "$TMP/$arch-refused.err" || { cat "$TMP/$arch-refused.err"; fail "$arch: no vllm refusal"; }
done
"$PY" - "$TMP" <<'PYEOF' || fail "gemma checks"
import json, math, os, struct, sys
tmp = sys.argv[1]
for arch, algos in (("gemma2", ("gptq",)), ("gemma3", ("gptq", "awq", "smoothquant"))):
    for algo in algos:
        lines = [l for l in open(os.path.join(tmp, "%s-%s.json" % (arch, algo))).read().splitlines()
                 if l.strip()]
        job = json.loads(lines[-1])
        assert job["state"] == "SUCCEEDED", (arch, algo, job.get("error"))
        m = job["result"]["metrics"]
        fp, qp = m["floatPerplexity"]["perplexity"], m["quantizedPerplexity"]["perplexity"]
        assert math.isfinite(qp) and abs(qp / fp - 1) < 0.05, (arch, algo, fp, qp)
        assert not job["result"]["artifacts"][0].get("consumers"), job["result"]["artifacts"]
        raw = open(os.path.join(tmp, "%s-%s" % (arch, algo), "model.safetensors"), "rb").read()
        header = json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])
        assert "model.layers.1.post_feedforward_layernorm.weight" in header, sorted(header)
        assert ("model.layers.0.self_attn.q_norm.weight" in header) == (arch == "gemma3")
        print("%s %s ok: float ppl %.4f, quantized %.4f" % (arch, algo, fp, qp))
PYEOF
echo PASS
