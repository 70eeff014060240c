// Client: submit, wait for, inspect, list and cancel quantd jobs over gRPC.
// The .proto files are loaded at run time with @grpc/proto-loader (no
// generated code). Every call rejects with QuantdError when quantd refuses
// it; job names may be "jobs/<id>" or the bare id.
import { randomUUID } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";

import { QuantdError, StatusDecoder } from "./errors.js";
import type { Job, JobEvent, JobSpec, JobStateName, JobViewName, Progress } from "./types.js";

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
  // Bearer token, sent as "authorization: Bearer <token>" on every call.
  token?: string;
  // false/absent: plaintext; true: TLS with the system roots.
  tls?: boolean | TlsOptions;
  // Deadline of each unary call (default 30 s).
  timeoutMs?: number;
  // How long calls and watches keep retrying while quantd is UNAVAILABLE
  // (a restart, a frontend failover). Default 60 s.
  unavailableRetryMs?: number;
  // Directory holding quantd/v1/*.proto (default $QUANTD_PROTO_DIR, else the
  // repository's proto/ next to this package).
  protoDir?: string;
  // Directory holding google/rpc/{status,error_details}.proto (default
  // $QUANTD_GOOGLEAPIS_DIR, else Debian's golang-github-gogo-googleapis-dev).
  googleapisDir?: string;
}

export interface ListOptions {
  state?: JobStateName | Lowercase<JobStateName> | (JobStateName | Lowercase<JobStateName>)[];
  labels?: Record<string, string>;
  // "create_time desc" (default) or "create_time asc".
  orderBy?: string;
  // Jobs per ListJobs call (0: the server's default, 50).
  pageSize?: number;
  // BASIC (the default) leaves out each job's quantization config content
  // and per-block metrics; FULL returns every field, as get() does.
  view?: JobViewName | Lowercase<JobViewName>;
}

export interface WaitOptions {
  onProgress?: (progress: Progress) => void;
  onEvent?: (event: JobEvent) => void;
  afterSequence?: number;
}

const PACKAGE_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const DEFAULT_GOOGLEAPIS_DIR = "/usr/share/gocode/src/github.com/gogo/googleapis";

export function jobName(name: string): string {
  return name.startsWith("jobs/") ? name : `jobs/${name}`;
}

function defaultProtoDir(): string {
  return process.env.QUANTD_PROTO_DIR || path.resolve(PACKAGE_DIR, "..", "..", "proto");
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

type Callback<T> = (err: grpc.ServiceError | null, value?: T) => void;
type UnaryMethod = (
  req: unknown,
  md: grpc.Metadata,
  opts: grpc.CallOptions,
  cb: Callback<unknown>,
) => grpc.ClientUnaryCall;

export class Client {
  private readonly stub: grpc.Client & Record<string, unknown>;
  private readonly decoder: StatusDecoder;
  private readonly token?: string;
  private readonly timeoutMs: number;
  private readonly retryMs: number;

  constructor(address = "127.0.0.1:50051", options: ClientOptions = {}) {
    const protoDir = options.protoDir ?? defaultProtoDir();
    const googleapisDir =
      options.googleapisDir ?? (process.env.QUANTD_GOOGLEAPIS_DIR || DEFAULT_GOOGLEAPIS_DIR);
    for (const [dir, file] of [
      [protoDir, "quantd/v1/quantization_service.proto"],
      [googleapisDir, "google/rpc/status.proto"],
    ]) {
      if (!existsSync(path.join(dir, file))) {
        throw new Error(`quantd client: ${file} not found under ${dir} (see ClientOptions)`);
      }
    }
    const definition = protoLoader.loadSync("quantd/v1/quantization_service.proto", {
      includeDirs: [protoDir, googleapisDir],
      longs: Number,
      enums: String,
      defaults: true,
      oneofs: true,
    });
    const loaded = grpc.loadPackageDefinition(definition) as unknown as {
      quantd: { v1: { QuantizationService: grpc.ServiceClientConstructor } };
    };
    this.stub = new loaded.quantd.v1.QuantizationService(
      address,
      channelCredentials(options.tls),
      channelOptions(options.tls),
    ) as grpc.Client & Record<string, unknown>;
    this.decoder = new StatusDecoder(googleapisDir);
    this.token = options.token;
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.retryMs = options.unavailableRetryMs ?? 60_000;
  }

  close(): void {
    this.stub.close();
  }

  // Creates a job. Without requestId a random one is used, so the retries
  // made while quantd is unavailable never create a second job.
  submit(spec: JobSpec, requestId?: string, opts: { validateOnly?: boolean } = {}): Promise<Job> {
    return this.unary<Job>("CreateJob", {
      spec,
      requestId: requestId ?? `ts-${randomUUID()}`,
      validateOnly: opts.validateOnly ?? false,
    });
  }

  get(name: string): Promise<Job> {
    return this.unary<Job>("GetJob", { name: jobName(name) });
  }

  // QUEUED jobs end CANCELLED, RUNNING ones go to CANCELLING; a finished job
  // rejects with FAILED_PRECONDITION (JOB_ALREADY_FINISHED).
  cancel(name: string): Promise<Job> {
    return this.unary<Job>("CancelJob", { name: jobName(name) }, false);
  }

  // Every matching job, fetching pages as the iteration goes.
  async *list(options: ListOptions = {}): AsyncGenerator<Job> {
    const states = options.state === undefined ? [] : [options.state].flat();
    const request = {
      pageSize: options.pageSize ?? 0,
      pageToken: "",
      states: states.map((s) => s.toUpperCase()),
      labels: options.labels ?? {},
      orderBy: options.orderBy ?? "",
      view: (options.view ?? "BASIC").toUpperCase(),
    };
    while (true) {
      const page = await this.unary<{ jobs: Job[]; nextPageToken: string }>("ListJobs", request);
      yield* page.jobs;
      if (!page.nextPageToken) return;
      request.pageToken = page.nextPageToken;
    }
  }

  // The job's events after afterSequence, live until the job ends. A stream
  // broken by UNAVAILABLE is reopened after the last event received.
  async *watch(name: string, afterSequence = 0): AsyncGenerator<JobEvent> {
    let after = afterSequence;
    let retryUntil = 0;
    while (true) {
      const stream = (
        this.stub.WatchJob as (req: unknown, md: grpc.Metadata) => grpc.ClientReadableStream<JobEvent>
      ).call(this.stub, { name: jobName(name), afterSequence: after }, this.metadata());
      try {
        for await (const event of stream as AsyncIterable<JobEvent>) {
          after = event.sequence;
          retryUntil = 0;
          yield event;
        }
        return;
      } catch (e) {
        const err = e as grpc.ServiceError;
        if (err.code !== grpc.status.UNAVAILABLE) throw this.decoder.fromServiceError(err);
        retryUntil = retryUntil || Date.now() + this.retryMs;
        if (Date.now() >= retryUntil) throw this.decoder.fromServiceError(err);
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
      if (event.payload === "progress" && event.progress) options.onProgress?.(event.progress);
    }
    return this.get(name);
  }

  // The QuantdError of a FAILED (or CANCELLED with a reason) job.
  errorOf(job: Job): QuantdError | null {
    return job.error ? this.decoder.fromJobError(job.error) : null;
  }

  private metadata(): grpc.Metadata {
    const md = new grpc.Metadata();
    if (this.token) md.set("authorization", `Bearer ${this.token}`);
    return md;
  }

  private async unary<T>(method: string, request: unknown, retry = true): Promise<T> {
    const giveUpAt = Date.now() + this.retryMs;
    let delay = 250;
    const fn = this.stub[method] as UnaryMethod;
    while (true) {
      try {
        return await new Promise<T>((resolve, reject) => {
          fn.call(
            this.stub,
            request,
            this.metadata(),
            { deadline: Date.now() + this.timeoutMs },
            (err, value) => (err ? reject(err) : resolve(value as T)),
          );
        });
      } catch (e) {
        const err = e as grpc.ServiceError;
        if (retry && err.code === grpc.status.UNAVAILABLE && Date.now() + delay < giveUpAt) {
          await sleep(delay);
          delay = Math.min(delay * 2, 2000);
          continue;
        }
        throw this.decoder.fromServiceError(err);
      }
    }
  }
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
