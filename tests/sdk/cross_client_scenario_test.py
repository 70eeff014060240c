#!/usr/bin/python3
"""The SDK scenario (tests/sdk/SCENARIO.md) through every client, compared.

One quantd with one local worker and its HTTP/JSON face; the Python SDK, the
TypeScript client, the Go client and plain HTTP requests each run the
scenario with their own run id and output folder. Their transcripts must be
equal, and the values right: the refused request's violations, the queued
job cancelled, the watched job's events, its metrics and artifact files (as
on disk), and the label-filtered pages.
"""

import json
import os
import subprocess
import sys
import unittest

RUNFILES = os.path.join(os.environ["TEST_SRCDIR"], os.environ.get("TEST_WORKSPACE", "quantd"))
sys.path.insert(0, os.path.join(RUNFILES, "client/python/testing"))
import live_quantd  # noqa: E402

MODEL = live_quantd.runfile("models/stories260K")
EVAL_TEXT = live_quantd.runfile("tests/data/tinystories-sample.txt")
# A ceiling for a hang, not a budget: each scenario runs a whole job, which
# takes minutes on a loaded machine.
SCENARIO_TIMEOUT_S = 1800



class CrossClientScenarioTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.quantd = live_quantd.LiveQuantd(
            "cross_client", local_workers=1, extra_flags=["--http-listen=127.0.0.1:0"]
        )
        # quantd's port file: line 1 the gRPC address, line 3 the HTTP port.
        with open(os.path.join(cls.quantd.data_dir, "port")) as f:
            lines = f.read().split("\n")
        cls.http_address = f"127.0.0.1:{int(lines[2])}"
        # The TypeScript client's npm packages and dist/, in its source
        # folder (where node resolves the example's imports).
        package = os.path.dirname(os.path.realpath(live_quantd.runfile("client/typescript/package.json")))
        subprocess.run(["bash", os.path.join(package, "setup.sh")], check=True, timeout=1800)

    @classmethod
    def tearDownClass(cls):
        cls.quantd.stop()

    def run_scenario(self, client: str, argv: list, env=None) -> dict:
        out = os.path.join(self.quantd.data_dir, "out", client)
        common = [
            "--model", MODEL, "--eval", EVAL_TEXT, "--output-dir", out, "--run", f"run-{client}",
        ]  # fmt: skip
        r = subprocess.run(
            argv + common,
            capture_output=True,
            text=True,
            timeout=SCENARIO_TIMEOUT_S,
            env={**os.environ, **(env or {})},
        )
        self.assertEqual(r.returncode, 0, f"{client}:\n{r.stderr}{r.stdout}\n{self.quantd.log()}")
        transcript = json.loads(r.stdout)
        # The files the transcript names are the ones on disk.
        for f in transcript["result"]["artifact_files"]:
            path = os.path.join(out, "a", f["path"])
            self.assertEqual(f["sha256"], live_quantd.sha256_file(path), f"{client}: {path}")
            self.assertEqual(f["bytes"], os.path.getsize(path), f"{client}: {path}")
        return transcript

    def test_every_client_sees_the_same_scenario(self):
        q = self.quantd
        transcripts = {
            "python": self.run_scenario(
                "python",
                ["/usr/bin/python3", live_quantd.runfile("client/python/examples/sdk_scenario.py"),
                 "--server", q.address],
                env={"PYTHONPATH": live_quantd.runfile("client/python")},
            ),
            "typescript": self.run_scenario(
                "typescript",
                ["node", live_quantd.runfile("client/typescript/examples/sdk_scenario.mjs"),
                 "--server", q.address],
            ),
            "go": self.run_scenario(
                "go", [live_quantd.runfile("client/go/sdk-scenario"), "--server", q.address]
            ),
            "http": self.run_scenario(
                "http",
                ["/usr/bin/python3", live_quantd.runfile("tests/sdk/http_scenario.py"),
                 "--http", self.http_address],
            ),
        }  # fmt: skip

        reference = transcripts["python"]
        for client, transcript in transcripts.items():
            self.assertEqual(transcript, reference, f"{client} differs from python")

        refused = reference["refused"]
        self.assertEqual(refused["code"], "INVALID_ARGUMENT")
        self.assertEqual(
            [v["field"] for v in refused["field_violations"]],
            ['spec.labels["Bad Key"]', "spec.quantization.scheme"],
        )
        self.assertIn("w_int9_bogus", refused["field_violations"][1]["description"])
        self.assertEqual(reference["submitted_state"], "QUEUED")
        self.assertEqual(reference["cancelled_state"], "CANCELLED")
        self.assertEqual(
            reference["watch"],
            {
                "states": ["QUEUED", "RUNNING", "SUCCEEDED"],
                "block_metrics": 5,
                "results": 1,
                "progress_last_percent": "100.0",
                "sequences_contiguous": True,
            },
        )
        result = reference["result"]
        self.assertEqual(result["state"], "SUCCEEDED")
        self.assertEqual((result["eval_windows"], result["eval_tokens"]), (4, 4 * 255))
        self.assertEqual(result["blocks"], 5)
        self.assertTrue(result["artifact_accepted"])
        self.assertEqual(
            [f["path"] for f in result["artifact_files"]],
            ["NOTICE.md", "config.json", "model.safetensors", "tokenizer.model"],
        )
        # stories260K's float perplexity over the first 4 windows of 256
        # tokens, and int8 per-channel staying within 2% of it.
        float_ppl = float(result["float_perplexity"])
        self.assertAlmostEqual(float_ppl, 5.0053, delta=1e-3)
        self.assertLess(abs(float(result["quantized_perplexity"]) / float_ppl - 1), 0.02)
        self.assertEqual(
            reference["list"],
            {"page_sizes": [1, 1], "roles": ["b", "a"], "states": ["CANCELLED", "SUCCEEDED"]},
        )


if __name__ == "__main__":
    unittest.main()
