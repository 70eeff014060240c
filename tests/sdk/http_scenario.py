#!/usr/bin/python3
"""Runs the SDK scenario (tests/sdk/SCENARIO.md) over quantd's HTTP/JSON face
with nothing but Python's http.client, as curl would.

    tests/sdk/http_scenario.py --http 127.0.0.1:8080 --model models/stories260K \
        --eval tests/data/tinystories-sample.txt --output-dir /tmp/scenario --run r1

Progress goes to stderr; the transcript (one JSON object) to stdout.
"""

import argparse
import http.client
import json
import os
import sys
import urllib.parse


class HttpError(Exception):
    """A non-2xx answer: the HTTP status and the JSON error's "error" object."""

    def __init__(self, http_status: int, error: dict):
        super().__init__(f"HTTP {http_status}: {error.get('status')}: {error.get('message')}")
        self.http_status = http_status
        self.error = error

    def detail(self, type_name: str) -> dict:
        for d in self.error.get("details", []):
            if d.get("@type") == "type.googleapis.com/" + type_name:
                return d
        return {}


class Http:
    """Requests to quantd's --http-listen address, each on a connection of
    its own as curl makes them: a kept-alive connection left idle while a
    job runs is closed by the server (its keep-alive timeout), and a request
    sent on it would be lost."""

    def __init__(self, address: str, token: str = None, timeout: float = 600):
        host, _, port = address.rpartition(":")
        self.host, self.port, self.timeout = host.strip("[]"), int(port), timeout
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}

    def call(self, method: str, path: str, body: dict = None, headers: dict = None) -> dict:
        data = None if body is None else json.dumps(body).encode()
        h = {**self.headers, **(headers or {})}
        if data is not None:
            h["Content-Type"] = "application/json"
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            conn.request(method, path, body=data, headers=h)
            response = conn.getresponse()
            payload = response.read()
        finally:
            conn.close()
        if response.status // 100 != 2:
            raise HttpError(response.status, json.loads(payload)["error"])
        return json.loads(payload)

    def events(self, path: str, headers: dict = None):
        """The server-sent events of a stream, as (id, event, data) until it
        ends, on a connection of its own."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            conn.request("GET", path, headers={**self.headers, **(headers or {})})
            response = conn.getresponse()
            if response.status != 200:
                raise HttpError(response.status, json.loads(response.read())["error"])
            event_id, kind, data = None, "message", []
            for raw in response:
                line = raw.decode().rstrip("\r\n")
                if line == "":
                    if data:
                        yield event_id, kind, "\n".join(data)
                    event_id, kind, data = None, "message", []
                elif line.startswith(":"):
                    continue  # a heartbeat
                else:
                    field, _, value = line.partition(":")
                    value = value[1:] if value.startswith(" ") else value
                    if field == "id":
                        event_id = value
                    elif field == "event":
                        kind = value
                    elif field == "data":
                        data.append(value)
        finally:
            conn.close()


def job_spec(args: argparse.Namespace, role: str) -> dict:
    return {
        "modelUri": "file://" + os.path.abspath(args.model),
        "quantization": {"scheme": "w_int8_per_channel_sym"},
        "evaluation": {
            "datasetUri": "file://" + os.path.abspath(args.eval),
            "nCtx": 256,
            "maxWindows": 4,
        },
        "export": {"outputUri": "file://" + os.path.join(os.path.abspath(args.output_dir), role)},
        "labels": {"sdk-scenario": args.run, "role": role},
    }


def refused(client: Http, args: argparse.Namespace) -> dict:
    spec = {
        "modelUri": "file://" + os.path.abspath(args.model),
        "quantization": {"scheme": "w_int9_bogus"},
        "labels": {"Bad Key": "x"},
    }
    try:
        job = client.call("POST", "/v1/jobs", {"spec": spec, "requestId": f"{args.run}-refused"})
    except HttpError as e:
        return {
            "code": e.error["status"],
            "reason": e.detail("google.rpc.ErrorInfo").get("reason", ""),
            "field_violations": [
                {"field": v.get("field", ""), "description": v.get("description", "")}
                for v in e.detail("google.rpc.BadRequest").get("fieldViolations", [])
            ],
        }
    raise SystemExit(f"quantd accepted the bad spec as {job['name']}")


def watch(client: Http, name: str) -> dict:
    states, sequences = [], []
    counts = {"blockMetrics": 0, "result": 0}
    last_percent = None
    for event_id, kind, data in client.events(f"/v1/{name}:watch"):
        if kind == "error":
            raise SystemExit(f"the watch stream failed: {data}")
        event = json.loads(data)
        sequence = int(event.get("sequence", "0"))
        if event_id != str(sequence):
            raise SystemExit(f"event id {event_id} is not the sequence {sequence}")
        sequences.append(sequence)
        if "state" in event:
            states.append(event["state"])
        elif "progress" in event:
            p = event["progress"]
            last_percent = p.get("percent", 0.0)
            print(f"[{last_percent:5.1f}%] {p.get('stage', '').lower()}", file=sys.stderr)
        for kind_name in counts:
            if kind_name in event:
                counts[kind_name] += 1
    return {
        "states": states,
        "block_metrics": counts["blockMetrics"],
        "results": counts["result"],
        "progress_last_percent": None if last_percent is None else f"{last_percent:.1f}",
        "sequences_contiguous": sequences == list(range(1, len(sequences) + 1)),
    }


def result(job: dict) -> dict:
    m = job.get("result", {}).get("metrics", {})
    (artifact,) = job["result"]["artifacts"]
    quantized = m.get("quantizedPerplexity", {})
    protocol = quantized.get("protocol", {})
    return {
        "state": job["state"],
        "float_perplexity": f"{m.get('floatPerplexity', {}).get('perplexity', 0.0):.4f}",
        "quantized_perplexity": f"{quantized.get('perplexity', 0.0):.4f}",
        "eval_windows": protocol.get("windows", 0),
        "eval_tokens": int(protocol.get("tokens", "0")),
        "blocks": len(m.get("blocks", [])),
        "artifact_accepted": artifact.get("accepted", False),
        "artifact_files": [
            {"path": f.get("path", ""), "bytes": int(f.get("bytes", "0")), "sha256": f.get("sha256", "")}
            for f in sorted(artifact.get("files", []), key=lambda f: f.get("path", ""))
        ],
    }


def list_pages(client: Http, run: str) -> list:
    pages, token = [], ""
    while True:
        query = urllib.parse.urlencode({"labels[sdk-scenario]": run, "page_size": 1, "page_token": token})
        page = client.call("GET", f"/v1/jobs?{query}")
        pages.append(page.get("jobs", []))
        token = page.get("nextPageToken", "")
        if not token:
            return pages


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", required=True, help="quantd's --http-listen HOST:PORT")
    parser.add_argument("--model", required=True)
    parser.add_argument("--eval", required=True)
    parser.add_argument("--output-dir", required=True)
    parser.add_argument("--run", required=True)
    parser.add_argument("--token")
    args = parser.parse_args()

    client = Http(args.http, token=args.token)
    transcript = {"refused": refused(client, args)}
    a = client.call("POST", "/v1/jobs", {"spec": job_spec(args, "a"), "requestId": f"{args.run}-a"})
    transcript["submitted_state"] = a["state"]
    b = client.call("POST", "/v1/jobs", {"spec": job_spec(args, "b"), "requestId": f"{args.run}-b"})
    transcript["cancelled_state"] = client.call("POST", f"/v1/{b['name']}:cancel", {})["state"]
    print(f"submitted {a['name']}, cancelled {b['name']}", file=sys.stderr)
    transcript["watch"] = watch(client, a["name"])
    transcript["result"] = result(client.call("GET", f"/v1/{a['name']}"))
    pages = list_pages(client, args.run)
    jobs = [j for page in pages for j in page]
    transcript["list"] = {
        "page_sizes": [len(page) for page in pages],
        "roles": [j.get("spec", {}).get("labels", {}).get("role", "") for j in jobs],
        "states": [j["state"] for j in jobs],
    }
    print(json.dumps(transcript, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
