#!/usr/bin/python3
"""quantd's HTTP/JSON face against a live quantd: the SDK scenario over
http.client (http_scenario.py), bearer authentication, the error shapes of
404/405/400/413, server-sent events with Last-Event-ID resumption and
heartbeats, the stream limit giving slots back when clients go away, and
/openapi.json describing every response served."""

import hashlib
import http.client
import json
import os
import socket
import subprocess
import sys
import time
import unittest
import urllib.parse

import jsonschema

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "client",
                                "python", "testing"))
import live_quantd  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_scenario import Http, HttpError  # noqa: E402

MODEL = live_quantd.runfile("models/stories260K")
EVAL = live_quantd.runfile("tests/data/tinystories-sample.txt")
SCENARIO = live_quantd.runfile("tests/sdk/http_scenario.py")
HTTP_FLAGS = ["--http-listen=127.0.0.1:0", "--http-sse-heartbeat=200ms"]


def http_address(q: live_quantd.LiveQuantd) -> str:
    """quantd's port file: line 3 is the HTTP port."""
    with open(os.path.join(q.data_dir, "port")) as f:
        lines = f.read().split("\n")
    return f"127.0.0.1:{int(lines[2])}"


def raw(address: str, method: str, path: str, body: bytes = None, headers=None):
    host, port = address.split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        conn.close()


def error_of(payload: bytes) -> dict:
    error = json.loads(payload)["error"]
    details = {d["@type"].rsplit("/", 1)[-1]: d for d in error["details"]}
    return {"code": error["code"], "status": error["status"], "message": error["message"],
            "reason": details.get("google.rpc.ErrorInfo", {}).get("reason"),
            "fields": [v["field"] for v in details.get("google.rpc.BadRequest", {}).get(
                "fieldViolations", [])]}


def spec(role: str = "x") -> dict:
    return {"modelUri": "file://" + MODEL, "quantization": {"scheme": "w_int8_per_tensor_sym"},
            "labels": {"role": role}}


class ScenarioTest(unittest.TestCase):
    def test_the_sdk_scenario_over_http(self):
        out = live_quantd.temp_dir("http_scenario_out")
        with live_quantd.LiveQuantd("http_scenario", local_workers=1, extra_flags=HTTP_FLAGS) as q:
            address = http_address(q)
            r = subprocess.run(
                ["/usr/bin/python3", SCENARIO, "--http", address, "--model", MODEL, "--eval", EVAL,
                 "--output-dir", out, "--run", "http-r1"],
                capture_output=True, text=True, timeout=1800)
            self.assertEqual(r.returncode, 0, r.stderr + q.log())
            t = json.loads(r.stdout)

            refused = t["refused"]
            self.assertEqual(refused["code"], "INVALID_ARGUMENT")
            self.assertEqual(refused["reason"], "INVALID_ARGUMENT")
            self.assertEqual([v["field"] for v in refused["field_violations"]],
                             ['spec.labels["Bad Key"]', "spec.quantization.scheme"])
            self.assertIn("w_int9_bogus", refused["field_violations"][1]["description"])
            self.assertEqual(t["submitted_state"], "QUEUED")
            self.assertEqual(t["cancelled_state"], "CANCELLED")
            w = t["watch"]
            self.assertEqual(w["states"][0], "QUEUED")
            self.assertEqual(w["states"][-1], "SUCCEEDED")
            self.assertIn("RUNNING", w["states"])
            self.assertEqual(w["block_metrics"], 5)
            self.assertEqual(w["results"], 1)
            self.assertEqual(w["progress_last_percent"], "100.0")
            self.assertTrue(w["sequences_contiguous"])
            res = t["result"]
            self.assertEqual(res["state"], "SUCCEEDED")
            self.assertGreater(float(res["float_perplexity"]), 1.0)
            self.assertGreater(float(res["quantized_perplexity"]), 1.0)
            self.assertEqual(res["eval_windows"], 4)
            self.assertGreater(res["eval_tokens"], 0)
            self.assertEqual(res["blocks"], 5)
            self.assertTrue(res["artifact_accepted"])
            self.assertTrue(res["artifact_files"])
            for f in res["artifact_files"]:
                with open(os.path.join(out, "a", f["path"]), "rb") as data:
                    content = data.read()
                self.assertEqual(f["bytes"], len(content), f["path"])
                self.assertEqual(f["sha256"], hashlib.sha256(content).hexdigest(), f["path"])
            self.assertEqual(t["list"], {"page_sizes": [1, 1], "roles": ["b", "a"],
                                         "states": ["CANCELLED", "SUCCEEDED"]})

            # Resumption: Last-Event-ID and after_sequence continue after
            # that event, to the same end.
            client = Http(address)
            (a,) = client.call("GET", "/v1/jobs?" + urllib.parse.urlencode(
                {"labels[role]": "a", "labels[sdk-scenario]": "http-r1"}))["jobs"]
            everything = list(client.events(f"/v1/{a['name']}:watch"))
            ids = [int(i) for i, _, _ in everything]
            self.assertEqual(ids, list(range(1, len(ids) + 1)))
            resumed = list(client.events(f"/v1/{a['name']}:watch", headers={"Last-Event-ID": "3"}))
            self.assertEqual(resumed, everything[3:])
            by_query = list(client.events(f"/v1/{a['name']}:watch?after_sequence=3"))
            self.assertEqual(by_query, everything[3:])
            # The header wins over the query (an EventSource reconnects with
            # its original URL).
            both = list(client.events(f"/v1/{a['name']}:watch?after_sequence=1",
                                      headers={"Last-Event-ID": str(len(ids) - 1)}))
            self.assertEqual(both, everything[-1:])


class HttpFaceTest(unittest.TestCase):
    """One quantd without workers (jobs stay QUEUED) and a small body limit."""

    @classmethod
    def setUpClass(cls):
        cls.q = live_quantd.LiveQuantd("http_face", extra_flags=HTTP_FLAGS + ["--max-request-bytes=4096"])
        cls.address = http_address(cls.q)

    @classmethod
    def tearDownClass(cls):
        cls.q.stop()

    def test_unknown_route_and_wrong_method(self):
        status, headers, body = raw(self.address, "GET", "/v2/jobs")
        self.assertEqual(status, 404)
        self.assertEqual(headers["Content-Type"], "application/json")
        e = error_of(body)
        self.assertEqual((e["code"], e["status"], e["reason"]), (404, "NOT_FOUND", "ROUTE_NOT_FOUND"))

        status, headers, body = raw(self.address, "DELETE", "/v1/jobs")
        self.assertEqual(status, 405)
        self.assertEqual(headers["Allow"], "GET, POST")
        e = error_of(body)
        self.assertEqual((e["code"], e["status"], e["reason"]), (405, "UNIMPLEMENTED", "METHOD_NOT_ALLOWED"))
        status, headers, _ = raw(self.address, "GET", "/v1/jobs/abc:cancel")
        self.assertEqual((status, headers["Allow"]), (405, "POST"))

    def test_the_openapi_document_describes_what_is_served(self):
        status, headers, body = raw(self.address, "GET", "/openapi.json")
        self.assertEqual((status, headers["Content-Type"]), (200, "application/json"))
        doc = json.loads(body)
        self.assertEqual(doc["openapi"], "3.0.3")

        def check(path: str, method: str, status: int, payload) -> None:
            """payload against the document's schema of that response."""
            responses = doc["paths"][path][method]["responses"]
            response = responses.get(str(status), responses["default"])
            if "$ref" in response:
                response = doc["components"]["responses"][response["$ref"].rsplit("/", 1)[-1]]
            (content,) = response["content"].values()
            schema = content.get("x-sse-data-schema", content["schema"])
            jsonschema.validate(payload, {**schema, "components": doc["components"]})

        # Every operation the document lists is served, and answers as it says.
        status, _, body = raw(self.address, "POST", "/v1/jobs",
                              json.dumps({"spec": spec("openapi")}).encode(),
                              {"Content-Type": "application/json"})
        self.assertEqual(status, 200, body)
        job = json.loads(body)
        check("/v1/jobs", "post", 200, job)
        job_id = job["name"].removeprefix("jobs/")
        status, _, body = raw(self.address, "GET", f"/v1/jobs/{job_id}")
        check("/v1/jobs/{jobId}", "get", status, json.loads(body))
        status, _, body = raw(self.address, "GET", "/v1/jobs?labels%5Brole%5D=openapi&view=FULL")
        self.assertEqual(len(json.loads(body)["jobs"]), 1)
        check("/v1/jobs", "get", status, json.loads(body))
        status, _, body = raw(self.address, "POST", f"/v1/jobs/{job_id}:cancel", b"{}",
                              {"Content-Type": "application/json"})
        self.assertEqual(json.loads(body)["state"], "CANCELLED")
        check("/v1/jobs/{jobId}:cancel", "post", status, json.loads(body))
        # Another test's streams may hold every slot until the next heartbeat
        # notices they are gone: retried, under a ceiling for a hang.
        deadline = time.monotonic() + 120
        while True:
            status, headers, body = raw(self.address, "GET", f"/v1/jobs/{job_id}:watch")
            if status != 429 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        self.assertEqual((status, headers["Content-Type"]), (200, "text/event-stream"))
        events = [json.loads(line[len(b"data: "):]) for line in body.split(b"\n")
                  if line.startswith(b"data: ")]
        self.assertEqual([e["state"] for e in events if "state" in e], ["QUEUED", "CANCELLED"])
        for e in events:
            check("/v1/jobs/{jobId}:watch", "get", status, e)
        # Errors: the service's and the gateway's.
        status, _, body = raw(self.address, "GET", "/v1/jobs/nope")
        self.assertEqual(status, 404)
        check("/v1/jobs/{jobId}", "get", status, json.loads(body))
        status, _, body = raw(self.address, "GET", "/v1/jobs?page_size=ten")
        self.assertEqual(status, 400)
        check("/v1/jobs", "get", status, json.loads(body))
        # A response the schema does not describe fails the check.
        with self.assertRaises(jsonschema.ValidationError):
            check("/v1/jobs", "post", 200, {**job, "state": ["QUEUED"]})

    def test_bad_query_parameters_are_named_together(self):
        status, _, body = raw(self.address, "GET",
                              "/v1/jobs?bogus=1&page_size=ten&states=NOPE&labels%5Ba%5D=1&labels%5Ba%5D=2")
        self.assertEqual(status, 400)
        e = error_of(body)
        self.assertEqual((e["status"], e["reason"]), ("INVALID_ARGUMENT", "INVALID_ARGUMENT"))
        self.assertEqual(e["fields"], ["bogus", "page_size", "states", "labels[a]"])
        for name in ("bogus", "page_size", "states"):
            self.assertIn(name, e["message"])

    def test_query_binding_reaches_the_service(self):
        client = Http(self.address)
        names = {role: client.call("POST", "/v1/jobs", {"spec": spec(role)})["name"] for role in ("p", "q")}
        page = client.call("GET", "/v1/jobs?labels%5Brole%5D=q&states=QUEUED&states=RUNNING&pageSize=5&view=FULL")
        self.assertEqual([j["name"] for j in page["jobs"]], [names["q"]])
        page = client.call("GET", "/v1/jobs?labels%5Brole%5D=q&states=SUCCEEDED")
        self.assertEqual(page, {})
        # quantd's own validation, as over gRPC.
        with self.assertRaises(HttpError) as cm:
            client.call("GET", "/v1/jobs?page_token=garbage")
        self.assertEqual(cm.exception.http_status, 400)
        self.assertEqual(cm.exception.detail("google.rpc.ErrorInfo")["reason"], "INVALID_PAGE_TOKEN")
        job = client.call("GET", f"/v1/{names['p']}")
        self.assertEqual((job["name"], job["state"]), (names["p"], "QUEUED"))
        with self.assertRaises(HttpError) as cm:
            client.call("GET", "/v1/jobs/01aaaaaaaaaaaaaaaaaaaaaaaa")
        self.assertEqual((cm.exception.http_status, cm.exception.error["status"]), (404, "NOT_FOUND"))

    def test_bodies(self):
        status, _, body = raw(self.address, "POST", "/v1/jobs", b"{\"spec\": ", {"Content-Type": "application/json"})
        self.assertEqual(status, 400)
        self.assertEqual(error_of(body)["fields"], ["(body)"])
        status, _, body = raw(self.address, "POST", "/v1/jobs", b"{}", {"Content-Type": "text/plain"})
        self.assertEqual((status, error_of(body)["reason"]), (415, "UNSUPPORTED_MEDIA_TYPE"))
        big = json.dumps({"spec": spec(), "requestId": "x" * 5000}).encode()
        status, _, body = raw(self.address, "POST", "/v1/jobs", big, {"Content-Type": "application/json"})
        self.assertEqual((status, error_of(body)["reason"]), (413, "REQUEST_TOO_LARGE"))
        # A path far longer than any id, through the body route: over
        # quantd's gRPC message limit (--max-request-bytes), and quantd
        # stays up.
        status, _, body = raw(self.address, "POST", "/v1/jobs/" + "a" * 8000 + ":cancel", b"")
        self.assertEqual((status, error_of(body)["status"]), (429, "RESOURCE_EXHAUSTED"))
        status, _, body = raw(self.address, "POST", "/v1/jobs/" + "a" * 2000 + ":cancel", b"")
        self.assertEqual((status, error_of(body)["fields"]), (400, ["name"]))
        status, _, body = raw(self.address, "GET", "/v1/jobs/a%2Fb")
        self.assertEqual((status, error_of(body)["fields"]), (400, ["name"]))
        # Garbage on the socket gets a JSON 400 too.
        with socket.create_connection(tuple([self.address.split(":")[0], int(self.address.split(":")[1])]), 30) as s:
            s.sendall(b"\x00\xff garbage\r\n\r\n")
            reply = s.recv(65536)
        self.assertTrue(reply.startswith(b"HTTP/1.1 400"), reply)
        self.assertEqual(raw(self.address, "GET", "/v1/jobs")[0], 200)

    def test_cancel_and_event_stream(self):
        client = Http(self.address)
        name = client.call("POST", "/v1/jobs", {"spec": spec()})["name"]
        # A QUEUED job with no worker: one event, then heartbeats.
        host, port = self.address.split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=120)
        conn.request("GET", f"/v1/{name}:watch")
        r = conn.getresponse()
        self.assertEqual((r.status, r.getheader("Content-Type")), (200, "text/event-stream"))
        self.assertEqual(r.readline(), b"id: 1\n")
        first = json.loads(r.readline().decode()[len("data: "):])
        self.assertEqual((first["job"], first["sequence"], first["state"]), (name, "1", "QUEUED"))
        self.assertEqual(r.readline(), b"\n")
        self.assertEqual(r.readline(), b": keep-alive\n")  # within --http-sse-heartbeat
        self.assertEqual(client.call("POST", f"/v1/{name}:cancel")["state"], "CANCELLED")
        rest = r.read().decode()  # the stream ends with the job
        conn.close()
        events = [b.strip("\n") for b in rest.split("\n\n")]
        events = [b for b in events if b.startswith("id:")]
        self.assertEqual([b.split("\n")[0] for b in events], ["id: 2", "id: 3"], rest)
        self.assertIn('"state":"CANCELLED"', events[-1])

        # Errors before the first event are JSON errors with their status.
        status, _, body = raw(self.address, "GET", "/v1/jobs/01aaaaaaaaaaaaaaaaaaaaaaaa:watch")
        self.assertEqual((status, error_of(body)["status"]), (404, "NOT_FOUND"))
        status, _, body = raw(self.address, "GET", f"/v1/{name}:watch", headers={"Last-Event-ID": "x"})
        self.assertEqual((status, error_of(body)["fields"]), (400, ["Last-Event-ID"]))

    def test_streams_are_limited_and_given_back(self):
        client = Http(self.address)
        name = client.call("POST", "/v1/jobs", {"spec": spec("streams")})["name"]
        host, port = self.address.split(":")

        def open_stream(ceiling: float):
            """A stream of the QUEUED job, retried while all slots are taken."""
            deadline = time.monotonic() + ceiling
            while True:
                conn = http.client.HTTPConnection(host, int(port), timeout=120)
                conn.request("GET", f"/v1/{name}:watch")
                r = conn.getresponse()
                if r.status == 200 or time.monotonic() > deadline:
                    self.assertEqual(r.status, 200)
                    return conn
                conn.close()
                time.sleep(0.1)

        for _ in range(2):
            # The second round needs every slot of the first given back:
            # gone clients are noticed at the next heartbeat.
            streams = [open_stream(ceiling=120) for _ in range(16)]
            status, _, body = raw(self.address, "GET", f"/v1/{name}:watch")
            self.assertEqual((status, error_of(body)["reason"]), (429, "HTTP_STREAMS_EXHAUSTED"))
            # Other requests are still served while every stream slot is taken.
            self.assertEqual(raw(self.address, "GET", f"/v1/{name}")[0], 200)
            for conn in streams:
                conn.close()


class BearerAuthTest(unittest.TestCase):
    def test_the_same_tokens_as_grpc(self):
        token = "http-test-token-1234"
        tokens_file = os.path.join(live_quantd.temp_dir("http_auth"), "tokens")
        live_quantd.write_tokens_file(tokens_file, token)
        with live_quantd.LiveQuantd("http_auth", extra_flags=HTTP_FLAGS + [f"--auth-tokens={tokens_file}"]) as q:
            address = http_address(q)
            status, headers, body = raw(address, "GET", "/v1/jobs")
            self.assertEqual(headers["WWW-Authenticate"], "Bearer")
            e = error_of(body)
            self.assertEqual((status, e["status"], e["reason"]), (401, "UNAUTHENTICATED", "MISSING_CREDENTIALS"))
            status, _, body = raw(address, "GET", "/v1/jobs", headers={"Authorization": "Bearer wrong"})
            self.assertEqual((status, error_of(body)["reason"]), (401, "INVALID_TOKEN"))
            status, _, body = raw(address, "GET", "/v1/jobs/01aaaaaaaaaaaaaaaaaaaaaaaa:watch")
            self.assertEqual((status, error_of(body)["reason"]), (401, "MISSING_CREDENTIALS"))
            client = Http(address, token=token)
            job = client.call("POST", "/v1/jobs", {"spec": spec()})
            self.assertEqual(job["tenant"], "acme")
            self.assertEqual([j["name"] for j in client.call("GET", "/v1/jobs")["jobs"]], [job["name"]])
            events = list(client.events(f"/v1/{client.call('POST', '/v1/' + job['name'] + ':cancel')['name']}:watch"))
            states = [json.loads(d).get("state") for _, _, d in events]
            self.assertEqual([s for s in states if s], ["QUEUED", "CANCELLED"])


if __name__ == "__main__":
    unittest.main()
