// llama.cpp peer check of quantd's quantized GGUF exports: for each model of
// gguf_export_peer_models' manifest, llama.cpp (node-llama-cpp's prebuilt CPU
// build) computes the perplexity of the same evaluation windows as the engine
// ([BOS] + text tokens, every text token scored, ppl = exp(mean NLL)), which
// must agree with the engine's within TOLERANCE (relative, default 0.005);
// where the manifest has a greedy continuation, llama.cpp's greedy tokens
// must be identical. A model may carry its own windows (models of different
// tokenizers); otherwise the manifest's are used.
//
//   node gguf_export_peer_check.mjs MANIFEST [TOLERANCE [RESULTS.json]]
//
// RESULTS.json, when named, receives {name: llama.cpp ppl} of every model.
import {readFileSync, writeFileSync} from "node:fs";
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const [manifestPath, toleranceArg, resultsPath] = process.argv.slice(2);
const tolerance = Number(toleranceArg ?? "0.005");
const manifest = JSON.parse(readFileSync(manifestPath, "utf8"));
const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});

function argmax(probabilities) {
  let best = -1, bestP = -1;
  for (const [token, p] of probabilities) {
    if (p > bestP) {
      bestP = p;
      best = token;
    }
  }
  return best;
}

let passed = 0, failed = 0;
const results = {};
for (const entry of manifest.models) {
  const model = await llama.loadModel({modelPath: entry.gguf});
  // F32 K/V so the comparison is of the weights, not of the cache's rounding.
  // One thread: ggml's workers spin between the per-token sampling calls and
  // starve them; on a 2-core machine that made scoring ~7x slower.
  const context = await model.createContext({
    contextSize: 256, batchSize: 256, flashAttention: false, threads: 1,
    experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32"});
  const sequence = context.getSequence();
  let nll = 0, tokens = 0;
  for (const window of entry.windows ?? manifest.windows) {
    await sequence.clearHistory();
    const inputs = window.slice(0, -1).map(t => [t, {generateNext: {probabilities: true}}]);
    const results = await sequence.controlledEvaluate(inputs);
    results.forEach((result, pos) => {
      const p = result.next.probabilities.get(window[pos + 1]) ?? 0;
      nll -= Math.log(p);
      ++tokens;
    });
  }
  const ppl = Math.exp(nll / tokens);
  results[entry.name] = ppl;
  const rel = Math.abs(ppl / entry.engine_ppl - 1);
  let ok = rel <= tolerance && tokens === entry.tokens;
  let line = `${entry.name}: llama.cpp ppl ${ppl.toFixed(5)}, engine ${entry.engine_ppl.toFixed(5)} ` +
             `(${(100 * rel).toFixed(3)}% apart, tolerance ${(100 * tolerance).toFixed(2)}%; ` +
             `${tokens} tokens)` +
             (entry.exact_code_tensors === undefined ? "" :
              `, ${entry.exact_code_tensors} weights with the job's codes`);
  if (entry.greedy) {
    // Greedy decoding is identical when, along the engine's greedy path,
    // llama.cpp's argmax after every prefix is the engine's next token; one
    // teacher-forced evaluation checks all of them.
    await sequence.clearHistory();
    const path = [...entry.greedy.prompt, ...entry.greedy.tokens];
    const start = entry.greedy.prompt.length - 1;
    const inputs = path.slice(0, -1).map((t, i) =>
        [t, i >= start ? {generateNext: {probabilities: true}} : {}]);
    const results = await sequence.controlledEvaluate(inputs);
    const got = [];
    for (let i = start; i < path.length - 1; ++i) got.push(argmax(results[i].next.probabilities));
    const same = got.every((t, i) => t === entry.greedy.tokens[i]);
    ok = ok && same;
    line += `; greedy ${got.length} tokens ${same ? "identical" : "differ: " + got.join(",") +
            " vs engine " + entry.greedy.tokens.join(",")}`;
  }
  console.log(`${ok ? "PASS" : "FAIL"} ${line}`);
  if (ok) ++passed; else ++failed;
  await context.dispose();
  await model.dispose();
}
console.log(`${passed} passed, ${failed} failed`);
if (resultsPath) writeFileSync(resultsPath, JSON.stringify(results));
process.exit(failed === 0 && passed === manifest.models.length ? 0 : 1);
