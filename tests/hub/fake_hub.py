#!/usr/bin/env python3
"""A small stand-in for the Hugging Face Hub's HTTP API, for quantd's tests.

It serves repos made from local directories, on 127.0.0.1 at a free port that
it writes to --port-file, and appends one JSON line per request to --log.

Endpoints (datasets use the /api/datasets/ and /datasets/ prefixes):
  GET       /api/models/{org}/{name}/revision/{rev}[?blobs=true]
  HEAD/GET  /{org}/{name}/resolve/{rev}/{path...}
              plain git files: 200/206 with the bytes, ETag = git blob id;
              LFS files: 302 to /cdn/{sha256} with X-Linked-Etag/-Size.
  HEAD/GET  /cdn/{sha256}    the LFS blob's bytes (no auth), Range honoured.
Anything else answers 404.  Every repo answer carries X-Repo-Commit, and
errors carry X-Error-Code (RepositoryNotFound, RevisionNotFound,
EntryNotFound, GatedRepo) like the real Hub.

Fault injection for download tests: --drop-after-bytes, --corrupt,
--ignore-range, --cross-scheme-redirect and --bytes-per-second (see --help).

Standard library only; run with /usr/bin/python3 (3.11).
"""

import argparse
import hashlib
import http.server
import json
import os
import signal
import socket
import sys
import threading
import time
import urllib.parse

LFS_SUFFIXES = (".safetensors", ".gguf", ".bin", ".model", ".parquet")
API_KINDS = {"models": "model", "datasets": "dataset"}  # /api/{word}/ -> type


def git_blob_id(data):
    """What `git hash-object` prints for these bytes."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class RepoFile:
    """One file of a repo: its path in the repo, where it lives, its hashes."""

    def __init__(self, rel, local):
        self.rel, self.local = rel, local
        data = self.read()
        self.size = len(data)
        self.sha256 = hashlib.sha256(data).hexdigest()
        self.lfs = rel.endswith(LFS_SUFFIXES)
        if self.lfs:
            # git stores an LFS file as this pointer; its blob id is the ETag.
            pointer = ("version https://git-lfs.github.com/spec/v1\n"
                       f"oid sha256:{self.sha256}\n"
                       f"size {self.size}\n").encode()
            self.pointer_size = len(pointer)
            self.blob_id = git_blob_id(pointer)
        else:
            self.blob_id = git_blob_id(data)

    def read(self):
        with open(self.local, "rb") as f:
            return f.read()


class Repo:
    """A repo built from the regular files under a directory (recursively)."""

    def __init__(self, repo_id, directory):
        self.id, self.files = repo_id, {}
        for root, dirs, names in os.walk(directory):
            dirs.sort()
            for name in sorted(names):
                local = os.path.join(root, name)
                if os.path.islink(local) or not os.path.isfile(local):
                    continue
                rel = os.path.relpath(local, directory).replace(os.sep, "/")
                self.files[rel] = RepoFile(rel, local)
        lines = sorted(f"{p}:{f.sha256}\n" for p, f in self.files.items())
        self.commit = hashlib.sha1("".join(lines).encode()).hexdigest()


class HubError(Exception):
    """An error answer: HTTP status, X-Error-Code (or None) and message."""

    def __init__(self, status, code, message):
        super().__init__(message)
        self.status, self.code = status, code


class Hub:
    """Everything the handlers share: repos, options, log, per-blob state."""

    def __init__(self, args):
        self.args = args
        self.repos = {}  # (repo type, "org/name") -> Repo
        for kind, specs in (("model", args.model), ("dataset", args.dataset)):
            for spec in specs:
                repo_id, sep, directory = spec.partition("=")
                if (not sep or repo_id.count("/") != 1
                        or not os.path.isdir(directory)):
                    sys.exit(f"fake_hub: bad --{kind} {spec!r}")
                self.repos[(kind, repo_id)] = Repo(repo_id, directory)
        # sha256 -> RepoFile, for the LFS blobs served at /cdn
        self.blobs = {f.sha256: f for repo in self.repos.values()
                      for f in repo.files.values() if f.lfs}
        self.private = set(args.private)
        self.dropped = set()  # sha256 of blobs whose first GET was cut short
        self.lock = threading.Lock()
        self.log = open(args.log, "a", encoding="utf-8")

    def write_log(self, record):
        with self.lock:
            self.log.write(json.dumps(record) + "\n")
            self.log.flush()

    def take_first_get(self, sha256):
        """True once per blob: the GET that --drop-after-bytes cuts short."""
        with self.lock:
            if sha256 in self.dropped:
                return False
            self.dropped.add(sha256)
            return True

    def content(self, f):
        """A file's bytes as served, with the --corrupt fault applied."""
        data = f.read()
        if f.rel in self.args.corrupt and data:
            mid = len(data) // 2
            data = data[:mid] + bytes([data[mid] ^ 0xFF]) + data[mid + 1:]
        return data


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake_hub/1"

    def log_message(self, *args):
        pass  # the JSON log replaces the default per-request stderr lines

    def do_GET(self):
        self.handle_request(head=False)

    def do_HEAD(self):
        self.handle_request(head=True)

    def do_other(self):
        """Any other method: 404, and close since the body is left unread."""
        self.close_connection = True
        self.handle_request(head=False, endpoint=False)

    do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_other

    # ---- plumbing ---------------------------------------------------------

    def handle_request(self, head, endpoint=True):
        self.head, self.status, self.body_bytes = head, None, 0
        self.logged = False
        url = urllib.parse.urlsplit(self.path)
        self.url = url
        try:
            if not endpoint:
                raise HubError(404, None, f"no {self.command} endpoints")
            self.route(url)
        except HubError as e:
            headers = {"Content-Type": "application/json"}
            if e.code:
                headers["X-Error-Code"] = e.code
            body = json.dumps({"error": str(e)}).encode()
            self.reply(e.status, headers, body)
        if not self.logged:
            self.log_request_line()

    def log_request_line(self):
        """Appends this request's record. reply() calls it before the body
        goes out, so a client that has read a whole answer finds its line."""
        self.logged = True
        self.server.hub.write_log({
            "method": self.command, "path": self.url.path, "query": self.url.query,
            "range": self.headers.get("Range"), "auth": self.auth_state(),
            "status": self.status, "body_bytes": self.body_bytes})

    def auth_state(self):
        value = self.headers.get("Authorization")
        if value is None:
            return "none"
        token = self.server.hub.args.token
        ok = token is not None and value == f"Bearer {token}"
        return "ok" if ok else "bad"

    def reply(self, status, headers, body=b"", limit=None, rate=None):
        """Send status, headers and Content-Length, then the body unless HEAD.

        With `limit`, only that many body bytes go out before the connection
        is cut; with `rate`, the body goes out in 0.1 s chunks of rate/10.
        """
        self.status = status
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        if self.head:
            self.log_request_line()
            self.end_headers()
            return
        if limit is not None:
            body = body[:limit]
        self.body_bytes = len(body)  # what this answer sends (or cuts off at)
        self.log_request_line()
        self.end_headers()
        step = max(1, rate // 10) if rate else max(1, len(body))
        try:
            for start in range(0, len(body), step):
                if rate and start:
                    time.sleep(step / rate)
                self.wfile.write(body[start:start + step])
            if limit is not None:
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:  # the client went away, or shutdown raced it
            self.close_connection = True

    def send_bytes(self, data, headers, ranged=True, drop_key=None,
                   rate=None):
        """Answer 200, 206 or 416 for `data`, following the Range header.

        With `drop_key` (a blob's sha256), the first GET that sends a body
        for that key is cut after --drop-after-bytes bytes.
        """
        headers = dict(headers, **{"Accept-Ranges": "bytes"})
        size, status = len(data), 200
        span = parse_range(self.headers.get("Range")) if ranged else None
        if span is not None:
            first, last = span
            if first >= size:
                headers["Content-Range"] = f"bytes */{size}"
                return self.reply(416, headers)
            last = size - 1 if last is None else min(last, size - 1)
            headers["Content-Range"] = f"bytes {first}-{last}/{size}"
            data, status = data[first:last + 1], 206
        hub = self.server.hub
        cut = drop_key and not self.head and hub.take_first_get(drop_key)
        limit = hub.args.drop_after_bytes if cut else None
        self.reply(status, headers, data, limit=limit, rate=rate)

    # ---- routes -----------------------------------------------------------

    def route(self, url):
        parts = [urllib.parse.unquote(p) for p in url.path.split("/")[1:]]
        query = urllib.parse.parse_qs(url.query)
        if parts[:1] == ["api"] and len(parts) >= 6 and parts[4] == "revision":
            kind = API_KINDS.get(parts[1])
            if kind:
                blobs = query.get("blobs", [""])[-1].lower() == "true"
                return self.api_revision(kind, "/".join(parts[2:4]),
                                         "/".join(parts[5:]), blobs)
        if parts[:1] == ["cdn"] and len(parts) == 2:
            return self.cdn(parts[1])
        kind = "model"
        if parts[:1] == ["datasets"]:
            kind, parts = "dataset", parts[1:]
        if len(parts) >= 5 and parts[2] == "resolve":
            return self.resolve(kind, "/".join(parts[:2]), parts[3],
                                "/".join(parts[4:]))
        raise HubError(404, None, f"no such endpoint: {url.path}")

    def find_repo(self, kind, repo_id, rev):
        """The repo, after the existence, auth and revision checks."""
        hub = self.server.hub
        repo = hub.repos.get((kind, repo_id))
        if repo is None:
            raise HubError(404, "RepositoryNotFound", f"{repo_id} not found")
        if repo_id in hub.private and self.auth_state() != "ok":
            raise HubError(401, "GatedRepo", f"{repo_id} needs a valid token")
        if rev not in ("main", repo.commit, *hub.args.ref):
            raise HubError(404, "RevisionNotFound", f"no revision {rev!r}")
        return repo

    def api_revision(self, kind, repo_id, rev, blobs):
        repo = self.find_repo(kind, repo_id, rev)
        siblings = []
        for path, f in sorted(repo.files.items()):
            entry = {"rfilename": path}
            if blobs:
                entry.update(size=f.size, blobId=f.blob_id)
                if f.lfs:
                    entry["lfs"] = {"sha256": f.sha256, "size": f.size,
                                    "pointerSize": f.pointer_size}
            siblings.append(entry)
        body = json.dumps({"id": repo.id, "sha": repo.commit,
                           "siblings": siblings}).encode()
        self.reply(200, {"Content-Type": "application/json",
                         "X-Repo-Commit": repo.commit}, body)

    def resolve(self, kind, repo_id, rev, path):
        repo = self.find_repo(kind, repo_id, rev)
        f = repo.files.get(path)
        if f is None:
            raise HubError(404, "EntryNotFound", f"{path} not in {repo_id}")
        headers = {"X-Repo-Commit": repo.commit, "ETag": f'"{f.blob_id}"'}
        if not f.lfs:
            headers["Content-Type"] = "application/octet-stream"
            return self.send_bytes(self.server.hub.content(f), headers)
        if path in self.server.hub.args.cross_scheme_redirect:
            location = f"ftp://127.0.0.1/{f.sha256}"
        else:
            port = self.server.server_address[1]
            location = (f"http://127.0.0.1:{port}/cdn/{f.sha256}?filename="
                        + urllib.parse.quote(path, safe=""))
        headers.update({"Location": location,
                        "X-Linked-Etag": f'"{f.sha256}"',
                        "X-Linked-Size": str(f.size)})
        self.reply(302, headers)

    def cdn(self, sha256):
        hub = self.server.hub
        f = hub.blobs.get(sha256)
        if f is None:
            raise HubError(404, None, f"no blob {sha256}")
        n = hub.args.drop_after_bytes
        cut = n is not None and f.size > n  # small blobs are never cut
        headers = {"Content-Type": "application/octet-stream",
                   "ETag": f'"{sha256}"'}
        self.send_bytes(hub.content(f), headers,
                        ranged=not hub.args.ignore_range,
                        drop_key=sha256 if cut else None,
                        rate=hub.args.bytes_per_second)


def parse_range(value):
    """(first, last or None) for "bytes=A-" / "bytes=A-B"; None otherwise."""
    if not value or not value.startswith("bytes="):
        return None
    first, sep, last = value[len("bytes="):].strip().partition("-")
    if not sep or not first.isdigit() or (last and not last.isdigit()):
        return None  # suffix, multi-range or junk: serve the whole body
    if last and int(last) < int(first):
        return None
    return int(first), int(last) if last else None


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port-file", required=True, help="gets the port")
    p.add_argument("--log", required=True, help="JSON-lines request log")
    repeated = (("--model", "ORG/NAME=DIR"), ("--dataset", "ORG/NAME=DIR"),
                ("--private", "ORG/NAME"))
    for flag, meta in repeated:
        p.add_argument(flag, action="append", default=[], metavar=meta)
    p.add_argument("--ref", action="append", default=[], metavar="REF",
                   help="another revision name every repo answers, e.g. refs/convert/parquet")
    p.add_argument("--token", help="the token private repos accept")
    p.add_argument("--drop-after-bytes", type=int, metavar="N",
                   help="cut each blob's first /cdn GET after N body bytes")
    p.add_argument("--corrupt", action="append", default=[], metavar="FILE",
                   help="flip the middle byte of this file as served")
    p.add_argument("--ignore-range", action="store_true",
                   help="/cdn always answers 200 with the whole blob")
    p.add_argument("--cross-scheme-redirect", action="append", default=[],
                   metavar="FILE", help="redirect this LFS file to ftp://")
    p.add_argument("--bytes-per-second", type=int, metavar="N",
                   help="throttle /cdn bodies to about N bytes/s")
    args = p.parse_args()

    hub = Hub(args)  # hashes every file before the port is announced
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.hub = hub

    tmp = args.port_file + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(str(server.server_address[1]))
    os.replace(tmp, args.port_file)

    def stop(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, stop)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        server.hub.log.close()


if __name__ == "__main__":
    main()
