#!/usr/bin/python3
"""mypy (Debian's 1.0) over quantd_client and examples/ with the generated
.pyi stubs (mypy/mypy.ini): it must pass, and each snippet in mypy/negative
must fail with exactly the errors its `# expect:` comments name, on those
lines, so a stub that lost its types (everything Any) fails the test.
"""

import glob
import os
import re
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIG = os.path.join(HERE, "mypy", "mypy.ini")
SDK = sorted(glob.glob(os.path.join(HERE, "quantd_client", "*.py")))
EXAMPLES = sorted(glob.glob(os.path.join(HERE, "examples", "*.py")))
NEGATIVE = sorted(glob.glob(os.path.join(HERE, "mypy", "negative", "*.py")))
CACHE = os.path.join(os.environ.get("TEST_TMPDIR", "/tmp"), "mypy_cache")
ERROR = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+): error: (?P<message>.*)$")


def mypy(*files: str) -> "subprocess.CompletedProcess[str]":
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            CONFIG,
            "--cache-dir",
            CACHE,
            "--no-error-summary",
            "--show-error-codes",
            *files,
        ],
        capture_output=True,
        text=True,
        # A ceiling for a hang; a cold run on a loaded machine takes a minute.
        timeout=900,
    )


class MypyTest(unittest.TestCase):
    def test_inputs_are_there(self) -> None:
        names = [os.path.basename(f) for f in SDK + EXAMPLES]
        for name in ["client.py", "errors.py", "quantize_stories.py", "sdk_scenario.py"]:
            self.assertIn(name, names)
        for module in ["quantd/v1/job_pb2.pyi", "google/rpc/status_pb2.pyi"]:
            self.assertTrue(
                os.path.isfile(os.path.join(HERE, "quantd_client", "_generated", module)), module
            )
        self.assertGreaterEqual(len(NEGATIVE), 3)

    def test_sdk_and_examples_pass(self) -> None:
        r = mypy(*SDK, *EXAMPLES)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(r.stdout.strip(), "", r.stdout)

    def test_negative_snippets_fail_as_expected(self) -> None:
        for snippet in NEGATIVE:
            with self.subTest(os.path.basename(snippet)):
                expected = []
                with open(snippet) as f:
                    for number, line in enumerate(f, 1):
                        m = re.search(r"# expect: (.*)$", line)
                        if m:
                            expected.append((number, m.group(1).strip()))
                self.assertTrue(expected, f"{snippet} has no '# expect:' comment")
                r = mypy(*SDK, snippet)
                self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
                errors = []
                for line in r.stdout.splitlines():
                    m = ERROR.match(line)
                    if m:
                        self.assertEqual(os.path.abspath(m["file"]), snippet, line)
                        errors.append((int(m["line"]), m["message"]))
                self.assertEqual(len(errors), len(expected), r.stdout)
                for (want_line, want), (got_line, got) in zip(expected, sorted(errors)):
                    self.assertEqual(got_line, want_line, got)
                    self.assertIn(want, got)


if __name__ == "__main__":
    unittest.main()
