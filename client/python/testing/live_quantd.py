"""A real quantd process for the client tests (SDKs and quantctl).

Starts //server:quantd from the test's runfiles on 127.0.0.1 with a free port
(--port-file tells which), optionally with local workers, and stops it (and
its process group) when the test is done.
"""

import hashlib
import os
import signal
import subprocess
import tempfile
import time


def runfiles_root() -> str:
    """The main repository's runfiles directory (Bazel runs tests there)."""
    srcdir = os.environ.get("TEST_SRCDIR")
    if srcdir:
        return os.path.join(srcdir, os.environ.get("TEST_WORKSPACE", "quantd"))
    return os.getcwd()


def runfile(relative: str) -> str:
    return os.path.join(runfiles_root(), relative)


def temp_dir(name: str) -> str:
    base = os.environ.get("TEST_TMPDIR") or tempfile.gettempdir()
    path = os.path.join(base, name)
    os.makedirs(path, exist_ok=True)
    return path


def sha256_file(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def write_tokens_file(path: str, token: str) -> None:
    """A file for quantd --auth-tokens: the token's sha256, tenant "acme",
    role "submitter"."""
    with open(path, "w") as f:
        f.write(f"{hashlib.sha256(token.encode()).hexdigest()} acme submitter\n")


def make_pki(directory: str) -> None:
    """openssl: a CA (ca.pem), a server certificate for 127.0.0.1 and
    localhost (server.pem, server.key) and a client certificate (client.pem,
    client.key), for TLS and mTLS tests."""

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True, timeout=60)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
            "/CN=quantd test CA", "-keyout", "ca.key", "-out", "ca.pem")  # fmt: skip
    with open(os.path.join(directory, "server.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for name, ext in (("server", ["-extfile", "server.ext"]), ("client", [])):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}",
                "-keyout", f"{name}.key", "-out", f"{name}.csr")  # fmt: skip
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-CAcreateserial", "-days", "2", "-out", f"{name}.pem", *ext)  # fmt: skip


def mtls_flags(directory: str) -> list:
    """quantd flags for mTLS with make_pki's files."""
    return [
        f"--tls-cert={os.path.join(directory, 'server.pem')}",
        f"--tls-key={os.path.join(directory, 'server.key')}",
        f"--tls-client-ca={os.path.join(directory, 'ca.pem')}",
    ]


class LiveQuantd:
    """quantd with its data under TEST_TMPDIR/<name>."""

    def __init__(self, name: str, local_workers: int = 0, extra_flags=(), env=None):
        self.data_dir = temp_dir(name)
        self.log_path = os.path.join(self.data_dir, "quantd.log")
        port_file = os.path.join(self.data_dir, "port")
        if os.path.exists(port_file):
            os.remove(port_file)
        argv = [
            runfile("server/quantd"),
            "--listen=127.0.0.1:0",
            f"--data-dir={self.data_dir}",
            f"--port-file={port_file}",
            f"--local-workers={local_workers}",
            f"--worker-binary={runfile('worker/quantd-worker')}",
            # The SDK tests name their own files and models that need not
            # exist; the URI policy itself is tested in server/ and tests/.
            "--allowed-uri-roots=" + ",".join(["file:///"] + [
                d for d in [os.environ.get("TEST_TMPDIR")] if d]),
            *extra_flags,
        ]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, **(env or {})},
            )
        deadline = time.monotonic() + 600  # a ceiling for a hang; slow machines start slowly
        self.address = ""
        while time.monotonic() < deadline:
            if os.path.exists(port_file):
                with open(port_file) as f:
                    self.address = f.readline().strip()
                if self.address:
                    return
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"quantd did not start:\n{self.log()}")

    def log(self) -> str:
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def stop(self) -> None:
        if self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def __enter__(self) -> "LiveQuantd":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
