#!/usr/bin/python3
"""The hf_quark export of TorchScript models through the service (quantctl
against a live quantd; docs/vision_models.md, "The hf_quark export"): the
digits CNN at static int8 and weight-only FP8, each exported as hf_quark and
torchscript by one job. The test decodes model.safetensors as the
reference's real-quantized layout defines it ((code - zero point) * scale,
per output channel; FP8 bytes * scale), and requires:
- every decoded weight equal bit for bit to the torchscript export's
  fake-quantized weight (the values quantd evaluated), every other tensor
  equal to the torchscript export's;
- each static input scale equal to the torchscript export's quantizer;
- the original module with the decoded tensors loaded computing the
  torchscript export's outputs exactly (weight-only FP8);
- model.json naming each quantized layer with its specs, and
  quantization_config.json the reference's export section;
and that 4-bit convolution weights, which the reference packs only in 2-D,
are refused before calibration naming every such layer.
"""

import json
import os
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


def fp8_e4m3(codes):
    """OCP e4m3fn bytes (uint8) as float32 (torch 1.13 has no float8 type)."""
    c = codes.to(torch.int32)
    sign = torch.where(c >= 128, -1.0, 1.0)
    exp = (c >> 3) & 0xF
    man = (c & 0x7).to(torch.float64)
    normal = (1 + man / 8) * torch.pow(2.0, exp.to(torch.float64) - 7)
    sub = man / 8 * 2.0 ** -6
    return (sign * torch.where(exp == 0, sub, normal)).to(torch.float32)


def channel_view(t, like):
    """A per-channel parameter [C] broadcast along axis 0 of `like`."""
    return t.reshape([-1] + [1] * (like.dim() - 1)) if t.dim() == 1 else t


class QuarkExportTest(QuantctlJobsTest):
    @classmethod
    def setUpClass(cls):
        cls.q = live_quantd.LiveQuantd("quark_export", local_workers=1)
        cls.tmp = live_quantd.temp_dir("quark_export_files")
        cls.results = {}

    def exported(self, *args):
        job = self.submit("--model", f"{DIGITS}/model.pt", *args, "--eval",
                          f"{DIGITS}/test.safetensors", "--format", "hf-quark", "--format",
                          "torchscript")
        self.assertEqual(job["state"], "SUCCEEDED", job)
        art = {a["format"]: a["uri"][len("file://"):] for a in job["result"]["artifacts"]}
        self.assertEqual(sorted(art), ["HF_QUARK", "TORCHSCRIPT"])
        quark = art["HF_QUARK"]
        self.assertEqual(sorted(f for f in os.listdir(quark) if not f.startswith(".")),
                         ["model.json", "model.safetensors", "quantization_config.json"])
        tensors = safetensors_file.load_torch(os.path.join(quark, "model.safetensors"))
        with open(os.path.join(quark, "model.json")) as f:
            structure = json.load(f)["structure"]
        with open(os.path.join(quark, "quantization_config.json")) as f:
            qconfig = json.load(f)
        self.assertEqual(qconfig["quant_method"], "quark")
        self.assertEqual(qconfig["export"]["weight_format"], "real_quantized")
        script = torch.jit.load(os.path.join(art["TORCHSCRIPT"], "model.pt"))
        return tensors, structure, script

    def leaf(self, structure, name):
        node = structure
        for part in name.split("."):
            node = node[part]
        self.assertEqual(node["name"], name)
        return node

    def decoded_state(self, tensors, structure, script, decode):
        """The module's state from the export, quantized weights decoded;
        checked against the torchscript export tensor by tensor."""
        state = dict(script.named_parameters())
        state.update(dict(script.named_buffers()))
        quantized = sorted(k[:-len(".weight_scale")] for k in tensors
                           if k.endswith(".weight_scale"))
        self.assertTrue(quantized)
        out = {}
        for name, want in state.items():
            self.assertIn(name, tensors)
            layer = name[:-len(".weight")]
            if name.endswith(".weight") and layer in quantized:
                got = decode(tensors, layer)
                node = self.leaf(structure, layer)
                self.assertEqual(node["weight"], name)
                self.assertIn("weight_quant", node)
            else:
                got = tensors[name]
            self.assertEqual(got.shape, want.shape, name)
            self.assertTrue(torch.equal(got, want.detach()), name)
            out[name] = got
        return out, quantized

    def test_static_int8_decodes_to_the_evaluated_weights(self):
        tensors, structure, script = self.exported(
            "--scheme", "w_int8_per_channel_a_int8_per_tensor_sym", "--calib",
            f"{DIGITS}/calibration.safetensors")

        def decode(t, layer):
            codes, scale = t[layer + ".weight"], t[layer + ".weight_scale"]
            self.assertEqual(codes.dtype, torch.int8)
            self.assertEqual(list(scale.shape), [codes.shape[0]])
            zp = t[layer + ".weight_zero_point"].to(torch.float32)
            return (codes.to(torch.float32) - channel_view(zp, codes)) * channel_view(scale, codes)

        _, quantized = self.decoded_state(tensors, structure, script, decode)
        convs = 0
        for layer in quantized:
            node = self.leaf(structure, layer)
            self.assertEqual(node["weight_quant"]["dtype"], "int8")
            self.assertEqual(node["weight_quant"]["qscheme"], "per_channel")
            self.assertEqual(node["input_quant"]["qscheme"], "per_tensor")
            convs += node["type"] == "Conv2d"
            module = script
            for part in layer.split("."):
                module = getattr(module, part)
            want = module._quantd_scale[0]
            self.assertTrue(torch.equal(tensors[layer + ".input_scale"], want.reshape([])), layer)
            self.assertEqual(tensors[layer + ".input_zero_point"].dtype, torch.int8)
        self.assertGreaterEqual(convs, 2)
        self.results["digits_cnn static int8"] = (
            f"{len(quantized)} layers ({convs} Conv2d) decode bit for bit to the evaluated "
            "weights; input scales equal")

    def test_weight_only_fp8_runs_in_pytorch_from_the_export(self):
        config = self.config("fp8_weights", {"global_quant_config": {
            "weight": {"dtype": "fp8_e4m3", "qscheme": "per_channel", "ch_axis": 0}}})
        tensors, structure, script = self.exported("--config", config)

        def decode(t, layer):
            codes, scale = t[layer + ".weight"], t[layer + ".weight_scale"]
            self.assertEqual(codes.dtype, torch.uint8)  # F8_E4M3 bytes, read as U8
            return fp8_e4m3(codes) * channel_view(scale, codes)

        state, quantized = self.decoded_state(tensors, structure, script, decode)
        rebuilt = torch.jit.load(f"{DIGITS}/model.pt")
        with torch.no_grad():
            for name, p in list(rebuilt.named_parameters()) + list(rebuilt.named_buffers()):
                p.copy_(state[name])
        inputs, _ = dataset_inputs(f"{DIGITS}/test.safetensors")
        got, want = batched_outputs(rebuilt, inputs), batched_outputs(script, inputs)
        self.assertTrue(torch.equal(got, want))
        self.results["digits_cnn weight-only fp8"] = (
            f"{len(quantized)} layers decoded; the original module with them gives the "
            f"torchscript export's {tuple(got.shape)} outputs bit for bit")

    def test_4_bit_convolutions_are_refused_naming_each(self):
        job = self.submit("--model", f"{DIGITS}/model.pt", "--scheme", "w_int4_per_channel_sym",
                          "--eval", f"{DIGITS}/test.safetensors", "--format", "hf-quark")
        self.assertEqual(job["state"], "FAILED", job)
        text = json.dumps(job["error"])
        # docs/vision_models.md quotes this message.
        self.assertEqual(job["error"]["message"],
                         "spec.export.formats[0]: features.0 weight: hf_quark packs only 2-D "
                         "weights, so a Conv2d weight is stored unpacked in its own shape: int8, "
                         "uint8, fp8_e4m3, fp8_e5m2, float16 or bfloat16, not int4")
        for conv in ("features.0 weight", "features.3 weight", "features.6 weight"):
            self.assertIn(conv, text)


if __name__ == "__main__":
    unittest.main(verbosity=2)
