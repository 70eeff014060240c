// @quantd/client: the TypeScript client of quantd (see docs/sdk.md). The
// message types, enums and schemas are generated from proto/quantd/v1 by
// protoc-gen-es (src/gen, made by setup.sh) and re-exported here.
//
//   import { Client, JobState } from "@quantd/client";
//   const client = new Client("127.0.0.1:50051", { token: process.env.QUANTD_TOKEN });
//   const job = await client.submit({ modelUri: "file:///models/llama",
//                                     quantization: { scheme: "w_int4_per_group_sym" } });
//   const done = await client.wait(job.name, { onProgress: (p) => console.log(p.percent) });
//   if (done.state !== JobState.SUCCEEDED) console.error(client.errorOf(done)?.toString());
export { Client, isLoopback, jobName } from "./client.js";
export type { ClientOptions, ListOptions, StateLike, TlsOptions, ViewLike, WaitOptions } from "./client.js";
export { QuantdError } from "./errors.js";
export type { FieldViolation } from "./errors.js";
export * from "./gen/quantd/v1/job_pb.js";
export * from "./gen/quantd/v1/quant_config_pb.js";
export * from "./gen/quantd/v1/quantization_service_pb.js";
// What a caller needs to build, print and compare the messages.
export { create, fromJson, isMessage, toJson, toJsonString } from "@bufbuild/protobuf";
