#!/usr/bin/python3
"""Accuracy-targeted quantization of a classifier through the service
(quantctl submit --auto-precision against a live quantd;
docs/auto_precision.md): models/digits_cnn (a TorchScript CNN), its
calibration images and its 360 test images, the budget a top-1 accuracy drop.

- spec.sensitivity on a TorchScript model: every layer's value for every
  candidate, one of them checked against an independent float64 reference
  in PyTorch;
- with a user cost table that makes int2 g16 the cheapest candidate, the
  first round (int2 wherever it fits) misses a half-point budget and the
  search finds a mix that meets it; the round's cost is the table's sum over
  the chosen formats, and the chosen config resubmitted as the reference
  toolkit's JSON gives the same accuracy;
- an evaluation dataset without labels, a language-model budget and a bad
  cost table are refused, each naming its field.
"""

import json
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "client",
                                "python", "testing"))
import live_quantd  # noqa: E402

sys.path.insert(0, os.path.dirname(live_quantd.runfile("tests/vision/vision_testing.py")))
from vision_testing import QuantctlJobsTest, batched_outputs, dataset_inputs  # noqa: E402
import safetensors_file  # noqa: E402  (vision_testing puts tools/make_models on the path)

DIGITS = live_quantd.runfile("models/digits_cnn")
MODEL = f"{DIGITS}/model.pt"
CALIB = f"{DIGITS}/calibration.safetensors"
TEST = f"{DIGITS}/test.safetensors"
CANDIDATES = ["w_int2_per_group_asym", "w_int4_per_channel_sym", "w_int8_per_channel_sym",
              "float"]
COSTS = {"w_int2_per_group_asym": 2, "w_int4_per_channel_sym": 4, "w_int8_per_channel_sym": 8,
         "float": 32}
# digits_cnn's layers and their weights (tools/make_models/make_digits_cnn.py).
WEIGHTS = {"features.0": 16 * 1 * 9, "features.3": 32 * 16 * 9, "features.6": 32 * 32 * 9,
           "classifier.1": 64 * 128, "classifier.3": 10 * 64}


class ClassifierAutoPrecisionTest(QuantctlJobsTest):
    @classmethod
    def setUpClass(cls):
        cls.q = live_quantd.LiveQuantd("classifier_auto_precision", local_workers=1)
        cls.tmp = live_quantd.temp_dir("classifier_auto_precision_files")
        cls.results = {}

    def search(self, budget, *extra, logs=None):
        return self.submit("--model", MODEL, "--auto-precision", "--candidates",
                           ",".join(CANDIDATES), "--group-size", "16", "--calib", CALIB, "--eval",
                           TEST, "--max-accuracy-drop", budget, *extra, logs=logs)

    def test_a_sensitivity_of_each_layer_matches_a_float64_reference(self):
        job = self.submit("--model", MODEL, "--scheme", "w_int8_per_channel_sym", "--calib", CALIB,
                          "--sensitivity", "w_int4_per_channel_sym,w_int8_per_channel_sym",
                          "--eval", TEST)
        self.assertEqual(job["state"], "SUCCEEDED", job)
        layers = {l["name"]: l for l in job["result"]["metrics"]["blocks"][0]["layers"]}
        self.assertEqual(set(layers), set(WEIGHTS))
        for name, layer in layers.items():
            int4, int8 = layer["sensitivityRelativeMse"]
            self.assertGreater(int4, int8, name)  # fewer bits, more error
            self.assertGreater(int8, 0, name)

        # Independently: the last linear's weight alone in int4 per channel
        # (scale = max |w| / 7.5 per output row, codes in [-8, 7]), the
        # model's logits on the calibration images against the float ones.
        import torch
        module = torch.jit.load(MODEL).eval()
        inputs, _ = dataset_inputs(CALIB)
        reference = batched_outputs(module, inputs).double()
        layer = getattr(module.classifier, "3")
        with torch.no_grad():
            w = layer.weight.detach().clone()
            scale = w.abs().amax(dim=1, keepdim=True) / 7.5
            layer.weight.copy_(torch.clamp(torch.round(w / scale), -8, 7) * scale)
        quantized = batched_outputs(module, inputs).double()
        expected = float(((quantized - reference) ** 2).sum() / (reference ** 2).sum())
        got = layers["classifier.3"]["sensitivityRelativeMse"][0]
        # float32 logits: the error's energy is good to ~1e-6 of itself.
        self.assertAlmostEqual(got, expected, delta=1e-4 * expected)
        self.results["sensitivity"] = (
            "int4 / int8 per channel: " + ", ".join(
                f"{n} {layers[n]['sensitivityRelativeMse'][0]:.3g} / "
                f"{layers[n]['sensitivityRelativeMse'][1]:.3g}" for n in WEIGHTS) +
            f"; classifier.3 int4 reference {expected:.6g}")

    def test_b_a_half_point_budget_under_a_cost_table(self):
        logs = []
        costs = ",".join(f"{k}={v}" for k, v in COSTS.items())
        job = self.search("0.005", "--cost-per-weight", costs, logs=logs)
        self.assertEqual(job["state"], "SUCCEEDED", job)
        ap = job["result"]["autoPrecision"]
        self.assertTrue(ap["budgetMet"], ap)
        rounds = ap["rounds"]
        # Round 1: int2 g16 wherever it fits; features.0 (one input
        # channel) takes the next dearer candidate, int4 per channel.
        self.assertEqual(rounds[0]["layersPerCandidate"], [4, 1, 0, 0])
        self.assertFalse(rounds[0].get("meetsBudget"), rounds[0])
        self.assertGreater(rounds[0]["accuracyDrop"], 0.005)
        self.assertIn("auto precision: 1 of 5 layers cannot take w_int2_per_group_asym (its group "
                      "does not divide their width); where a candidate does not fit, the layer "
                      "takes the next dearer one that does", logs)
        chosen = rounds[ap["chosenRound"] - 1]
        self.assertTrue(chosen["meetsBudget"])
        self.assertLessEqual(chosen["accuracyDrop"], 0.005)
        self.assertAlmostEqual(chosen["top1Accuracy"],
                               ap["floatTop1Accuracy"] - chosen["accuracyDrop"], delta=1e-12)
        self.assertIn("predictedAccuracyDrop", chosen)
        # The cost is the table's sum over the chosen formats.
        formats = {l["layer"]: l["candidate"] for l in ap["layers"]}
        self.assertEqual(set(formats), set(WEIGHTS))
        self.assertEqual(chosen["cost"], sum(WEIGHTS[n] * COSTS[c] for n, c in formats.items()))
        self.assertEqual(rounds[0]["cost"], 2 * (sum(WEIGHTS.values()) - WEIGHTS["features.0"]) +
                         4 * WEIGHTS["features.0"])
        # The job's metrics are the chosen model's.
        m = job["result"]["metrics"]
        self.assertEqual(m["quantizedTop1Accuracy"], chosen["top1Accuracy"])
        # Resubmitted as the reference toolkit's JSON, the same model.
        config = os.path.join(self.tmp, "chosen.json")
        with open(config, "w") as f:
            f.write(ap["quarkJson"])
        again = self.submit("--model", MODEL, "--config", config, "--eval", TEST)
        self.assertEqual(again["state"], "SUCCEEDED", again)
        self.assertEqual(again["result"]["metrics"]["quantizedTop1Accuracy"],
                         chosen["top1Accuracy"])
        self.results["half-point budget, cost table"] = (
            "rounds " + "; ".join(
                f"{r['round']}: {r['bitsPerWeight']:.2f} bits/w, cost {r['cost']:.0f}, top-1 "
                f"{100 * r['top1Accuracy']:.2f}% ({-100 * r['accuracyDrop']:+.2f} points), "
                f"layers {r['layersPerCandidate']}" for r in rounds) +
            f"; chosen {ap['chosenRound']}: {formats}")

    def test_c_bad_classifier_searches_are_refused_naming_every_field(self):
        p = self.quantctl("submit", "--model", MODEL, "--auto-precision", "--candidates",
                          ",".join(CANDIDATES), "--group-size", "16", "--calib", CALIB, "--eval",
                          TEST, "--max-ppl-increase", "0.02", "--cost-per-weight",
                          "w_int2_per_group_asym=2,w_int4_per_channel_sym=4,nope=1,"
                          "float=2000000", check=False)
        self.assertNotEqual(p.returncode, 0)
        for field in ("spec.evaluation.max_accuracy_drop: spec.auto_precision needs a budget",
                      "spec.evaluation.max_perplexity_increase: a TorchScript model is measured "
                      "by top-1 accuracy",
                      "spec.auto_precision.cost_per_weight: no cost for the candidate "
                      "'w_int8_per_channel_sym'",
                      "spec.auto_precision.cost_per_weight[nope]: not one of",
                      "spec.auto_precision.cost_per_weight[float]: must be in (0, 1e6]"):
            self.assertIn(field, p.stderr)

        # Top-1 accuracy needs labels: a dataset of images alone fails the
        # search after its first round, naming the dataset.
        inputs, _ = dataset_inputs(TEST)
        unlabelled = os.path.join(self.tmp, "unlabelled.safetensors")
        safetensors_file.save(unlabelled, {"input": inputs[0].numpy()})
        job = self.submit("--model", MODEL, "--auto-precision", "--candidates",
                          ",".join(CANDIDATES), "--group-size", "16", "--calib", CALIB, "--eval",
                          unlabelled, "--max-accuracy-drop", "0.01")
        self.assertEqual(job["state"], "FAILED", job)
        self.assertIn("spec.evaluation.dataset_uri: the evaluation dataset has no 'label' tensor",
                      job["error"]["message"])
        self.assertEqual(job["error"]["code"], 9, job["error"])  # FAILED_PRECONDITION


if __name__ == "__main__":
    unittest.main()
