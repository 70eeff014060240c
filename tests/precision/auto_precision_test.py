#!/usr/bin/python3
"""Accuracy-targeted quantization through the service (quantctl submit
--auto-precision against a live quantd; docs/auto_precision.md), on
stories260K with the bundled text split in two: the search measures on the
first half, the chosen config is checked on the second (held out).

- a +2% perplexity budget with {uint4 g32, int8 per channel, float} is met,
  on held-out text too, by a model smaller than uniform int8;
- q/k/v and gate/up share a format in every block;
- a budget that uniform uint4 g32 already meets ends in round 1 with it;
- an impossible budget ends with the most accurate round, budget_met false
  and the job failed by the accuracy gate, not silently;
- a second job on the same model, data and candidates reads the first
  round from the worker's cache;
- candidates the export format cannot hold are refused, each named.
"""

import json
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "client",
                                "python", "testing"))
import live_quantd  # noqa: E402

sys.path.insert(0, os.path.dirname(live_quantd.runfile("tests/vision/vision_testing.py")))
from vision_testing import QuantctlJobsTest  # noqa: E402

STORIES = live_quantd.runfile("models/stories260K")
TEXT = live_quantd.runfile("tests/data/tinystories-sample.txt")
CANDIDATES = "w_uint4_per_group_asym,w_int8_per_channel_sym,float"
WINDOWS = "48"


class AutoPrecisionTest(QuantctlJobsTest):
    @classmethod
    def setUpClass(cls):
        cls.q = live_quantd.LiveQuantd("auto_precision", local_workers=1)
        cls.tmp = live_quantd.temp_dir("auto_precision_files")
        cls.results = {}
        with open(TEXT) as f:
            stories = f.read().split("\n\n")
        half = len(stories) // 2
        cls.search_text = os.path.join(cls.tmp, "search.txt")
        cls.held_out_text = os.path.join(cls.tmp, "held_out.txt")
        for path, part in ((cls.search_text, stories[:half]), (cls.held_out_text, stories[half:])):
            with open(path, "w") as f:
                f.write("\n\n".join(part))

    def search(self, budget, *extra, logs=None):
        return self.submit("--model", STORIES, "--auto-precision", "--candidates", CANDIDATES,
                           "--group-size", "32", "--calib", self.search_text, "--calib-samples",
                           "16", "--calib-seq-len", "128", "--eval", self.search_text,
                           "--eval-windows", WINDOWS, "--max-ppl-increase", budget, *extra,
                           logs=logs)

    def uniform(self, *quantization, text=None):
        job = self.submit("--model", STORIES, *quantization, "--calib", self.search_text,
                          "--calib-samples", "16", "--calib-seq-len", "128", "--eval",
                          text or self.search_text, "--eval-windows", WINDOWS)
        self.assertEqual(job["state"], "SUCCEEDED", job)
        return job["result"]["metrics"]

    def check_fused_groups_share(self, layers):
        chosen = {l["layer"]: l["candidate"] for l in layers}
        for b in range(5):
            p = f"model.layers.{b}."
            self.assertEqual(len({chosen[p + f"self_attn.{x}_proj"] for x in "qkv"}), 1, chosen)
            self.assertEqual(chosen[p + "mlp.gate_proj"], chosen[p + "mlp.up_proj"], chosen)

    def test_a_two_percent_budget_is_met_smaller_than_int8(self):
        logs = []
        job = self.search("0.02", logs=logs)
        self.assertEqual(job["state"], "SUCCEEDED", job)
        ap = job["result"]["autoPrecision"]
        self.assertTrue(ap["budgetMet"], ap)
        rounds = ap["rounds"]
        chosen = rounds[ap["chosenRound"] - 1]
        self.assertTrue(chosen["meetsBudget"])
        self.assertLessEqual(chosen["perplexityIncrease"], 0.02)
        self.assertFalse(rounds[0].get("meetsBudget"), rounds[0])  # uniform uint4 misses +2%
        self.assertEqual(rounds[0]["layersPerCandidate"], [30, 5, 0])  # 172-wide down_proj: int8
        self.assertTrue(chosen["pareto"])
        self.check_fused_groups_share(ap["layers"])
        self.assertEqual(len(ap["layers"]), 35)
        # Each round's line reaches the job's events.
        self.assertTrue(any(m.startswith("auto precision round 2: ") for m in logs), logs)
        # The job's own metrics are the chosen model's.
        m = job["result"]["metrics"]
        self.assertAlmostEqual(m["quantizedPerplexity"]["perplexity"], chosen["perplexity"],
                               delta=1e-9 * chosen["perplexity"])

        # Smaller than uniform int8 per channel, whose bytes the job counts
        # the same way.
        int8 = self.uniform("--scheme", "w_int8_per_channel_sym")
        self.assertLess(int(m["quantizedModelBytes"]), int(int8["quantizedModelBytes"]))

        # The chosen config, resubmitted as the reference toolkit's JSON,
        # quantizes the same model and meets the budget on held-out text.
        config = os.path.join(self.tmp, "chosen.json")
        with open(config, "w") as f:
            f.write(ap["quarkJson"])
        again = self.uniform("--config", config)
        self.assertEqual(again["quantizedModelBytes"], m["quantizedModelBytes"])
        self.assertAlmostEqual(again["quantizedPerplexity"]["perplexity"], chosen["perplexity"],
                               delta=1e-9 * chosen["perplexity"])
        held = self.uniform("--config", config, text=self.held_out_text)
        held_increase = (held["quantizedPerplexity"]["perplexity"] /
                         held["floatPerplexity"]["perplexity"] - 1)
        self.assertLessEqual(held_increase, 0.02)
        self.results["+2% budget"] = (
            "rounds " + "; ".join(
                f"{r['round']}: {r['bitsPerWeight']:.2f} bits/w, ppl {r['perplexity']:.4f} "
                f"({100 * r['perplexityIncrease']:+.2f}%), layers {r['layersPerCandidate']}"
                for r in rounds) +
            f"; chosen {ap['chosenRound']}: {m['quantizedModelBytes']} bytes vs uniform int8 "
            f"{int8['quantizedModelBytes']}; held out {100 * held_increase:+.2f}%")

    def test_b_a_budget_uniform_uint4_meets_ends_in_round_one(self):
        job = self.search("0.5")
        self.assertEqual(job["state"], "SUCCEEDED", job)
        ap = job["result"]["autoPrecision"]
        self.assertEqual(len(ap["rounds"]), 1, ap)
        self.assertEqual(ap["chosenRound"], 1)
        self.assertTrue(ap["budgetMet"])
        self.assertEqual(ap["rounds"][0]["layersPerCandidate"], [30, 5, 0])
        counts = {}
        for layer in ap["layers"]:
            counts[layer["candidate"]] = counts.get(layer["candidate"], 0) + 1
        self.assertEqual(counts, {"w_uint4_per_group_asym": 30, "w_int8_per_channel_sym": 5})
        # The same model, data and candidates: the first round is cached.
        again = self.search("0.4")
        self.assertEqual(again["state"], "SUCCEEDED", again)
        self.assertTrue(again["result"]["autoPrecision"]["fromCache"])
        self.assertEqual(again["result"]["autoPrecision"]["rounds"][0]["perplexity"],
                         ap["rounds"][0]["perplexity"])

    def test_c_an_impossible_budget_says_so(self):
        job = self.submit("--model", STORIES, "--auto-precision", "--candidates",
                          "w_uint4_per_group_asym,w_int8_per_channel_sym", "--group-size", "32",
                          "--calib", self.search_text, "--calib-samples", "16", "--calib-seq-len",
                          "128", "--eval", self.search_text, "--eval-windows", WINDOWS,
                          "--max-ppl-increase", "0", "--max-rounds", "3")
        self.assertEqual(job["state"], "FAILED", job)
        self.assertIn("ACCURACY_GATE", json.dumps(job["error"]), job["error"])
        ap = job["result"]["autoPrecision"]
        self.assertFalse(ap.get("budgetMet"))
        self.assertGreaterEqual(len(ap["rounds"]), 2)
        self.assertFalse(any(r.get("meetsBudget") for r in ap["rounds"]))
        best = min(ap["rounds"], key=lambda r: r["perplexityIncrease"])
        self.assertEqual(ap["chosenRound"], best["round"])
        self.results["impossible budget"] = (
            f"{len(ap['rounds'])} rounds, best round {best['round']} at "
            f"{100 * best['perplexityIncrease']:+.2f}%: {job['error']['message'][:160]}")

    def test_d_bad_searches_are_refused_naming_every_field(self):
        p = self.quantctl("submit", "--model", STORIES, "--auto-precision", "--candidates",
                          "w_uint4_per_group_asym,w_int2_per_group_asym,nope,float,float",
                          "--group-size", "32", "--calib", self.search_text, "--eval",
                          self.search_text, "--max-ppl-increase", "0.02", "--max-rounds", "11",
                          "--target", "vllm", "--format", "hf-quark", check=False)
        self.assertNotEqual(p.returncode, 0)
        for field in ("spec.auto_precision.candidates[1]: w_int2_per_group_asym as the job's "
                      "scheme: spec.export.formats[0]",
                      "spec.auto_precision.candidates[2]: unknown candidate 'nope'",
                      "spec.auto_precision.candidates[4]: 'float' is listed twice",
                      "spec.auto_precision.max_rounds: must be in [1, 10]"):
            self.assertIn(field, p.stderr)
        p = self.quantctl("submit", "--model", STORIES, "--auto-precision", "--candidates",
                          "w_uint4_per_group_asym,float", "--group-size", "32", check=False)
        self.assertNotEqual(p.returncode, 0)
        for field in ("spec.evaluation.max_perplexity_increase: spec.auto_precision needs a budget",
                      "spec.evaluation.dataset_uri: spec.auto_precision measures every round",
                      "spec.calibration.dataset_uri: spec.auto_precision measures the "
                      "sensitivities"):
            self.assertIn(field, p.stderr)


if __name__ == "__main__":
    unittest.main()
