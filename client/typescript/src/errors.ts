// QuantdError: a refused or failed call with quantd's error details, unpacked
// from the google.rpc.Status quantd sends in the grpc-status-details-bin
// trailer (an ErrorInfo reason and, for bad requests, BadRequest field
// violations).
import * as grpc from "@grpc/grpc-js";
import protobuf from "protobufjs";

import type { RpcStatus } from "./types.js";

export interface FieldViolation {
  field: string;
  description: string;
}

// Decoders for google.rpc.Status, ErrorInfo and BadRequest, loaded once from
// the googleapis .proto files.
export class StatusDecoder {
  private readonly status: protobuf.Type;
  private readonly errorInfo: protobuf.Type;
  private readonly badRequest: protobuf.Type;

  constructor(googleapisDir: string) {
    const root = new protobuf.Root();
    root.resolvePath = (_origin: string, target: string) =>
      target.startsWith("google/rpc/") ? `${googleapisDir}/${target}` : target;
    root.loadSync(["google/rpc/status.proto", "google/rpc/error_details.proto"]);
    this.status = root.lookupType("google.rpc.Status");
    this.errorInfo = root.lookupType("google.rpc.ErrorInfo");
    this.badRequest = root.lookupType("google.rpc.BadRequest");
  }

  // Fills reason, domain, metadata and fieldViolations of `error` from the
  // packed details.
  unpack(error: QuantdError, details: { typeUrl?: string; type_url?: string; value: Uint8Array }[]) {
    for (const any of details) {
      const typeName = (any.typeUrl ?? any.type_url ?? "").split("/").pop();
      if (typeName === "google.rpc.ErrorInfo" && error.reason === "") {
        const info = this.errorInfo.toObject(this.errorInfo.decode(any.value), { defaults: true });
        error.reason = info.reason;
        error.domain = info.domain;
        error.metadata = info.metadata ?? {};
      } else if (typeName === "google.rpc.BadRequest") {
        const bad = this.badRequest.toObject(this.badRequest.decode(any.value), { defaults: true });
        for (const v of bad.fieldViolations ?? []) {
          error.fieldViolations.push({ field: v.field, description: v.description });
        }
      }
    }
    if (error.reason === "") error.reason = error.codeName;
  }

  fromServiceError(e: grpc.ServiceError): QuantdError {
    const error = new QuantdError(e.code, e.details ?? e.message);
    const packed = e.metadata?.get("grpc-status-details-bin") ?? [];
    if (packed.length > 0 && typeof packed[0] !== "string") {
      const status = this.status.toObject(this.status.decode(packed[0] as Buffer), {
        defaults: true,
      });
      this.unpack(error, status.details ?? []);
    } else {
      error.reason = error.codeName;
    }
    return error;
  }

  fromJobError(status: RpcStatus): QuantdError {
    const error = new QuantdError(status.code, status.message);
    this.unpack(error, status.details ?? []);
    return error;
  }
}

export class QuantdError extends Error {
  // grpc.status number and its name, e.g. 3 and "INVALID_ARGUMENT".
  readonly code: grpc.status;
  readonly codeName: string;
  readonly details: string;
  // ErrorInfo.reason (UPPER_SNAKE); the code's name when there is none.
  reason = "";
  domain = "";
  metadata: Record<string, string> = {};
  fieldViolations: FieldViolation[] = [];

  constructor(code: grpc.status, details: string) {
    super(`${grpc.status[code] ?? "UNKNOWN"}: ${details}`);
    this.name = "QuantdError";
    this.code = code;
    this.codeName = grpc.status[code] ?? "UNKNOWN";
    this.details = details;
  }

  toString(): string {
    let text = `${this.codeName}: ${this.details} (reason ${this.reason})`;
    for (const v of this.fieldViolations) text += `\n  ${v.field}: ${v.description}`;
    return text;
  }
}
