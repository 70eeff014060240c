#!/usr/bin/python3
"""Quantization-aware training through the service (quantctl against a live
quantd; docs/qat.md): at int2 / int3 weights, where rounding to nearest loses
clearly, QAT on the digits CNN (cross-entropy on its training split, learned
scales, trained biases, distillation) and on the digits denoiser (MSE on its
targets) recovers at least half of what rounding lost; a job whose worker is
killed with SIGKILL mid-training resumes from its checkpoint and ends with
the same model as an uninterrupted one; bad specs are refused naming every
field; a language model trains block by block (stories260K at int3)."""

import json
import os
import signal
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "client",
                                "python", "testing"))
import live_quantd  # noqa: E402
import torch  # noqa: E402
from vision_testing import QUANTCTL, QuantctlJobsTest, safetensors_file  # noqa: E402

DIGITS = live_quantd.runfile("models/digits_cnn")
DENOISER = live_quantd.runfile("models/digits_denoiser")
STORIES = live_quantd.runfile("models/stories260K")
TEXT = live_quantd.runfile("tests/data/tinystories-sample.txt")


def int_weights(bits):
    return {"global_quant_config": {"weight": {
        "dtype": bits, "qscheme": "per_channel", "ch_axis": 0, "symmetric": False}}}


def worker_pids(server_pid):
    """The quantd-worker processes quantd --local-workers started."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if ppid == server_pid and b"quantd-worker" in cmd:
            pids.append(int(entry))
    return pids


class QatJobsTest(QuantctlJobsTest):
    @classmethod
    def setUpClass(cls):
        # Short leases: a killed worker's job is leased again within seconds.
        # One intra-op thread: thousands of small training steps on a loaded
        # machine (the suite runs tests side by side) are slower with two
        # threads waiting on each other than with one; and both attempts of
        # a resumed job must use the same count.
        cls.q = live_quantd.LiveQuantd(
            "qat_jobs", local_workers=1,
            extra_flags=["--lease-duration=3s", "--requeue-backoff=100ms",
                         "--max-requeue-backoff=400ms", "--worker-arg=--threads=1"])
        cls.tmp = live_quantd.temp_dir("qat_jobs_files")
        cls.results = {}

    def submit(self, *args):
        job = super().submit(*args)
        self.assertEqual(job["state"], "SUCCEEDED", job)
        return job

    def submit_and_kill(self, args, when, logs=None):
        """Submits a job, SIGKILLs its worker at the first progress event for
        which when(progress) holds, and returns the job once it has ended
        (asserting it succeeded on a later attempt). The job's log lines go
        to `logs` when given."""
        p = subprocess.Popen([QUANTCTL, "--server", self.q.address, "-o", "json", "submit",
                              *args, "--wait"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        name, killed = None, False
        for line in p.stdout:
            event = json.loads(line)
            name = name or event.get("job")
            if logs is not None and "log" in event:
                logs.append(event["log"]["message"])
            if not killed and when(event.get("progress", {})):
                pids = worker_pids(self.q.process.pid)
                self.assertEqual(len(pids), 1, pids)
                os.kill(pids[0], signal.SIGKILL)
                killed = True
        p.wait(timeout=900)
        p.stdout.close()
        p.stderr.close()
        self.assertTrue(killed, "the job ended before the moment to kill its worker")
        job = json.loads(self.quantctl("get", name).stdout)
        self.assertEqual(job["state"], "SUCCEEDED", job)
        self.assertGreaterEqual(job["attempt"], 2)
        return job

    def output(self, name):
        return os.path.join(self.tmp, name)

    def digits_job(self, name, *qat):
        return self.submit("--model", f"{DIGITS}/model.pt", "--config",
                           self.config("int2", int_weights("int2")),
                           "--eval", f"{DIGITS}/test.safetensors",
                           "--output", self.output(name), *qat)

    def test_digits_int2_qat_recovers_at_least_half_of_the_accuracy(self):
        rtn = self.digits_job("rtn")["result"]["metrics"]
        lost = rtn["floatTop1Accuracy"] - rtn["quantizedTop1Accuracy"]
        self.assertGreater(lost, 0.01, "int2 rounding should lose clearly")
        common = ["--qat-steps", "300", "--qat-lr", "1e-3",
                  "--qat-data", f"{DIGITS}/train.safetensors"]
        for variant, extra in [("weights", []),
                               ("learned scales", ["--qat-learn-scales"]),
                               ("weights and biases", ["--qat-parameters", "weights-and-biases"]),
                               ("distillation", ["--qat-loss", "distillation"])]:
            job = self.digits_job(variant.replace(" ", "_"), *common, *extra)
            m = job["result"]["metrics"]
            t = m["training"]
            self.assertEqual(t["steps"], 300)
            self.assertEqual(t["loss"], "distillation" if "distillation" in variant
                             else "cross_entropy")
            self.assertLess(t["finalLoss"], t["firstLoss"], variant)
            regained = m["quantizedTop1Accuracy"] - rtn["quantizedTop1Accuracy"]
            self.assertGreaterEqual(regained, 0.5 * lost, (variant, m))
            if variant == "distillation":
                # Distillation matches the float model's outputs.
                self.assertLess(m["outputRelativeMse"], 0.5 * rtn["outputRelativeMse"])
            self.results[f"digits_cnn int2 QAT ({variant})"] = (
                f"top-1 {100 * m['floatTop1Accuracy']:.2f}% float,"
                f" {100 * rtn['quantizedTop1Accuracy']:.2f}% RTN ->"
                f" {100 * m['quantizedTop1Accuracy']:.2f}% QAT; relative MSE"
                f" {rtn['outputRelativeMse']:.4g} -> {m['outputRelativeMse']:.4g};"
                f" loss {t['firstLoss']:.4g} -> {t['finalLoss']:.4g}")
        # The export holds the trained weights: PyTorch's outputs of it are
        # what quantd evaluated (torchscript_jobs_test checks the export
        # format itself).
        self.assertTrue(os.path.exists(os.path.join(self.output("weights"), "model.pt")))

    def test_denoiser_int3_qat_on_targets(self):
        common = ["--model", f"{DENOISER}/model.pt", "--config",
                  self.config("int3", int_weights("int3")),
                  "--calib", f"{DENOISER}/calibration.safetensors",
                  "--eval", f"{DENOISER}/test.safetensors"]
        rtn = self.submit(*common, "--output", self.output("den_rtn"))["result"]["metrics"]
        job = self.submit(*common, "--output", self.output("den_qat"),
                          "--qat-steps", "400", "--qat-lr", "1e-3")
        m = job["result"]["metrics"]
        self.assertEqual(m["training"]["loss"], "mse")  # the calibration data has targets
        lost = rtn["quantizedTargetMse"] - rtn["floatTargetMse"]
        self.assertGreater(lost, 0)
        regained = rtn["quantizedTargetMse"] - m["quantizedTargetMse"]
        self.assertGreaterEqual(regained, 0.5 * lost, m)
        self.results["digits_denoiser int3 QAT (mse on targets)"] = (
            f"target MSE {m['floatTargetMse']:.4g} float, {rtn['quantizedTargetMse']:.4g} RTN ->"
            f" {m['quantizedTargetMse']:.4g} QAT")

    def test_resume_after_sigkill_gives_the_uninterrupted_result(self):
        spec = ["--model", f"{DIGITS}/model.pt", "--config",
                self.config("int3", int_weights("int3")),
                "--eval", f"{DIGITS}/test.safetensors",
                "--qat-steps", "2000", "--qat-lr", "3e-4", "--qat-batch-size", "16",
                "--qat-data", f"{DIGITS}/train.safetensors", "--qat-learn-scales"]
        reference = self.submit(*spec, "--output", self.output("uninterrupted"))
        self.assertEqual(reference["result"]["metrics"]["training"].get("resumedAfterStep", 0), 0)

        # The same job, its worker killed once training is past step 600
        # (a checkpoint is written every 100 steps).
        job = self.submit_and_kill(
            [*spec, "--output", self.output("killed")],
            lambda p: p.get("training", {}).get("step", 0) >= 600)
        t = job["result"]["metrics"]["training"]
        self.assertGreaterEqual(t["resumedAfterStep"], 100)
        self.assertLess(t["resumedAfterStep"], 2000)
        want = reference["result"]["metrics"]
        got = job["result"]["metrics"]
        for key in ("quantizedTop1Accuracy", "outputSqnrDb", "outputRelativeMse"):
            self.assertEqual(got[key], want[key], key)
        self.assertEqual(t["finalLoss"], want["training"]["finalLoss"])
        self.assertEqual(job["result"]["artifacts"][0]["sha256"],
                         reference["result"]["artifacts"][0]["sha256"])
        self.results["digits_cnn int3 QAT killed and resumed"] = (
            f"resumed after step {t['resumedAfterStep']} of 2000 on attempt {job['attempt']};"
            f" top-1 {100 * got['quantizedTop1Accuracy']:.2f}%, model.pt sha256 equal")

    def test_bad_qat_specs_are_refused_naming_every_field(self):
        p = self.quantctl("submit", "--model", f"{DIGITS}/model.pt", "--scheme",
                          "w_int8_per_channel_sym", "--qat-steps", "0", "--qat-lr", "5",
                          "--qat-batch-size", "0", check=False)
        self.assertNotEqual(p.returncode, 0)
        for field in ("spec.qat.steps", "spec.qat.learning_rate", "spec.qat.batch_size",
                      "spec.qat.dataset_uri"):
            self.assertIn(field, p.stderr)
        p = self.quantctl("submit", "--model", f"{DIGITS}/model.pt", "--scheme",
                          "w_int8_per_channel_sym", "--qat-lr", "1e-3", check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("--qat-steps", p.stderr)

        # Learned scales on MX weights: refused naming the layers.
        mx = self.config("mx", {"global_quant_config": {"weight": {
            "dtype": "mxfp4", "qscheme": "per_group", "group_size": 32}}})
        p = self.quantctl("submit", "--model", f"{DIGITS}/model.pt", "--config", mx,
                          "--qat-steps", "10", "--qat-learn-scales",
                          "--qat-data", f"{DIGITS}/train.safetensors", "--wait", check=False)
        job = json.loads(self.quantctl("get", json.loads(p.stdout.splitlines()[0])["job"]).stdout)
        self.assertEqual(job["state"], "FAILED")
        self.assertIn("spec.qat.learn_scales", job["error"]["message"])
        self.assertIn("features.0", job["error"]["message"])

        # Training data holding NaN: the job fails saying so, it does not
        # export a model trained on it.
        nan_data = os.path.join(self.tmp, "nan.safetensors")
        safetensors_file.save(nan_data, {"input": torch.full((16, 1, 8, 8), float("nan")),
                                         "label": torch.zeros(16, dtype=torch.int64)})
        p = self.quantctl("submit", "--model", f"{DIGITS}/model.pt", "--config",
                          self.config("int4", int_weights("int4")), "--qat-steps", "10",
                          "--qat-data", nan_data, "--wait", check=False)
        job = json.loads(self.quantctl("get", json.loads(p.stdout.splitlines()[0])["job"]).stdout)
        self.assertEqual(job["state"], "FAILED")
        self.assertIn("NaN", job["error"]["message"])

        # Cross-entropy without labels (the denoiser's data has targets).
        p = self.quantctl("submit", "--model", f"{DENOISER}/model.pt", "--config",
                          self.config("int4", int_weights("int4")), "--qat-steps", "10",
                          "--qat-loss", "cross-entropy",
                          "--calib", f"{DENOISER}/calibration.safetensors", "--wait", check=False)
        job = json.loads(self.quantctl("get", json.loads(p.stdout.splitlines()[0])["job"]).stdout)
        self.assertEqual(job["state"], "FAILED")
        self.assertIn("spec.qat.loss: cross-entropy needs a `label`", job["error"]["message"])

        # A language model trains on its calibration text against each block's
        # float outputs: a training dataset or another loss is refused, every
        # field named.
        p = self.quantctl("submit", "--model", STORIES, "--scheme", "w_int8_per_channel_sym",
                          "--qat-steps", "10", "--qat-data", f"{DIGITS}/train.safetensors",
                          "--qat-loss", "mse", "--no-eval", "--wait", check=False)
        job = json.loads(self.quantctl("get", json.loads(p.stdout.splitlines()[0])["job"]).stdout)
        self.assertEqual(job["state"], "FAILED")
        fields = {v["field"] for d in job["error"].get("details", [])
                  for v in d.get("fieldViolations", [])}
        self.assertTrue({"spec.qat.dataset_uri", "spec.qat.loss",
                         "spec.calibration.dataset_uri"} <= fields, job["error"])

    def test_stories260k_int3_block_qat_recovers_at_least_half_of_the_perplexity(self):
        common = ["--model", STORIES, "--config", self.config("int3", int_weights("int3")),
                  "--calib", TEXT, "--calib-samples", "32", "--calib-seq-len", "256",
                  "--eval", TEXT, "--eval-windows", "40"]
        rtn = self.submit(*common, "--output", self.output("llm_rtn"))["result"]["metrics"]
        job = self.submit(*common, "--output", self.output("llm_qat"),
                          "--qat-steps", "60", "--qat-lr", "1e-3", "--qat-batch-size", "8")
        m = job["result"]["metrics"]
        f = rtn["floatPerplexity"]["perplexity"]
        r = rtn["quantizedPerplexity"]["perplexity"]
        q = m["quantizedPerplexity"]["perplexity"]
        self.assertGreater(r - f, 1.0, "int3 rounding should lose clearly")
        self.assertLessEqual(q - f, 0.5 * (r - f), (f, r, q))
        self.results["stories260K int3 block QAT"] = (
            f"perplexity {f:.4f} float, {r:.4f} RTN -> {q:.4f} QAT (40 windows)")

        # The same job, its worker killed while block 3 trains: the next
        # attempt resumes from the block checkpoint and ends where the
        # uninterrupted job did.
        logs = []
        resumed = self.submit_and_kill(
            [*common, "--output", self.output("llm_killed"), "--qat-steps", "60",
             "--qat-lr", "1e-3", "--qat-batch-size", "8"],
            lambda p: p.get("block", 0) >= 3 and "training" in p, logs)
        self.assertTrue(any("resumed at block" in line for line in logs), logs)
        got = resumed["result"]["metrics"]["quantizedPerplexity"]["perplexity"]
        self.assertEqual(got, q)
        self.assertEqual(resumed["result"]["artifacts"][0]["sha256"],
                         job["result"]["artifacts"][0]["sha256"])
        self.results["stories260K int3 block QAT killed and resumed"] = (
            f"attempt {resumed['attempt']}, perplexity {got:.4f}, model sha256 equal")


if __name__ == "__main__":
    unittest.main()
