#!/usr/bin/python3
"""quantd_client and examples/quantize_stories.py against a live quantd.

quantd runs with one local worker; the example quantizes stories260K
(w_int8_per_channel_sym, 20 evaluation windows of 256 tokens) and the test
checks the golden float perplexity, the artifact files and the SDK's error
details, paging, event replay and bearer tokens.
"""

import dataclasses
import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "testing"))
import live_quantd  # noqa: E402

sys.path.insert(0, live_quantd.runfile("client/python"))
import grpc  # noqa: E402
from google.protobuf import json_format  # noqa: E402

import quantd_client  # noqa: E402
from quantd_client import Client, QuantdError, TlsOptions  # noqa: E402

MODEL = live_quantd.runfile("models/stories260K")
EVAL_TEXT = live_quantd.runfile("tests/data/tinystories-sample.txt")
EXAMPLE = live_quantd.runfile("client/python/examples/quantize_stories.py")
# Float perplexity of stories260K on the first 20 windows of 256 tokens of
# tinystories-sample.txt (the engine's golden number, see tests/e2e).
GOLDEN_FLOAT_PPL_20_WINDOWS = 4.8374
SUCCEEDED = quantd_client.JobState.Value("SUCCEEDED")



def run_example(address: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": live_quantd.runfile("client/python")}
    return subprocess.run(
        ["/usr/bin/python3", EXAMPLE, "--server", address, *args],
        capture_output=True,
        text=True,
        # A ceiling for a hang, not a budget: the example runs a whole job,
        # which takes minutes on a loaded machine.
        timeout=1800,
        env=env,
    )


class QuantdClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.quantd = live_quantd.LiveQuantd("python_sdk", local_workers=1)
        cls.client = Client(cls.quantd.address)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.quantd.stop()

    def test_example_quantizes_stories260k_with_the_golden_float_perplexity(self):
        out = os.path.join(self.quantd.data_dir, "example_out")
        r = run_example(
            self.quantd.address,
            "--model", MODEL, "--eval", EVAL_TEXT, "--eval-windows", "20",
            "--output", out, "--label", "suite=python-example", "--json",
        )  # fmt: skip
        self.assertEqual(r.returncode, 0, r.stderr + r.stdout + self.quantd.log())
        job = json_format.Parse(r.stdout.strip().splitlines()[-1], quantd_client.Job())
        self.assertEqual(job.state, SUCCEEDED)
        self.assertEqual(job.attempt, 1)
        self.assertEqual(dict(job.spec.labels), {"suite": "python-example"})
        self.assertIn("quantize block 5/5", r.stderr)

        m = job.result.metrics
        self.assertAlmostEqual(m.float_perplexity.perplexity, GOLDEN_FLOAT_PPL_20_WINDOWS, delta=1e-3)
        self.assertEqual(m.float_perplexity.protocol.n_ctx, 256)
        self.assertEqual(m.float_perplexity.protocol.windows, 20)
        self.assertEqual(m.float_perplexity.protocol.tokens, 5100)
        ratio = m.quantized_perplexity.perplexity / m.float_perplexity.perplexity
        self.assertLess(abs(ratio - 1), 0.02)
        self.assertEqual(len(m.blocks), 5)

        self.assertEqual(len(job.result.artifacts), 1)
        artifact = job.result.artifacts[0]
        self.assertEqual(artifact.uri, "file://" + out)
        self.assertTrue(artifact.accepted)
        self.assertEqual(artifact.sha256, live_quantd.sha256_file(os.path.join(out, "model.safetensors")))
        paths = sorted(f.path for f in artifact.files)
        self.assertIn("model.safetensors", paths)
        self.assertIn("config.json", paths)
        self.assertIn("tokenizer.model", paths)
        for f in artifact.files:
            self.assertEqual(f.sha256, live_quantd.sha256_file(os.path.join(out, f.path)), f.path)
            self.assertEqual(f.bytes, os.path.getsize(os.path.join(out, f.path)), f.path)
        self.assertEqual(artifact.bytes, sum(f.bytes for f in artifact.files))
        with open(os.path.join(out, "config.json")) as f:
            self.assertIn("quantization_config", json.load(f))

        # The same job through the wrapper: get (bare id too), list, replay.
        self.assertEqual(self.client.get(job.name), job)
        self.assertEqual(self.client.get(job.name.removeprefix("jobs/")).name, job.name)
        listed = [j.name for j in self.client.list(labels={"suite": "python-example"})]
        self.assertEqual(listed, [job.name])
        # list() is BASIC unless asked: no per-block metrics; FULL is the whole job.
        (basic,) = self.client.list(labels={"suite": "python-example"})
        self.assertEqual(len(basic.result.metrics.blocks), 0)
        self.assertEqual(basic.result.artifacts, job.result.artifacts)
        (full,) = self.client.list(labels={"suite": "python-example"}, view="full")
        self.assertEqual(full, job)
        with self.assertRaises(ValueError):
            next(self.client.list(view="everything"))
        self.assertIn(job.name, [j.name for j in self.client.list(state="succeeded")])
        self.assertEqual(list(self.client.list(state=["failed"], labels={"suite": "python-example"})), [])

        events, progress = [], []
        again = self.client.wait(job.name, on_progress=progress.append, on_event=events.append)
        self.assertEqual(again, job)
        self.assertEqual([e.sequence for e in events], list(range(1, len(events) + 1)))
        self.assertEqual(sum(e.WhichOneof("payload") == "block_metrics" for e in events), 5)
        self.assertEqual(len(progress), sum(e.WhichOneof("payload") == "progress" for e in events))
        self.assertEqual(progress[-1].percent, 100.0)
        self.assertEqual(events[-1].state, SUCCEEDED)
        tail = list(self.client.watch(job.name, after_sequence=events[-3].sequence))
        self.assertEqual(tail, events[-2:])

        with self.assertRaises(QuantdError) as cm:
            self.client.cancel(job.name)
        self.assertEqual(cm.exception.code, grpc.StatusCode.FAILED_PRECONDITION)
        self.assertEqual(cm.exception.reason, "JOB_ALREADY_FINISHED")

    def test_bad_preset_is_invalid_argument_with_the_field_violation(self):
        spec = {
            "model_uri": "file://" + MODEL,
            "quantization": {"scheme": "w_int9_bogus"},
        }
        with self.assertRaises(QuantdError) as cm:
            self.client.submit(spec)
        e = cm.exception
        self.assertEqual(e.code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertEqual(e.reason, "INVALID_JOB_SPEC")
        self.assertEqual(e.domain, "quantd")
        self.assertEqual(len(e.field_violations), 1)
        self.assertEqual(e.field_violations[0].field, "spec.quantization.scheme")
        # The description's wording is the engine's; it names the bad value.
        self.assertIn("'w_int9_bogus'", e.field_violations[0].description)
        # The example surfaces the same error and exits 3.
        r = run_example(self.quantd.address, "--model", MODEL, "--scheme", "w_int9_bogus")
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn("INVALID_ARGUMENT", r.stderr)
        self.assertIn("\n  spec.quantization.scheme: ", r.stderr)
        self.assertIn(e.field_violations[0].description, r.stderr)

    def test_list_pages_idempotent_submit_and_bad_page_size(self):
        spec = quantd_client.JobSpec(
            model_uri="file:///nonexistent/model",
            quantization=quantd_client.QuantizationSettings(scheme="w_int8_per_tensor_sym"),
            evaluation=quantd_client.EvaluationSpec(disabled=True),
            labels={"suite": "python-paging"},
        )
        names = [self.client.submit(spec, request_id=f"paging-{i}").name for i in range(3)]
        self.assertEqual(len(set(names)), 3)
        # Idempotent on request_id: the retry is the stored job.
        self.assertEqual(self.client.submit(spec, request_id="paging-1").name, names[1])
        with self.assertRaises(QuantdError) as cm:
            other = quantd_client.JobSpec()
            other.CopyFrom(spec)
            other.device = "cpu"
            self.client.submit(other, request_id="paging-1")
        self.assertEqual(cm.exception.code, grpc.StatusCode.ALREADY_EXISTS)
        self.assertEqual(cm.exception.reason, "REQUEST_ID_REUSED")
        # validate_only stores nothing.
        self.client.submit(spec, request_id="paging-validate", validate_only=True)

        labels = {"suite": "python-paging"}
        newest_first = [j.name for j in self.client.list(labels=labels, page_size=1)]
        self.assertEqual(newest_first, names[::-1])
        oldest_first = [
            j.name for j in self.client.list(labels=labels, page_size=2, order_by="create_time asc")
        ]
        self.assertEqual(oldest_first, names)
        with self.assertRaises(QuantdError) as cm:
            next(self.client.list(page_size=-1))
        self.assertEqual(cm.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertEqual([v.field for v in cm.exception.field_violations], ["page_size"])
        with self.assertRaises(ValueError):
            list(self.client.list(state="finished"))


class BearerTokenTest(unittest.TestCase):
    def test_calls_need_a_valid_token(self):
        token = "sdk-test-token-1234"
        tokens_file = os.path.join(live_quantd.temp_dir("python_sdk_auth"), "tokens")
        live_quantd.write_tokens_file(tokens_file, token)
        with live_quantd.LiveQuantd("python_sdk_auth", extra_flags=[f"--auth-tokens={tokens_file}"]) as q:
            spec = {"model_uri": "file://" + MODEL, "quantization": {"scheme": "w_int8_per_tensor_sym"}}
            with Client(q.address) as anonymous:
                with self.assertRaises(QuantdError) as cm:
                    list(anonymous.list())
                self.assertEqual(cm.exception.code, grpc.StatusCode.UNAUTHENTICATED)
                self.assertEqual(cm.exception.reason, "MISSING_CREDENTIALS")
            with Client(q.address, token="wrong") as wrong:
                with self.assertRaises(QuantdError) as cm:
                    wrong.submit(spec)
                self.assertEqual(cm.exception.code, grpc.StatusCode.UNAUTHENTICATED)
                self.assertEqual(cm.exception.reason, "INVALID_TOKEN")
            with Client(q.address, token=token) as client:
                job = client.submit(spec)
                self.assertEqual(job.tenant, "acme")
                self.assertEqual([j.name for j in client.list()], [job.name])
                self.assertEqual(client.cancel(job.name).state, quantd_client.JobState.Value("CANCELLED"))


class PlaintextTokenTest(unittest.TestCase):
    def test_a_token_goes_over_plaintext_only_to_loopback_unless_allowed(self):
        from quantd_client.client import is_loopback

        for address in ("127.0.0.1:50051", "localhost:1", "[::1]:50051", "unix:/run/q.sock",
                        "dns:///localhost:50051", "127.8.9.10:5"):
            self.assertTrue(is_loopback(address), address)
            Client(address, token="t").close()
        for address in ("192.0.2.1:50051", "quantd.internal:443", "[2001:db8::1]:1", "10.0.0.1"):
            self.assertFalse(is_loopback(address), address)
            with self.assertRaisesRegex(ValueError, "refusing to send a bearer token over plaintext"):
                Client(address, token="t")
            Client(address, token="t", allow_plaintext_token=True).close()
            Client(address).close()  # no token, nothing to leak


class TlsTest(unittest.TestCase):
    def test_mtls_needs_the_ca_and_a_client_certificate(self):
        pki = live_quantd.temp_dir("python_sdk_pki")
        live_quantd.make_pki(pki)
        p = lambda name: os.path.join(pki, name)  # noqa: E731
        spec = {"model_uri": "file://" + MODEL, "quantization": {"scheme": "w_int8_per_tensor_sym"}}
        with live_quantd.LiveQuantd("python_sdk_tls", extra_flags=live_quantd.mtls_flags(pki)) as q:
            for tls in (None, TlsOptions(ca_file=p("ca.pem"))):
                with Client(q.address, tls=tls, unavailable_retry_seconds=0) as refused:
                    with self.assertRaises(QuantdError) as cm:
                        refused.submit(spec)
                    self.assertEqual(cm.exception.code, grpc.StatusCode.UNAVAILABLE)
            mtls = TlsOptions(ca_file=p("ca.pem"), cert_file=p("client.pem"), key_file=p("client.key"))
            with Client(q.address, tls=mtls) as client:
                job = client.submit(spec)
                self.assertEqual(client.get(job.name).state, quantd_client.JobState.Value("QUEUED"))
            named = dataclasses.replace(mtls, server_name="localhost")
            with Client(q.address, tls=named) as client:
                self.assertEqual([j.name for j in client.list()], [job.name])
            wrong_name = dataclasses.replace(mtls, server_name="other.example")
            with Client(q.address, tls=wrong_name, unavailable_retry_seconds=0) as client:
                with self.assertRaises(QuantdError) as cm:
                    client.get(job.name)
                self.assertEqual(cm.exception.code, grpc.StatusCode.UNAVAILABLE)


if __name__ == "__main__":
    unittest.main(verbosity=2)
