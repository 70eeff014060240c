// The TypeScript client, examples/quantize_stories.mjs and
// examples/sdk_scenario.mjs against a live quantd with one local worker (run
// by quantd_client_test.sh under Bazel): golden float perplexity, artifact
// files, error details, paging, event replay, bearer tokens, mTLS and the SDK
// scenario's transcript (tests/sdk/SCENARIO.md).
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { test, after } from "node:test";

import { Client, JobSpecSchema, JobState, QuantdError, create, isLoopback } from "./dist/index.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const runfiles = process.env.RUNFILES_ROOT;
const runfile = (p) => path.join(runfiles, p);
const tmp = process.env.TEST_TMPDIR || "/tmp";
const MODEL = runfile("models/stories260K");
const EVAL_TEXT = runfile("tests/data/tinystories-sample.txt");
// Float perplexity of stories260K on the first 20 windows of 256 tokens of
// tinystories-sample.txt (the engine's golden number, see tests/e2e).
const GOLDEN_FLOAT_PPL_20_WINDOWS = 4.8374;

const sha256File = (p) => createHash("sha256").update(readFileSync(p)).digest("hex");
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function startQuantd(name, { localWorkers = 0, extraFlags = [] } = {}) {
  const dataDir = path.join(tmp, name);
  rmSync(dataDir, { recursive: true, force: true });
  mkdirSync(dataDir, { recursive: true });
  const portFile = path.join(dataDir, "port");
  const log = path.join(dataDir, "quantd.log");
  const child = spawn(
    runfile("server/quantd"),
    [
      "--listen=127.0.0.1:0",
      `--data-dir=${dataDir}`,
      `--port-file=${portFile}`,
      `--local-workers=${localWorkers}`,
      `--worker-binary=${runfile("worker/quantd-worker")}`,
      // The SDK tests name their own files and models that need not exist;
      // the URI policy itself is tested in server/ and tests/.
      `--allowed-uri-roots=file:///,${tmp}`,
      ...extraFlags,
    ],
    { stdio: ["ignore", "ignore", "ignore"] },
  );
  let exited = false;
  child.on("exit", () => (exited = true));
  const stop = async () => {
    if (exited) return;
    child.kill("SIGTERM");
    for (let i = 0; i < 400 && !exited; ++i) await sleep(50);
    if (!exited) child.kill("SIGKILL");
  };
  // Up to 10 minutes: a ceiling for a hang; a loaded machine starts slowly.
  for (let i = 0; i < 12000; ++i) {
    if (existsSync(portFile)) {
      const address = readFileSync(portFile, "utf8").split("\n")[0];
      if (address) return { address, dataDir, stop, log };
    }
    if (exited) break;
    await sleep(50);
  }
  await stop();
  throw new Error(`quantd did not start (see ${log})`);
}

function runExample(address, ...args) {
  return runProgram("quantize_stories.mjs", address, ...args);
}

function runProgram(program, address, ...args) {
  return spawnSync(
    process.execPath,
    [path.join(here, "examples", program), "--server", address, ...args],
    // A ceiling for a hang, not a budget: the example runs a whole job,
    // which takes minutes on a loaded machine.
    { encoding: "utf8", timeout: 1_800_000 },
  );
}

const quantd = await startQuantd("ts_sdk", { localWorkers: 1 });
const client = new Client(quantd.address);
after(async () => {
  client.close();
  await quantd.stop();
});

test("src/gen is what generate.sh makes from the .proto files under test", () => {
  // setup.sh regenerates on newer mtimes; this catches a .proto restored
  // with an old mtime (cp -p, rsync -a) that the client would miss.
  const fresh = path.join(tmp, "ts_gen_check");
  rmSync(fresh, { recursive: true, force: true });
  const r = spawnSync("bash", [path.join(here, "generate.sh"), fresh, runfile("proto")], { encoding: "utf8" });
  assert.equal(r.status, 0, r.stderr);
  const files = (dir) =>
    readdirSync(dir, { recursive: true })
      .filter((f) => f.endsWith(".ts"))
      .sort();
  const used = path.join(here, "src", "gen");
  assert.deepEqual(files(used), files(fresh));
  assert.ok(files(fresh).includes(path.join("quantd", "v1", "job_pb.ts")));
  for (const f of files(fresh)) {
    assert.equal(readFileSync(path.join(used, f), "utf8"), readFileSync(path.join(fresh, f), "utf8"),
                 `src/gen/${f} is stale: rm -r client/typescript/src/gen, then run setup.sh`);
  }
});

test("the example quantizes stories260K with the golden float perplexity", async () => {
  const out = path.join(quantd.dataDir, "example_out");
  const r = runExample(quantd.address, "--model", MODEL, "--eval", EVAL_TEXT, "--eval-windows", "20",
                       "--output", out, "--label", "suite=ts-example", "--json");
  assert.equal(r.status, 0, r.stderr + r.stdout);
  assert.match(r.stderr, /quantize block 5\/5/);
  const job = JSON.parse(r.stdout.trim().split("\n").pop());
  assert.equal(job.state, "SUCCEEDED");
  assert.equal(job.attempt, 1);
  assert.deepEqual(job.spec.labels, { suite: "ts-example" });

  const m = job.result.metrics;
  assert.ok(Math.abs(m.floatPerplexity.perplexity - GOLDEN_FLOAT_PPL_20_WINDOWS) < 1e-3,
            `float perplexity ${m.floatPerplexity.perplexity}`);
  assert.equal(m.floatPerplexity.protocol.nCtx, 256);
  assert.equal(m.floatPerplexity.protocol.windows, 20);
  // int64 fields are strings in proto3 JSON.
  assert.equal(m.floatPerplexity.protocol.tokens, "5100");
  assert.ok(Math.abs(m.quantizedPerplexity.perplexity / m.floatPerplexity.perplexity - 1) < 0.02);
  assert.equal(m.blocks.length, 5);

  assert.equal(job.result.artifacts.length, 1);
  const artifact = job.result.artifacts[0];
  assert.equal(artifact.uri, `file://${out}`);
  assert.equal(artifact.accepted, true);
  assert.equal(artifact.sha256, sha256File(path.join(out, "model.safetensors")));
  const paths = artifact.files.map((f) => f.path);
  for (const p of ["model.safetensors", "config.json", "tokenizer.model"]) assert.ok(paths.includes(p), p);
  let total = 0;
  for (const f of artifact.files) {
    assert.equal(f.sha256, sha256File(path.join(out, f.path)), f.path);
    assert.equal(Number(f.bytes), statSync(path.join(out, f.path)).size, f.path);
    total += Number(f.bytes);
  }
  assert.equal(Number(artifact.bytes), total);
  assert.ok("quantization_config" in JSON.parse(readFileSync(path.join(out, "config.json"), "utf8")));

  // The same job through the client: get (bare id too), list, replay, cancel.
  const got = await client.get(job.name);
  assert.equal(got.state, JobState.SUCCEEDED);
  assert.equal(got.result.metrics.floatPerplexity.protocol.tokens, 5100n);
  assert.equal((await client.get(job.name.slice("jobs/".length))).name, job.name);
  const listed = [];
  for await (const j of client.list({ labels: { suite: "ts-example" } })) listed.push(j.name);
  assert.deepEqual(listed, [job.name]);
  // list() is BASIC unless asked: no per-block metrics; FULL has them.
  for await (const j of client.list({ labels: { suite: "ts-example" } })) {
    assert.equal(j.result.metrics.blocks.length, 0);
    assert.equal(j.result.artifacts[0].sha256, artifact.sha256);
  }
  for await (const j of client.list({ labels: { suite: "ts-example" }, view: "full" })) {
    assert.equal(j.result.metrics.blocks.length, 5);
  }
  const failed = [];
  for await (const j of client.list({ state: "failed", labels: { suite: "ts-example" } })) failed.push(j);
  assert.deepEqual(failed, []);

  const events = [];
  const progress = [];
  const again = await client.wait(job.name, { onEvent: (e) => events.push(e), onProgress: (p) => progress.push(p) });
  assert.equal(again.state, JobState.SUCCEEDED);
  assert.deepEqual(events.map((e) => e.sequence), events.map((_, i) => BigInt(i + 1)));
  assert.equal(events.filter((e) => e.payload.case === "blockMetrics").length, 5);
  assert.equal(progress.length, events.filter((e) => e.payload.case === "progress").length);
  assert.equal(progress.at(-1).percent, 100);
  assert.deepEqual(events.at(-1).payload, { case: "state", value: JobState.SUCCEEDED });
  const tail = [];
  for await (const e of client.watch(job.name, events.at(-3).sequence)) tail.push(e.sequence);
  assert.deepEqual(tail, events.slice(-2).map((e) => e.sequence));

  await assert.rejects(client.cancel(job.name), (e) => {
    assert.ok(e instanceof QuantdError);
    assert.equal(e.codeName, "FAILED_PRECONDITION");
    assert.equal(e.reason, "JOB_ALREADY_FINISHED");
    return true;
  });
});

test("the SDK scenario's transcript (tests/sdk/SCENARIO.md)", async () => {
  const out = path.join(quantd.dataDir, "scenario_out");
  const run = "ts-scenario";
  const r = runProgram("sdk_scenario.mjs", quantd.address, "--model", MODEL, "--eval", EVAL_TEXT,
                       "--output-dir", out, "--run", run);
  assert.equal(r.status, 0, r.stderr + r.stdout);
  const t = JSON.parse(r.stdout);
  assert.deepEqual(Object.keys(t).sort(),
                   ["cancelled_state", "list", "refused", "result", "submitted_state", "watch"]);

  assert.equal(t.refused.code, "INVALID_ARGUMENT");
  // Two bad fields: quantd's ErrorInfo reason is the generic one, and the
  // violations come in its order (labels before the scheme).
  assert.equal(t.refused.reason, "INVALID_ARGUMENT");
  const [label, scheme, ...rest] = t.refused.field_violations;
  assert.deepEqual(rest, []);
  assert.deepEqual(label, {
    field: 'spec.labels["Bad Key"]',
    description: "a label key starts with a lowercase letter or a digit",
  });
  assert.equal(scheme.field, "spec.quantization.scheme");
  assert.match(scheme.description, /^unknown quantization scheme 'w_int9_bogus'; known: .*w_int8_per_channel_sym/);

  assert.equal(t.submitted_state, "QUEUED");
  assert.equal(t.cancelled_state, "CANCELLED");
  assert.equal(t.watch.states.at(-1), "SUCCEEDED");
  assert.ok(t.watch.states.includes("RUNNING"), t.watch.states.join());
  assert.equal(t.watch.block_metrics, 5);
  assert.equal(t.watch.results, 1);
  assert.equal(t.watch.progress_last_percent, "100.0");
  assert.equal(t.watch.sequences_contiguous, true);

  const res = t.result;
  assert.equal(res.state, "SUCCEEDED");
  assert.match(res.float_perplexity, /^\d+\.\d{4}$/);
  assert.match(res.quantized_perplexity, /^\d+\.\d{4}$/);
  assert.ok(Math.abs(Number(res.quantized_perplexity) / Number(res.float_perplexity) - 1) < 0.02,
            `${res.float_perplexity} ${res.quantized_perplexity}`);
  assert.equal(res.eval_windows, 4);
  assert.equal(res.eval_tokens, 4 * 255);
  assert.equal(res.blocks, 5);
  assert.equal(res.artifact_accepted, true);
  const paths = res.artifact_files.map((f) => f.path);
  assert.deepEqual(paths, [...paths].sort());
  for (const p of ["model.safetensors", "config.json", "tokenizer.model"]) assert.ok(paths.includes(p), p);
  for (const f of res.artifact_files) {
    const file = path.join(out, "a", f.path);
    assert.equal(f.sha256, sha256File(file), f.path);
    assert.equal(f.bytes, statSync(file).size, f.path);
  }
  // Job B was cancelled before it ran: nothing exported.
  assert.equal(existsSync(path.join(out, "b", "model.safetensors")), false);

  assert.deepEqual(t.list, { page_sizes: [1, 1], roles: ["b", "a"], states: ["CANCELLED", "SUCCEEDED"] });
});

test("a JobSpec is checked before it is sent", async () => {
  await assert.rejects(client.submit({ modelUri: "file:///m", modelUrl: "file:///m" }), (e) => {
    assert.ok(e instanceof TypeError);
    assert.match(e.message, /invalid JobSpec.*modelUrl/);
    return true;
  });
  await assert.rejects(client.submit({ modelUri: "file:///m", export: { formats: ["NOT_A_FORMAT"] } }),
                       /invalid JobSpec/);
  await assert.rejects(client.get("x".repeat(1000)), TypeError);
  await assert.rejects(client.list({ state: "DONE" }).next(), /not a quantd\.v1\.JobState/);
  // A message built with create() goes as it is.
  const spec = create(JobSpecSchema, {
    modelUri: `file://${MODEL}`,
    quantization: { source: { case: "scheme", value: "w_int9_bogus" } },
    evaluation: { disabled: true },
  });
  await assert.rejects(client.submit(spec), (e) => {
    assert.deepEqual(e.fieldViolations.map((v) => v.field), ["spec.quantization.scheme"]);
    return true;
  });
});

test("a bad preset is INVALID_ARGUMENT with the field violation", async () => {
  const spec = { modelUri: `file://${MODEL}`, quantization: { scheme: "w_int9_bogus" } };
  await assert.rejects(client.submit(spec), (e) => {
    assert.ok(e instanceof QuantdError);
    assert.equal(e.codeName, "INVALID_ARGUMENT");
    assert.equal(e.reason, "INVALID_JOB_SPEC");
    assert.equal(e.domain, "quantd");
    assert.equal(e.fieldViolations.length, 1);
    assert.equal(e.fieldViolations[0].field, "spec.quantization.scheme");
    // The description's wording is the engine's; it names the bad value.
    assert.match(e.fieldViolations[0].description, /'w_int9_bogus'/);
    return true;
  });
  const r = runExample(quantd.address, "--model", MODEL, "--scheme", "w_int9_bogus");
  assert.equal(r.status, 3, r.stderr);
  assert.match(r.stderr, /INVALID_ARGUMENT/);
  assert.match(r.stderr, /\n  spec\.quantization\.scheme: .*'w_int9_bogus'/);
});

test("list pages, idempotent submit and a negative page size", async () => {
  const spec = {
    modelUri: "file:///nonexistent/model",
    quantization: { scheme: "w_int8_per_tensor_sym" },
    evaluation: { disabled: true },
    labels: { suite: "ts-paging" },
  };
  const names = [];
  for (let i = 0; i < 3; ++i) names.push((await client.submit(spec, `ts-paging-${i}`)).name);
  assert.equal(new Set(names).size, 3);
  assert.equal((await client.submit(spec, "ts-paging-1")).name, names[1]);
  await assert.rejects(client.submit({ ...spec, device: "cpu" }, "ts-paging-1"), (e) => {
    assert.equal(e.codeName, "ALREADY_EXISTS");
    assert.equal(e.reason, "REQUEST_ID_REUSED");
    return true;
  });
  await client.submit(spec, "ts-paging-validate", { validateOnly: true });

  const newestFirst = [];
  for await (const j of client.list({ labels: { suite: "ts-paging" }, pageSize: 1 })) newestFirst.push(j.name);
  assert.deepEqual(newestFirst, [...names].reverse());
  const oldestFirst = [];
  for await (const j of client.list({ labels: { suite: "ts-paging" }, pageSize: 2, orderBy: "create_time asc" }))
    oldestFirst.push(j.name);
  assert.deepEqual(oldestFirst, names);
  await assert.rejects(client.list({ pageSize: -1 }).next(), (e) => {
    assert.equal(e.codeName, "INVALID_ARGUMENT");
    assert.deepEqual(e.fieldViolations.map((v) => v.field), ["page_size"]);
    return true;
  });
});

test("calls need a valid bearer token", async () => {
  const token = "ts-sdk-test-token-5678";
  const dir = path.join(tmp, "ts_sdk_auth_tokens");
  mkdirSync(dir, { recursive: true });
  const tokens = path.join(dir, "tokens");
  writeFileSync(tokens, `${createHash("sha256").update(token).digest("hex")} acme submitter\n`);
  const q = await startQuantd("ts_sdk_auth", { extraFlags: [`--auth-tokens=${tokens}`] });
  const spec = { modelUri: `file://${MODEL}`, quantization: { scheme: "w_int8_per_tensor_sym" } };
  const anonymous = new Client(q.address);
  const wrong = new Client(q.address, { token: "wrong" });
  const good = new Client(q.address, { token });
  try {
    await assert.rejects(anonymous.list().next(), (e) => {
      assert.equal(e.codeName, "UNAUTHENTICATED");
      assert.equal(e.reason, "MISSING_CREDENTIALS");
      return true;
    });
    await assert.rejects(wrong.submit(spec), (e) => {
      assert.equal(e.codeName, "UNAUTHENTICATED");
      assert.equal(e.reason, "INVALID_TOKEN");
      return true;
    });
    const job = await good.submit(spec);
    assert.equal(job.tenant, "acme");
    const listed = [];
    for await (const j of good.list()) listed.push(j.name);
    assert.deepEqual(listed, [job.name]);
    assert.equal((await good.cancel(job.name)).state, JobState.CANCELLED);
  } finally {
    for (const c of [anonymous, wrong, good]) c.close();
    await q.stop();
  }
});

// openssl: a CA, a server certificate for 127.0.0.1 and localhost, and a
// client certificate.
function makePki(dir) {
  const openssl = (...args) => {
    const r = spawnSync("openssl", args, { cwd: dir, encoding: "utf8" });
    assert.equal(r.status, 0, r.stderr);
  };
  openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=quantd test CA",
          "-keyout", "ca.key", "-out", "ca.pem");
  writeFileSync(path.join(dir, "server.ext"), "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
  for (const [name, ext] of [["server", ["-extfile", "server.ext"]], ["client", []]]) {
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", `/CN=${name}`, "-keyout", `${name}.key`,
            "-out", `${name}.csr`);
    openssl("x509", "-req", "-in", `${name}.csr`, "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-days", "2", "-out", `${name}.pem`, ...ext);
  }
}

test("a token goes over plaintext only to loopback unless allowed", () => {
  for (const address of ["127.0.0.1:50051", "localhost:1", "[::1]:50051", "unix:/run/q.sock", "dns:///localhost:1"]) {
    assert.ok(isLoopback(address), address);
    new Client(address, { token: "t" }).close();
  }
  for (const address of ["192.0.2.1:50051", "quantd.internal:443", "[2001:db8::1]:1", "10.0.0.1"]) {
    assert.ok(!isLoopback(address), address);
    assert.throws(() => new Client(address, { token: "t" }), /refusing to send a bearer token over plaintext/);
    new Client(address, { token: "t", allowPlaintextToken: true }).close();
    new Client(address).close();
  }
});

test("mTLS needs the CA and a client certificate", async () => {
  const pki = path.join(tmp, "ts_sdk_pki");
  rmSync(pki, { recursive: true, force: true });
  mkdirSync(pki, { recursive: true });
  makePki(pki);
  const p = (f) => path.join(pki, f);
  const q = await startQuantd("ts_sdk_tls", {
    extraFlags: [`--tls-cert=${p("server.pem")}`, `--tls-key=${p("server.key")}`, `--tls-client-ca=${p("ca.pem")}`],
  });
  const spec = { modelUri: `file://${MODEL}`, quantization: { scheme: "w_int8_per_tensor_sym" } };
  const mtls = { caFile: p("ca.pem"), certFile: p("client.pem"), keyFile: p("client.key") };
  const clients = [];
  const open = (options) => {
    const c = new Client(q.address, { unavailableRetryMs: 0, ...options });
    clients.push(c);
    return c;
  };
  try {
    for (const tls of [false, { caFile: p("ca.pem") }]) {
      await assert.rejects(open({ tls }).submit(spec), (e) => {
        assert.equal(e.codeName, "UNAVAILABLE");
        return true;
      });
    }
    const job = await open({ tls: mtls }).submit(spec);
    assert.equal(job.state, JobState.QUEUED);
    const listed = [];
    for await (const j of open({ tls: { ...mtls, serverName: "localhost" } }).list()) listed.push(j.name);
    assert.deepEqual(listed, [job.name]);
    await assert.rejects(open({ tls: { ...mtls, serverName: "other.example" } }).get(job.name), (e) => {
      assert.equal(e.codeName, "UNAVAILABLE");
      return true;
    });
  } finally {
    for (const c of clients) c.close();
    await q.stop();
  }
});
