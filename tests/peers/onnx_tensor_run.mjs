// Runs an ONNX model on raw tensors in onnxruntime-node (its bundled CPU
// library), for checks of quantd's onnx export of TorchScript models
// (tests/vision/onnx_export_test.py).
//
//   node onnx_tensor_run.mjs MANIFEST
//
// MANIFEST: {"model": path, "level": "basic" | "all" (graph optimization),
// "inputs": {name: {"file", "dims", "type": "float32" | "int64"}},
// "output_file": path}. The model's first output goes to output_file
// (float32, little-endian); stdout gets {"ok": true, "dims": [...]}, or
// {"ok": false, "error": first line} when onnxruntime refuses the model.
import {readFileSync, writeFileSync} from "node:fs";
import * as ort from "onnxruntime-node";

const manifest = JSON.parse(readFileSync(process.argv[2], "utf8"));
const arrays = {float32: Float32Array, int64: BigInt64Array};
try {
  const session = await ort.InferenceSession.create(manifest.model, {
    executionProviders: ["cpu"],
    graphOptimizationLevel: manifest.level ?? "all",
  });
  const feeds = {};
  for (const [name, t] of Object.entries(manifest.inputs)) {
    const bytes = readFileSync(t.file);
    const data = new arrays[t.type](bytes.buffer, bytes.byteOffset,
                                    bytes.byteLength / arrays[t.type].BYTES_PER_ELEMENT);
    feeds[name] = new ort.Tensor(t.type, data.slice(), t.dims);
  }
  const out = (await session.run(feeds))[session.outputNames[0]];
  if (out.type !== "float32") throw new Error(`output of type ${out.type}, not float32`);
  writeFileSync(manifest.output_file, Buffer.from(out.data.buffer, out.data.byteOffset, out.data.byteLength));
  console.log(JSON.stringify({ok: true, dims: out.dims}));
  await session.release();
} catch (e) {
  console.log(JSON.stringify({ok: false, error: String(e.message ?? e).split("\n")[0]}));
}
