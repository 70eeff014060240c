// The quantd.v1 messages as @grpc/proto-loader hands them over: camelCase
// fields, enums as their names, int64 as numbers, unset messages as null and
// each oneof's case in a virtual field (JobEvent.payload). Only what a client
// reads is spelled out; the .proto files in proto/quantd/v1 are the reference.

export type JobStateName =
  | "JOB_STATE_UNSPECIFIED"
  | "QUEUED"
  | "RUNNING"
  | "SUCCEEDED"
  | "FAILED"
  | "CANCELLING"
  | "CANCELLED";

export type StageName =
  | "STAGE_UNSPECIFIED"
  | "LOAD"
  | "CALIBRATE"
  | "ALGORITHMS"
  | "QUANTIZE"
  | "EVALUATE"
  | "EXPORT";

export type ExportFormatName =
  | "EXPORT_FORMAT_UNSPECIFIED"
  | "HF_FAKE_QUANTIZED"
  | "HF_QUARK"
  | "GGUF"
  | "ONNX_QDQ"
  | "COMPRESSED_TENSORS";

// ListJobs' view (AIP-157).
export type JobViewName = "JOB_VIEW_UNSPECIFIED" | "BASIC" | "FULL";

export interface Timestamp {
  seconds: number;
  nanos: number;
}

// What CreateJob takes. Nested settings not listed here (QuantConfig,
// algorithms) may be passed as their proto3 objects too.
export interface JobSpec {
  modelUri: string;
  quantization?: {
    scheme?: string;
    config?: Record<string, unknown>;
    quarkJson?: string;
    groupSize?: number;
    exclude?: string[];
    algorithms?: Record<string, unknown>[];
    calibrateOnFloatOutputs?: boolean;
    fp8KvCache?: boolean;
  };
  calibration?: {
    datasetUri?: string;
    textField?: string;
    numSamples?: number;
    seqLen?: number;
    // Unspecified: RANDOM_WINDOWS, the worker's default (docs/algorithms.md).
    sampling?: "SAMPLING_MODE_UNSPECIFIED" | "CONCAT" | "RANDOM_WINDOWS";
    // Seed of RANDOM_WINDOWS; default 0.
    seed?: number;
    // The calibration passes' matrix products: float32 (the default, the
    // reference numerics) or bfloat16 (faster on GPUs; docs/algorithms.md).
    computeDtype?: "COMPUTE_DTYPE_UNSPECIFIED" | "COMPUTE_FLOAT32" | "COMPUTE_BFLOAT16";
  };
  evaluation?: {
    datasetUri?: string;
    textField?: string;
    nCtx?: number;
    maxWindows?: number;
    disabled?: boolean;
    maxPerplexityIncrease?: number;
    maxKlDivergence?: number;
  };
  export?: {
    formats?: ExportFormatName[];
    outputUri?: string;
    overwrite?: boolean;
    /** GGUF only: the type of the tensors the job left in float (default F32, exact). */
    ggufFloatType?: "GGUF_FLOAT_TYPE_UNSPECIFIED" | "GGUF_F32" | "GGUF_F16" | "GGUF_BF16";
    /** Who serves the exports; VLLM refuses what vLLM cannot load (default ANY). */
    target?: "SERVING_TARGET_UNSPECIFIED" | "SERVING_TARGET_ANY" | "SERVING_TARGET_VLLM";
    /**
     * A llama.cpp recipe ("Q4_K_M", "Q6_K", ...): the job quantizes the model as
     * llama-quantize does, instead of `quantization` (leave that unset). Needs GGUF
     * in `formats`.
     */
    ggufType?: string;
  };
  device?: string;
  labels?: Record<string, string>;
  maxAttempts?: number;
}

export interface Progress {
  stage: StageName;
  block: number;
  blockCount: number;
  percent: number;
  message: string;
}

export interface EvalProtocol {
  datasetUri: string;
  nCtx: number;
  windows: number;
  tokens: number;
  description: string;
}

export interface PerplexityResult {
  perplexity: number;
  meanNll: number;
  protocol: EvalProtocol | null;
}

export interface LayerMetrics {
  name: string;
  weightFormat: string;
  inputFormat: string;
  outputFormat: string;
  weightSqnrDb: number;
  excluded: boolean;
  inputMin: number;
  inputMax: number;
}

export interface BlockMetrics {
  block: number;
  layers: LayerMetrics[];
  /** Absent when not measured (a job without calibration data). */
  outputRelMse?: number;
  blockCount: number;
  /** Wall time of the block, and the part its block algorithms took. */
  seconds: number;
  algorithmSeconds: number;
  /** On a GPU: the caching allocator's peak live and held bytes during the block (0 on CPU). */
  devicePeakAllocatedBytes: number;
  devicePeakReservedBytes: number;
}

export interface Metrics {
  floatPerplexity: PerplexityResult | null;
  quantizedPerplexity: PerplexityResult | null;
  klDivergenceMean?: number;
  klDivergenceP99?: number;
  top1Agreement?: number;
  blocks: BlockMetrics[];
  floatModelBytes: number;
  quantizedModelBytes: number;
  stageTimings: { stage: StageName; seconds: number }[];
}

export interface ArtifactFile {
  path: string;
  bytes: number;
  sha256: string;
}

export interface Artifact {
  format: ExportFormatName;
  uri: string;
  bytes: number;
  sha256: string;
  files: ArtifactFile[];
  accepted: boolean;
  /** The consumers that load it: "vllm", "llama.cpp", "onnxruntime". */
  consumers: string[];
}

export interface JobResult {
  metrics: Metrics | null;
  artifacts: Artifact[];
}

// google.rpc.Status with its details still packed (see QuantdError.fromJobError).
export interface RpcStatus {
  code: number;
  message: string;
  details: { typeUrl: string; value: Buffer }[];
}

export interface Job {
  name: string;
  spec: JobSpec | null;
  state: JobStateName;
  progress: Progress | null;
  result: JobResult | null;
  error: RpcStatus | null;
  createTime: Timestamp | null;
  startTime: Timestamp | null;
  updateTime: Timestamp | null;
  endTime: Timestamp | null;
  attempt: number;
  worker: string;
  requestId: string;
  tenant: string;
}

export interface JobEvent {
  job: string;
  sequence: number;
  time: Timestamp | null;
  payload: "state" | "progress" | "log" | "blockMetrics" | "result";
  state?: JobStateName;
  progress?: Progress;
  log?: { severity: "LOG_SEVERITY_UNSPECIFIED" | "INFO" | "WARNING" | "ERROR"; message: string };
  blockMetrics?: BlockMetrics;
  result?: JobResult;
  attempt: number;
}
