// Client: submit, wait for, inspect, list and cancel quantd jobs over gRPC
// (@grpc/grpc-js), with the message types and schemas protoc-gen-es
// generated from proto/quantd/v1 (src/gen; setup.sh). Every call rejects
// with QuantdError when quantd refuses it; job names may be "jobs/<id>" or
// the bare id.
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { isIP } from "node:net";

import * as grpc from "@grpc/grpc-js";
import {
  create,
  fromBinary,
  fromJson,
  isMessage,
  toBinary,
  type DescMessage,
  type DescMethod,
  type JsonValue,
  type MessageInitShape,
  type MessageShape,
} from "@bufbuild/protobuf";

import { QuantdError, fromServiceError, fromStatus } from "./errors.js";
import {
  JobSpecSchema,
  JobStateSchema,
  type Job,
  type JobEvent,
  type JobSpec,
  type JobSpecJson,
  type JobState,
  type Progress,
} from "./gen/quantd/v1/job_pb.js";
import {
  JobViewSchema,
  QuantizationService,
  type JobView,
  type ListJobsResponse,
} from "./gen/quantd/v1/quantization_service_pb.js";

export interface TlsOptions {
  // PEM CA bundle verifying the server (default: the system roots).
  caFile?: string;
  // PEM client certificate and key (mTLS).
  certFile?: string;
  keyFile?: string;
  // Name to verify the server certificate against instead of the address.
  serverName?: string;
}

export interface ClientOptions {
  // Bearer token, sent as "authorization: Bearer <token>" on every call, as
  // per-call metadata rather than call credentials (which grpc-js only sends
  // over TLS), so that plaintext to a loopback sidecar proxy works. Over
  // plaintext to any other address the constructor refuses it unless
  // allowPlaintextToken says the network is trusted.
  token?: string;
  allowPlaintextToken?: boolean;
  // false/absent: plaintext; true: TLS with the system roots.
  tls?: boolean | TlsOptions;
  // Deadline of each unary call (default 30 s).
  timeoutMs?: number;
  // How long calls and watches keep retrying while quantd is UNAVAILABLE
  // (a restart, a frontend failover). Default 60 s.
  unavailableRetryMs?: number;
}

// A job state or job view: the generated enum value or its proto name in
// any case ("FAILED", "failed").
export type StateLike = JobState | string;
export type ViewLike = JobView | string;

export interface ListOptions {
  state?: StateLike | StateLike[];
  labels?: Record<string, string>;
  // "create_time desc" (default) or "create_time asc".
  orderBy?: string;
  // Jobs per ListJobs call (0: the server's default, 50).
  pageSize?: number;
  // BASIC (the default) leaves out each job's quantization config content
  // and per-block metrics; FULL returns every field, as get() does.
  view?: ViewLike;
}

export interface WaitOptions {
  onProgress?: (progress: Progress) => void;
  onEvent?: (event: JobEvent) => void;
  afterSequence?: number | bigint;
}

// Longest job name accepted before asking quantd ("jobs/" + a 36-char id
// fits with room); anything longer is a caller bug, not a lookup.
const MAX_NAME_LENGTH = 256;

export function jobName(name: string): string {
  if (typeof name !== "string" || name === "" || name.length > MAX_NAME_LENGTH) {
    throw new TypeError(`quantd client: a job name is 1 to ${MAX_NAME_LENGTH} characters, got ${String(name).slice(0, 40)}`);
  }
  return name.startsWith("jobs/") ? name : `jobs/${name}`;
}

function enumValue(schema: typeof JobStateSchema | typeof JobViewSchema, v: number | string): number {
  const found =
    typeof v === "number"
      ? schema.values.find((e) => e.number === v)
      : schema.values.find((e) => e.name === String(v).toUpperCase());
  if (!found) {
    const names = schema.values.map((e) => e.name).join(", ");
    throw new TypeError(`quantd client: ${String(v)} is not a ${schema.typeName} (${names})`);
  }
  return found.number;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

type Method<I extends DescMessage, O extends DescMessage> = DescMethod & { input: I; output: O };

export class Client {
  private readonly channel: grpc.Client;
  private readonly token?: string;
  private readonly timeoutMs: number;
  private readonly retryMs: number;

  constructor(address = "127.0.0.1:50051", options: ClientOptions = {}) {
    if (options.token && !options.tls && !options.allowPlaintextToken && !isLoopback(address)) {
      throw new TypeError(
        `quantd client: refusing to send a bearer token over plaintext to ${JSON.stringify(address)}: ` +
          "use tls, or allowPlaintextToken on a trusted network",
      );
    }
    this.channel = new grpc.Client(address, channelCredentials(options.tls), channelOptions(options.tls));
    this.token = options.token;
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.retryMs = options.unavailableRetryMs ?? 60_000;
  }

  close(): void {
    this.channel.close();
  }

  // Creates a job. `spec` is a JobSpec message (create(JobSpecSchema, ...))
  // or its proto3 JSON form (JobSpecJson: enums by name, oneofs flattened),
  // which is checked field by field before anything is sent. Without
  // requestId a random one is used, so the retries made while quantd is
  // unavailable never create a second job.
  async submit(spec: JobSpec | JobSpecJson, requestId?: string, opts: { validateOnly?: boolean } = {}): Promise<Job> {
    return this.unary(QuantizationService.method.createJob, {
      spec: toJobSpec(spec),
      requestId: requestId ?? `ts-${randomUUID()}`,
      validateOnly: opts.validateOnly ?? false,
    });
  }

  async get(name: string): Promise<Job> {
    return this.unary(QuantizationService.method.getJob, { name: jobName(name) });
  }

  // QUEUED jobs end CANCELLED, RUNNING ones go to CANCELLING; a finished job
  // rejects with FAILED_PRECONDITION (JOB_ALREADY_FINISHED).
  async cancel(name: string): Promise<Job> {
    return this.unary(QuantizationService.method.cancelJob, { name: jobName(name) }, false);
  }

  // Every matching job, fetching pages as the iteration goes.
  async *list(options: ListOptions = {}): AsyncGenerator<Job> {
    for await (const page of this.listPages(options)) yield* page.jobs;
  }

  // As list(), one ListJobsResponse per page, following nextPageToken until
  // it is empty.
  async *listPages(options: ListOptions = {}): AsyncGenerator<ListJobsResponse> {
    const states = options.state === undefined ? [] : [options.state].flat();
    const request = {
      pageSize: options.pageSize ?? 0,
      pageToken: "",
      states: states.map((s) => enumValue(JobStateSchema, s) as JobState),
      labels: options.labels ?? {},
      orderBy: options.orderBy ?? "",
      view: enumValue(JobViewSchema, options.view ?? "BASIC") as JobView,
    };
    while (true) {
      const page = await this.unary(QuantizationService.method.listJobs, request);
      yield page;
      if (!page.nextPageToken) return;
      request.pageToken = page.nextPageToken;
    }
  }

  // The job's events after afterSequence, live until the job ends. A stream
  // broken by UNAVAILABLE is reopened after the last event received.
  async *watch(name: string, afterSequence: number | bigint = 0): AsyncGenerator<JobEvent> {
    const method = QuantizationService.method.watchJob;
    let after = BigInt(afterSequence);
    let retryUntil = 0;
    while (true) {
      const request = toBinary(method.input, create(method.input, { name: jobName(name), afterSequence: after }));
      const stream = this.channel.makeServerStreamRequest(
        path(method),
        (b: Uint8Array) => Buffer.from(b),
        (b: Buffer) => fromBinary(method.output, b),
        request,
        this.metadata(),
      );
      try {
        for await (const event of stream as AsyncIterable<JobEvent>) {
          after = event.sequence;
          retryUntil = 0;
          yield event;
        }
        return;
      } catch (e) {
        const err = e as grpc.ServiceError;
        if (err.code !== grpc.status.UNAVAILABLE) throw fromServiceError(err);
        retryUntil = retryUntil || Date.now() + this.retryMs;
        if (Date.now() >= retryUntil) throw fromServiceError(err);
        await sleep(500);
      } finally {
        stream.cancel();
      }
    }
  }

  // Follows the job until it ends and returns it (check job.state: it may
  // be FAILED or CANCELLED; errorOf(job) turns its error into a QuantdError).
  async wait(name: string, options: WaitOptions = {}): Promise<Job> {
    for await (const event of this.watch(name, options.afterSequence ?? 0)) {
      options.onEvent?.(event);
      if (event.payload.case === "progress") options.onProgress?.(event.payload.value);
    }
    return this.get(name);
  }

  // The QuantdError of a FAILED (or CANCELLED with a reason) job.
  errorOf(job: Job): QuantdError | null {
    return job.error ? fromStatus(job.error) : null;
  }

  private metadata(): grpc.Metadata {
    const md = new grpc.Metadata();
    if (this.token) md.set("authorization", `Bearer ${this.token}`);
    return md;
  }

  private async unary<I extends DescMessage, O extends DescMessage>(
    method: Method<I, O>,
    init: MessageInitShape<I>,
    retry = true,
  ): Promise<MessageShape<O>> {
    const request = toBinary(method.input, create(method.input, init));
    const giveUpAt = Date.now() + this.retryMs;
    let delay = 250;
    while (true) {
      try {
        return await new Promise<MessageShape<O>>((resolve, reject) => {
          this.channel.makeUnaryRequest(
            path(method),
            (b: Uint8Array) => Buffer.from(b),
            (b: Buffer) => fromBinary(method.output, b),
            request,
            this.metadata(),
            { deadline: Date.now() + this.timeoutMs },
            (err, value) => (err ? reject(err) : resolve(value as MessageShape<O>)),
          );
        });
      } catch (e) {
        const err = e as grpc.ServiceError;
        if (retry && err.code === grpc.status.UNAVAILABLE && Date.now() + delay < giveUpAt) {
          await sleep(delay);
          delay = Math.min(delay * 2, 2000);
          continue;
        }
        throw fromServiceError(err);
      }
    }
  }
}

function path(method: DescMethod): string {
  return `/${method.parent.typeName}/${method.name}`;
}

function toJobSpec(spec: JobSpec | JobSpecJson): JobSpec {
  if (isMessage(spec, JobSpecSchema)) return spec;
  try {
    return fromJson(JobSpecSchema, spec as JsonValue);
  } catch (e) {
    throw new TypeError(`quantd client: invalid JobSpec: ${(e as Error).message}`);
  }
}

// Whether a gRPC target is this machine: a Unix socket, "localhost", or a
// loopback IP literal. Other names may resolve anywhere, so they are not.
export function isLoopback(address: string): boolean {
  if (address.startsWith("unix:") || address.startsWith("unix-abstract:")) return true;
  let host = address.replace(/^dns:\/\/\//, "").replace(/^ipv[46]:/, "");
  if (host.startsWith("[")) {
    host = host.slice(1, host.includes("]") ? host.indexOf("]") : undefined);
  } else if (host.split(":").length === 2) {
    host = host.split(":")[0];
  }
  if (host.toLowerCase() === "localhost") return true;
  if (isIP(host) === 4) return host.split(".")[0] === "127";
  if (isIP(host) === 6) return host === "::1" || host === "0:0:0:0:0:0:0:1";
  return false;
}

function channelCredentials(tls: ClientOptions["tls"]): grpc.ChannelCredentials {
  if (!tls) return grpc.credentials.createInsecure();
  const o: TlsOptions = tls === true ? {} : tls;
  const read = (file?: string) => (file ? readFileSync(file) : null);
  return grpc.credentials.createSsl(read(o.caFile), read(o.keyFile), read(o.certFile));
}

function channelOptions(tls: ClientOptions["tls"]): grpc.ChannelOptions {
  const serverName = typeof tls === "object" ? tls.serverName : undefined;
  return serverName ? { "grpc.ssl_target_name_override": serverName } : {};
}
