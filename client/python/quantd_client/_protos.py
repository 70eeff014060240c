"""Loads the generated quantd.v1 and google.rpc modules.

protoc writes them as top-level packages (quantd/v1/*_pb2.py,
google/rpc/*_pb2.py) that import each other by those names, so their root
directory goes on sys.path.
"""

import os
import sys

_GENERATED = os.environ.get("QUANTD_CLIENT_GENERATED") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "_generated"
)
if not os.path.isfile(os.path.join(_GENERATED, "quantd", "v1", "job_pb2.py")):
    raise ImportError(
        f"quantd_client: the generated protobuf modules are missing from {_GENERATED}; "
        "run client/python/generate.sh (or set QUANTD_CLIENT_GENERATED)"
    )
if _GENERATED not in sys.path:
    sys.path.insert(0, _GENERATED)

from google.rpc import error_details_pb2, status_pb2  # noqa: E402
from quantd.v1 import job_pb2, quantization_service_pb2, quantization_service_pb2_grpc  # noqa: E402

Artifact = job_pb2.Artifact
CalibrationSpec = job_pb2.CalibrationSpec
EvaluationSpec = job_pb2.EvaluationSpec
ExportFormat = job_pb2.ExportFormat
ExportSpec = job_pb2.ExportSpec
Job = job_pb2.Job
JobEvent = job_pb2.JobEvent
JobSpec = job_pb2.JobSpec
JobState = job_pb2.JobState
Progress = job_pb2.Progress
Stage = job_pb2.Stage
QuantizationSettings = job_pb2.QuantizationSettings

__all__ = [
    "error_details_pb2",
    "job_pb2",
    "quantization_service_pb2",
    "quantization_service_pb2_grpc",
    "status_pb2",
]
