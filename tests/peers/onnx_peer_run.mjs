// Runs onnxruntime-node (its bundled CPU library) for the onnxruntime peer
// check: onnx_export_peer_models writes the models and a manifest, calls this
// script, then judges what it wrote (see onnx_export_peer_models.cc).
//
// Every model has the decoder-with-past interface (input_ids,
// attention_mask, position_ids, past_key_values.N.key/value -> logits,
// present.N.key/value). For each run of the manifest:
//  - on the manifest's token ids, with an empty cache, at graph optimization
//    level "basic": the model as exported ("onnx": its logits) and its probe
//    copy ("probe_onnx": the same graph with intermediate values as extra
//    graph outputs, every output written);
//  - for a run with "generation" (the exports themselves, not the mutated
//    copies), at onnxruntime's default level ("all"), which is what users
//    run: the same logits again ("default_logits"); greedy decoding of
//    `steps` tokens from `prompt`, the prompt in one call and each next
//    token alone with the cache ("generated": tokens, "generated_logits":
//    the logits each token was chosen from); and `padded`: its prompts
//    left-padded into one batch, decoded greedily `steps` tokens together,
//    and each prompt decoded alone ("padded_batch_logits" [2, steps + 1, V]
//    and "padded_alone_logits" of the same shape: for each prompt, the
//    logits at its last prompt position, then at each generated token).
//    The graph onnxruntime runs at that level is saved as
//    RUN_DIR/optimized.onnx (which fusions it applied).
// Each output goes to RUN_DIR/<name>.f32 (float32, little-endian) and
// RUN_DIR/result.json lists them: {"ok": true, "export_logits": {file, dims},
// "outputs": {name: {file, dims}}, ...}, or {"ok": false, "error": first
// line, "missing_kernel": bool} when onnxruntime refuses the model.
//
//   node onnx_peer_run.mjs MANIFEST
import {mkdirSync, readFileSync, writeFileSync} from "node:fs";
import * as ort from "onnxruntime-node";

const [manifestPath] = process.argv.slice(2);
const manifest = JSON.parse(readFileSync(manifestPath, "utf8"));
const i64 = (rows) =>
  new ort.Tensor("int64", BigInt64Array.from(rows.flat().map(BigInt)), [rows.length, rows[0].length]);

async function open(path, level, saveAs) {
  const options = {executionProviders: ["cpu"], graphOptimizationLevel: level};
  if (saveAs) options.optimizedModelFilePath = saveAs;
  return ort.InferenceSession.create(path, options);
}

// One call: `ids` [B, S] new tokens, `mask` [B, past + S], `positions`
// [B, S], `past` the previous call's present tensors (null: empty cache).
async function step(session, ids, mask, positions, past) {
  const feeds = {input_ids: i64(ids), attention_mask: i64(mask), position_ids: i64(positions)};
  for (const name of session.inputNames) {
    if (!name.startsWith("past_key_values.")) continue;
    const present = "present." + name.slice("past_key_values.".length);
    if (past) {
      feeds[name] = past[present];
    } else {
      const meta = session.inputMetadata.find((m) => m.name === name);
      const [, heads, , dim] = meta.shape;
      feeds[name] = new ort.Tensor("float32", new Float32Array(0), [ids.length, heads, 0, dim]);
    }
  }
  return session.run(feeds);
}

const range = (n, from = 0) => Array.from({length: n}, (_, i) => from + i);

// The logits row of sample `b` at position `t` of a [B, S, V] output.
function row(logits, b, t) {
  const [, s, v] = logits.dims;
  return logits.data.subarray((b * s + t) * v, (b * s + t + 1) * v);
}

function argmax(values) {
  let best = 0;
  for (let i = 1; i < values.length; ++i) if (values[i] > values[best]) best = i;
  return best;
}

// Greedy decoding of `steps` tokens for left-padded `prompts` in one batch:
// the logits each token was chosen from, [B][steps] rows, and the tokens.
async function greedy(session, prompts, pad, steps) {
  const width = Math.max(...prompts.map((p) => p.length));
  let ids = prompts.map((p) => [...Array(width - p.length).fill(pad), ...p]);
  let mask = prompts.map((p) => [...Array(width - p.length).fill(0), ...Array(p.length).fill(1)]);
  let positions = prompts.map((p) => [...Array(width - p.length).fill(0), ...range(p.length)]);
  let next = prompts.map((p) => p.length);
  let past = null;
  const rows = prompts.map(() => []), tokens = prompts.map(() => []);
  for (let k = 0; k < steps; ++k) {
    const out = await step(session, ids, mask, positions, past);
    past = out;
    const last = out.logits.dims[1] - 1;
    ids = [];
    positions = [];
    prompts.forEach((_, b) => {
      const r = Float32Array.from(row(out.logits, b, last));
      rows[b].push(r);
      tokens[b].push(argmax(r));
      ids.push([tokens[b][k]]);
      positions.push([next[b]++]);
      mask[b].push(1);
    });
  }
  return {rows, tokens};
}

function write(dir, file, tensor) {
  if (tensor.type !== "float32") throw new Error(`output of type ${tensor.type}, not float32`);
  const d = tensor.data;
  writeFileSync(`${dir}/${file}`, Buffer.from(d.buffer, d.byteOffset, d.byteLength));
  return {file, dims: tensor.dims};
}

function writeRows(dir, file, rows) {
  const v = rows[0][0].length;
  const flat = new Float32Array(rows.length * rows[0].length * v);
  rows.forEach((r, b) => r.forEach((x, t) => flat.set(x, (b * r.length + t) * v)));
  return write(dir, file, new ort.Tensor("float32", flat, [rows.length, rows[0].length, v]));
}

async function runOnce(path, level, fn, saveAs) {
  const session = await open(path, level, saveAs);
  try {
    return await fn(session);
  } finally {
    await session.release();
  }
}

const ids = manifest.ids;
const fullMask = ids.map((r) => r.map(() => 1));
const fullPositions = ids.map((r) => range(r.length));
const full = (session) => step(session, ids, fullMask, fullPositions, null);

for (const r of manifest.runs) {
  mkdirSync(r.dir, {recursive: true});
  let result;
  try {
    const exported = await runOnce(r.onnx, "basic", full);
    const probe = await runOnce(r.probe_onnx, "basic", full);
    result = {ok: true, export_logits: write(r.dir, "export_logits.f32", exported.logits), outputs: {}};
    Object.keys(probe).forEach((name, i) => {
      if (!name.startsWith("present.")) result.outputs[name] = write(r.dir, `${i}.f32`, probe[name]);
    });
    if (r.generation) {
      const g = r.generation;
      await runOnce(r.onnx, "all", async (session) => {
        result.default_logits = write(r.dir, "default_logits.f32", (await full(session)).logits);
        const gen = await greedy(session, [g.prompt], g.pad, g.steps);
        result.generated = gen.tokens[0];
        result.generated_logits = writeRows(r.dir, "generated_logits.f32", gen.rows);
        const batch = await greedy(session, g.padded, g.pad, g.padded_steps);
        const alone = [];
        for (const p of g.padded) alone.push((await greedy(session, [p], g.pad, g.padded_steps)).rows[0]);
        result.padded_batch_logits = writeRows(r.dir, "padded_batch_logits.f32", batch.rows);
        result.padded_alone_logits = writeRows(r.dir, "padded_alone_logits.f32", alone);
      }, `${r.dir}/optimized.onnx`);
    }
  } catch (e) {
    const msg = String(e.message ?? e).split("\n")[0];
    result = {ok: false, error: msg,
              missing_kernel: /NOT_IMPLEMENTED|Could not find an implementation|not implemented/i.test(msg)};
  }
  writeFileSync(`${r.dir}/result.json`, JSON.stringify(result));
  console.log(`onnxruntime ${r.name}: ${result.ok ? Object.keys(result.outputs).length + " outputs" : result.error}`);
}
