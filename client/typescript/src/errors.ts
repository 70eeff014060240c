// QuantdError: a refused or failed call with quantd's error details, unpacked
// from the google.rpc.Status quantd sends in the grpc-status-details-bin
// trailer (an ErrorInfo reason and, for bad requests, BadRequest field
// violations), with the generated google.rpc schemas.
import * as grpc from "@grpc/grpc-js";
import { fromBinary } from "@bufbuild/protobuf";
import { anyUnpack, type Any } from "@bufbuild/protobuf/wkt";

import { BadRequestSchema, ErrorInfoSchema } from "./gen/google/rpc/error_details_pb.js";
import { StatusSchema, type Status } from "./gen/google/rpc/status_pb.js";

export interface FieldViolation {
  field: string;
  description: string;
}

// Fills reason, domain, metadata and fieldViolations of `error` from the
// packed details; the code's name stands in for a missing reason.
function unpack(error: QuantdError, details: Any[]): void {
  for (const any of details) {
    const info = error.reason === "" ? anyUnpack(any, ErrorInfoSchema) : undefined;
    if (info) {
      error.reason = info.reason;
      error.domain = info.domain;
      error.metadata = { ...info.metadata };
      continue;
    }
    const bad = anyUnpack(any, BadRequestSchema);
    for (const v of bad?.fieldViolations ?? []) {
      error.fieldViolations.push({ field: v.field, description: v.description });
    }
  }
  if (error.reason === "") error.reason = error.codeName;
}

export function fromServiceError(e: grpc.ServiceError): QuantdError {
  const error = new QuantdError(e.code, e.details ?? e.message);
  const packed = e.metadata?.get("grpc-status-details-bin") ?? [];
  let details: Any[] = [];
  if (packed.length > 0 && typeof packed[0] !== "string") {
    try {
      details = fromBinary(StatusSchema, packed[0] as Buffer).details;
    } catch {
      // A trailer that is not a google.rpc.Status: keep code and message.
    }
  }
  unpack(error, details);
  return error;
}

export function fromStatus(status: Status): QuantdError {
  const error = new QuantdError(status.code, status.message);
  unpack(error, status.details);
  return error;
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
