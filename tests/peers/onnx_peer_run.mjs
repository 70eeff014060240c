// Runs onnxruntime-node (its bundled CPU library) for the onnxruntime peer
// check: onnx_export_peer_models writes the models and a manifest, calls this
// script, then judges what it wrote (see onnx_export_peer_models.cc).
//
// For each run of the manifest, on the manifest's token ids: the model as
// exported ("onnx": its logits only) and its probe copy ("probe_onnx": the
// same graph with intermediate values as extra graph outputs, every output
// written). Each output goes to RUN_DIR/<i>.f32 (float32, little-endian) and
// RUN_DIR/result.json lists them: {"ok": true, "export_logits": {file, dims},
// "outputs": {name: {file, dims}}}, or {"ok": false, "error": first line,
// "missing_kernel": bool} when onnxruntime refuses the model.
//
// Graph optimizations stay at "basic": onnxruntime's extended QDQ fusions
// rewrite DequantizeLinear -> MatMul -> QuantizeLinear into QLinearMatMul,
// which has no FP8 kernel (the FP8 model is then refused), and with them the
// int8 model's logits move by ~10% of the largest logit (measured with
// onnxruntime-node 1.30.0): they would test onnxruntime's fused int8
// kernels, not the export.
//
//   node onnx_peer_run.mjs MANIFEST
import {mkdirSync, readFileSync, writeFileSync} from "node:fs";
import * as ort from "onnxruntime-node";

const [manifestPath] = process.argv.slice(2);
const manifest = JSON.parse(readFileSync(manifestPath, "utf8"));
const batch = manifest.ids.length, seq = manifest.ids[0].length;
const ids = new ort.Tensor("int64", BigInt64Array.from(manifest.ids.flat().map(BigInt)), [batch, seq]);

async function run(path) {
  const session = await ort.InferenceSession.create(path, {
    executionProviders: ["cpu"], graphOptimizationLevel: "basic"});
  try {
    return await session.run({input_ids: ids});
  } finally {
    await session.release();
  }
}

function write(dir, file, tensor) {
  if (tensor.type !== "float32") throw new Error(`output of type ${tensor.type}, not float32`);
  const d = tensor.data;
  writeFileSync(`${dir}/${file}`, Buffer.from(d.buffer, d.byteOffset, d.byteLength));
  return {file, dims: tensor.dims};
}

for (const r of manifest.runs) {
  mkdirSync(r.dir, {recursive: true});
  let result;
  try {
    const exported = await run(r.onnx);
    const probe = await run(r.probe_onnx);
    result = {ok: true, export_logits: write(r.dir, "export_logits.f32", exported.logits), outputs: {}};
    Object.keys(probe).forEach((name, i) => {
      result.outputs[name] = write(r.dir, `${i}.f32`, probe[name]);
    });
  } catch (e) {
    const msg = String(e.message ?? e).split("\n")[0];
    result = {ok: false, error: msg,
              missing_kernel: /NOT_IMPLEMENTED|Could not find an implementation|not implemented/i.test(msg)};
  }
  writeFileSync(`${r.dir}/result.json`, JSON.stringify(result));
  console.log(`onnxruntime ${r.name}: ${result.ok ? Object.keys(result.outputs).length + " outputs" : result.error}`);
}
