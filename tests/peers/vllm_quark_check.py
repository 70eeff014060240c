#!/usr/bin/env python3
"""Would vLLM load this hf-quark export, and decode the weights quantd meant?

Applies vLLM's Quark loading rules to an exported Llama-family directory
(config.json + safetensors) without vLLM or a GPU:

  1. QuarkConfig.from_config (vllm_quark_rules.py);
  2. per vLLM Linear module (model.layers.N.self_attn.qkv_proj, o_proj,
     mlp.gate_up_proj, down_proj; q/k/v and gate/up are loaded as shards of
     the fused module): exclude matching, the matched layer config and the
     scheme vLLM instantiates, or the exception it raises;
  3. the parameters that scheme's create_weights allocates (names, dtypes,
     shapes) and the checkpoint tensors loaded into them with the parameter
     classes' loader rules (fused shards narrowed at their offsets, packed
     dims divided by the pack factor, scalars, extra names -> KeyError,
     torch.empty parameters nothing wrote);
  4. process_weights_after_loading and the dequantized weight the scheme
     computes, compared with quantd's fake-quantized export (--reference).

Followed, besides the files named in vllm_quark_rules.py (vllm-project/vllm):
  vllm/model_executor/layers/quantization/quark/schemes/quark_w8a8_fp8.py @037cffecfe40b0486a9506f86bd7d36f2035f0ff
  vllm/model_executor/layers/quantization/quark/schemes/quark_w8a8_int8.py @7f1541fabbfe83b1ea426229ad5083725431ca6e
      (process_weights_after_loading) and @002e317b69f1b9aa0bf459d064c82d00c7362ab1
      (create_weights: per-channel scale and zero point [out], not [out, 1])
  vllm/model_executor/layers/quantization/quark/schemes/quark_ocp_mx.py @039541c743938f45865b5672f7d20073061531af
  vllm/model_executor/layers/quantization/quark/schemes/quark_w4a16_int4.py @3d4be8970300b08b574fdcf37f449de2e33635f3
  vllm/model_executor/layers/quantization/quark/utils.py (canonicalize_quark_packed_int4, post-#48606)
  vllm/model_executor/layers/quantization/utils/mxfp6_utils.py @055e47c28003156421365af985d676fc921cb075
  LlamaModel.load_weights (get_cache_scale, stacked_params_mapping) as stored
  with model_executor/models/*.py; vllm/model_executor/parameter.py loaders.
  vllm/model_executor/models/qwen3.py @002456df36fc7a63ca4463f335a49d05634ab2ab
      (Qwen3Attention: the Llama linears plus q_norm / k_norm, RMSNorm(head_dim);
      o_proj without a bias)
  vllm/model_executor/models/phi3.py @d3390218a7f851559a65b46309313a3c991b3457
      (Phi3ForCausalLM is LlamaForCausalLM with qkv_proj / gate_up_proj fused on
      disk: load_weights finds no stacked shard name in them and calls the fused
      module's weight_loader without a shard id)
  vllm/model_executor/layers/linear.py @9e109c9887e38c51fc16b0da89760c5bd7c293c9
      (weight_loader_v2 without a shard id: a PerTensorScaleParameter loads into
      shard 0 only, a BasevLLMParameter whole, the rest through
      _load_fused_module_from_checkpoint: narrowed per shard at its offset, packed
      dims divided by the pack factor)
  vllm/model_executor/layers/quantization/utils/w8a8_utils.py requantize_with_max_scale
      (a last shard scale still at its float32-min default marks a module fused on
      disk: no requantization, the one loaded scale for every row)
FP6 unpacking follows Quark's Pack_fp6.unpack (amd/Quark quark/torch/utils/pack.py,
the version with the 24-bit little-endian word), which vLLM's dequant_mxfp6 calls.

Exactness: for FP8/INT8/MX the weight vLLM multiplies by is code * scale in
float32 (MX: a power of two, exact), so it must equal the reference bit for
bit (-0 == +0). W4A16 allocates its scales in the model dtype and the kernels
dequantize in it: the codes must match exactly, the rounding of the scale and
product to bfloat16/float16 is reported as a note with its bound (two
roundings, 2^-7 relative for bfloat16, 2^-10 for float16). Per-tensor FP8 in
a fused module is requantized to the largest shard scale (requantize_with_max_scale):
a note with the bound 2^-4 relative (half an E4M3 step) plus float16 rounding.

Output: one line per problem, `module: what vLLM does: why it fails`, notes as
`note: ...`, and `summary: ...` lines. Exit 0: loads and decodes exactly (notes
allowed; --strict counts them as problems); 1: a problem; 2: usage or
unreadable input.
"""

import argparse
import fnmatch
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vllm_quark_files as vf  # noqa: E402
import vllm_quark_rules as vr  # noqa: E402

BF16_BOUND, F16_BOUND = 2.0 ** -7 + 2.0 ** -15, 2.0 ** -10 + 2.0 ** -21
FP8_REQUANT_BOUND = 2.0 ** -4 + 2.0 ** -10
F32_MIN = float(np.finfo(np.float32).min)
E4M3_MIN = -448.0  # torch.finfo(torch.float8_e4m3fn).min


class NarrowedRef:
    """A checkpoint tensor narrowed along one axis, as loaded_weight.narrow."""

    def __init__(self, ref, axis, offset, size):
        self.ref, self.axis, self.offset, self.size = ref, axis, offset, size
        self.dtype = ref.dtype
        shape = list(ref.shape)
        shape[axis] = size
        self.shape = tuple(shape)

    def _narrow(self, a):
        return np.take(a, range(self.offset, self.offset + self.size), axis=self.axis)

    def raw(self):
        return self._narrow(self.ref.raw())

    def values(self):
        return self._narrow(self.ref.values())


class Report:
    def __init__(self):
        self.problems, self.notes, self.checked = [], [], {}

    def problem(self, module, what, why):
        self.problems.append(f"{module}: {what}: {why}")

    def note(self, text):
        self.notes.append(f"note: {text}")


class Param:
    """A parameter as create_weights allocates it."""

    def __init__(self, name, shape, dtype, kind, required=True, output_dim=0,
                 input_dim=None, packed_dim=None, packed_factor=1, init=None):
        self.name, self.shape, self.dtype, self.kind = name, tuple(shape), dtype, kind
        self.required, self.output_dim, self.input_dim = required, output_dim, input_dim
        self.packed_dim, self.packed_factor = packed_dim, packed_factor
        self.data = np.zeros(self.shape, dtype=np.float64)
        self.written = np.zeros(self.shape, dtype=bool)
        # What create_weights fills in (FP8's scales: float32 min), or None
        # for torch.empty.
        self.init = init


def model_geometry(cfg):
    def need(key):
        v = cfg.get(key)
        if not isinstance(v, int) or isinstance(v, bool) or not 0 < v < 1 << 24:
            raise vf.FormatError(f"config.json: {key} = {v!r}")
        return v
    hidden, heads = need("hidden_size"), need("num_attention_heads")
    kv_heads = cfg.get("num_key_value_heads") or heads
    head_dim = cfg.get("head_dim") or hidden // heads
    archs = cfg.get("architectures") or [""]
    return {"hidden": hidden, "inter": need("intermediate_size"),
            "layers": need("num_hidden_layers"), "q": heads * head_dim,
            "kv": kv_heads * head_dim, "vocab": need("vocab_size"), "head_dim": head_dim,
            "tied": bool(cfg.get("tie_word_embeddings", False)),
            "qk_norm": archs[0] == "Qwen3ForCausalLM",
            "fused_on_disk": archs[0] == "Phi3ForCausalLM"}


def linear_modules(geo):
    """(vLLM prefix, [(checkpoint shard prefix, shard id, out)], in_features).

    Phi-3 holds each fused module under its own name: every shard then names
    the module itself (fused_on_disk)."""
    for n in range(geo["layers"]):
        a, m = f"model.layers.{n}.self_attn", f"model.layers.{n}.mlp"
        if geo["fused_on_disk"]:
            qkv, gu = f"{a}.qkv_proj", f"{m}.gate_up_proj"
            yield (qkv, [(qkv, "q", geo["q"]), (qkv, "k", geo["kv"]), (qkv, "v", geo["kv"])],
                   geo["hidden"])
            yield (f"{a}.o_proj", [(f"{a}.o_proj", None, geo["hidden"])], geo["q"])
            yield (gu, [(gu, 0, geo["inter"]), (gu, 1, geo["inter"])], geo["hidden"])
            yield (f"{m}.down_proj", [(f"{m}.down_proj", None, geo["hidden"])], geo["inter"])
            continue
        yield (f"{a}.qkv_proj", [(f"{a}.q_proj", "q", geo["q"]), (f"{a}.k_proj", "k", geo["kv"]),
                                 (f"{a}.v_proj", "v", geo["kv"])], geo["hidden"])
        yield (f"{a}.o_proj", [(f"{a}.o_proj", None, geo["hidden"])], geo["q"])
        yield (f"{m}.gate_up_proj", [(f"{m}.gate_proj", 0, geo["inter"]),
                                     (f"{m}.up_proj", 1, geo["inter"])], geo["hidden"])
        yield (f"{m}.down_proj", [(f"{m}.down_proj", None, geo["hidden"])], geo["inter"])


def create_params(scheme, outs, in_f, params_dtype):
    """What scheme.create_weights registers (None scheme: UnquantizedLinearMethod)."""
    out, n = sum(outs), len(outs)
    if scheme is None:
        return [Param("weight", (out, in_f), params_dtype, "weight", input_dim=1)]
    s = scheme.name
    if s == "QuarkW8A8Fp8":
        ps = [Param("weight", (out, in_f), "F8_E4M3", "weight", input_dim=1)]
        # weight_scale[:] = input_scale[:] = torch.finfo(torch.float32).min
        ps.append(Param("weight_scale", (out,), "F32", "channel", init=F32_MIN)
                  if scheme.weight_qscheme == "per_channel"
                  else Param("weight_scale", (n,), "F32", "per_tensor", init=F32_MIN))
        if scheme.static_input:
            ps.append(Param("input_scale", (n,), "F32", "per_tensor", init=F32_MIN))
        return ps
    if s == "QuarkW8A8Int8":
        ps = [Param("weight", (out, in_f), "I8", "weight", input_dim=1)]
        if scheme.weight_qscheme == "per_channel":
            ps += [Param("weight_scale", (out,), "F32", "channel"),
                   Param("weight_zero_point", (out,), "I8", "channel", required=False)]
        else:
            ps += [Param("weight_scale", (n,), "F32", "per_tensor"),
                   Param("weight_zero_point", (n,), "I8", "per_tensor", required=False)]
        if scheme.static_input:
            ps.append(Param("input_scale", (1,), "F32", "scalar"))
            ps.append(Param("input_zero_point", (1,), "I8", "scalar",
                            required=not scheme.input_symmetric))
        return ps
    if s == "QuarkW4A16Int4":
        gs = scheme.group_size
        if in_f % gs:
            raise vr.VllmError("ValueError", "The input size is not aligned with the quantized "
                               f"weight shape. input_size_per_partition={in_f}, "
                               f"group_size={gs}.")
        packed = -(-out // 8)
        return [Param("weight", (in_f, packed), "I32", "weight", output_dim=1, input_dim=0,
                      packed_dim=1, packed_factor=8),
                Param("weight_zero_point", (in_f // gs, packed), "I32", "weight", required=False,
                      output_dim=1, input_dim=0, packed_dim=1, packed_factor=8),
                Param("weight_scale", (in_f // gs, packed * 8), params_dtype, "w4a16_scale",
                      output_dim=1, input_dim=0)]
    if s == "QuarkOCP_MX":
        if scheme.weight_dtype == "mxfp4":
            if in_f % 2:
                raise vr.VllmError("AssertionError", f"get_packed_dim: {in_f} % 2 != 0")
            packed, factor = in_f // 2, 2
        else:
            if (in_f * 3) % 4:
                raise vr.VllmError("AssertionError", f"get_packed_dim: {in_f} * 3 % 4 != 0")
            packed, factor = in_f * 3 // 4, None
        return [Param("weight", (out, packed), "U8", "weight", input_dim=1, packed_dim=1,
                      packed_factor=factor),
                Param("weight_scale", (out, in_f // 32), "U8", "weight", input_dim=1)]
    raise vr.VllmError("Unmodeled", f"scheme {s}")


def load_tensor(param, ref, shard_id, shard_index, outs, fused):
    """The parameter class's loader; returns an error string or None."""
    # FP8 and MX bytes stay codes; the scheme decodes them after loading.
    loaded = ref.raw().astype(np.float64) if ref.dtype.startswith("F8_") else ref.values()
    if param.kind in ("per_tensor", "scalar"):
        if loaded.size != 1:
            return f"{ref.shape} into a per-tensor parameter {param.shape}"
        if param.kind == "per_tensor":
            index = shard_index if fused else 0
            param.data[index] = loaded.reshape(())
            param.written[index] = True
        else:  # BasevLLMParameter: every shard writes the same element
            param.data[...] = loaded.reshape(())
            param.written[...] = True
        return None
    if loaded.ndim == 0:
        loaded = loaded.reshape(1)
    if not fused:
        # RowParallel / unfused loaders narrow the input dim to the parameter's size.
        if param.input_dim is not None and loaded.ndim == len(param.shape):
            d = param.input_dim
            if loaded.shape[d] < param.shape[d]:
                return f"narrow({d}, 0, {param.shape[d]}) of {ref.shape}: out of range"
            loaded = np.take(loaded, range(param.shape[d]), axis=d)
        if param.kind == "w4a16_scale" and loaded.ndim == 2 and loaded.shape[1] < param.shape[1]:
            loaded = np.pad(loaded, ((0, 0), (0, param.shape[1] - loaded.shape[1])))
        if loaded.shape != param.shape:
            return f"shape {ref.shape} loaded into {param.shape}"
        param.data[...] = loaded
        param.written[...] = True
        return None
    d = param.output_dim
    offset, size = sum(outs[:shard_index]), outs[shard_index]
    if param.packed_dim is not None and param.packed_dim == d:
        offset, size = offset // param.packed_factor, size // param.packed_factor
    if param.kind == "w4a16_scale" and loaded.ndim == 2 and loaded.shape[1] < param.shape[1]:
        loaded = np.pad(loaded, ((0, 0), (0, param.shape[1] - loaded.shape[1])))
    if loaded.ndim != len(param.shape) or loaded.shape[d] < size:
        return f"shard {shard_id!r} {ref.shape} does not cover {size} rows of dim {d} of {param.shape}"
    loaded = np.take(loaded, range(size), axis=d)  # the TP narrow, rank 0
    target = [slice(None)] * len(param.shape)
    target[d] = slice(offset, offset + size)
    if param.data[tuple(target)].shape != loaded.shape:
        return f"shard {shard_id!r} {ref.shape} vs parameter slice {param.data[tuple(target)].shape}"
    param.data[tuple(target)] = loaded
    param.written[tuple(target)] = True
    return None


def dtype_ok(param, ref, params_dtype):
    if param.dtype in ("F32", "float32", "bfloat16", "float16") or param.kind == "w4a16_scale":
        return ref.dtype in vf.FLOAT_DTYPES
    if param.name == "weight" and param.dtype == params_dtype:
        return ref.dtype in vf.FLOAT_DTYPES
    return ref.dtype == param.dtype


def unpack_int4(words, pack_reorder):
    """int32 words -> unsigned nibbles, element j of a word at vLLM's source order."""
    order = [0, 4, 1, 5, 2, 6, 3, 7] if pack_reorder else list(range(8))
    w = words.astype(np.int64) & 0xFFFFFFFF
    nib = np.stack([(w >> (4 * order[j])) & 0xF for j in range(8)], axis=-1)
    return nib.reshape(*words.shape[:-1], words.shape[-1] * 8)


def dequantize(scheme, params, outs, in_f, params_dtype):
    """(vLLM's effective weight [out, in], exact code*scale [out, in] or None, note)."""
    p = {x.name: x for x in params}
    out = sum(outs)
    if scheme is None:
        w = vf.round_to(params_dtype, p["weight"].data)
        return w, None, None
    if scheme.name == "QuarkW8A8Int8":
        s = p["weight_scale"].data.reshape(-1)
        rows = s if scheme.weight_qscheme == "per_channel" else np.repeat(s, outs)
        return vf.round_to_float32(p["weight"].data * rows[:, None]), None, None
    if scheme.name == "QuarkW8A8Fp8":
        codes = p["weight"].data.astype(np.int64)
        q = vf.FP8_TABLES["F8_E4M3"][codes]
        s = p["weight_scale"].data.reshape(-1)
        if scheme.weight_qscheme == "per_channel":
            return vf.round_to_float32(q * s[:, None]), None, None
        smax = s.max()
        if s[-1] <= E4M3_MIN:
            # requantize_with_max_scale: fused on disk (the last shard's scale
            # is still its default), so no requantization: the loaded scale
            # (the largest) for every row.
            return vf.round_to_float32(q * smax), None, None
        exact = vf.round_to_float32(q * np.repeat(s, outs)[:, None])
        if np.all(s == smax):
            return exact, None, None
        # requantize_with_max_scale: dequant in float16, requantize to the max scale.
        dq = vf.round_to("float16", q.astype(np.float16).astype(np.float64)
                         * np.repeat(s, outs)[:, None])
        inv = vf.round_to_float32(1.0 / vf.round_to_float32(smax))
        requant = vf.fp8_e4m3_quantize(vf.round_to_float32(dq * inv))
        return vf.round_to_float32(requant * smax), exact, "fp8_requant"
    if scheme.name == "QuarkW4A16Int4":
        gs = scheme.group_size
        u = unpack_int4(p["weight"].data, scheme.pack_reorder)[:, :out]
        if scheme.symmetric:
            v = (u ^ 8) - 8
        else:
            z = unpack_int4(p["weight_zero_point"].data, scheme.pack_reorder)[:, :out]
            v = u - np.repeat(z, gs, axis=0)
        s32 = p["weight_scale"].data[:, :out]
        exact = vf.round_to_float32(v * np.repeat(s32, gs, axis=0)).T
        sd = vf.round_to(params_dtype, s32)
        w = vf.round_to(params_dtype, v * np.repeat(sd, gs, axis=0)).T
        return w, exact, "w4a16_dtype"
    if scheme.name == "QuarkOCP_MX":
        if in_f % 32:
            raise vr.VllmError("RuntimeError", f"at the first forward: the emulated dequant "
                               f"scales {in_f} unpacked inputs with {in_f // 32} blocks of 32")
        raw = p["weight"].data.astype(np.int64)
        if scheme.weight_dtype == "mxfp4":
            codes = np.stack([raw & 0xF, raw >> 4], axis=-1).reshape(out, in_f)
        else:
            b = raw.reshape(out, -1, 3)
            word = b[..., 0] | (b[..., 1] << 8) | (b[..., 2] << 16)
            codes = np.stack([(word >> (6 * k)) & 0x3F for k in range(4)], -1).reshape(out, in_f)
        vals = vf.MX_TABLES[scheme.weight_dtype][codes]
        e = p["weight_scale"].data.astype(np.int64)
        scale = np.where(e == 255, np.nan, np.ldexp(1.0, e - 127))
        return vals * np.repeat(scale, 32, axis=1), None, None
    raise vr.VllmError("Unmodeled", scheme.name)


def compare(report, shard, got, exact, note_kind, ref, params_dtype, floor_scale=0.0):
    if ref is None:
        return
    want = ref.values()
    if want.shape != got.shape:
        report.problem(shard, "vLLM's weight has shape " + str(got.shape),
                       f"the reference holds {want.shape}")
        return
    if exact is None:
        exact = got
    bad = ~((exact == want) | (np.isnan(exact) & np.isnan(want)))
    if bad.any():
        i = np.unravel_index(np.argmax(bad), bad.shape)
        report.problem(shard, "vLLM decodes a different weight",
                       f"{int(bad.sum())} of {bad.size} values differ from the reference "
                       f"(first at {tuple(int(x) for x in i)}: vLLM {exact[i]!r}, quantd "
                       f"{want[i]!r})")
        return
    if note_kind is None:
        return
    diff = np.abs(got - want)
    # Relative bound, with an absolute floor of half the smallest step for values
    # that land in the format's subnormal range (E4M3: 2^-10 * scale).
    # float16 W4A16: a subnormal scale or product (below 2^-14) loses up to half of
    # 2^-24 per rounding, times |code| <= 15 for the scale.
    floor = (floor_scale * 2.0 ** -10 if note_kind == "fp8_requant"
             else 2.0 ** -21 if params_dtype == "float16" else 0.0)
    excess = diff - floor
    rel = float(np.max(np.where(excess > 0, excess, 0) / np.maximum(np.abs(want), 1e-30)))
    if note_kind == "w4a16_dtype":
        bound = BF16_BOUND if params_dtype == "bfloat16" else F16_BOUND
        why = f"scales and products rounded to {params_dtype}"
    else:
        bound, why = FP8_REQUANT_BOUND, "fused shards requantized to the largest per-tensor scale"
    if rel > bound:
        report.problem(shard, f"vLLM's weight after {why}",
                       f"max relative difference {rel:.3g} exceeds the bound {bound:.3g}")
    elif diff.any():
        report.note(f"{shard}: codes exact; {why}: max relative difference {rel:.3g} "
                    f"beyond the subnormal floor (bound {bound:.3g})")


def check(directory, reference, capability, params_dtype_opt, config_override=None):
    report = Report()
    cfg = vf.read_json(os.path.join(directory, "config.json"))
    qcfg = config_override if config_override is not None else cfg.get("quantization_config")
    if not isinstance(qcfg, dict) or qcfg.get("quant_method") != "quark":
        report.problem("config", "vLLM does not pick QuarkConfig",
                       "quantization_config.quant_method is not 'quark'")
        return report
    geo = model_geometry(cfg)
    params_dtype = params_dtype_opt or {"float16": "float16"}.get(cfg.get("torch_dtype"),
                                                                   "bfloat16")
    tensors = vf.read_checkpoint(directory)
    ref_tensors = vf.read_checkpoint(reference) if reference else {}
    consumed = set()
    try:
        quant_config, kv_config, pack_method = vr.from_config(qcfg)
        vr.validate_kv_cache_config(kv_config)
    except vr.VllmError as e:
        report.problem("config", f"QuarkConfig.from_config {e}", "vLLM refuses the model")
        return report
    if qcfg.get("layer_type_quant_config"):
        report.problem("config", "vLLM ignores layer_type_quant_config",
                       "_find_matched_config looks it up by type(module), never a str key")
    exclude = quant_config.get("exclude")
    for prefix, shards, in_f in linear_modules(geo):
        outs = [o for _, _, o in shards]
        fused = len(shards) > 1
        globbed = [e for e in (exclude or []) if isinstance(e, str) and not e.startswith("re:")
                   and e not in [sh for sh, _, _ in shards]
                   and any(fnmatch.fnmatchcase(sh, e) or sh.startswith(e + ".")
                           for sh, _, _ in shards)]
        try:
            ignored = vr.should_ignore_layer(prefix, exclude)
            if globbed and not ignored:
                report.problem(prefix, f"vLLM does not exclude it (exclude entries {globbed} "
                               "are globs or prefixes)", "should_ignore_layer matches exact "
                               "module names and 're:' regexes only")
            scheme = None if ignored else vr.scheme_from_config(
                vr.find_matched_config(quant_config, prefix), capability, pack_method)
            params = create_params(scheme, outs, in_f, params_dtype)
        except vr.VllmError as e:
            report.problem(prefix, f"vLLM {e}", "the model does not load")
            for shard, _, _ in shards:
                consumed.update(n for n in tensors if n.startswith(shard + "."))
            report.checked.setdefault("refused", 0)
            report.checked["refused"] += 1
            continue
        name = scheme.name if scheme else "unquantized"
        by_name = {p.name: p for p in params}
        ok = True
        on_disk = fused and len({sh for sh, _, _ in shards}) == 1
        if on_disk:
            ok = load_fused_on_disk(report, tensors, shards, by_name, name, outs,
                                    params_dtype, consumed)
        for index, (shard, shard_id, _) in enumerate([] if on_disk else shards):
            for tname in sorted(n for n in tensors if n.startswith(shard + ".")):
                suffix = tname[len(shard) + 1:]
                if vr.get_cache_scale(tname) is not None or suffix == "bias":
                    continue  # attention scales below; biases are not in Llama
                consumed.add(tname)
                param = by_name.get(suffix)
                if param is None:
                    report.problem(shard, f"{name} has no parameter '{suffix}'",
                                   f"KeyError loading {tname}")
                    ok = False
                    continue
                if not dtype_ok(param, tensors[tname], params_dtype):
                    report.problem(shard, f"{name} allocates {suffix} as {param.dtype}",
                                   f"the file holds {tensors[tname].dtype}: copy_ converts "
                                   "the values")
                    ok = False
                    continue
                err = load_tensor(param, tensors[tname], shard_id, index, outs, fused)
                if err:
                    report.problem(shard, f"{name} loader asserts", err)
                    ok = False
        for p in params:
            if p.required and not p.written.all():
                ragged = [o for o in outs if p.packed_dim == p.output_dim and fused
                          and o % (p.packed_factor or 1)]
                hint = (f"; shard widths {ragged} are not multiples of the pack factor "
                        f"{p.packed_factor}, so the shard offsets are floored" if ragged else "")
                report.problem(prefix, f"{name} leaves {p.name} uninitialized "
                               f"({int((~p.written).sum())} of {p.written.size} values)",
                               "nothing in the file is loaded into it (torch.empty)" + hint)
                ok = False
        if scheme is not None and scheme.name in ("QuarkW8A8Fp8", "QuarkW8A8Int8") and \
                fused and scheme.static_input:
            values = [tensors.get(s + ".input_scale") for s, _, _ in shards]
            vals = [float(v.values().reshape(-1)[0]) for v in values if v is not None]
            if len(set(vals)) > 1:
                rule = ("keeps the largest" if scheme.name == "QuarkW8A8Fp8"
                        else "keeps the last shard's")
                report.problem(prefix, f"{name} {rule} input_scale of {vals}",
                               "the shards' static input scales differ")
                ok = False
        report.checked.setdefault(name, 0)
        report.checked[name] += 1
        if not ok:
            continue
        try:
            got, exact, note_kind = dequantize(scheme, params, outs, in_f, params_dtype)
        except vr.VllmError as e:
            report.problem(prefix, f"{name} {e}", "the weight cannot be decoded")
            continue
        start = 0
        for shard, _, o in ([(prefix, None, sum(outs))] if on_disk else shards):
            part = slice(start, start + o)
            start += o
            if reference:
                ref = ref_tensors.get(shard + ".weight")
                if ref is None:
                    report.problem(shard, "no reference weight", f"{reference} lacks it")
                    continue
                if scheme is None:
                    want_dtype = vf.round_to(params_dtype, ref.values())
                    if not np.array_equal(got[part], want_dtype):
                        report.problem(shard, "vLLM loads the float weight",
                                       "it differs from the reference (after rounding both "
                                       f"to {params_dtype})")
                    continue
                smax = float(by_name["weight_scale"].data.max()) if note_kind else 0.0
                compare(report, shard, got[part], None if exact is None else exact[part],
                        note_kind, ref, params_dtype, smax)
    check_attention(report, tensors, geo, kv_config, consumed)
    check_rest(report, tensors, geo, consumed, params_dtype)
    return report


def load_fused_on_disk(report, tensors, shards, by_name, name, outs, params_dtype, consumed):
    """A module fused on disk: weight_loader_v2 without a shard id."""
    prefix = shards[0][0]
    ok = True
    for tname in sorted(n for n in tensors if n.startswith(prefix + ".")):
        suffix = tname[len(prefix) + 1:]
        if suffix == "bias":
            continue
        consumed.add(tname)
        param, ref = by_name.get(suffix), tensors[tname]
        if param is None:
            report.problem(prefix, f"{name} has no parameter '{suffix}'",
                           f"KeyError loading {tname}")
            ok = False
            continue
        if not dtype_ok(param, ref, params_dtype):
            report.problem(prefix, f"{name} allocates {suffix} as {param.dtype}",
                           f"the file holds {ref.dtype}: copy_ converts the values")
            ok = False
            continue
        if param.kind in ("per_tensor", "scalar"):
            # PerTensorScaleParameter: shard 0 only; BasevLLMParameter: whole.
            err = load_tensor(param, ref, shards[0][1], 0, outs, True)
        else:
            err, offset = None, 0
            for index, (_, shard_id, size) in enumerate(shards):
                d = param.output_dim
                o, n = offset, size
                if param.packed_dim is not None and param.packed_dim == d:
                    o, n = o // param.packed_factor, n // param.packed_factor
                offset += size
                if len(ref.shape) <= d or ref.shape[d] < o + n:
                    err = f"narrow({d}, {o}, {n}) of {ref.shape}: out of range"
                    break
                err = load_tensor(param, NarrowedRef(ref, d, o, n), shard_id, index, outs, True)
                if err:
                    break
        if err:
            report.problem(prefix, f"{name} loader asserts", err)
            ok = False
    # Entries no shard wrote keep what create_weights put there.
    for p in by_name.values():
        if p.init is not None:
            p.data[~p.written] = p.init
            p.written[...] = True
    return ok


def check_attention(report, tensors, geo, kv_config, consumed):
    for n in range(geo["layers"]):
        a = f"model.layers.{n}.self_attn"
        for proj, scale in (("k_proj", "k_scale"), ("v_proj", "v_scale"), ("q_proj", "q_scale")):
            name = f"{a}.{proj}.output_scale"
            ref = tensors.get(name)
            if ref is not None:
                consumed.add(name)
                v = ref.values().reshape(-1)
                if ref.dtype not in vf.FLOAT_DTYPES or v.size < 1:
                    report.problem(f"{a}.attn", f"loads {name} as attn.{scale}",
                                   f"{ref.dtype} {ref.shape} is not a float scale")
                elif not (np.isfinite(v[0]) and v[0] > 0):
                    report.problem(f"{a}.attn", f"attn.{scale} = {v[0]!r}",
                                   "a KV-cache scale must be positive and finite")
            elif kv_config is not None and proj != "q_proj":
                report.problem(f"{a}.attn", f"FP8 KV cache with attn.{scale} unset",
                               f"{name} is missing: vLLM falls back to scale 1.0")


def check_rest(report, tensors, geo, consumed, params_dtype):
    known = {"model.embed_tokens.weight": (geo["vocab"], geo["hidden"]),
             "model.norm.weight": (geo["hidden"],)}
    if not geo["tied"]:
        known["lm_head.weight"] = (geo["vocab"], geo["hidden"])
    for n in range(geo["layers"]):
        for norm in ("input_layernorm", "post_attention_layernorm"):
            known[f"model.layers.{n}.{norm}.weight"] = (geo["hidden"],)
        if geo["qk_norm"]:  # Qwen3Attention's q_norm / k_norm: RMSNorm(head_dim)
            for norm in ("q_norm", "k_norm"):
                known[f"model.layers.{n}.self_attn.{norm}.weight"] = (geo["head_dim"],)
    for name, shape in known.items():
        ref = tensors.get(name)
        consumed.add(name)
        if ref is None:
            if name != "lm_head.weight":
                report.problem(name, "vLLM leaves it uninitialized", "missing from the file")
        elif ref.dtype not in vf.FLOAT_DTYPES or ref.shape != shape:
            report.problem(name, f"vLLM allocates {params_dtype} {shape}",
                           f"the file holds {ref.dtype} {list(ref.shape)}")
    for name in sorted(set(tensors) - consumed):
        if "rotary_emb.inv_freq" in name or (geo["tied"] and name.startswith("lm_head.")):
            continue  # skipped by LlamaForCausalLM.load_weights
        report.problem(name, "vLLM has no parameter of that name", "KeyError in load_weights")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("directory", help="an hf-quark export (config.json + safetensors)")
    ap.add_argument("--reference", help="the same job's hf_fake_quantized directory")
    ap.add_argument("--config", help="check this quantization_config (JSON file: the object "
                    "or a config.json holding it) against DIRECTORY instead of its own")
    ap.add_argument("--capability", type=int, default=90,
                    help="GPU compute capability vLLM sees (default 90; FP8 needs 89)")
    ap.add_argument("--dtype", choices=["bfloat16", "float16"],
                    help="model dtype (default: config torch_dtype float16, else bfloat16 "
                         "as vLLM resolves float32 checkpoints on CUDA)")
    ap.add_argument("--strict", action="store_true",
                    help="count the notes (inexact but bounded decodes) as problems")
    args = ap.parse_args(argv)
    try:
        override = None
        if args.config:
            override = vf.read_json(args.config)
            if isinstance(override, dict) and "quantization_config" in override:
                override = override["quantization_config"]
        report = check(args.directory, args.reference, args.capability, args.dtype, override)
    except vf.FormatError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.strict:
        report.problems += report.notes
        report.notes = []
    for line in report.problems + report.notes:
        print(line)
    counts = ", ".join(f"{k} {v}" for k, v in sorted(report.checked.items()))
    verdict = "FAIL" if report.problems else "OK"
    print(f"summary: {verdict}: {len(report.problems)} problems; modules per scheme: "
          f"{counts or 'none'}")
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
