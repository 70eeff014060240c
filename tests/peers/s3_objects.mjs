// Reads and writes an S3 endpoint with the AWS SDK for JavaScript
// (@aws-sdk/client-s3), independently of quantd's own S3 client:
//
//   node s3_objects.mjs ENDPOINT put BUCKET KEY FILE
//   node s3_objects.mjs ENDPOINT list BUCKET PREFIX
//       prints {"objects": [{"key", "size", "sha256"}], "uploads": N}
//       (N: multipart uploads begun and neither completed nor aborted)
// Credentials: the access key S3RVER, the secret key $S3_SECRET_KEY (default
// S3RVER), as s3_server.mjs checks them.
import crypto from "node:crypto";
import fs from "node:fs";
import {
  GetObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
} from "@aws-sdk/client-s3";

const [endpoint, command, bucket, key, file] = process.argv.slice(2);
const client = new S3Client({
  endpoint,
  region: "us-east-1",
  forcePathStyle: true,
  credentials: {
    accessKeyId: "S3RVER",
    secretAccessKey: process.env.S3_SECRET_KEY ?? "S3RVER",
  },
});

if (command === "put") {
  await client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: fs.readFileSync(file) }));
} else if (command === "list") {
  const objects = [];
  let token;
  do {
    const page = await client.send(
      new ListObjectsV2Command({ Bucket: bucket, Prefix: key, ContinuationToken: token }));
    for (const o of page.Contents ?? []) {
      const got = await client.send(new GetObjectCommand({ Bucket: bucket, Key: o.Key }));
      const bytes = Buffer.from(await got.Body.transformToByteArray());
      objects.push({
        key: o.Key,
        size: o.Size,
        sha256: crypto.createHash("sha256").update(bytes).digest("hex"),
      });
    }
    token = page.IsTruncated ? page.NextContinuationToken : undefined;
  } while (token);
  let uploads = 0;
  try {
    const mp = await client.send(new ListMultipartUploadsCommand({ Bucket: bucket }));
    uploads = (mp.Uploads ?? []).length;
  } catch (e) {
    uploads = -1;  // the endpoint does not list them
  }
  console.log(JSON.stringify({ objects, uploads }));
} else {
  console.error("usage: s3_objects.mjs ENDPOINT put|list ...");
  process.exit(2);
}
