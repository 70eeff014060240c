"""What the tests of TorchScript jobs share: a unittest base class that runs
quantctl (-o json) against its class's LiveQuantd, and the tensor-dataset
helpers (docs/vision_models.md)."""

import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "client",
                                "python", "testing"))
import live_quantd  # noqa: E402

sys.path.insert(0, live_quantd.runfile("tools/make_models"))
import safetensors_file  # noqa: E402

QUANTCTL = live_quantd.runfile("client/quantctl/quantctl")


class QuantctlJobsTest(unittest.TestCase):
    """Subclasses set cls.q (a LiveQuantd), cls.tmp (a directory) and
    cls.results ({name: line}, printed at the end) in setUpClass."""

    @classmethod
    def tearDownClass(cls):
        cls.q.stop()
        for name, line in sorted(cls.results.items()):
            print(f"{name}: {line}")

    def quantctl(self, *args, check=True):
        p = subprocess.run([QUANTCTL, "--server", self.q.address, "-o", "json", *args],
                           capture_output=True, text=True, timeout=900)
        if check:
            self.assertEqual(p.returncode, 0, p.stderr + self.q.log()[-3000:])
        return p

    def submit(self, *args, logs=None):
        """Runs a job to its end (quantctl submit --wait streams its events as
        JSON lines); returns the final Job as JSON, and appends the job's log
        messages to `logs` when given."""
        p = self.quantctl("submit", *args, "--wait", check=False)
        lines = p.stdout.strip().splitlines()
        self.assertTrue(lines, p.stderr + self.q.log()[-3000:])
        events = [json.loads(line) for line in lines]
        if logs is not None:
            logs.extend(e["log"]["message"] for e in events if "log" in e)
        return json.loads(self.quantctl("get", events[0]["job"]).stdout)

    def config(self, name, cfg):
        """Writes a quantization config as JSON; returns its path."""
        path = os.path.join(self.tmp, name + ".json")
        with open(path, "w") as f:
            json.dump(cfg, f)
        return path


def dataset_inputs(path):
    """A tensor dataset's forward inputs (in order) and all its tensors."""
    t = safetensors_file.load_torch(path)
    if "input" in t:
        return [t["input"]], t
    return [t[f"input.{i}"] for i in range(len([k for k in t if k.startswith("input.")]))], t


def batched_outputs(module, inputs, batch=32):
    """module's outputs on the dataset's inputs, in quantd's batches."""
    import torch
    outs = []
    with torch.no_grad():
        for b in range(0, inputs[0].shape[0], batch):
            outs.append(module(*[x[b:b + batch] for x in inputs]))
    return torch.cat(outs)
