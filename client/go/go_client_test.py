#!/usr/bin/python3
"""The Go client against a live quantd, built offline with Debian's Go.

gofmt, go vet and the Go unit tests run first, then the committed generated
code is compared with a fresh generate.sh run; then quantd runs with one
local worker and the example (stories260K, 20 evaluation windows) and the
SDK scenario program (tests/sdk/SCENARIO.md) run against it, and a second
quantd checks bearer tokens.
"""

import json
import os
import subprocess
import sys
import unittest


def _runfiles_root() -> str:
    srcdir = os.environ.get("TEST_SRCDIR")
    if srcdir:
        return os.path.join(srcdir, os.environ.get("TEST_WORKSPACE", "quantd"))
    return os.getcwd()


sys.path.insert(0, os.path.join(_runfiles_root(), "client", "python", "testing"))
import live_quantd  # noqa: E402

MODULE = live_quantd.runfile("client/go")
MODEL = live_quantd.runfile("models/stories260K")
EVAL_TEXT = live_quantd.runfile("tests/data/tinystories-sample.txt")
# Float perplexity of stories260K on the first 20 windows of 256 tokens of
# tinystories-sample.txt (the engine's golden number, see tests/e2e).
GOLDEN_FLOAT_PPL_20_WINDOWS = 4.8374
# The same on the scenario's 4 windows.
FLOAT_PPL_4_WINDOWS = 5.0053
WORK = live_quantd.temp_dir("go")
BIN = os.path.join(WORK, "bin")


def go_env() -> dict:
    # The go tool and the Go tests write only under TEST_TMPDIR: the build
    # cache, the GOPATH link, t.TempDir.
    return {
        **os.environ,
        "QUANTD_GO_WORK": WORK,
        "HOME": live_quantd.temp_dir("go/home"),
        "TMPDIR": live_quantd.temp_dir("go/tmp"),
        "GOENV": "off",
    }


def go(*args: str, timeout: float = 1800) -> subprocess.CompletedProcess:
    """A go command in the module through offline.sh. The ceiling is for a
    hang: the first build compiles grpc-go on a loaded machine."""
    return subprocess.run(
        [os.path.join(MODULE, "offline.sh"), *args],
        capture_output=True, text=True, timeout=timeout, env=go_env(),
    )  # fmt: skip



def googleapis_root() -> str:
    for candidate in (
        os.path.join(os.environ.get("TEST_SRCDIR", ""), "googleapis_protos"),
        live_quantd.runfile("external/googleapis_protos"),
    ):
        if os.path.exists(os.path.join(candidate, "google/rpc/status.proto")):
            return candidate
    raise AssertionError("googleapis protos are not in the runfiles")


def files_under(root: str) -> dict:
    out = {}
    for d, _, names in os.walk(root, followlinks=True):
        for n in names:
            path = os.path.join(d, n)
            with open(path, "rb") as f:
                out[os.path.relpath(path, root)] = f.read()
    return out


def run(binary: str, *args: str) -> subprocess.CompletedProcess:
    # A ceiling for a hang, not a budget: a whole job takes minutes on a
    # loaded machine.
    return subprocess.run([os.path.join(BIN, binary), *args], capture_output=True, text=True, timeout=1800)


class GoToolchainTest(unittest.TestCase):
    """Offline build checks; the live tests below need their binaries."""

    def test_1_gofmt_vet_and_unit_tests(self):
        r = go("gofmt", "-l", ".")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "", "gofmt would change these files")
        r = go("go", "vet", "./...")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        r = go("go", "test", "-count=1", "./...")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("ok  \tgithub.com/quantd/quantd/client/go/quantd", r.stdout)

    def test_2_generated_code_is_fresh(self):
        out = os.path.join(WORK, "regenerated")
        r = subprocess.run(
            [os.path.join(MODULE, "generate.sh"), out, live_quantd.runfile("proto"), googleapis_root()],
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        self.assertEqual(r.returncode, 0, r.stderr)
        fresh = files_under(out)
        committed = files_under(os.path.join(MODULE, "gen"))
        self.assertEqual(sorted(fresh), sorted(committed), "run client/go/generate.sh")
        for path in fresh:
            self.assertEqual(fresh[path], committed[path], f"gen/{path} is stale: run client/go/generate.sh")

    def test_3_builds_the_programs(self):
        for name, package in (("quantize_stories", "./examples/quantize_stories"), ("sdk-scenario", "./cmd/sdk-scenario")):
            r = go("go", "build", "-o", os.path.join(BIN, name), package)
            self.assertEqual(r.returncode, 0, r.stderr)


class LiveQuantdTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        for name in ("quantize_stories", "sdk-scenario"):
            if not os.path.exists(os.path.join(BIN, name)):
                raise unittest.SkipTest("the Go programs did not build (see GoToolchainTest)")
        cls.quantd = live_quantd.LiveQuantd("go_client", local_workers=1)

    @classmethod
    def tearDownClass(cls):
        cls.quantd.stop()

    def assert_files_match(self, artifact_dir: str, files: list) -> None:
        self.assertIn("model.safetensors", [f["path"] for f in files])
        self.assertIn("config.json", [f["path"] for f in files])
        for f in files:
            path = os.path.join(artifact_dir, f["path"])
            self.assertEqual(f["sha256"], live_quantd.sha256_file(path), f["path"])
            self.assertEqual(int(f["bytes"]), os.path.getsize(path), f["path"])

    def test_example_quantizes_stories260k_with_the_golden_float_perplexity(self):
        out = os.path.join(self.quantd.data_dir, "example_out")
        r = run(
            "quantize_stories", "--server", self.quantd.address,
            "--model", MODEL, "--eval", EVAL_TEXT, "--eval-windows", "20",
            "--output", out, "--label", "suite=go-example", "--json",
        )  # fmt: skip
        self.assertEqual(r.returncode, 0, r.stderr + r.stdout + self.quantd.log())
        self.assertIn("quantize block 5/5", r.stderr)
        # proto3 JSON: camelCase names, int64 as strings.
        job = json.loads(r.stdout.strip().splitlines()[-1])
        self.assertEqual(job["state"], "SUCCEEDED")
        self.assertEqual(job["spec"]["labels"], {"suite": "go-example"})
        m = job["result"]["metrics"]
        self.assertAlmostEqual(m["floatPerplexity"]["perplexity"], GOLDEN_FLOAT_PPL_20_WINDOWS, delta=1e-3)
        self.assertEqual(m["floatPerplexity"]["protocol"]["windows"], 20)
        self.assertEqual(m["floatPerplexity"]["protocol"]["tokens"], "5100")
        ratio = m["quantizedPerplexity"]["perplexity"] / m["floatPerplexity"]["perplexity"]
        self.assertLess(abs(ratio - 1), 0.02)
        self.assertEqual(len(m["blocks"]), 5)
        (artifact,) = job["result"]["artifacts"]
        self.assertEqual(artifact["uri"], "file://" + out)
        self.assertTrue(artifact["accepted"])
        self.assertEqual(artifact["sha256"], live_quantd.sha256_file(os.path.join(out, "model.safetensors")))
        self.assert_files_match(out, artifact["files"])

        # A refused request: exit status 3 and the field violation on stderr.
        r = run("quantize_stories", "--server", self.quantd.address, "--model", MODEL, "--scheme", "w_int9_bogus")
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn("INVALID_ARGUMENT", r.stderr)
        self.assertIn("(reason INVALID_JOB_SPEC)", r.stderr)
        self.assertIn("\n  spec.quantization.scheme: unknown quantization scheme 'w_int9_bogus'", r.stderr)

    def test_sdk_scenario_transcript(self):
        out = os.path.join(self.quantd.data_dir, "scenario_out")
        r = run(
            "sdk-scenario", "--server", self.quantd.address, "--model", MODEL,
            "--eval", EVAL_TEXT, "--output-dir", out, "--run", "go-scenario",
        )  # fmt: skip
        self.assertEqual(r.returncode, 0, r.stderr + r.stdout + self.quantd.log())
        t = json.loads(r.stdout)
        self.assertEqual(list(t), ["refused", "submitted_state", "cancelled_state", "watch", "result", "list"])

        refused = t["refused"]
        self.assertEqual(refused["code"], "INVALID_ARGUMENT")
        self.assertEqual(refused["reason"], "INVALID_ARGUMENT")
        fields = [v["field"] for v in refused["field_violations"]]
        self.assertEqual(fields, ['spec.labels["Bad Key"]', "spec.quantization.scheme"])
        self.assertIn("lowercase letter", refused["field_violations"][0]["description"])
        self.assertIn("'w_int9_bogus'", refused["field_violations"][1]["description"])

        self.assertEqual(t["submitted_state"], "QUEUED")
        self.assertEqual(t["cancelled_state"], "CANCELLED")
        self.assertEqual(
            t["watch"],
            {
                "states": ["QUEUED", "RUNNING", "SUCCEEDED"],
                "block_metrics": 5,
                "results": 1,
                "progress_last_percent": "100.0",
                "sequences_contiguous": True,
            },
        )
        result = t["result"]
        self.assertEqual(result["state"], "SUCCEEDED")
        self.assertAlmostEqual(float(result["float_perplexity"]), FLOAT_PPL_4_WINDOWS, delta=1e-3)
        ratio = float(result["quantized_perplexity"]) / float(result["float_perplexity"])
        self.assertLess(abs(ratio - 1), 0.02)
        self.assertEqual(result["eval_windows"], 4)
        self.assertEqual(result["eval_tokens"], 4 * 255)
        self.assertEqual(result["blocks"], 5)
        self.assertTrue(result["artifact_accepted"])
        paths = [f["path"] for f in result["artifact_files"]]
        self.assertEqual(paths, sorted(paths))
        self.assert_files_match(os.path.join(out, "a"), result["artifact_files"])
        self.assertEqual(
            t["list"],
            {"page_sizes": [1, 1], "roles": ["b", "a"], "states": ["CANCELLED", "SUCCEEDED"]},
        )

    def test_bearer_tokens(self):
        token = "go-client-token-1234"
        tokens_file = os.path.join(live_quantd.temp_dir("go_client_auth"), "tokens")
        live_quantd.write_tokens_file(tokens_file, token)
        flags = [f"--auth-tokens={tokens_file}"]
        with live_quantd.LiveQuantd("go_client_auth", extra_flags=flags) as q:
            bogus = ("--server", q.address, "--model", MODEL, "--scheme", "w_int9_bogus")
            for args, reason in (((), "MISSING_CREDENTIALS"), (("--token", "wrong"), "INVALID_TOKEN")):
                r = run("quantize_stories", *bogus, *args)
                self.assertEqual(r.returncode, 3, r.stderr)
                self.assertIn("UNAUTHENTICATED", r.stderr)
                self.assertIn(f"(reason {reason})", r.stderr)
            # Authenticated, the spec itself is what quantd refuses.
            r = run("quantize_stories", *bogus, "--token", token)
            self.assertEqual(r.returncode, 3, r.stderr)
            self.assertIn("(reason INVALID_JOB_SPEC)", r.stderr)
            # A token over plaintext to a non-loopback address never leaves.
            r = run("quantize_stories", "--server", "192.0.2.1:50051", "--token", token)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("refusing to send a bearer token over plaintext", r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
