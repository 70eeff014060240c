"""QuantdError: a refused or failed call, with quantd's error details.

quantd puts a google.rpc.Status in the `grpc-status-details-bin` trailer of
every error: an ErrorInfo (UPPER_SNAKE reason) and, for bad requests, a
BadRequest naming each bad field. QuantdError unpacks both.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, Optional, Sequence

import grpc

from quantd_client._protos import error_details_pb2, status_pb2

_DETAILS_KEY = "grpc-status-details-bin"


@dataclasses.dataclass(frozen=True)
class FieldViolation:
    """One bad request field, e.g. field="spec.quantization.scheme"."""

    field: str
    description: str


class QuantdError(Exception):
    """A gRPC error from quantd.

    Attributes:
      code: the grpc.StatusCode.
      message: the status message.
      reason: ErrorInfo.reason (UPPER_SNAKE, e.g. "INVALID_JOB_SPEC"); the
        code's name when the server sent no ErrorInfo.
      domain: ErrorInfo.domain ("quantd").
      metadata: ErrorInfo.metadata.
      field_violations: the BadRequest's violations, in order.
    """

    def __init__(
        self,
        code: grpc.StatusCode,
        message: str,
        reason: str = "",
        domain: str = "",
        metadata: Optional[Mapping[str, str]] = None,
        field_violations: Sequence[FieldViolation] = (),
    ) -> None:
        self.code = code
        self.message = message
        self.reason = reason or code.name
        self.domain = domain
        self.metadata = dict(metadata or {})
        self.field_violations = list(field_violations)
        super().__init__(str(self))

    def __str__(self) -> str:
        text = f"{self.code.name}: {self.message} (reason {self.reason})"
        for v in self.field_violations:
            text += f"\n  {v.field}: {v.description}"
        return text

    @classmethod
    def from_rpc_error(cls, error: grpc.RpcError) -> "QuantdError":
        """Converts the error raised by a gRPC call (a grpc.Call)."""
        code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
        message = error.details() if hasattr(error, "details") else str(error)
        trailers = error.trailing_metadata() if hasattr(error, "trailing_metadata") else None
        status = None
        for key, value in trailers or ():
            if key == _DETAILS_KEY and isinstance(value, bytes):
                status = status_pb2.Status.FromString(value)
                break
        return cls.from_status(code, message or "", status)

    @classmethod
    def from_status(
        cls, code: grpc.StatusCode, message: str, status: Optional[status_pb2.Status]
    ) -> "QuantdError":
        """Builds the error from a code and an optional google.rpc.Status."""
        reason, domain = "", ""
        metadata: dict[str, str] = {}
        violations: list[FieldViolation] = []
        for detail in status.details if status is not None else ():
            info = error_details_pb2.ErrorInfo()
            bad = error_details_pb2.BadRequest()
            if detail.Is(info.DESCRIPTOR) and detail.Unpack(info):
                if not reason:
                    reason, domain, metadata = info.reason, info.domain, dict(info.metadata)
            elif detail.Is(bad.DESCRIPTOR) and detail.Unpack(bad):
                violations.extend(
                    FieldViolation(v.field, v.description) for v in bad.field_violations
                )
        return cls(code, message, reason, domain, metadata, violations)

    @classmethod
    def from_job_error(cls, status: status_pb2.Status) -> "QuantdError":
        """Builds the error from a FAILED job's Job.error."""
        code = next((c for c in grpc.StatusCode if c.value[0] == status.code), None)
        return cls.from_status(code or grpc.StatusCode.UNKNOWN, status.message, status)
