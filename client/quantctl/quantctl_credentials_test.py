#!/usr/bin/python3
"""quantctl's credentials against a live quantd: bearer tokens (--token,
$QUANTD_TOKEN, the config file, flags over the file) on a quantd with
--auth-tokens, and TLS / mTLS (--tls-ca, --tls-cert, --tls-key, relative paths
in the config file) on a quantd with --tls-cert/--tls-key/--tls-client-ca.
"""

import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", "testing"))
import live_quantd  # noqa: E402

QUANTCTL = live_quantd.runfile("client/quantctl/quantctl")
MODEL = live_quantd.runfile("models/stories260K")
TOKEN = "quantctl-test-token-9f3a"
EXIT_RPC = 3


def quantctl(*args: str, home: str, env=None) -> subprocess.CompletedProcess:
    """Runs quantctl with HOME (and so the default config file) under the test."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("QUANTD_", "QUANTCTL_"))}
    return subprocess.run(
        [QUANTCTL, *args],
        capture_output=True,
        text=True,
        timeout=600,  # a ceiling for a hang, not a budget
        env={**clean, "HOME": home, **(env or {})},
    )


def write_json(path: str, value: dict) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(value, f)


class BearerTokenTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        base = live_quantd.temp_dir("quantctl_auth_files")
        tokens = os.path.join(base, "tokens")
        live_quantd.write_tokens_file(tokens, TOKEN)
        cls.quantd = live_quantd.LiveQuantd("quantctl_auth", extra_flags=[f"--auth-tokens={tokens}"])
        cls.home = live_quantd.temp_dir("quantctl_auth_home")

    @classmethod
    def tearDownClass(cls):
        cls.quantd.stop()

    def test_calls_without_a_valid_token_are_refused(self):
        r = quantctl("--server", self.quantd.address, "list", home=self.home)
        self.assertEqual(r.returncode, EXIT_RPC, r.stdout)
        self.assertIn("error: UNAUTHENTICATED", r.stderr)
        self.assertIn("reason: MISSING_CREDENTIALS", r.stderr)
        r = quantctl("--server", self.quantd.address, "--token", "wrong", "list", home=self.home)
        self.assertEqual(r.returncode, EXIT_RPC)
        self.assertIn("reason: INVALID_TOKEN", r.stderr)

    def test_flag_environment_and_config_file_tokens_work(self):
        address = self.quantd.address
        r = quantctl(
            "--server", address, "--token", TOKEN, "submit", "--model", MODEL,
            "--scheme", "w_int8_per_tensor_sym", "--no-eval", "--label", "suite=quantctl-auth",
            home=self.home,
        )  # fmt: skip
        self.assertEqual(r.returncode, 0, r.stderr)
        name = r.stdout.strip()
        self.assertTrue(name.startswith("jobs/"), name)

        # $QUANTD_TOKEN and $QUANTD_SERVER.
        r = quantctl("-o", "json", "get", name, home=self.home,
                     env={"QUANTD_TOKEN": TOKEN, "QUANTD_SERVER": address})  # fmt: skip
        self.assertEqual(r.returncode, 0, r.stderr)
        job = json.loads(r.stdout)
        self.assertEqual(job["name"], name)
        self.assertEqual(job["tenant"], "acme")
        self.assertEqual(job["state"], "QUEUED")  # no workers

        # The default config file (~/.config/quantd/quantctl.json) alone.
        home = live_quantd.temp_dir("quantctl_auth_home_config")
        write_json(os.path.join(home, ".config", "quantd", "quantctl.json"),
                   {"address": address, "token": TOKEN})  # fmt: skip
        r = quantctl("list", "--label", "suite=quantctl-auth", home=home)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(name, r.stdout)

        # --quantctl-config, with the flag's token overriding the file's.
        config = os.path.join(live_quantd.temp_dir("quantctl_auth_config"), "q.json")
        write_json(config, {"address": address, "token": "stale-token"})
        r = quantctl("--quantctl-config", config, "get", name, home=self.home)
        self.assertEqual(r.returncode, EXIT_RPC)
        self.assertIn("reason: INVALID_TOKEN", r.stderr)
        r = quantctl("--quantctl-config", config, "--token", TOKEN, "cancel", name, home=self.home)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), f"{name}: CANCELLED")

    def test_bad_config_file_is_a_usage_error(self):
        config = os.path.join(live_quantd.temp_dir("quantctl_bad_config"), "q.json")
        write_json(config, {"adress": self.quantd.address})
        r = quantctl("--quantctl-config", config, "list", home=self.home)
        self.assertEqual(r.returncode, 2)
        self.assertIn(f'{config}: unknown key "adress"', r.stderr)


class TlsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.pki = live_quantd.temp_dir("quantctl_pki")
        live_quantd.make_pki(cls.pki)
        cls.quantd = live_quantd.LiveQuantd("quantctl_tls", extra_flags=live_quantd.mtls_flags(cls.pki))
        cls.home = live_quantd.temp_dir("quantctl_tls_home")

    @classmethod
    def tearDownClass(cls):
        cls.quantd.stop()

    def test_mtls_with_flags_and_with_relative_paths_in_the_config_file(self):
        address = self.quantd.address
        p = lambda name: os.path.join(self.pki, name)  # noqa: E731
        # Plaintext, and TLS without a client certificate, are refused.
        r = quantctl("--server", address, "list", home=self.home)
        self.assertEqual(r.returncode, EXIT_RPC)
        self.assertIn("error: UNAVAILABLE", r.stderr)
        r = quantctl("--server", address, "--tls-ca", p("ca.pem"), "list", home=self.home)
        self.assertEqual(r.returncode, EXIT_RPC)
        self.assertIn("error: UNAVAILABLE", r.stderr)

        r = quantctl(
            "--server", address, "--tls-ca", p("ca.pem"), "--tls-cert", p("client.pem"),
            "--tls-key", p("client.key"), "submit", "--model", MODEL, "--scheme",
            "w_int8_per_tensor_sym", "--no-eval", home=self.home,
        )  # fmt: skip
        self.assertEqual(r.returncode, 0, r.stderr)
        name = r.stdout.strip()

        # The same through a config file next to the PEM files.
        config = os.path.join(self.pki, "quantctl.json")
        write_json(config, {"address": address, "tls_ca": "ca.pem", "tls_cert": "client.pem",
                            "tls_key": "client.key"})  # fmt: skip
        r = quantctl("-o", "json", "get", name, home=self.home, env={"QUANTCTL_CONFIG": config})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["name"], name)

        # A server name the certificate does not carry fails verification.
        r = quantctl("--tls-server-name", "other.example", "get", name, home=self.home,
                     env={"QUANTCTL_CONFIG": config})  # fmt: skip
        self.assertEqual(r.returncode, EXIT_RPC)
        self.assertIn("error: UNAVAILABLE", r.stderr)
        r = quantctl("--tls-server-name", "localhost", "get", name, home=self.home,
                     env={"QUANTCTL_CONFIG": config})  # fmt: skip
        self.assertEqual(r.returncode, 0, r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
