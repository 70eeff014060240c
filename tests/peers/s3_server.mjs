// An S3 endpoint for quantd's tests: s3rver (an S3 API over a local
// directory) on 127.0.0.1 at a free port, which it writes to --port-file
// once it listens.
//
//   node s3_server.mjs --port-file FILE --dir DIR [--bucket NAME]...
//                      [--fail-puts-after N]
//
// s3rver does not check Signature V4 signatures, so every request must
// carry one that AWS's own signer (@smithy/signature-v4, which the AWS SDK
// signs with) computes identically for the access key S3RVER and the
// secret key --secret-key (default S3RVER);
// anything else, anonymous requests included, is refused with 403.
// --fail-puts-after N answers every PUT after the first N with 503 SlowDown,
// as an overloaded S3 does: an upload broken off part-way.
import crypto from "node:crypto";
import fs from "node:fs";
import { SignatureV4 } from "@smithy/signature-v4";
import S3rver from "s3rver";

const args = process.argv.slice(2);
const opt = (name) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const buckets = args.flatMap((a, i) => (a === "--bucket" ? [{ name: args[i + 1] }] : []));
const server = new S3rver({
  address: "127.0.0.1",
  port: 0,
  silent: true,
  directory: opt("--dir"),
  configureBuckets: buckets,
});

function refuse(ctx, status, code, message) {
  ctx.status = status;
  ctx.type = "application/xml";
  ctx.body = `<Error><Code>${code}</Code><Message>${message}</Message></Error>`;
}

// The hash (and HMAC) interface the signer takes, on Node's crypto.
class Sha256 {
  constructor(secret) {
    this.secret = secret;
    this.reset();
  }
  reset() {
    this.hash = this.secret ? crypto.createHmac("sha256", this.secret) : crypto.createHash("sha256");
  }
  update(data) {
    this.hash.update(typeof data === "string" ? Buffer.from(data) : data);
  }
  async digest() {
    return new Uint8Array(this.hash.digest());
  }
}

// Recomputes the request's SigV4 signature from what it says it signed.
const signer = new SignatureV4({
  credentials: { accessKeyId: "S3RVER", secretAccessKey: opt("--secret-key") ?? "S3RVER" },
  region: "us-east-1",
  service: "s3",
  sha256: Sha256,
  uriEscapePath: false,
  applyChecksum: false,
});
const AUTH = new RegExp(
  "^AWS4-HMAC-SHA256 Credential=([^/]+)/(\\d{8})/([^/]+)/s3/aws4_request, ?" +
    "SignedHeaders=([^,]+), ?Signature=([0-9a-f]{64})$");
async function checkSignature(ctx, next) {
  const m = AUTH.exec(ctx.get("authorization"));
  if (!m) return refuse(ctx, 403, "AccessDenied", "a SigV4 signature is required");
  const [, accessKey, , region, signedHeaders, provided] = m;
  if (accessKey !== "S3RVER") return refuse(ctx, 403, "InvalidAccessKeyId", "unknown key");
  const names = signedHeaders.split(";");
  const headers = {};
  for (const name of names) headers[name] = ctx.get(name);
  const [path, rawQuery = ""] = ctx.req.url.split("?");
  const query = {};
  for (const [k, v] of new URLSearchParams(rawQuery)) query[k] = v;
  const date = new Date(ctx.get("x-amz-date").replace(
    /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/, "$1-$2-$3T$4:$5:$6Z"));
  const signed = await signer.sign(
    { method: ctx.method, protocol: "http:", hostname: "127.0.0.1", path, query, headers },
    { signingDate: date, signingRegion: region, signableHeaders: new Set(names) });
  const computed = /Signature=([0-9a-f]{64})/.exec(signed.headers.authorization)[1];
  if (computed !== provided) {
    return refuse(ctx, 403, "SignatureDoesNotMatch", "the request signature does not match");
  }
  await next();
}

const failAfter = opt("--fail-puts-after");
if (failAfter !== undefined) {
  let puts = 0;
  server.middleware.unshift(async (ctx, next) => {
    if (ctx.method === "PUT" && ++puts > Number(failAfter)) {
      return refuse(ctx, 503, "SlowDown", "injected");
    }
    await next();
  });
}
// First in the chain: s3rver's own middleware runs after these.
server.middleware.unshift(checkSignature);
const { port } = await server.run();
fs.writeFileSync(opt("--port-file") + ".tmp", String(port));
fs.renameSync(opt("--port-file") + ".tmp", opt("--port-file"));
for (const sig of ["SIGTERM", "SIGINT"]) {
  process.on(sig, async () => {
    await server.close();
    process.exit(0);
  });
}
