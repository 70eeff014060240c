#!/usr/bin/python3
"""The buf checks can fail: scratch copies of proto/quantd/v1, each with one
deliberate change, against the committed release image and the lint rules.

A field renumbering, a field type change, a removed RPC and a renamed field
must each fail `buf.sh breaking` with the rule that names them; a lowercase
message name must fail `buf.sh lint`. An untouched copy and an added field
must pass, so the failures come from the changes.
"""

import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

RUNFILES = os.path.join(
    os.environ.get("TEST_SRCDIR", os.path.join(os.getcwd(), "..")),
    os.environ.get("TEST_WORKSPACE", "quantd"),
)
TOOLS = os.path.dirname(os.path.realpath(os.path.join(RUNFILES, "tools/buf/package.json")))
SERVICE = "quantd/v1/quantization_service.proto"
JOB = "quantd/v1/job.proto"


def setUpModule():
    subprocess.run(["bash", os.path.join(TOOLS, "setup.sh")], check=True)


class BufViolationsTest(unittest.TestCase):
    def setUp(self):
        base = os.environ.get("TEST_TMPDIR") or tempfile.gettempdir()
        self.root = tempfile.mkdtemp(prefix="protos.", dir=base)
        shutil.copytree(
            os.path.join(RUNFILES, "proto/quantd"),
            os.path.join(self.root, "quantd"),
            copy_function=shutil.copyfile,
        )

    def tearDown(self):
        shutil.rmtree(self.root)

    def edit(self, relative, pattern, replacement, flags=0):
        """Applies one regex substitution that must match exactly once."""
        path = os.path.join(self.root, relative)
        with open(path) as f:
            text = f.read()
        text, n = re.subn(pattern, replacement, text, flags=flags)
        self.assertEqual(n, 1, f"{pattern!r} in {relative}")
        with open(path, "w") as f:
            f.write(text)

    def buf(self, command):
        """Runs buf.sh; returns (exit status, findings as dicts)."""
        env = dict(os.environ)
        env.update(
            BUF=os.path.join(TOOLS, "node_modules/.bin/buf"),
            BUF_ERROR_FORMAT="json",
            QUANTD_PROTO_CONFIG=os.path.join(RUNFILES, "proto/buf.yaml"),
            QUANTD_RELEASE_IMAGE=os.path.join(RUNFILES, "proto/released/quantd_v1.binpb"),
            QUANTD_GOOGLEAPIS_DIR=os.path.join(RUNFILES, "external/googleapis_protos"),
            TMPDIR=os.environ.get("TEST_TMPDIR") or tempfile.gettempdir(),
        )
        run = subprocess.run(
            ["bash", os.path.join(RUNFILES, "tools/buf/buf.sh"), command, self.root],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            timeout=300,
        )
        findings = [json.loads(line) for line in run.stdout.splitlines() if line.strip()]
        return run.returncode, findings, run.stderr

    def assertFails(self, command, rule, *words):
        rc, findings, stderr = self.buf(command)
        # 100 is buf's "the check found something"; anything else is a crash.
        self.assertEqual(rc, 100, f"buf {command}: {findings} {stderr}")
        matching = [f for f in findings if f["type"] == rule]
        self.assertTrue(matching, f"no {rule} among {findings}")
        for word in words:
            self.assertTrue(
                any(word in f["message"] for f in matching),
                f"{word!r} not named by {matching}",
            )
        return findings

    def test_untouched_copy_passes(self):
        for command in ("lint", "breaking"):
            rc, findings, stderr = self.buf(command)
            self.assertEqual((rc, findings), (0, []), f"{command}: {stderr}")

    def test_added_field_passes(self):
        self.edit(SERVICE, r"(  int64 after_sequence = 2;\n)", r"\1  int32 max_events = 3;\n")
        rc, findings, stderr = self.buf("breaking")
        self.assertEqual((rc, findings), (0, []), stderr)

    def test_field_renumbering_fails(self):
        self.edit(SERVICE, r"int64 after_sequence = 2;", "int64 after_sequence = 3;")
        findings = self.assertFails(
            "breaking", "FIELD_NO_DELETE_UNLESS_NUMBER_RESERVED", '"after_sequence"', '"2"'
        )
        self.assertTrue(all(f["path"] == SERVICE for f in findings), findings)

    def test_field_type_change_fails(self):
        self.edit(SERVICE, r"  int32 page_size = 1;", "  string page_size = 1;")
        self.assertFails(
            "breaking", "FIELD_WIRE_JSON_COMPATIBLE_TYPE", '"page_size"', '"int32" to "string"'
        )

    def test_removed_rpc_fails(self):
        # The rpc with its leading comment and its google.api.http option.
        self.edit(
            SERVICE,
            r"\n  // QUEUED jobs end[^\n]*\n(  //[^\n]*\n)*  rpc CancelJob\(.*?\n  \}\n",
            "\n",
            flags=re.S,
        )
        self.assertFails("breaking", "RPC_NO_DELETE", '"CancelJob"', '"QuantizationService"')

    def test_renamed_field_fails(self):
        # Same number and type, so the wire is unchanged; JSON clients break.
        self.edit(JOB, r"  int64 sequence = 2;", "  int64 seq = 2;")
        self.assertFails("breaking", "FIELD_SAME_NAME", '"sequence"', '"seq"')
        self.assertFails("breaking", "FIELD_SAME_JSON_NAME", '"sequence"', '"seq"')

    def test_lowercase_message_name_fails_lint(self):
        self.edit(SERVICE, r"message GetJobRequest \{", "message getJobRequest {")
        self.edit(SERVICE, r"rpc GetJob\(GetJobRequest\)", "rpc GetJob(getJobRequest)")
        self.assertFails("lint", "MESSAGE_PASCAL_CASE", '"getJobRequest"')


if __name__ == "__main__":
    unittest.main()
