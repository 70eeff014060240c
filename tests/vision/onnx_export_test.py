#!/usr/bin/python3
"""The onnx export of TorchScript models through the service (quantctl
against a live quantd): the digits CNN at static int8 and with int4, uint4,
FP8, per-group int4 and MXFP4 (fake-quantized floats) weights, the digits
denoiser at weight-only int8, ResNet-18 and MobileNetV2 at static int8, each
exported as onnx and torchscript by one job; the onnx model run in onnxruntime-node against quantd's own quantized
outputs (the torchscript export in PyTorch, which gives them bit for bit:
//worker/torchscript:script_model_test); and a model with an operator ONNX
export does not translate, refused naming it (docs/vision_models.md, "The
onnx export").

Tolerances (docs/vision_models.md):
- weight-only: the graphs compute the same values (the weights are
  DequantizeLinear of the codes of quantd's fake-quantized weights, equal bit
  for bit) in another summation order: max abs difference under 1e-4 of the
  largest output;
- static activations: QuantizeLinear computes round(x / scale), quantd
  round(x * (1 / scale)), on inputs that differ by float rounding (another
  summation order), so a code flips where x / scale lies within rounding of
  a half. A flip moves one activation by one step s; the layers after it see
  inputs moved by a fraction of a step and flip some codes of their own.
  Both models are roundings of the same float model, each within its
  quantization error e of it, so the difference is at most 2 e (energy 4 e^2,
  about 2 e^2 for independent roundings). The test allows a quarter of e^2
  (the difference 6 dB below quantd's quantization error), the SQNR against
  float within 0.5 dB of quantd's, and top-1 agreement with quantd on all but
  one of the 360 images; the torchvision models, e^2.
"""

import json
import math
import os
import subprocess
import sys
import unittest

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "client",
                                "python", "testing"))
import live_quantd  # noqa: E402

sys.path.insert(0, live_quantd.runfile("tools/make_models"))
import safetensors_file  # noqa: E402
from vision_testing import QuantctlJobsTest, batched_outputs, dataset_inputs  # noqa: E402

DIGITS = live_quantd.runfile("models/digits_cnn")
DENOISER = live_quantd.runfile("models/digits_denoiser")
TEST_MODULES = live_quantd.runfile("worker/torchscript/testdata/modules")
PEERS = os.path.dirname(os.path.realpath(live_quantd.runfile("tests/peers/package.json")))


def sqnr_db(reference, other):
    r, o = reference.double(), other.double()
    return 10 * math.log10((r ** 2).sum().item() / ((o - r) ** 2).sum().item())


class OnnxExportTest(QuantctlJobsTest):
    @classmethod
    def setUpClass(cls):
        subprocess.run(["bash", os.path.join(PEERS, "setup.sh")], check=True, timeout=900)
        cls.q = live_quantd.LiveQuantd("onnx_export", local_workers=1)
        cls.tmp = live_quantd.temp_dir("onnx_export_files")
        cls.results = {}

    def artifacts(self, job):
        """{format: directory} of a job's artifacts."""
        out = {}
        for a in job["result"]["artifacts"]:
            self.assertTrue(a["uri"].startswith("file://"))
            out[a["format"]] = a["uri"][len("file://"):]
        return out

    def run_onnx(self, model, names, inputs, level):
        """The model's output in onnxruntime-node on `inputs` (one batch)."""
        d = os.path.join(self.tmp, os.path.basename(os.path.dirname(model)) + "_" + level)
        os.makedirs(d, exist_ok=True)
        manifest = {"model": model, "level": level, "inputs": {},
                    "output_file": os.path.join(d, "output.f32")}
        for name, x in zip(names, inputs):
            f = os.path.join(d, name + ".bin")
            x.contiguous().numpy().tofile(f)
            manifest["inputs"][name] = {"file": f, "dims": list(x.shape),
                                        "type": "int64" if x.dtype == torch.int64 else "float32"}
        with open(os.path.join(d, "manifest.json"), "w") as f:
            json.dump(manifest, f)
        p = subprocess.run(["node", os.path.join(PEERS, "onnx_tensor_run.mjs"),
                            os.path.join(d, "manifest.json")],
                           capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr)
        r = json.loads(p.stdout.strip().splitlines()[-1])
        self.assertTrue(r["ok"], r)
        with open(manifest["output_file"], "rb") as f:
            return torch.frombuffer(bytearray(f.read()), dtype=torch.float32).reshape(r["dims"])

    def exported(self, model_dir, data, *args):
        """Submits model_dir/model.pt exporting onnx and torchscript; returns
        the job's metrics, quantd's quantized outputs (the torchscript export
        in PyTorch), the float outputs, the dataset and the onnx model path."""
        job = self.submit("--model", f"{model_dir}/model.pt", *args, "--eval",
                          f"{model_dir}/{data}", "--format", "onnx", "--format", "torchscript")
        self.assertEqual(job["state"], "SUCCEEDED", job)
        art = self.artifacts(job)
        self.assertEqual(sorted(art), ["ONNX_QDQ", "TORCHSCRIPT"])
        onnx_art = [a for a in job["result"]["artifacts"] if a["format"] == "ONNX_QDQ"][0]
        self.assertEqual(onnx_art["consumers"], ["onnxruntime"])
        self.assertTrue(art["ONNX_QDQ"].endswith("/onnx_qdq"), art)
        inputs, t = dataset_inputs(f"{model_dir}/{data}")
        quantd_q = batched_outputs(torch.jit.load(os.path.join(art["TORCHSCRIPT"], "model.pt")),
                                   inputs)
        float_out = batched_outputs(torch.jit.load(f"{model_dir}/model.pt"), inputs)
        with open(os.path.join(art["ONNX_QDQ"], "onnx_export.json")) as f:
            info = json.load(f)
        return job["result"]["metrics"], quantd_q, float_out, t, inputs, art["ONNX_QDQ"], info

    def test_digits_static_int8_in_onnxruntime(self):
        m, quantd_q, float_out, t, inputs, onnx_dir, info = self.exported(
            DIGITS, "test.safetensors", "--scheme", "w_int8_per_channel_a_int8_per_tensor_sym",
            "--calib", f"{DIGITS}/calibration.safetensors")
        self.assertEqual(info["opset"], 13)
        self.assertEqual(info["float_weights"], [])
        model = os.path.join(onnx_dir, "model.onnx")
        for level in ("basic", "all"):
            ort = self.run_onnx(model, ["x"], inputs, level)
            self.assertEqual(tuple(ort.shape), tuple(quantd_q.shape))
            diff = (ort - quantd_q).abs()
            qerr = ((quantd_q.double() - float_out.double()) ** 2).sum().item()
            derr = ((ort.double() - quantd_q.double()) ** 2).sum().item()
            agree = (ort.argmax(1) == quantd_q.argmax(1)).sum().item()
            acc = (ort.argmax(1) == t["label"]).double().mean().item()
            self.assertLessEqual(derr, 0.25 * qerr, level)
            self.assertLess(abs(sqnr_db(float_out, ort) - m["outputSqnrDb"]), 0.5, level)
            self.assertGreaterEqual(agree, 359, level)
            self.assertAlmostEqual(acc, m["quantizedTop1Accuracy"], delta=1.5 / 360)
            self.results[f"digits_cnn static int8, onnxruntime level {level}"] = (
                f"max abs diff {diff.max().item():.3g} (largest |logit| "
                f"{quantd_q.abs().max().item():.3g}), diff energy "
                f"{100 * derr / qerr:.3g}% of quantization error, top-1 agreement "
                f"{agree}/360, top-1 {100 * acc:.2f}% (quantd "
                f"{100 * m['quantizedTop1Accuracy']:.2f}%), SQNR vs float "
                f"{sqnr_db(float_out, ort):.2f} dB (quantd {m['outputSqnrDb']:.2f} dB)")

    def test_denoiser_weight_only_int8_in_onnxruntime(self):
        m, quantd_q, float_out, t, inputs, onnx_dir, info = self.exported(
            DENOISER, "test.safetensors", "--scheme", "w_int8_per_channel_sym")
        self.assertEqual(len(info["layers"]), 10)
        model = os.path.join(onnx_dir, "model.onnx")
        for level in ("basic", "all"):
            ort = self.run_onnx(model, ["x", "t"], inputs, level)
            diff = (ort - quantd_q).abs().max().item()
            top = quantd_q.abs().max().item()
            self.assertLess(diff, 1e-4 * top, level)
            mse = ((ort - t["target"]) ** 2).flatten(1).mean(1).mean().item()
            self.results[f"digits_denoiser w_int8_per_channel_sym, onnxruntime level {level}"] = (
                f"max abs diff {diff:.3g} (largest |output| {top:.3g}), noise MSE {mse:.4f}, "
                f"SQNR vs float {sqnr_db(float_out, ort):.2f} dB (quantd "
                f"{m['outputSqnrDb']:.2f} dB)")

    def test_digits_weight_types_in_onnxruntime(self):
        # int4 (opset 21), uint4 with zero points, FP8 (opset 19) codes, and
        # MXFP4, which ONNX has no type for: its fake-quantized floats.
        fp8 = os.path.join(self.tmp, "fp8_weights.json")
        with open(fp8, "w") as f:
            json.dump({"global_quant_config": {"weight": {
                "dtype": "fp8_e4m3", "qscheme": "per_channel", "ch_axis": 0}}}, f)
        # Groups of 16 along the inputs (axis 1 of a Conv2d weight); features.0
        # has one input channel.
        group = os.path.join(self.tmp, "int4_groups.json")
        with open(group, "w") as f:
            json.dump({"global_quant_config": {"weight": {
                "dtype": "int4", "qscheme": "per_group", "group_size": 16, "symmetric": True}},
                "exclude": ["features.0"]}, f)
        configs = {"fp8_e4m3 per_channel": fp8, "int4 per_group(16)": group}
        for scheme, opset, floats in (("w_int4_per_channel_sym", 21, 0),
                                      ("w_uint4_per_channel_asym", 21, 0),
                                      ("fp8_e4m3 per_channel", 19, 0),
                                      ("int4 per_group(16)", 21, 0),
                                      ("w_mxfp4", 13, 5)):
            spec = ["--config", configs[scheme]] if scheme in configs else ["--scheme", scheme]
            m, quantd_q, float_out, _, inputs, onnx_dir, info = self.exported(
                DIGITS, "test.safetensors", *spec)
            self.assertEqual((info["opset"], len(info["float_weights"])), (opset, floats), scheme)
            ort = self.run_onnx(os.path.join(onnx_dir, "model.onnx"), ["x"], inputs, "all")
            diff = (ort - quantd_q).abs().max().item()
            self.assertLess(diff, 1e-4 * quantd_q.abs().max().item(), scheme)
            self.results[f"digits_cnn {scheme}, onnxruntime level all"] = (
                f"opset {opset}, max abs diff {diff:.3g}, SQNR vs float "
                f"{sqnr_db(float_out, ort):.2f} dB (quantd {m['outputSqnrDb']:.2f} dB)")

    def test_torchvision_architectures_in_onnxruntime(self):
        # ResNet-18 and MobileNetV2 (random weights, 8 images 64x64): every
        # operator they use, static int8, at onnxruntime's default level. The
        # flips cascade through more layers (53 in MobileNetV2, whose random
        # output is small against its activations): the difference is held
        # to no more than quantd's own quantization error (energy e^2).
        script = live_quantd.runfile("tools/make_models/script_torchvision.py")
        for arch, extra in (("resnet18", []), ("mobilenet_v2", ["--bn-warmup"])):
            out = os.path.join(self.tmp, arch)
            subprocess.run(["/usr/bin/python3", script, "--arch", arch, "--out", out, *extra],
                           check=True, capture_output=True, timeout=600)
            m, quantd_q, float_out, _, inputs, onnx_dir, _ = self.exported(
                out, "data.safetensors", "--scheme", "w_int8_per_channel_a_int8_per_tensor_sym",
                "--calib", f"{out}/data.safetensors")
            ort = self.run_onnx(os.path.join(onnx_dir, "model.onnx"), ["x"], inputs, "all")
            qerr = ((quantd_q.double() - float_out.double()) ** 2).sum().item()
            derr = ((ort.double() - quantd_q.double()) ** 2).sum().item()
            self.assertLessEqual(derr, qerr, arch)
            self.results[f"{arch} static int8, onnxruntime level all"] = (
                f"max abs diff {(ort - quantd_q).abs().max().item():.3g} (largest |logit| "
                f"{quantd_q.abs().max().item():.3g}), diff energy {100 * derr / qerr:.3g}% of "
                f"quantization error, SQNR vs float {sqnr_db(float_out, ort):.2f} dB (quantd "
                f"{m['outputSqnrDb']:.2f} dB)")

    def test_unsupported_operator_is_refused_naming_it(self):
        x = os.path.join(self.tmp, "four.safetensors")
        safetensors_file.save(x, {"input": torch.ones(2, 4)})
        job = self.submit("--model", f"{TEST_MODULES}/unsupported_op.pt", "--scheme",
                          "w_int8_per_channel_sym", "--eval", x, "--format", "onnx")
        self.assertEqual(job["state"], "FAILED", job)
        self.assertIn("spec.export.formats[0]: onnx cannot express aten::cumsum (in head)",
                      job["error"]["message"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
