#!/usr/bin/env node
// Runs the SDK scenario (tests/sdk/SCENARIO.md) with the TypeScript client.
//
//   bash client/typescript/setup.sh      # once: npm ci, generate, tsc
//   node client/typescript/examples/sdk_scenario.mjs --server 127.0.0.1:50051 \
//       --model models/stories260K --eval tests/data/tinystories-sample.txt \
//       --output-dir /tmp/scenario --run r1
//
// Progress goes to stderr; the transcript (one JSON object) to stdout. Exit
// status 0 when the scenario ran to its end, 1 otherwise.
import path from "node:path";
import { parseArgs } from "node:util";

import { Client, JobState, QuantdError, Stage } from "../dist/index.js";

const { values: args } = parseArgs({
  options: {
    server: { type: "string" },
    model: { type: "string" },
    eval: { type: "string" },
    "output-dir": { type: "string" },
    run: { type: "string" },
    token: { type: "string" },
  },
  strict: true,
});
for (const flag of ["server", "model", "eval", "output-dir", "run"]) {
  if (!args[flag]) {
    console.error(`sdk_scenario: --${flag} is required`);
    process.exit(2);
  }
}

const fileUri = (p) => `file://${path.resolve(p)}`;

// %.Nf as C, Python and Go print it: JavaScript's toFixed rounds an exact
// tie (x * 10^N ending in .5 exactly) away from zero, they round it to even.
function fixed(x, digits) {
  const text = x.toFixed(digits);
  if (!Number.isFinite(x) || !isExactTie(Math.abs(x), digits)) return text;
  const last = Number(text.at(-1));
  if (last % 2 === 0) return text;
  // Odd after rounding away: the even neighbour is one unit toward zero.
  const unit = 10 ** -digits;
  return (Math.sign(x) * (Math.abs(Number(text)) - unit)).toFixed(digits);
}

// Whether 2 * x * 10^digits is an odd integer, on x's exact binary value.
function isExactTie(x, digits) {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, x);
  const bits = view.getBigUint64(0);
  const biased = Number((bits >> 52n) & 0x7ffn);
  let mantissa = bits & ((1n << 52n) - 1n);
  if (biased !== 0) mantissa |= 1n << 52n;
  const exponent = (biased === 0 ? 1 : biased) - 1075; // x = mantissa * 2^exponent
  const scaled = mantissa * 10n ** BigInt(digits) * 2n;
  if (exponent >= 0) return false; // an even integer
  const shift = BigInt(-exponent);
  return scaled % (1n << shift) === 0n && ((scaled >> shift) & 1n) === 1n;
}

const jobSpec = (role) => ({
  modelUri: fileUri(args.model),
  quantization: { scheme: "w_int8_per_channel_sym" },
  evaluation: { datasetUri: fileUri(args.eval), nCtx: 256, maxWindows: 4 },
  export: { outputUri: fileUri(path.join(args["output-dir"], role)) },
  labels: { "sdk-scenario": args.run, role },
});

async function refused(client) {
  const spec = {
    modelUri: fileUri(args.model),
    quantization: { scheme: "w_int9_bogus" },
    labels: { "Bad Key": "x" },
  };
  try {
    const job = await client.submit(spec, `${args.run}-refused`);
    throw new Error(`quantd accepted the bad spec as ${job.name}`);
  } catch (e) {
    if (!(e instanceof QuantdError)) throw e;
    return {
      code: e.codeName,
      reason: e.reason,
      field_violations: e.fieldViolations.map((v) => ({ field: v.field, description: v.description })),
    };
  }
}

async function watch(client, name) {
  const states = [];
  const sequences = [];
  let blockMetrics = 0;
  let results = 0;
  let lastPercent = null;
  for await (const event of client.watch(name)) {
    sequences.push(event.sequence);
    const { case: kind, value } = event.payload;
    if (kind === "state") {
      states.push(JobState[value]);
    } else if (kind === "progress") {
      lastPercent = value.percent;
      console.error(`[${value.percent.toFixed(1).padStart(5)}%] ${Stage[value.stage].toLowerCase()}`);
    } else if (kind === "blockMetrics") {
      ++blockMetrics;
    } else if (kind === "result") {
      ++results;
    }
  }
  return {
    states,
    block_metrics: blockMetrics,
    results,
    progress_last_percent: lastPercent === null ? null : fixed(lastPercent, 1),
    sequences_contiguous: sequences.every((s, i) => s === BigInt(i + 1)),
  };
}

function result(job) {
  const m = job.result.metrics;
  if (job.result.artifacts.length !== 1) {
    throw new Error(`${job.name}: ${job.result.artifacts.length} artifacts, expected 1`);
  }
  const [artifact] = job.result.artifacts;
  return {
    state: JobState[job.state],
    float_perplexity: fixed(m.floatPerplexity.perplexity, 4),
    quantized_perplexity: fixed(m.quantizedPerplexity.perplexity, 4),
    eval_windows: m.quantizedPerplexity.protocol.windows,
    eval_tokens: Number(m.quantizedPerplexity.protocol.tokens),
    blocks: m.blocks.length,
    artifact_accepted: artifact.accepted,
    artifact_files: [...artifact.files]
      .sort((x, y) => (x.path < y.path ? -1 : x.path > y.path ? 1 : 0))
      .map((f) => ({ path: f.path, bytes: Number(f.bytes), sha256: f.sha256 })),
  };
}

const client = new Client(args.server, { token: args.token || undefined });
try {
  const transcript = {};
  transcript.refused = await refused(client);
  const a = await client.submit(jobSpec("a"), `${args.run}-a`);
  transcript.submitted_state = JobState[a.state];
  const b = await client.submit(jobSpec("b"), `${args.run}-b`);
  transcript.cancelled_state = JobState[(await client.cancel(b.name)).state];
  console.error(`submitted ${a.name}, cancelled ${b.name}`);
  transcript.watch = await watch(client, a.name);
  transcript.result = result(await client.get(a.name));
  const pageSizes = [];
  const jobs = [];
  for await (const page of client.listPages({ labels: { "sdk-scenario": args.run }, pageSize: 1 })) {
    pageSizes.push(page.jobs.length);
    jobs.push(...page.jobs);
  }
  transcript.list = {
    page_sizes: pageSizes,
    roles: jobs.map((j) => j.spec?.labels.role ?? null),
    states: jobs.map((j) => JobState[j.state]),
  };
  console.log(JSON.stringify(transcript, null, 2));
} catch (e) {
  console.error(`sdk_scenario: ${e instanceof QuantdError ? e.toString() : e.stack}`);
  process.exitCode = 1;
} finally {
  client.close();
}
