# The part of grpcio's API that quantd_client uses (Debian's python3-grpcio
# ships no type information). An RPC error raised by a call is also a
# grpc.Call, hence code()/details()/trailing_metadata() on RpcError.
import enum
from typing import Any, Optional, Sequence, Tuple, Union

MetadataValue = Union[str, bytes]
Metadata = Tuple[Tuple[str, MetadataValue], ...]
ChannelOptions = Sequence[Tuple[str, Any]]

class StatusCode(enum.Enum):
    OK = (0, "ok")
    CANCELLED = (1, "cancelled")
    UNKNOWN = (2, "unknown")
    INVALID_ARGUMENT = (3, "invalid argument")
    DEADLINE_EXCEEDED = (4, "deadline exceeded")
    NOT_FOUND = (5, "not found")
    ALREADY_EXISTS = (6, "already exists")
    PERMISSION_DENIED = (7, "permission denied")
    RESOURCE_EXHAUSTED = (8, "resource exhausted")
    FAILED_PRECONDITION = (9, "failed precondition")
    ABORTED = (10, "aborted")
    OUT_OF_RANGE = (11, "out of range")
    UNIMPLEMENTED = (12, "unimplemented")
    INTERNAL = (13, "internal")
    UNAVAILABLE = (14, "unavailable")
    DATA_LOSS = (15, "data loss")
    UNAUTHENTICATED = (16, "unauthenticated")

class RpcContext:
    def is_active(self) -> bool: ...
    def time_remaining(self) -> Optional[float]: ...
    def cancel(self) -> bool: ...

class Call(RpcContext):
    def initial_metadata(self) -> Optional[Metadata]: ...
    def trailing_metadata(self) -> Optional[Metadata]: ...
    def code(self) -> StatusCode: ...
    def details(self) -> Optional[str]: ...

class RpcError(Exception):
    def code(self) -> StatusCode: ...
    def details(self) -> Optional[str]: ...
    def trailing_metadata(self) -> Optional[Metadata]: ...

class ChannelCredentials: ...

class Channel:
    def close(self) -> None: ...
    def __enter__(self) -> Channel: ...
    def __exit__(self, *args: object) -> None: ...

def insecure_channel(
    target: str, options: Optional[ChannelOptions] = ..., compression: Any = ...
) -> Channel: ...
def secure_channel(
    target: str,
    credentials: ChannelCredentials,
    options: Optional[ChannelOptions] = ...,
    compression: Any = ...,
) -> Channel: ...
def ssl_channel_credentials(
    root_certificates: Optional[bytes] = ...,
    private_key: Optional[bytes] = ...,
    certificate_chain: Optional[bytes] = ...,
) -> ChannelCredentials: ...
