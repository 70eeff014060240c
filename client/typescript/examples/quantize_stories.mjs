#!/usr/bin/env node
// Quantizes the bundled stories260K model with quantd and prints the result.
//
//   bash client/typescript/setup.sh      # once: npm ci, generate, tsc
//   node client/typescript/examples/quantize_stories.mjs --server 127.0.0.1:50051 --eval-windows 20
//
// Progress goes to stderr; the summary (or, with --json, the final job as one
// line of proto3 JSON) to stdout. Exit status: 0 SUCCEEDED, 1 the job FAILED or was
// CANCELLED, 3 quantd refused the request.
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

import { Client, JobSchema, JobState, QuantdError, Stage, toJsonString } from "../dist/index.js";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
const fileUri = (p) => (p.includes("://") ? p : `file://${path.resolve(p)}`);

const { values: args } = parseArgs({
  options: {
    server: { type: "string", default: process.env.QUANTD_SERVER || "127.0.0.1:50051" },
    token: { type: "string", default: process.env.QUANTD_TOKEN || "" },
    "tls-ca": { type: "string" },
    "tls-cert": { type: "string" },
    "tls-key": { type: "string" },
    model: { type: "string", default: path.join(repo, "models", "stories260K") },
    scheme: { type: "string", default: "w_int8_per_channel_sym" },
    eval: { type: "string", default: path.join(repo, "tests", "data", "tinystories-sample.txt") },
    "eval-windows": { type: "string", default: "20" },
    output: { type: "string" },
    label: { type: "string", multiple: true, default: [] },
    json: { type: "boolean", default: false },
  },
});

const tls =
  args["tls-ca"] || args["tls-cert"]
    ? { caFile: args["tls-ca"], certFile: args["tls-cert"], keyFile: args["tls-key"] }
    : false;
const spec = {
  modelUri: fileUri(args.model),
  quantization: { scheme: args.scheme },
  evaluation: {
    datasetUri: fileUri(args.eval),
    nCtx: 256,
    maxWindows: Number(args["eval-windows"]),
  },
  labels: Object.fromEntries(
    args.label.map((kv) => {
      if (!kv.includes("=")) {
        console.error(`error: --label wants KEY=VALUE, got ${JSON.stringify(kv)}`);
        process.exit(2);
      }
      return [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)];
    }),
  ),
};
if (args.output) spec.export = { outputUri: fileUri(args.output) };

const client = new Client(args.server, { token: args.token || undefined, tls });
let job;
try {
  job = await client.submit(spec);
  console.error(`submitted ${job.name}`);
  job = await client.wait(job.name, {
    onProgress: (p) => {
      const block = p.block ? ` block ${p.block}/${p.blockCount}` : "";
      console.error(`[${p.percent.toFixed(1).padStart(5)}%] ${Stage[p.stage].toLowerCase()}${block} ${p.message}`);
    },
  });
} catch (e) {
  if (!(e instanceof QuantdError)) throw e;
  console.error(`error: ${e.toString()}`);
  client.close();
  process.exit(3);
}
client.close();

if (args.json) {
  console.log(toJsonString(JobSchema, job));
} else {
  console.log(`${job.name}: ${JobState[job.state]}`);
  const m = job.result?.metrics;
  if (m?.floatPerplexity) {
    console.log(`perplexity float:     ${m.floatPerplexity.perplexity.toFixed(4)}`);
    console.log(`perplexity quantized: ${m.quantizedPerplexity.perplexity.toFixed(4)}`);
  }
  for (const a of job.result?.artifacts ?? []) console.log(`artifact: ${a.uri} (${a.bytes} bytes)`);
  if (job.state !== JobState.SUCCEEDED) console.error(`error: ${client.errorOf(job)}`);
}
process.exit(job.state === JobState.SUCCEEDED ? 0 : 1);
