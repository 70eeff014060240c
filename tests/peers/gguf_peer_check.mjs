// llama.cpp peer check: runs each model of peer_models' manifest.json through
// llama.cpp (node-llama-cpp's prebuilt CPU build) and compares its next-token
// probabilities at every position with the engine's.
//
//   node gguf_peer_check.mjs MANIFEST [TOLERANCE]
// Prints one line per model and a closing "N passed, N failed" line; exits 1
// when any model disagrees by more than TOLERANCE (absolute, default 1e-3).
import {readFileSync} from "node:fs";
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const [manifestPath, toleranceArg] = process.argv.slice(2);
const tolerance = Number(toleranceArg ?? "1e-3");
const manifest = JSON.parse(readFileSync(manifestPath, "utf8"));
const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});

let passed = 0, failed = 0;
for (const entry of manifest) {
  const model = await llama.loadModel({modelPath: entry.gguf});
  // llama.cpp keeps K/V in F16 by default; F32 makes it compare the
  // forward itself rather than the cache's rounding.
  const context = await model.createContext({
    contextSize: 128, batchSize: 128, flashAttention: false,
    experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32"});
  const sequence = context.getSequence();
  const results = await sequence.controlledEvaluate(
      entry.ids.map(t => [t, {generateNext: {probabilities: true}}]));
  let maxDiff = 0, worst = "";
  results.forEach((result, pos) => {
    const expected = entry.probs[pos];
    const got = result.next.probabilities;
    for (let token = 0; token < expected.length; ++token) {
      const diff = Math.abs((got.get(token) ?? 0) - expected[token]);
      if (diff > maxDiff) {
        maxDiff = diff;
        worst = `position ${pos} token ${token}: llama.cpp ${got.get(token) ?? 0} engine ${expected[token]}`;
      }
    }
  });
  const top = entry.probs.map(row => row.indexOf(Math.max(...row)));
  const llamaTop = results.map(r => [...r.next.probabilities.entries()].reduce((a, b) => (b[1] > a[1] ? b : a))[0]);
  const sameTop = top.every((t, i) => t === llamaTop[i]);
  const ok = maxDiff <= tolerance && sameTop;
  console.log(`${ok ? "PASS" : "FAIL"} ${entry.name}: ${entry.ids.length} positions, ` +
              `max |p_llama.cpp - p_engine| = ${maxDiff.toExponential(3)} (tolerance ${tolerance}), ` +
              `top-1 ${sameTop ? "identical" : "differs"}${ok ? "" : "; worst " + worst}`);
  if (ok) ++passed; else ++failed;
  await context.dispose();
  await model.dispose();
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
