"""vLLM's Quark config rules: from_config, exclude matching, scheme choice.

Written after vLLM's Quark loader (github.com/vllm-project/vllm, read as the
search index stores each file; no single commit holds them all):
  vllm/model_executor/layers/quantization/quark/quark.py @006bce4ebff558210f0d2e0b6da1582268144d4f
      QuarkConfig.from_config, get_quant_method, _find_matched_config,
      _get_scheme_from_config and its _is_* predicates, get_cache_scale,
      QuarkKVCacheMethod.validate_kv_cache_config
  vllm/model_executor/layers/quantization/quark/utils.py @5ee0c1f91ca310f2c3abef3c64dbf52bb6df0ab9
      should_ignore_layer, _is_equal_or_regex_match, deep_compare
  vllm/model_executor/layers/quantization/quark/schemes/quark_w4a16_int4.py @3d4be8970300b08b574fdcf37f449de2e33635f3
      plus utils.parse_w4a16_int4_weight_config and the tests of vLLM PR
      #48606 (tests/quantization: "Focused Quark W4A16 INT4/UINT4 config and
      packing regressions"): the quark.py stored above predates that PR, so
      its W4A16 branch is reconstructed from those tests: int4/uint4
      per_group static weights with no input quantizer select QuarkW4A16Int4,
      a missing or non-positive group_size or a non-bool symmetric raises
      ValueError, any input quantizer falls through to NotImplementedError.
  vllm/model_executor/layers/quantization/quark/schemes/quark_ocp_mx.py @039541c743938f45865b5672f7d20073061531af
      QuarkOCP_MX.__init__ (reads input_quant_spec["dtype"])

Each rule raises VllmError carrying the exception vLLM would raise.
"""

import copy
import fnmatch
import re

# LlamaForCausalLM.packed_modules_mapping.
PACKED_MODULES = {
    "qkv_proj": ["q_proj", "k_proj", "v_proj"],
    "gate_up_proj": ["gate_proj", "up_proj"],
}


class VllmError(Exception):
    """What vLLM raises; kind is the Python exception class name."""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind
        self.message = message

    def __str__(self):
        return f"raises {self.kind}: {self.message}"


def deep_compare(a, b):
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        if a.keys() != b.keys():
            return False
        return all(deep_compare(a[k], b[k]) for k in a)
    if isinstance(a, list):
        # vLLM compares lists as sets (of hashable items).
        try:
            return set(a) == set(b)
        except TypeError:
            return a == b
    return a == b


def _is_equal_or_regex_match(value, target):
    if target.startswith("re:"):
        return re.match(target[3:], value) is not None
    return target == value


def check_equal_or_regex_match(layer_name, targets):
    return any(_is_equal_or_regex_match(layer_name, t) for t in targets)


def should_ignore_layer(layer_name, ignore, fused_mapping=PACKED_MODULES):
    """True when vLLM leaves the module unquantized (exact names or re:)."""
    if ignore is None:
        raise VllmError("TypeError", "'NoneType' object is not iterable (exclude is null)")
    proj_name = layer_name.split(".")[-1]
    if proj_name not in fused_mapping:
        return check_equal_or_regex_match(layer_name, ignore)
    result = None
    for shard in fused_mapping[proj_name]:
        ignored = check_equal_or_regex_match(layer_name.replace(proj_name, shard), ignore)
        if result is None:
            result = ignored
        elif ignored != result:
            raise VllmError(
                "ValueError",
                f"Found a different quantization schemes for {fused_mapping[proj_name]} "
                f"in {layer_name}. vLLM requires all to use the same scheme.")
    return result


def from_config(config):
    """QuarkConfig.from_config: returns (quant_config, kv_cache_config, pack_method)."""
    if not isinstance(config, dict):
        raise VllmError("AttributeError", "quantization_config is not an object")
    config = copy.deepcopy(config)  # vLLM edits the layer configs in place
    export = config.get("export")
    if export is None:
        raise VllmError("ValueError", "The export key should be included in the "
                        "configurations of Quark quantized model")
    kv_cache_group = export.get("kv_cache_group")
    pack_method = export.get("pack_method")
    if kv_cache_group is None:
        raise VllmError("TypeError", "object of type 'NoneType' has no len() "
                        "(export.kv_cache_group is null)")
    kv_cache_config = None
    if len(kv_cache_group) != 0:
        layer_quant_config = config.get("layer_quant_config")
        if not isinstance(layer_quant_config, dict):
            raise VllmError("AttributeError", "'NoneType' object has no attribute 'keys' "
                            "(layer_quant_config is null)")
        names = set(layer_quant_config)
        kv_set = set(kv_cache_group)
        if not (kv_set.issubset(names) or any(
                fnmatch.fnmatchcase(n, p) for n in names for p in kv_set)):
            raise VllmError(
                "ValueError", "The Quark quantized model has the kv_cache_group parameter "
                "setting, but no kv_cache quantization settings were found in the "
                "quantization configuration.")
        q_configs = [cfg for name, cfg in layer_quant_config.items()
                     if any(fnmatch.fnmatchcase(name, p) for p in kv_cache_group)]
        if not all(deep_compare(q.get("output_tensors"), q_configs[0].get("output_tensors"))
                   for q in q_configs):
            raise VllmError("ValueError", "The quantization method used for kv_cache should "
                            "be the same, but the quantization method for the kv_cache "
                            "layer in the config is different.")
        kv_cache_config = q_configs[0].get("output_tensors")
        if kv_cache_config is None:
            raise VllmError("ValueError", "The kv_cache quantization configuration is empty.")
        for q in q_configs:
            q["output_tensors"] = None
        q_proj = layer_quant_config.get("*q_proj")
        if q_proj is not None:
            q_proj["output_tensors"] = None
    return config, kv_cache_config, pack_method


def validate_kv_cache_config(kv_cache_config):
    """QuarkKVCacheMethod.validate_kv_cache_config (every Attention layer)."""
    if kv_cache_config is None:
        return
    dtype = kv_cache_config.get("dtype")
    if dtype != "fp8_e4m3":
        raise VllmError("NotImplementedError", "Currently supported kv cache quantization is "
                        f"dtype=fp8_e4m3, however received {dtype}")
    qscheme = kv_cache_config.get("qscheme")
    if qscheme != "per_tensor":
        raise VllmError("NotImplementedError", "Only support per-tensor scaling factor for "
                        f"quark KV cache. Expected qscheme: per_tensor, found qscheme: {qscheme}")


def _matches_pattern(layer_name, pattern):
    # vLLM's own rule: without '*' it tests substring of the *pattern*.
    if "*" not in pattern:
        return layer_name in pattern
    return fnmatch.fnmatch(layer_name, pattern)


def find_matched_config(quant_config, layer_name):
    proj_name = layer_name.split(".")[-1]
    if proj_name in PACKED_MODULES:
        shard_configs = []
        for shard in PACKED_MODULES[proj_name]:
            shard_name = layer_name.replace(proj_name, shard)
            if shard_name == layer_name:
                shard_configs.append(quant_config.get("global_quant_config"))
            else:
                shard_configs.append(find_matched_config(quant_config, shard_name))
        if not all(deep_compare(c, shard_configs[0]) for c in shard_configs):
            raise VllmError(
                "ValueError", f"Found a different quantization configuration for "
                f"{PACKED_MODULES[proj_name]} in {layer_name}. vLLM requires all to use the "
                "same scheme.")
        return shard_configs[0]
    layer_quant_config = quant_config.get("layer_quant_config")
    if layer_quant_config is None:
        raise VllmError("AttributeError", "'NoneType' object has no attribute 'items' "
                        "(layer_quant_config is null)")
    for pattern, cfg in layer_quant_config.items():
        if _matches_pattern(layer_name, pattern):
            return cfg
    # layer_type_quant_config is keyed by strings but looked up with type(module):
    # it never matches, so the global config applies.
    return quant_config.get("global_quant_config")


def _is_fp8_w8a8(w, i):
    if w is None or i is None:
        return False
    if not (w.get("dtype") == "fp8_e4m3" and i.get("dtype") == "fp8_e4m3"
            and not w.get("is_dynamic") and w.get("qscheme") in ("per_tensor", "per_channel")):
        return False
    if i.get("is_dynamic"):
        return True
    return i.get("qscheme") == "per_tensor"


def _is_static_tensor_w8a8(w, i):
    if w is None or i is None:
        return False
    return (w.get("dtype") == "int8" and i.get("dtype") == "int8"
            and w.get("qscheme") in ("per_tensor", "per_channel")
            and i.get("qscheme") == "per_tensor"
            and not w.get("is_dynamic") and not i.get("is_dynamic")
            and w.get("symmetric") is True)


def _is_w4a8_mxfp4_fp8(w, i):
    if w is None or i is None or isinstance(w, list) or isinstance(i, list):
        return False
    return (w.get("dtype") == "fp4" and w.get("qscheme") == "per_group"
            and w.get("group_size") == 32 and w.get("scale_format") == "e8m0"
            and not w.get("is_dynamic") and i.get("dtype") == "fp8_e4m3"
            and i.get("qscheme") == "per_tensor" and not i.get("is_dynamic")
            and i.get("symmetric") is True)


def _is_dynamic_per_token_w8a8(w, i):
    if w is None or i is None:
        return False
    return (w.get("dtype") == "int8" and i.get("dtype") == "int8"
            and w.get("qscheme") in ("per_tensor", "per_channel")
            and i.get("qscheme") == "per_channel" and i.get("is_dynamic") is True
            and w.get("symmetric") is True)


def _is_w4a16_int4(w, i):
    # Reconstructed (see the header): static int4/uint4 per_group, no input.
    if w is None or i is not None or isinstance(w, list):
        return False
    return (w.get("dtype") in ("int4", "uint4") and w.get("qscheme") == "per_group"
            and not w.get("is_dynamic"))


def parse_w4a16_int4_weight_config(w):
    for key in ("group_size", "symmetric"):
        if key not in w:
            raise VllmError("ValueError",
                            f"Quark W4A16 INT4/UINT4 configs must specify weight.{key}")
    group_size, symmetric = w["group_size"], w["symmetric"]
    if not isinstance(group_size, int) or isinstance(group_size, bool) or group_size <= 0:
        raise VllmError("ValueError", "Quark W4A16 weight.group_size must be a positive int, "
                        f"got {group_size!r}")
    if not isinstance(symmetric, bool):
        raise VllmError("ValueError",
                        f"Quark W4A16 weight.symmetric must be a bool, got {symmetric!r}")
    return group_size, symmetric


def _is_w_ocp_mx_a_x(w, i):
    if w is None or isinstance(w, list):
        return False
    return (w.get("qscheme") == "per_group" and w.get("group_size") == 32
            and w.get("scale_format") == "e8m0"
            and w.get("dtype") in ("fp4", "fp6_e3m2", "fp6_e2m3"))


class Scheme:
    """The scheme vLLM instantiates, reduced to what loading depends on."""

    def __init__(self, name, weight, input_tensors, **attrs):
        self.name = name
        self.weight = weight
        self.input = input_tensors
        self.__dict__.update(attrs)


def scheme_from_config(config, capability, pack_method):
    """_get_scheme_from_config + get_scheme's capability check."""
    if not isinstance(config, dict):
        raise VllmError("AttributeError", f"layer config is {config!r}, not an object")
    if config.get("output_tensors") or config.get("bias"):
        raise VllmError("NotImplementedError", "Currently, Quark models with output_tensors "
                        "and bias quantized are not supported")
    w, i = config.get("weight"), config.get("input_tensors")
    if isinstance(w, list) or isinstance(i, list):
        raise VllmError("Unmodeled", "list-valued weight/input specs (NVFP4, W4A8 FP8+int4) "
                        "are not modeled by this checker")
    if _is_fp8_w8a8(w, i):
        if capability >= 89:
            per_token = i.get("is_dynamic") and i.get("qscheme") == "per_channel"
            return Scheme("QuarkW8A8Fp8", w, i, weight_qscheme=w.get("qscheme"),
                          static_input=not i.get("is_dynamic"), per_token=bool(per_token))
    elif _is_static_tensor_w8a8(w, i):
        return Scheme("QuarkW8A8Int8", w, i, weight_qscheme=w.get("qscheme"),
                      static_input=True, input_symmetric=i.get("symmetric"))
    elif _is_w4a8_mxfp4_fp8(w, i):
        raise VllmError("Unmodeled", "vLLM picks QuarkW4A8_MXFP4_FP8 (MXFP4 weights, static "
                        "FP8 inputs), which this checker does not model")
    elif _is_dynamic_per_token_w8a8(w, i):
        return Scheme("QuarkW8A8Int8", w, i, weight_qscheme=w.get("qscheme"),
                      static_input=False, input_symmetric=i.get("symmetric"))
    elif _is_w4a16_int4(w, i):
        group_size, symmetric = parse_w4a16_int4_weight_config(w)
        return Scheme("QuarkW4A16Int4", w, i, group_size=group_size, symmetric=symmetric,
                      pack_reorder=(pack_method == "reorder"))
    elif _is_w_ocp_mx_a_x(w, i):
        if i is None:
            raise VllmError("TypeError", "'NoneType' object is not subscriptable "
                            "(QuarkOCP_MX reads input_tensors['dtype']; weight-only MX "
                            "has no scheme)")
        if not i.get("is_dynamic"):
            # vLLM's QuarkOCP_MX raises NotImplementedError for these.
            raise VllmError("NotImplementedError",
                            "QuarkOCP_MX refuses static input scales (dynamic MX inputs only)")
        return Scheme("QuarkOCP_MX", w, i, weight_dtype="mx" + w["dtype"])
    raise VllmError("NotImplementedError", "No quark compatible scheme was found. "
                    f"Weight config: {_brief(w)}, Input config: {_brief(i)}")


def _brief(spec):
    if not isinstance(spec, dict):
        return repr(spec)
    keys = ("dtype", "qscheme", "group_size", "symmetric", "is_dynamic")
    return "{" + ", ".join(f"{k}={spec.get(k)!r}" for k in keys if k in spec) + "}"


def get_cache_scale(name):
    """QuarkConfig.get_cache_scale: checkpoint name -> Attention scale name."""
    if name.endswith(".output_scale") and ".k_proj" in name:
        return name.replace(".k_proj.output_scale", ".attn.k_scale")
    if name.endswith(".output_scale") and ".v_proj" in name:
        return name.replace(".v_proj.output_scale", ".attn.v_scale")
    if name.endswith(".output_scale") and ".q_proj" in name:
        return name.replace(".q_proj.output_scale", ".attn.q_scale")
    if name.endswith("self_attn.prob_output_scale"):
        return name.replace(".prob_output_scale", ".attn.prob_scale")
    return None
