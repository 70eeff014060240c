#!/usr/bin/python3
"""Conformance check of a compressed-tensors export against vLLM's loader.

Applies, to an exported Hugging Face directory, the rules by which vLLM loads
a quant_method "compressed-tensors" checkpoint, and decodes every quantized
weight the way the compressed-tensors library decompresses it; compares the
result with quantd's fake-quantized (hf) export of the same job.

Followed (logic re-expressed here, nothing copied):
  vllm-project/vllm
    vllm/model_executor/layers/quantization/compressed_tensors/
      compressed_tensors.py at be696453ee1bf3b7a2f652cc457b340d5a20c88c:
        from_config / _quantization_scheme_map_from_config (config groups,
        per-group format, input_activations), get_scheme + _get_scheme_from_parts
        (_is_wNa16_group_channel, _is_fp8_w8a8, _is_fp8_w8a16,
        _is_static_tensor_w8a8, _is_dynamic_token_w8a8), get_cache_scale,
        CompressedTensorsKVCacheMethod.validate_kv_cache_scheme
      utils.py (should_ignore_layer, find_matched_target,
        _is_equal_or_regex_match: exact name, "re:" + re.match, class-name
        containment, fused shards q/k/v -> qkv_proj, gate/up -> gate_up_proj)
      schemes/compressed_tensors_wNa16.py (version with
        WNA16_ZP_SUPPORTED_TYPES_MAP: uint4b8 / uint8b128, zero points packed
        along the output axis), schemes/compressed_tensors_w8a8_int8.py at
        c45614b5d83bd38e3cec1966637e11ad8c9c1aca, schemes/
        compressed_tensors_w8a8_fp8.py at de4766a1b8c51300457adfb3eb8bf4a10d62f727
        (create_weights; per-tensor weight scales of fused shards requantized
        to their max; input_scale.max()).
  vllm-project/compressed-tensors at ac8e2ba82f4e0d5eaa40069f8fc642738f124cd4
    (0.18.0): compressors/pack_quantized/{base,helpers}.py (unpack_from_int32,
    offset 2^(bits-1)), compressors/naive_quantized/base.py,
    quantization/lifecycle/forward.py (dequantize: (q - zp) * scale, group
    columns by g_idx), quantization/quant_args.py (QuantizationArgs rules).

usage: vllm_ct_check.py CT_DIR HF_DIR
  CT_DIR: the compressed_tensors export; HF_DIR: the hf (fake-quantized)
  export of the same job. Prints one line per problem ("PROBLEM ...") and
  notes on what vLLM computes differently at run time ("note ..."), then a
  summary. Exit 0: conforms; 1: problems; 2: unreadable input or usage.
"""

import json
import os
import re
import sys

import numpy as np

import vllm_quark_files as files

FLOAT_DTYPES = files.FLOAT_DTYPES
# vLLM's packed_modules_mapping of its Llama-family models.
FUSED = {"qkv_proj": ("q_proj", "k_proj", "v_proj"), "gate_up_proj": ("gate_proj", "up_proj")}
LINEAR_CLASS = {"qkv_proj": "QKVParallelLinear", "gate_up_proj": "MergedColumnParallelLinear",
                "o_proj": "RowParallelLinear", "down_proj": "RowParallelLinear"}
# Qwen3 (vllm/model_executor/models/qwen3.py at 002456df36fc7a63ca4463f335a49d05634ab2ab)
# loads its linears as Qwen2 does (the same packed_modules_mapping); its
# q_norm / k_norm are float weights, compared like the other norms.
# Phi-3 (vllm/model_executor/models/phi3.py at d3390218a7f851559a65b46309313a3c991b3457)
# is LlamaForCausalLM with qkv_proj / gate_up_proj fused on disk: each tensor
# loads without a shard id (vllm/model_executor/layers/linear.py at
# 9e109c9887e38c51fc16b0da89760c5bd7c293c9, weight_loader_v2): a
# PerTensorScaleParameter into shard 0 only, a BasevLLMParameter whole, the
# others narrowed per shard (packed dims divided by the pack factor).
ARCHITECTURES = ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM",
                 "Phi3ForCausalLM")
ACT_FORMATS = ("naive-quantized", "int-quantized", "float-quantized", "nvfp4-pack-quantized",
               "mxfp8-quantized")


# The directory cannot be read as a checkpoint (exit 2).
Unreadable = files.FormatError
FP8_E4M3 = files.FP8_TABLES["F8_E4M3"].astype(np.float32)
read_json = files.read_json


class Checkpoint:
    """The tensors of a safetensors directory (vllm_quark_files' bounded reader)."""

    def __init__(self, directory):
        self.tensors = files.read_checkpoint(directory)  # name -> TensorRef

    def has(self, name):
        return name in self.tensors

    def dtype(self, name):
        return self.tensors[name].dtype

    def shape(self, name):
        return list(self.tensors[name].shape)

    def load(self, name):
        """As stored (BF16 as uint16 bits, FP8 as bytes)."""
        return self.tensors[name].raw()

    def load_f32(self, name):
        """Float tensors as float32 values (exact for F16 / BF16 / FP8)."""
        return self.tensors[name].values().astype(np.float32)


def quant_args(d, where):
    """QuantizationArgs as the library validates them; raises ValueError."""
    if not isinstance(d, dict):
        raise ValueError(f"{where}: not an object")
    a = {"num_bits": d.get("num_bits", 8), "type": str(d.get("type", "int")).lower(),
         "symmetric": d.get("symmetric", True), "group_size": d.get("group_size"),
         "strategy": d.get("strategy"), "dynamic": d.get("dynamic", False),
         "actorder": d.get("actorder"), "block_structure": d.get("block_structure")}
    if not isinstance(a["num_bits"], int) or not 1 <= a["num_bits"] <= 64:
        raise ValueError(f"{where}: num_bits {a['num_bits']!r}")
    if a["type"] not in ("int", "float"):
        raise ValueError(f"{where}: type {a['type']!r}")
    gs = a["group_size"]
    if gs is not None and (not isinstance(gs, int) or gs < -1):
        raise ValueError(f"{where}: group_size {gs!r}")
    if a["strategy"] is None:
        a["strategy"] = "tensor" if gs is None else ("group" if gs > 0 else "channel")
    a["strategy"] = str(a["strategy"]).lower()
    if a["strategy"] not in ("tensor", "channel", "group", "block", "token", "tensor_group",
                             "attn_head"):
        raise ValueError(f"{where}: strategy {a['strategy']!r}")
    if a["strategy"] in ("group", "tensor_group") and (gs is None or gs <= 0):
        raise ValueError(f"{where}: strategy {a['strategy']} needs a positive group_size")
    if gs is not None and gs > 0 and a["strategy"] not in ("group", "tensor_group"):
        raise ValueError(f"{where}: group_size requires strategy group")
    if a["strategy"] == "token" and not a["dynamic"]:
        raise ValueError(f"{where}: static token quantization")
    if (a["strategy"] == "block") != (a["block_structure"] is not None):
        raise ValueError(f"{where}: block strategy and block_structure go together")
    actorder = a["actorder"]
    if actorder is True or (isinstance(actorder, str) and actorder.lower() in ("group", "dynamic")):
        a["actorder"] = "group"
        if a["strategy"] not in ("group", "tensor_group"):
            raise ValueError(f"{where}: actorder group needs group quantization")
    elif actorder in (None, False) or (isinstance(actorder, str) and
                                        actorder.lower() in ("weight", "static")):
        a["actorder"] = None if actorder in (None, False) else "weight"
    else:
        raise ValueError(f"{where}: actorder {actorder!r}")
    return a


def regex_or_equal(value, target):
    if target.startswith("re:"):
        return re.match(target[3:], value) is not None
    return target == value


class Checker:
    def __init__(self, ct_dir, hf_dir):
        self.problems, self.notes, self.schemes = [], [], {}
        self.ct_dir, self.hf_dir = ct_dir, hf_dir

    def problem(self, where, what):
        self.problems.append(f"PROBLEM {where}: {what}")

    def note(self, where, what):
        self.notes.append(f"note {where}: {what}")

    # ---- config ----
    def parse_config(self):
        cfg = read_json(os.path.join(self.ct_dir, "config.json"))
        self.model_config = cfg
        archs = cfg.get("architectures") or []
        if not any(a in ARCHITECTURES for a in archs):
            raise Unreadable(f"architectures {archs}: this check follows vLLM's Llama-family models")
        q = cfg.get("quantization_config")
        if not isinstance(q, dict):
            raise Unreadable("config.json has no quantization_config object")
        if q.get("quant_method") != "compressed-tensors":
            self.problem("quantization_config.quant_method",
                         f"{q.get('quant_method')!r}, vLLM selects compressed-tensors by "
                         "'compressed-tensors'")
        if q.get("quantization_status") != "compressed":
            self.problem("quantization_config.quantization_status",
                         f"{q.get('quantization_status')!r}: the tensors are compressed")
        self.ignore = q.get("ignore") or []
        if not isinstance(self.ignore, list) or not all(isinstance(x, str) for x in self.ignore):
            self.problem("quantization_config.ignore", "not a list of strings")
            self.ignore = []
        for x in self.ignore:
            if not x.startswith("re:") and ("*" in x or "?" in x):
                self.problem("quantization_config.ignore", f"{x!r} is a glob; vLLM matches exact "
                             "names or 're:' regexes only")
        self.format = q.get("format")
        self.targets = {}  # target -> (weights, input, format)
        groups = q.get("config_groups")
        if not isinstance(groups, dict) or not groups:
            self.problem("quantization_config.config_groups", "missing or empty")
            groups = {}
        for gname, g in groups.items():
            where = f"config_groups.{gname}"
            if not isinstance(g, dict) or not isinstance(g.get("targets"), list):
                self.problem(where, "no targets list")
                continue
            try:
                weights = quant_args(g.get("weights"), where + ".weights")
                fmt = g.get("format") or self.format
                act = fmt in ACT_FORMATS
                inp = None
                if act or g.get("input_activations"):
                    if not g.get("input_activations"):
                        if weights["type"] != "float":
                            raise ValueError(f"{where}: an activation format without "
                                             "input_activations needs float weights (assert)")
                    else:
                        inp = quant_args(g["input_activations"], where + ".input_activations")
                if g.get("output_activations"):
                    self.problem(where + ".output_activations",
                                 "vLLM's Linear schemes do not quantize outputs")
            except ValueError as e:
                self.problem(where, str(e))
                continue
            for t in g["targets"]:
                self.targets[t] = (weights, inp, fmt)
        self.kv = q.get("kv_cache_scheme")
        if self.kv is not None:
            # validate_kv_cache_scheme, condition as vLLM writes it.
            if self.kv.get("type") != "float" and self.kv.get("num_bits") != 8:
                self.problem("kv_cache_scheme", "vLLM supports num_bits 8, type float")
            if self.kv.get("strategy") != "tensor":
                self.problem("kv_cache_scheme", "vLLM supports strategy tensor only")
            if not self.kv.get("symmetric"):
                self.problem("kv_cache_scheme", "vLLM supports symmetric only")
            if self.kv.get("type") != "float" or self.kv.get("num_bits") != 8:
                self.problem("kv_cache_scheme", "quantd's KV cache is FP8 e4m3 (float, 8 bits)")

    # ---- scheme selection ----
    def match_target(self, prefix, shards):
        cls = LINEAR_CLASS.get(prefix.rsplit(".", 1)[-1], "ColumnParallelLinear")
        for t in self.targets:
            if regex_or_equal(prefix, t):
                return t
        for t in self.targets:
            if not t.startswith("re:") and t.lower() in cls.lower():
                return t
        if len(shards) > 1:
            matches = []
            for s in shards:
                m = next((t for t in self.targets if regex_or_equal(s, t)), None)
                matches.append(m)
            if all(matches):
                if len({json.dumps(self.targets[m], sort_keys=True) for m in matches}) > 1:
                    raise ValueError(f"shards {shards} match targets with different schemes")
                return matches[0]
        raise ValueError("no config_groups target matches (vLLM: Unable to find matching target)")

    def scheme_of(self, weights, inp, fmt):
        """_get_scheme_from_parts, for the schemes quantd writes."""
        if (weights["strategy"] in ("channel", "group") and inp is None
                and not weights["dynamic"]):
            if fmt == "pack-quantized" and weights["num_bits"] in (4, 8):
                if weights["group_size"] in (None, -1) and weights["strategy"] != "channel":
                    raise ValueError("WNA16 needs group or channel quantization")
                if weights["type"] != "int":
                    raise ValueError("pack-quantized float weights")
                return "WNA16"
        if fmt in ACT_FORMATS:
            w_float = weights["type"] == "float"
            w_ok = (weights["symmetric"] and not weights["dynamic"]
                    and weights["strategy"] in ("tensor", "channel", "block"))
            if inp is not None and w_float and inp["type"] == "float" and w_ok:
                if inp["dynamic"] or (inp["symmetric"] and inp["strategy"] == "tensor"):
                    return "W8A8Fp8"
            if w_float and w_ok:
                return "W8A16Fp8"
            if inp is not None and weights["num_bits"] == inp["num_bits"] == 8 and \
                    weights["type"] == "int" and weights["symmetric"] and \
                    weights["strategy"] in ("tensor", "channel") and not weights["dynamic"]:
                if inp["strategy"] == "tensor" and not inp["dynamic"]:
                    return "W8A8Int8"
                if inp["strategy"] == "token" and inp["dynamic"]:
                    return "W8A8Int8"
        raise ValueError("No compressed-tensors compatible scheme was found")

    # ---- per layer ----
    def check(self):
        self.parse_config()
        self.ct = Checkpoint(self.ct_dir)
        self.hf = Checkpoint(self.hf_dir)
        used = set()
        linears = {}
        for name in self.ct.tensors:
            m = re.match(r"^(model\.layers\.\d+\.(self_attn|mlp)\.[a-z_]+_proj)\.(weight|weight_packed)$",
                         name)
            if m:
                linears[m.group(1)] = True
        if self.ct.has("lm_head.weight") or self.ct.has("lm_head.weight_packed"):
            linears["lm_head"] = True
        layers = {}  # vLLM prefix -> shard module names
        for mod in sorted(linears):
            parent, leaf = mod.rsplit(".", 1) if "." in mod else ("", mod)
            fused = next((f for f, parts in FUSED.items() if leaf in parts), None)
            prefix = f"{parent}.{fused}" if fused else mod
            layers.setdefault(prefix, []).append(mod)
        for prefix, shards in sorted(layers.items()):
            self.check_layer(prefix, shards, used)
        self.check_kv(used)
        for name in sorted(self.ct.tensors):
            if name in used:
                continue
            base = name.rsplit(".", 1)[-1]
            if base in ("weight", "bias") and self.ct.dtype(name) in FLOAT_DTYPES:
                self.compare_float(name)
                used.add(name)
            else:
                self.problem(name, "vLLM allocates no parameter of this name for its scheme")
        for name in self.hf.tensors:
            if name.endswith(".weight") and name not in used and \
                    not self.ct.has(name[:-len(".weight")] + ".weight_packed") and \
                    not self.ct.has(name):
                self.problem(name, "in the hf export but not in the compressed-tensors export")

    def compare_float(self, name):
        if not self.hf.has(name):
            self.problem(name, "not in the hf export")
            return
        if self.ct.dtype(name) != self.hf.dtype(name) or self.ct.shape(name) != self.hf.shape(name):
            self.problem(name, f"{self.ct.dtype(name)} {self.ct.shape(name)}, hf has "
                         f"{self.hf.dtype(name)} {self.hf.shape(name)}")
        elif self.ct.load(name).tobytes() != self.hf.load(name).tobytes():
            self.problem(name, "differs from the hf export")

    def check_layer(self, prefix, shards, used):
        ignored = [any(regex_or_equal(s, t) for t in self.ignore) for s in shards]
        if len(set(ignored)) > 1:
            self.problem(prefix, f"ignore lists some of {shards} but not all: vLLM raises "
                         "(fused shards need one scheme)")
            return
        if ignored[0]:
            for s in shards:
                if not self.ct.has(s + ".weight") or self.ct.dtype(s + ".weight") not in FLOAT_DTYPES:
                    self.problem(s, "ignored by the config but its weight is not stored in float")
            return  # float tensors are compared with the hf export at the end
        try:
            target = self.match_target(prefix, shards)
            weights, inp, fmt = self.targets[target]
            scheme = self.scheme_of(weights, inp, fmt)
        except ValueError as e:
            self.problem(prefix, str(e))
            # Its tensors are accounted for by this one line.
            used.update(n for n in self.ct.tensors for s in shards if n.startswith(s + "."))
            return
        self.schemes[scheme] = self.schemes.get(scheme, 0) + len(shards)
        if shards == [prefix] and prefix.rsplit(".", 1)[-1] in FUSED and \
                not self.fused_on_disk_loads(prefix, scheme, weights):
            used.update(n for n in self.ct.tensors if n.startswith(prefix + "."))
            return
        weight_scales, input_scales = [], []
        for s in shards:
            ref = s + ".weight"
            if not self.hf.has(ref) or len(self.hf.shape(ref)) != 2:
                self.problem(s, "no 2-D weight in the hf export to compare with")
                continue
            out, inn = self.hf.shape(ref)
            decoded = self.decode(s, scheme, weights, inp, out, inn, used, weight_scales,
                                  input_scales)
            if decoded is None:
                continue
            want = self.hf.load_f32(ref)
            if self.hf.dtype(ref) == "BF16":  # the stored value, rounded half to even
                bits = decoded.astype(np.float32).view(np.uint32).astype(np.uint64)
                decoded = ((((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16)
                           .astype(np.uint32).view(np.float32))
            elif self.hf.dtype(ref) == "F16":
                decoded = decoded.astype(np.float16).astype(np.float32)
            bad = np.count_nonzero(decoded.view(np.uint32) != want.view(np.uint32))
            if bad:
                err = float(np.nanmax(np.abs(decoded - want)))
                self.problem(s, f"{bad} of {decoded.size} dequantized weights differ from the hf "
                             f"export (max |diff| {err:.3g})")
        if len(shards) > 1 and scheme in ("W8A8Fp8", "W8A16Fp8") and \
                weights["strategy"] == "tensor" and len(set(weight_scales)) > 1:
            ratio = max(weight_scales) / min(weight_scales)
            self.note(prefix, f"per-tensor FP8 weight scales of {len(shards)} shards differ "
                      f"(max / min {ratio:.3g}): vLLM requantizes the shards to the largest "
                      "after loading, so its fused weights are not bit-exact")
        if len(set(input_scales)) > 1:
            self.problem(prefix, f"input scales {input_scales} differ across {shards}; vLLM uses "
                         "their maximum for the fused layer")

    def fused_on_disk_loads(self, prefix, scheme, weights):
        """Phi-3's fused module, loaded without a shard id: False (with the
        problem reported) where vLLM would not compute the stored weight."""
        if scheme == "W8A8Int8" and weights["strategy"] == "tensor":
            # CompressedTensorsW8A8Int8 (at c45614b5d83bd38e3cec1966637e11ad8c9c1aca)
            # allocates one torch.empty weight_scale per shard; the loaded one
            # fills shard 0 and the kernel uses every shard's.
            self.problem(prefix, "the per-tensor weight_scale of a Linear fused on disk loads "
                         "into shard 0 only: vLLM leaves the other shards' scales uninitialized")
            return False
        if scheme == "WNA16" and not weights["symmetric"]:
            # weight_zero_point is packed along the outputs: each shard's offset
            # is divided by the pack factor.
            cfg, pack = self.model_config, 32 // weights["num_bits"]
            heads = cfg.get("num_attention_heads") or 1
            hd = cfg.get("head_dim") or (cfg.get("hidden_size") or 0) // heads
            kv = (cfg.get("num_key_value_heads") or heads) * hd
            sizes = ([heads * hd, kv, kv] if prefix.endswith("qkv_proj")
                     else [cfg.get("intermediate_size") or 0] * 2)
            if any(n % pack for n in sizes):
                self.problem(prefix, f"shard widths {sizes} are not multiples of {pack}: vLLM "
                             "floors the packed zero points' shard offsets")
                return False
        return True

    def expect(self, name, dtypes, shape, used, what=None):
        """A tensor create_weights allocates: present, dtype, shape (None: any numel 1)."""
        if not self.ct.has(name):
            self.problem(name, f"missing ({what or 'allocated by the scheme'})")
            return None
        used.add(name)
        got_dtype, got_shape = self.ct.dtype(name), self.ct.shape(name)
        if got_dtype not in dtypes:
            self.problem(name, f"{got_dtype}, vLLM loads it as {'/'.join(dtypes)}")
            return None
        if shape is None:
            if int(np.prod(got_shape, dtype=np.int64)) != 1:
                self.problem(name, f"shape {got_shape}, vLLM loads one value")
                return None
        elif got_shape != shape:
            self.problem(name, f"shape {got_shape}, vLLM allocates {shape}")
            return None
        return self.ct.load(name)

    def decode(self, s, scheme, weights, inp, out, inn, used, weight_scales, input_scales):
        bits = weights["num_bits"]
        if scheme == "WNA16":
            pack = 32 // bits
            gs = inn if weights["strategy"] == "channel" else weights["group_size"]
            if inn % gs:
                self.problem(s, f"in_features {inn} is not a multiple of group_size {gs}")
                return None
            groups = inn // gs
            packed = self.expect(s + ".weight_packed", ("I32",), [out, inn // pack], used)
            scale = self.expect(s + ".weight_scale", FLOAT_DTYPES, [out, groups], used)
            shape = self.expect(s + ".weight_shape", ("I64", "I32"), [2], used)
            zp = None
            if not weights["symmetric"]:
                zp = self.expect(s + ".weight_zero_point", ("I32",), [out // pack, groups], used)
                if zp is None:
                    return None
            g_idx = None
            if weights["actorder"] == "group":
                g_idx = self.expect(s + ".weight_g_idx", ("I32",), [inn], used)
                if g_idx is None:
                    return None
            if packed is None or scale is None or shape is None:
                return None
            if list(shape.astype(np.int64)) != [out, inn]:
                self.problem(s + ".weight_shape", f"{list(shape)}, the weight is {[out, inn]}")
            q = unpack(packed, bits, inn)
            zq = np.zeros((out, groups), np.int64) if zp is None else unpack(zp.T, bits, out).T
            scale = self.ct.load_f32(s + ".weight_scale")
            if g_idx is None:
                col_group = np.arange(inn) // gs
            else:
                col_group = g_idx.astype(np.int64)
                if col_group.min() < 0 or col_group.max() >= groups or \
                        np.any(np.bincount(col_group, minlength=groups) != gs):
                    self.problem(s + ".weight_g_idx", f"not a map of {inn} columns onto "
                                 f"{groups} groups of {gs}")
                    return None
            diff = (q - zq[:, col_group]).astype(np.float32)
            return diff * scale[:, col_group]
        # Unpacked schemes: weight stored as codes, dequantized per tensor / channel.
        code_dtype = "I8" if scheme == "W8A8Int8" else "F8_E4M3"
        w = self.expect(s + ".weight", (code_dtype,), [out, inn], used)
        scale_shape = [out, 1] if weights["strategy"] == "channel" else None
        if weights["strategy"] not in ("channel", "tensor"):
            self.problem(s, f"weight strategy {weights['strategy']} is not checked here")
            return None
        sc = self.expect(s + ".weight_scale", ("F32",), scale_shape, used)
        if inp is not None and not inp["dynamic"]:
            isc = self.expect(s + ".input_scale", ("F32",), None, used)
            if isc is not None:
                input_scales.append(float(self.ct.load_f32(s + ".input_scale").reshape(-1)[0]))
            if scheme == "W8A8Int8" and not inp["symmetric"]:
                self.expect(s + ".input_zero_point", ("I8",), None, used)
        if w is None or sc is None:
            return None
        scale = self.ct.load_f32(s + ".weight_scale").reshape(-1, 1)
        if weights["strategy"] == "tensor":
            weight_scales.append(float(scale[0, 0]))
        values = w.astype(np.float32) if code_dtype == "I8" else FP8_E4M3[w]
        return values * scale

    def check_kv(self, used):
        names = [n for n in self.ct.tensors if re.search(r"\.(k_scale|v_scale)$", n) or
                 re.search(r"\.[kv]_proj\.output_scale$", n)]
        if self.kv is None:
            for n in names:
                self.problem(n, "a KV-cache scale without kv_cache_scheme")
            return
        layers = self.model_config.get("num_hidden_layers")
        if not isinstance(layers, int) or not 0 < layers < 100000:
            self.problem("config.json", "num_hidden_layers")
            return
        for i in range(layers):
            for kv in ("k", "v"):
                # The library's name, and the one get_cache_scale maps.
                cands = [f"model.layers.{i}.self_attn.{kv}_scale",
                         f"model.layers.{i}.self_attn.{kv}_proj.output_scale"]
                found = [c for c in cands if self.ct.has(c)]
                if len(found) != 1:
                    self.problem(cands[0], f"{len(found)} KV-cache scales for layer {i} "
                                 "(vLLM loads one; without it the scale stays 1.0)")
                    continue
                v = self.expect(found[0], ("F32", "F16", "BF16"), None, used)
                if v is not None:
                    val = float(self.ct.load_f32(found[0]).reshape(-1)[0])
                    if not (val > 0 and np.isfinite(val)):
                        self.problem(found[0], f"KV-cache scale {val}")


def unpack(packed, bits, n):
    """unpack_from_int32 along the last axis: int64 codes in the signed range."""
    words = packed.astype(np.int64) & 0xFFFFFFFF
    rows = words.shape[0]
    out = np.zeros((rows, n), np.int64)
    for i in range(n):
        bit = i * bits
        w, sh = bit // 32, bit % 32
        v = words[:, w] >> sh
        if sh + bits > 32:
            v = v | (words[:, w + 1] << (32 - sh))
        out[:, i] = (v & ((1 << bits) - 1)) - (1 << (bits - 1))
    return out


def main(argv):
    if len(argv) != 3:
        print(__doc__.split("usage:")[1].strip().splitlines()[0], file=sys.stderr)
        return 2
    c = Checker(argv[1], argv[2])
    try:
        c.check()
    except Unreadable as e:
        print(f"UNREADABLE {e}")
        return 2
    for line in c.problems + c.notes:
        print(line)
    schemes = ", ".join(f"{k} x{v}" for k, v in sorted(c.schemes.items())) or "none"
    print(f"{'FAIL' if c.problems else 'OK'}: {len(c.problems)} problems; "
          f"Linears by vLLM scheme: {schemes}")
    return 1 if c.problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
