#!/usr/bin/python3
"""make_models_test's checks (run by make_models_test.sh with /usr/bin/python3).

    check_models.py --models DIR [--torchvision ARCH:SAMPLES:SIZE:DIR[:warm]]...

  - the safetensors writer and reader: the layout, a round trip, refusals;
  - each --torchvision output (script_torchvision.py's DIR): model.pt loads
    with torch.jit.load, data.safetensors has input [SAMPLES,3,SIZE,SIZE] and
    label [SAMPLES], and the model gives finite logits [SAMPLES,10] (of order 1
    where the BatchNorm statistics were warmed up);
  - each committed model under --models (digits_cnn, digits_denoiser,
    recommender): the datasets follow the convention (keys, dtypes, shapes),
    model.pt is a scripted eval-mode float32 module, and its float metrics on
    test.safetensors are the README's (accuracy within 0.5 point, the
    denoiser's MSEs and the recommender's AUC and accuracy within 2%
    relative); every committed file is under 1 MiB, all under 3 MiB.
"""

import argparse
import json
import math
import os
import struct
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402  (first: it makes OpenBLAS single-threaded before torch loads)
import numpy as np  # noqa: E402
import safetensors_file  # noqa: E402
import torch  # noqa: E402

ARGS = None

# name -> (metric kind, {dataset file: number of samples}, forward arguments)
MODELS = {
    "digits_cnn": ("classifier", {"calibration": 256, "test": 360, "train": 1437}, 1),
    "digits_denoiser": ("denoiser", {"calibration": 256, "test": 360}, 2),
    "recommender": ("recommender", {"calibration": 256, "test": 1000}, 2),
}
MIB = 1 << 20


class SafetensorsFileTest(unittest.TestCase):

    def test_layout(self):
        blob = safetensors_file.encode({
            "b": np.arange(3, dtype=np.int64),
            "a": np.ones((2, 2), dtype=np.float32),
        })
        (n,) = struct.unpack("<Q", blob[:8])
        self.assertEqual((8 + n) % 8, 0, "the data section starts 8-byte aligned")
        header = json.loads(blob[8:8 + n])
        self.assertEqual(list(header), ["a", "b"], "names in sorted order")
        self.assertNotIn("__metadata__", header)
        self.assertEqual(header["a"], {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]})
        self.assertEqual(header["b"], {"dtype": "I64", "shape": [3], "data_offsets": [16, 40]})
        self.assertEqual(len(blob), 8 + n + 40)
        self.assertEqual(blob[8 + n + 16:8 + n + 24], struct.pack("<q", 0))
        self.assertEqual(blob[8 + n:8 + n + 4], struct.pack("<f", 1.0))

    def test_round_trip(self):
        tensors = {
            "input.0": torch.randn(4, 1, 8, 8),
            "input.1": torch.tensor([0, 5, -7, 2**40]),
            "scalar": torch.tensor(3.5),
            "empty": torch.zeros(0, 3),
        }
        back = safetensors_file.decode(safetensors_file.encode(tensors))
        self.assertEqual(sorted(back), sorted(tensors))
        for name, value in tensors.items():
            self.assertEqual(back[name].dtype, value.numpy().dtype, name)
            np.testing.assert_array_equal(back[name], value.numpy(), err_msg=name)
        self.assertEqual(safetensors_file.inputs(back)[1].tolist(), [0, 5, -7, 2**40])

    def test_refusals(self):
        with self.assertRaises(TypeError):
            safetensors_file.encode({"x": np.zeros(2, dtype=np.float64)})
        blob = safetensors_file.encode({"x": np.zeros(4, dtype=np.float32)})
        with self.assertRaises(ValueError):
            safetensors_file.decode(blob[:-1])
        with self.assertRaises(ValueError):
            safetensors_file.decode(blob + b"\0")


class TorchvisionTest(unittest.TestCase):

    def test_outputs(self):
        self.assertTrue(ARGS.torchvision, "no --torchvision output to check")
        for spec in ARGS.torchvision:
            arch, samples, size, path, *warm = spec.split(":")
            samples, size = int(samples), int(size)
            with self.subTest(spec=spec):
                model = torch.jit.load(os.path.join(path, "model.pt"))
                self.assertFalse(model.training)
                data = safetensors_file.load_torch(os.path.join(path, "data.safetensors"))
                self.assertEqual(sorted(data), ["input", "label"])
                self.assertEqual(data["input"].dtype, torch.float32)
                self.assertEqual(list(data["input"].shape), [samples, 3, size, size])
                self.assertEqual(data["label"].dtype, torch.int64)
                self.assertEqual(list(data["label"].shape), [samples])
                self.assertTrue(bool(((data["label"] >= 0) & (data["label"] < 10)).all()))
                with torch.no_grad():
                    logits = model(data["input"])
                self.assertEqual(list(logits.shape), [samples, 10])
                self.assertEqual(logits.dtype, torch.float32)
                self.assertTrue(bool(torch.isfinite(logits).all()))
                if warm:
                    self.assertGreater(float(logits.std()), 1e-2, "degenerate logits")


class CommittedModelsTest(unittest.TestCase):

    def _dir(self, name):
        return os.path.join(ARGS.models, name)

    def test_datasets(self):
        for name, (kind, files, n_args) in MODELS.items():
            for file, n in files.items():
                with self.subTest(model=name, file=file):
                    data = safetensors_file.load(
                        os.path.join(self._dir(name), file + ".safetensors"))
                    args = safetensors_file.inputs(data)
                    self.assertEqual(len(args), n_args)
                    for value in data.values():
                        self.assertEqual(value.shape[0], n)
                    if kind == "classifier":
                        self.assertEqual(sorted(data), ["input", "label"])
                        self.assertEqual(data["input"].dtype, np.float32)
                        self.assertEqual(data["input"].shape, (n, 1, 8, 8))
                        self.assertTrue(((data["input"] >= 0) & (data["input"] <= 1)).all())
                        self.assertEqual(data["label"].dtype, np.int64)
                        self.assertEqual(set(data["label"].tolist()), set(range(10)))
                    elif kind == "denoiser":
                        self.assertEqual(sorted(data), ["bucket", "input.0", "input.1", "target"])
                        self.assertEqual(data["input.0"].dtype, np.float32)
                        self.assertEqual(data["input.0"].shape, (n, 1, 8, 8))
                        self.assertEqual(data["input.1"].dtype, np.int64)
                        self.assertTrue(((data["input.1"] >= 0) & (data["input.1"] < 100)).all())
                        self.assertEqual(data["target"].dtype, np.float32)
                        self.assertEqual(data["target"].shape, (n, 1, 8, 8))
                        self.assertEqual(data["bucket"].dtype, np.int64)
                        np.testing.assert_array_equal(data["bucket"], data["input.1"] * 4 // 100)
                        self.assertEqual(set(data["bucket"].tolist()), {0, 1, 2, 3})
                    else:
                        self.assertEqual(sorted(data), ["input.0", "input.1", "target"])
                        self.assertEqual(data["input.0"].dtype, np.int64)
                        self.assertEqual(data["input.0"].shape, (n, 8))
                        self.assertTrue(((data["input.0"] >= 0) & (data["input.0"] < 1000)).all())
                        self.assertEqual(data["input.1"].dtype, np.int64)
                        self.assertEqual(data["input.1"].shape, (n, 4))
                        self.assertTrue(((data["input.1"] >= 0) & (data["input.1"] < 50)).all())
                        self.assertEqual(data["target"].dtype, np.float32)
                        self.assertEqual(set(data["target"].tolist()), {0.0, 1.0})

    def test_models(self):
        for name in MODELS:
            with self.subTest(model=name):
                model = torch.jit.load(os.path.join(self._dir(name), "model.pt"))
                self.assertIsInstance(model, torch.jit.ScriptModule)
                self.assertFalse(model.training)
                self.assertTrue(all(not m.training for m in model.modules()))
                for pname, p in model.named_parameters():
                    self.assertEqual(p.dtype, torch.float32, pname)

    def test_metrics_match_readme(self):
        for name, (kind, _, _) in MODELS.items():
            with self.subTest(model=name):
                with open(os.path.join(self._dir(name), "README.md")) as f:
                    expected = common.parse_metric_rows(f.read())
                self.assertTrue(expected, "no metric table in the README")
                model = torch.jit.load(os.path.join(self._dir(name), "model.pt"))
                data = safetensors_file.load(os.path.join(self._dir(name), "test.safetensors"))
                got = common.METRICS[kind](model, data)
                self.assertEqual(sorted(got), sorted(expected))
                print(f"{name}: " + ", ".join(f"{k} {v:.4f} (README {expected[k]:.4f})"
                                              for k, v in got.items()), file=sys.stderr)
                for metric, value in got.items():
                    self.assertFalse(math.isnan(value), metric)
                    if metric.endswith("_percent") and kind == "classifier":
                        self.assertLessEqual(abs(value - expected[metric]), 0.5, metric)
                    else:
                        self.assertLessEqual(abs(value - expected[metric]),
                                             0.02 * abs(expected[metric]), metric)
        with open(os.path.join(self._dir("digits_cnn"), "README.md")) as f:
            self.assertGreaterEqual(common.parse_metric_rows(f.read())["accuracy_percent"], 95.0)

    def test_sizes(self):
        total = 0
        for name in MODELS:
            for file in sorted(os.listdir(self._dir(name))):
                size = os.path.getsize(os.path.join(self._dir(name), file))
                with self.subTest(file=f"{name}/{file}"):
                    self.assertLess(size, MIB)
                total += size
        self.assertLess(total, 3 * MIB)


def main():
    global ARGS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", required=True, help="the directory holding the model dirs")
    parser.add_argument("--torchvision", action="append", default=[],
                        help="ARCH:SAMPLES:SIZE:DIR[:warm], a script_torchvision.py output")
    ARGS, rest = parser.parse_known_args()
    common.setup(0)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
