"""Client: submit, wait for, inspect, list and cancel quantd jobs.

Every call raises QuantdError when quantd refuses it. Job names may be given
as "jobs/<id>" or the bare id.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import time
import uuid
from typing import (
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Optional,
    Protocol,
    Sequence,
    Tuple,
    TypeVar,
    Union,
    cast,
)

import grpc
from google.protobuf import json_format

from quantd_client._protos import job_pb2, quantization_service_pb2 as service_pb2
from quantd_client._protos import quantization_service_pb2_grpc as service_grpc
from quantd_client.errors import QuantdError

SpecLike = Union[job_pb2.JobSpec, Mapping[str, object]]
StateLike = Union[int, str]
_Metadata = Tuple[Tuple[str, str], ...]

_Req = TypeVar("_Req", contravariant=True)
_Resp = TypeVar("_Resp", covariant=True)
_Q = TypeVar("_Q")
_R = TypeVar("_R")


# grpc_python_plugin writes no .pyi for quantization_service_pb2_grpc (mypy
# skips that module, see mypy/mypy.ini), so the stub's methods are typed here.
class _Unary(Protocol[_Req, _Resp]):
    def __call__(self, request: _Req, *, timeout: float, metadata: _Metadata) -> _Resp:
        ...


class _EventStream(Protocol):
    def __iter__(self) -> Iterator[job_pb2.JobEvent]:
        ...

    def cancel(self) -> bool:
        ...


class _WatchMethod(Protocol):
    def __call__(
        self, request: service_pb2.WatchJobRequest, *, metadata: _Metadata
    ) -> _EventStream:
        ...


class _ServiceStub(Protocol):
    CreateJob: _Unary[service_pb2.CreateJobRequest, job_pb2.Job]
    GetJob: _Unary[service_pb2.GetJobRequest, job_pb2.Job]
    ListJobs: _Unary[service_pb2.ListJobsRequest, service_pb2.ListJobsResponse]
    CancelJob: _Unary[service_pb2.CancelJobRequest, job_pb2.Job]
    WatchJob: _WatchMethod


@dataclasses.dataclass(frozen=True)
class TlsOptions:
    """TLS settings. Without ca_file the system roots verify the server;
    cert_file and key_file present a client certificate (mTLS)."""

    ca_file: Optional[str] = None
    cert_file: Optional[str] = None
    key_file: Optional[str] = None
    # Name to verify the server certificate against instead of the address.
    server_name: Optional[str] = None


def _read(path: Optional[str]) -> Optional[bytes]:
    if path is None:
        return None
    with open(path, "rb") as f:
        return f.read()


def job_name(name: str) -> str:
    """"jobs/<id>" for a name or a bare id."""
    return name if name.startswith("jobs/") else "jobs/" + name


def parse_state(state: StateLike) -> job_pb2.JobState:
    """A JobState from its number or its name in any case ("succeeded")."""
    if isinstance(state, int):
        return cast(job_pb2.JobState, state)
    try:
        return cast(job_pb2.JobState, job_pb2.JobState.Value(state.upper()))
    except ValueError:
        names = ", ".join(n.lower() for n in job_pb2.JobState.keys()[1:])
        raise ValueError(f"unknown job state {state!r}; one of {names}") from None


def is_loopback(address: str) -> bool:
    """Whether a gRPC target is this machine: a Unix socket, "localhost", or a
    loopback IP literal. Other names may resolve anywhere, so they are not."""
    if address.startswith(("unix:", "unix-abstract:")):
        return True
    host = address.removeprefix("dns:///").removeprefix("ipv4:").removeprefix("ipv6:")
    if host.startswith("["):
        host = host[1 : host.find("]")] if "]" in host else host
    elif host.count(":") == 1:
        host = host.split(":")[0]
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Client:
    """A connection to one quantd frontend.

    Args:
      address: "host:port" of quantd.
      token: bearer token, sent as "authorization: Bearer <token>" on every call.
      tls: None or False for plaintext, True for TLS with the system roots,
        or TlsOptions.
      timeout: deadline in seconds of each unary call.
      unavailable_retry_seconds: how long submit, the reads and wait keep
        retrying while quantd is UNAVAILABLE (a restart or a failover).
      allow_plaintext_token: send `token` over a plaintext connection to an
        address that is not loopback (a trusted network). Without it such a
        client raises ValueError: anyone on the path could read the token.
    """

    def __init__(
        self,
        address: str = "127.0.0.1:50051",
        token: Optional[str] = None,
        tls: Union[None, bool, TlsOptions] = None,
        *,
        timeout: float = 30.0,
        unavailable_retry_seconds: float = 60.0,
        allow_plaintext_token: bool = False,
    ) -> None:
        plaintext = tls is None or tls is False
        if token and plaintext and not allow_plaintext_token and not is_loopback(address):
            raise ValueError(
                f"refusing to send a bearer token over plaintext to {address!r}: "
                "use tls, or allow_plaintext_token=True on a trusted network"
            )
        self._timeout = timeout
        self._retry_seconds = unavailable_retry_seconds
        self._metadata: _Metadata = (("authorization", f"Bearer {token}"),) if token else ()
        if plaintext:
            self._channel = grpc.insecure_channel(address)
        else:
            opts = tls if isinstance(tls, TlsOptions) else TlsOptions()
            creds = grpc.ssl_channel_credentials(
                root_certificates=_read(opts.ca_file),
                private_key=_read(opts.key_file),
                certificate_chain=_read(opts.cert_file),
            )
            options: list[Tuple[str, str]] = []
            if opts.server_name:
                options.append(("grpc.ssl_target_name_override", opts.server_name))
            self._channel = grpc.secure_channel(address, creds, options=options)
        self._stub: _ServiceStub = service_grpc.QuantizationServiceStub(self._channel)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: _Unary[_Q, _R], request: _Q, retry: bool = True) -> _R:
        deadline = time.monotonic() + self._retry_seconds
        delay = 0.25
        while True:
            try:
                return method(request, timeout=self._timeout, metadata=self._metadata)
            except grpc.RpcError as e:
                if (
                    retry
                    and e.code() == grpc.StatusCode.UNAVAILABLE
                    and time.monotonic() + delay < deadline
                ):
                    time.sleep(delay)
                    delay = min(delay * 2, 2.0)
                    continue
                raise QuantdError.from_rpc_error(e) from None

    def submit(
        self,
        spec: SpecLike,
        request_id: Optional[str] = None,
        *,
        validate_only: bool = False,
    ) -> job_pb2.Job:
        """Creates a job. `spec` is a JobSpec or its proto3 JSON as a dict.

        Without request_id a random one is used, so the retries this method
        makes while quantd is unavailable never create a second job.
        """
        if not isinstance(spec, job_pb2.JobSpec):
            spec = json_format.ParseDict(spec, job_pb2.JobSpec())
        request = service_pb2.CreateJobRequest(
            spec=spec,
            request_id=request_id or f"py-{uuid.uuid4().hex}",
            validate_only=validate_only,
        )
        return self._call(self._stub.CreateJob, request)

    def get(self, name: str) -> job_pb2.Job:
        return self._call(self._stub.GetJob, service_pb2.GetJobRequest(name=job_name(name)))

    def cancel(self, name: str) -> job_pb2.Job:
        """Cancels a job: QUEUED ends CANCELLED, RUNNING goes to CANCELLING.
        A finished job raises FAILED_PRECONDITION (JOB_ALREADY_FINISHED)."""
        return self._call(
            self._stub.CancelJob, service_pb2.CancelJobRequest(name=job_name(name)), retry=False
        )

    def list(
        self,
        state: Union[None, StateLike, Iterable[StateLike]] = None,
        labels: Optional[Mapping[str, str]] = None,
        *,
        order_by: str = "",
        page_size: int = 0,
        view: str = "basic",
    ) -> Iterator[job_pb2.Job]:
        """Every matching job, fetching pages of `page_size` (0: the server's
        default) as the iteration goes. `view` "basic" (the default) leaves out
        each job's quantization config content and per-block metrics; "full"
        returns every field, as `get` does."""
        for page in self.list_pages(
            state, labels, order_by=order_by, page_size=page_size, view=view
        ):
            yield from page.jobs

    def list_pages(
        self,
        state: Union[None, StateLike, Iterable[StateLike]] = None,
        labels: Optional[Mapping[str, str]] = None,
        *,
        order_by: str = "",
        page_size: int = 0,
        view: str = "basic",
    ) -> Iterator[service_pb2.ListJobsResponse]:
        """As `list`, one ListJobsResponse per page, following next_page_token
        until it is empty."""
        views = {"basic": service_pb2.BASIC, "full": service_pb2.FULL}
        if view.lower() not in views:
            raise ValueError(f"view must be 'basic' or 'full', got {view!r}")
        if state is None:
            states: Sequence[job_pb2.JobState] = ()
        elif isinstance(state, (int, str)):
            states = (parse_state(state),)
        else:
            states = tuple(parse_state(s) for s in state)
        request = service_pb2.ListJobsRequest(
            page_size=page_size,
            states=states,
            labels=dict(labels or {}),
            order_by=order_by,
            view=views[view.lower()],
        )
        while True:
            response = self._call(self._stub.ListJobs, request)
            yield response
            if not response.next_page_token:
                return
            request.page_token = response.next_page_token

    def watch(self, name: str, after_sequence: int = 0) -> Iterator[job_pb2.JobEvent]:
        """The job's events after `after_sequence`, live until the job ends.

        When the stream breaks with UNAVAILABLE (quantd restarting, a
        frontend failing over) it is reopened after the last event received,
        for up to `unavailable_retry_seconds`, so no event is lost or repeated.
        """
        name = job_name(name)
        after = after_sequence
        retry_until = None
        while True:
            stream = self._stub.WatchJob(
                service_pb2.WatchJobRequest(name=name, after_sequence=after),
                metadata=self._metadata,
            )
            try:
                for event in stream:
                    after = event.sequence
                    retry_until = None
                    yield event
                return
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.UNAVAILABLE:
                    raise QuantdError.from_rpc_error(e) from None
                now = time.monotonic()
                retry_until = retry_until or now + self._retry_seconds
                if now >= retry_until:
                    raise QuantdError.from_rpc_error(e) from None
                time.sleep(0.5)
            finally:
                stream.cancel()

    def wait(
        self,
        name: str,
        on_progress: Optional[Callable[[job_pb2.Progress], None]] = None,
        *,
        on_event: Optional[Callable[[job_pb2.JobEvent], None]] = None,
        after_sequence: int = 0,
    ) -> job_pb2.Job:
        """Follows the job with WatchJob until it ends and returns it.

        on_progress gets each Progress update; on_event gets every event
        (states, progress, logs, block metrics, the result). The returned
        job may be FAILED or CANCELLED: check job.state (QuantdError.
        from_job_error(job.error) turns its error into an exception).
        """
        for event in self.watch(name, after_sequence):
            if on_event is not None:
                on_event(event)
            if on_progress is not None and event.WhichOneof("payload") == "progress":
                on_progress(event.progress)
        return self.get(name)
