// @quantd/client: the TypeScript client of quantd (see docs/sdk.md).
//
//   import { Client } from "@quantd/client";
//   const client = new Client("127.0.0.1:50051", { token: process.env.QUANTD_TOKEN });
//   const job = await client.submit({ modelUri: "file:///models/llama",
//                                     quantization: { scheme: "w_int4_per_group_sym" } });
//   const done = await client.wait(job.name, { onProgress: (p) => console.log(p.percent) });
export { Client, jobName } from "./client.js";
export type { ClientOptions, ListOptions, TlsOptions, WaitOptions } from "./client.js";
export { QuantdError } from "./errors.js";
export type { FieldViolation } from "./errors.js";
export type * from "./types.js";
