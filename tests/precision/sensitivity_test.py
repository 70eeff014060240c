#!/usr/bin/python3
"""Per-layer sensitivity through the service (quantctl --sensitivity against a
live quantd; docs/sensitivity.md), on stories260K with the bundled text:

- every linear the job quantizes gets one value per candidate, and int8 per
  channel disturbs each block less than int4 per channel, layer by layer;
- a value is what it says: the job that quantizes that one layer alone with
  the candidate reports the same block output error for the block
  (BlockMetrics.output_rel_mse), to float rounding;
- bad candidate lists are refused at CreateJob naming every bad entry.
"""

import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "client",
                                "python", "testing"))
import live_quantd  # noqa: E402

sys.path.insert(0, os.path.dirname(live_quantd.runfile("tests/vision/vision_testing.py")))
from vision_testing import QUANTCTL, QuantctlJobsTest  # noqa: E402

STORIES = live_quantd.runfile("models/stories260K")
TEXT = live_quantd.runfile("tests/data/tinystories-sample.txt")
CANDIDATES = ["w_int4_per_channel_sym", "w_int8_per_channel_sym"]
# The calibration both jobs of the cross-check share.
CALIB = ["--calib", TEXT, "--calib-samples", "16", "--calib-seq-len", "128"]


class SensitivityTest(QuantctlJobsTest):
    @classmethod
    def setUpClass(cls):
        cls.q = live_quantd.LiveQuantd("sensitivity", local_workers=1)
        cls.tmp = live_quantd.temp_dir("sensitivity_files")
        cls.results = {}

    def test_sensitivity_per_layer_and_candidate(self):
        job = self.submit("--model", STORIES, "--scheme", "w_int8_per_channel_sym", *CALIB,
                          "--sensitivity", ",".join(CANDIDATES), "--no-eval")
        self.assertEqual(job["state"], "SUCCEEDED", job)
        blocks = job["result"]["metrics"]["blocks"]
        self.assertEqual(len(blocks), 5)
        table = {}
        for b in blocks:
            for layer in b["layers"]:
                s = layer["sensitivityRelativeMse"]
                self.assertEqual(len(s), len(CANDIDATES), layer["name"])
                self.assertGreater(s[1], 0, layer["name"])
                self.assertLess(s[1], s[0], layer["name"])  # int8 below int4
                table[layer["name"]] = (b["block"], s)
        self.assertEqual(len(table), 35)  # 7 linears in each of 5 blocks
        worst = max(table, key=lambda n: table[n][1][0])
        self.results["stories260K sensitivity"] = (
            f"{len(table)} layers x {len(CANDIDATES)} candidates; most sensitive to int4: "
            f"{worst} ({table[worst][1][0]:.3g} vs int8 {table[worst][1][1]:.3g})")

        # quantctl get names each candidate's most and least sensitive layer.
        text = subprocess.run([QUANTCTL, "--server", self.q.address, "get", job["name"]],
                              capture_output=True, text=True, timeout=60, check=True).stdout
        line = [t for t in text.splitlines() if t.startswith("sensitivity " + CANDIDATES[0])]
        self.assertEqual(len(line), 1, text)
        self.assertIn(f": 35 layers, block out rel-mse {table[worst][1][0]:.3g} ({worst}) to ",
                      line[0])
        self.results["quantctl get"] = line[0]

        # The first block's most sensitive layer, quantized alone at int4.
        first = max((n for n in table if table[n][0] == 1), key=lambda n: table[n][1][0])
        cfg = self.config("alone", {"layer_quant_config": {first: {"weight": {
            "dtype": "int4", "qscheme": "per_channel", "ch_axis": 0, "symmetric": True}}}})
        alone = self.submit("--model", STORIES, "--config", cfg, *CALIB, "--no-eval")
        self.assertEqual(alone["state"], "SUCCEEDED", alone)
        got = alone["result"]["metrics"]["blocks"][0]["outputRelMse"]
        want = table[first][1][0]
        self.assertAlmostEqual(got, want, delta=1e-6 * want)
        self.results["stories260K sensitivity cross-check"] = (
            f"{first} alone at int4: block 1 output relative MSE {got:.6g}, sensitivity "
            f"{want:.6g}")

    def test_bad_candidates_are_refused_naming_each(self):
        p = self.quantctl("submit", "--model", STORIES, "--scheme", "w_int8_per_channel_sym",
                          "--sensitivity", "w_int8_per_channel_sym,no_such_preset,"
                          "w_int8_per_channel_sym", check=False)
        self.assertNotEqual(p.returncode, 0)
        for text in ("spec.sensitivity.candidates[1]: unknown preset 'no_such_preset'",
                     "spec.sensitivity.candidates[2]: 'w_int8_per_channel_sym' is listed twice",
                     "spec.calibration.dataset_uri: the sensitivity is measured on the "
                     "calibration samples"):
            self.assertIn(text, p.stderr)
        # Nine candidates, one a 10 kB name: the count refused, the name cut
        # to 64 characters in the message.
        names = ["w_int8_per_channel_sym"] * 8 + ["x" * 10000]
        p = self.quantctl("submit", "--model", STORIES, "--scheme", "w_int8_per_channel_sym",
                          "--calib", TEXT, "--sensitivity", ",".join(names), check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("spec.sensitivity.candidates: give 1 to 8 preset names, got 9", p.stderr)
        self.assertNotIn("x" * 65, p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
