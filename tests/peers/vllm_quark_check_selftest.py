#!/usr/bin/env python3
"""The vLLM Quark checker must fail on broken exports.

usage: vllm_quark_check_selftest.py CHECKER WORKDIR INT8_DIR INT4_DIR FP8KV_DIR

Each *_DIR is a job output (hf_quark/ + hf_fake_quantized/) that passes the
checker: int8 W8A8 static per-tensor, int4 W4A16 per_group, FP8 W8A8 with an
FP8 KV cache written the way Quark writes it. Every case copies one, breaks
one thing and asserts the checker's exit code and message; the unbroken
copies must pass, so each failure comes from its mutation.
"""

import json
import os
import shutil
import struct
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vllm_quark_files as vf  # noqa: E402


def write_safetensors(path, tensors):
    """tensors: name -> (dtype, shape, raw bytes)."""
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    head = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head + b"".join(blobs))


def load(path):
    return {n: (r.dtype, r.shape, r.raw().tobytes())
            for n, r in vf.read_safetensors_header(path).items()}


def copy_job(src, dst):
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    return dst


def edit_config(job, fn):
    path = os.path.join(job, "hf_quark", "config.json")
    cfg = json.load(open(path))
    fn(cfg["quantization_config"])
    json.dump(cfg, open(path, "w"))


def edit_tensors(job, fn, sub="hf_quark"):
    path = os.path.join(job, sub, "model.safetensors")
    tensors = load(path)
    fn(tensors)
    write_safetensors(path, tensors)


def main():
    checker, work, int8, int4, fp8kv = sys.argv[1:6]
    os.makedirs(work, exist_ok=True)
    failures = []

    def expect(name, job, rc, text):
        res = subprocess.run([sys.executable, checker, os.path.join(job, "hf_quark"),
                              "--reference", os.path.join(job, "hf_fake_quantized")],
                             capture_output=True, text=True)
        out = res.stdout + res.stderr
        ok = res.returncode == rc and text in out
        print(f"{'ok' if ok else 'FAIL'}: {name}: exit {res.returncode}, "
              f"{(next((l for l in out.splitlines() if text and text in l), None) or out.splitlines()[-1:])}")
        if not ok:
            print(out[-2000:])
            failures.append(name)

    for label, src in (("int8", int8), ("int4", int4), ("fp8kv", fp8kv)):
        expect(f"unbroken {label}", copy_job(src, os.path.join(work, label)), 0, "summary: OK")

    job = copy_job(fp8kv, os.path.join(work, "kv_group_without_layer_config"))
    edit_config(job, lambda q: q.update(layer_quant_config={}))
    expect("kv_cache_group without layer_quant_config", job, 1,
           "kv_cache_group parameter setting, but no kv_cache quantization settings")

    job = copy_job(int8, os.path.join(work, "glob_exclude"))
    edit_config(job, lambda q: q.update(exclude=["lm_head", "*o_proj"]))
    expect("glob exclude", job, 1, "are globs or prefixes")

    job = copy_job(int4, os.path.join(work, "transposed_group_scale"))

    def transpose_scale(t):
        name = "model.layers.0.self_attn.q_proj.weight_scale"
        dtype, shape, data = t[name]
        arr = np.frombuffer(data, dtype="<f4").reshape(shape)
        t[name] = (dtype, shape[::-1], np.ascontiguousarray(arr.T).tobytes())
    edit_tensors(job, transpose_scale)
    expect("per_group scale stored [out, in/gs]", job, 1, "vs parameter slice (2, 64)")

    job = copy_job(int4, os.path.join(work, "int4_called_asymmetric"))

    def make_asym(q):
        q["global_quant_config"]["weight"]["symmetric"] = False
    edit_config(job, make_asym)
    expect("signed int4 codes read without the XOR", job, 1, "vLLM decodes a different weight")

    job = copy_job(int4, os.path.join(work, "no_group_size"))
    edit_config(job, lambda q: q["global_quant_config"]["weight"].pop("group_size"))
    expect("W4A16 without group_size", job, 1, "must specify weight.group_size")

    job = copy_job(fp8kv, os.path.join(work, "missing_input_scale"))
    edit_tensors(job, lambda t: t.pop("model.layers.2.self_attn.k_proj.input_scale"))
    expect("missing input_scale", job, 1, "leaves input_scale uninitialized (1 of 3 values)")

    job = copy_job(fp8kv, os.path.join(work, "missing_k_scale"))
    edit_tensors(job, lambda t: t.pop("model.layers.1.self_attn.k_proj.output_scale"))
    expect("missing KV scale", job, 1, "falls back to scale 1.0")

    job = copy_job(int8, os.path.join(work, "extra_output_scale"))
    edit_tensors(job, lambda t: t.update({"model.layers.0.self_attn.o_proj.output_scale": (
        "F32", [], np.float32(0.5).tobytes())}))
    expect("extra tensor", job, 1, "KeyError loading model.layers.0.self_attn.o_proj.output_scale")

    job = copy_job(int8, os.path.join(work, "reference_one_ulp_off"))

    def nudge(t):
        name = "model.layers.3.mlp.down_proj.weight"
        dtype, shape, data = t[name]
        arr = np.frombuffer(data, dtype="<f4").copy().reshape(shape)
        arr[5, 7] = np.nextafter(arr[5, 7], np.float32(np.inf))
        t[name] = (dtype, shape, arr.tobytes())
    edit_tensors(job, nudge, sub="hf_fake_quantized")
    expect("reference one ulp off", job, 1, "1 of 11008 values differ")

    job = copy_job(int8, os.path.join(work, "hostile_header"))
    with open(os.path.join(job, "hf_quark", "model.safetensors"), "r+b") as f:
        f.write(struct.pack("<Q", 1 << 40))
    expect("header length beyond the file", job, 2, "header of 1099511627776 bytes")

    print(f"self-test: {len(failures)} failures {failures}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
