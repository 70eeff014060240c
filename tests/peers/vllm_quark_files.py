"""Bounded readers for an exported directory and the number formats vLLM decodes.

Every file is hostile: headers and indexes are size-limited, every offset and
shape is checked against the file before a byte is read. Numbers decode to
float64 arrays, which hold every value of the formats here (FP8, FP4, FP6,
E8M0 powers of two, float16/bfloat16/float32) exactly.
"""

import json
import os
import struct

import numpy as np

MAX_HEADER_BYTES = 64 << 20
MAX_JSON_BYTES = 16 << 20
MAX_SHARDS = 1024
MAX_RANK = 8

DTYPES = {  # safetensors dtype -> (numpy dtype of the raw bytes, item size)
    "F64": ("<f8", 8), "F32": ("<f4", 4), "F16": ("<f2", 2), "BF16": ("<u2", 2),
    "I64": ("<i8", 8), "I32": ("<i4", 4), "I16": ("<i2", 2), "I8": ("i1", 1),
    "U8": ("u1", 1), "U16": ("<u2", 2), "U32": ("<u4", 4), "BOOL": ("u1", 1),
    "F8_E4M3": ("u1", 1), "F8_E5M2": ("u1", 1),
}
FLOAT_DTYPES = ("F64", "F32", "F16", "BF16")


class FormatError(Exception):
    """The directory cannot be read as a checkpoint (exit 2)."""


def read_json(path, limit=MAX_JSON_BYTES):
    try:
        size = os.path.getsize(path)
        if size > limit:
            raise FormatError(f"{path}: {size} bytes, over the {limit}-byte limit")
        with open(path, "rb") as f:
            return json.loads(f.read().decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise FormatError(f"{path}: {e}") from e


class TensorRef:
    def __init__(self, path, dtype, shape, begin, end):
        self.path, self.dtype, self.shape = path, dtype, tuple(shape)
        self.begin, self.end = begin, end

    def raw(self):
        """The tensor's values as stored (BF16 as uint16 bits, FP8 as bytes)."""
        np_dtype, _ = DTYPES[self.dtype]
        with open(self.path, "rb") as f:
            f.seek(self.begin)
            data = f.read(self.end - self.begin)
        if len(data) != self.end - self.begin:
            raise FormatError(f"{self.path}: short read")
        return np.frombuffer(data, dtype=np_dtype).reshape(self.shape)

    def values(self):
        """float64 for float dtypes (FP8 decoded), int64 for integers."""
        raw = self.raw()
        if self.dtype == "BF16":
            return (raw.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        if self.dtype in ("F8_E4M3", "F8_E5M2"):
            return FP8_TABLES[self.dtype][raw]
        if self.dtype in FLOAT_DTYPES:
            return raw.astype(np.float64)
        return raw.astype(np.int64)


def read_safetensors_header(path):
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) != 8:
                raise FormatError(f"{path}: shorter than the 8-byte header length")
            (n,) = struct.unpack("<Q", head)
            if n > MAX_HEADER_BYTES or 8 + n > size:
                raise FormatError(f"{path}: header of {n} bytes (file {size}, limit "
                                  f"{MAX_HEADER_BYTES})")
            header = json.loads(f.read(n).decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise FormatError(f"{path}: {e}") from e
    if not isinstance(header, dict):
        raise FormatError(f"{path}: header is not an object")
    data_start, data_size = 8 + n, size - 8 - n
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(entry, dict):
            raise FormatError(f"{path}: {name}: entry is not an object")
        dtype, shape, offs = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
        if dtype not in DTYPES:
            raise FormatError(f"{path}: {name}: unknown dtype {dtype!r}")
        if (not isinstance(shape, list) or len(shape) > MAX_RANK or not all(
                isinstance(d, int) and not isinstance(d, bool) and 0 <= d < 2**40
                for d in shape)):
            raise FormatError(f"{path}: {name}: bad shape {shape!r}")
        if (not isinstance(offs, list) or len(offs) != 2 or not all(
                isinstance(o, int) and not isinstance(o, bool) for o in offs)
                or not 0 <= offs[0] <= offs[1] <= data_size):
            raise FormatError(f"{path}: {name}: bad data_offsets {offs!r}")
        numel = int(np.prod(shape, dtype=object)) if shape else 1
        if numel * DTYPES[dtype][1] != offs[1] - offs[0]:
            raise FormatError(f"{path}: {name}: {offs[1] - offs[0]} bytes for {dtype} "
                              f"{shape}")
        tensors[name] = TensorRef(path, dtype, shape, data_start + offs[0],
                                  data_start + offs[1])
    return tensors


def read_checkpoint(directory):
    """name -> TensorRef over model.safetensors or the shards of its index."""
    single = os.path.join(directory, "model.safetensors")
    index = os.path.join(directory, "model.safetensors.index.json")
    if os.path.isfile(index):
        weight_map = read_json(index).get("weight_map")
        if not isinstance(weight_map, dict):
            raise FormatError(f"{index}: no weight_map object")
        shards = sorted(set(weight_map.values()))
        if len(shards) > MAX_SHARDS:
            raise FormatError(f"{index}: {len(shards)} shards, over {MAX_SHARDS}")
        tensors = {}
        for shard in shards:
            if not isinstance(shard, str) or os.path.basename(shard) != shard:
                raise FormatError(f"{index}: shard name {shard!r} is not a plain file name")
            for name, ref in read_safetensors_header(os.path.join(directory, shard)).items():
                if name in tensors:
                    raise FormatError(f"{directory}: {name} is stored twice")
                tensors[name] = ref
        for name, shard in weight_map.items():
            if name not in tensors or os.path.basename(tensors[name].path) != shard:
                raise FormatError(f"{index}: {name} is not in {shard}")
        return tensors
    if os.path.isfile(single):
        return read_safetensors_header(single)
    raise FormatError(f"{directory}: no model.safetensors or model.safetensors.index.json")


def _fp8_table(exp_bits, man_bits, bias, fn):
    """All 256 values of an FP8 format (fn: E4M3FN, no infinities, S.1111.111 NaN)."""
    out = np.empty(256, dtype=np.float64)
    for code in range(256):
        sign = -1.0 if code & 0x80 else 1.0
        e = (code >> man_bits) & ((1 << exp_bits) - 1)
        m = code & ((1 << man_bits) - 1)
        top = (1 << exp_bits) - 1
        if fn and e == top and m == (1 << man_bits) - 1:
            out[code] = np.nan
        elif not fn and e == top:
            out[code] = sign * np.inf if m == 0 else np.nan
        elif e == 0:
            out[code] = sign * m * 2.0 ** (1 - bias - man_bits)
        else:
            out[code] = sign * (1 + m / (1 << man_bits)) * 2.0 ** (e - bias)
    return out


FP8_TABLES = {"F8_E4M3": _fp8_table(4, 3, 7, True), "F8_E5M2": _fp8_table(5, 2, 15, False)}
def _small_float_table(exp_bits, man_bits, bias):
    bits = 1 + exp_bits + man_bits
    out = np.empty(1 << bits, dtype=np.float64)
    for code in range(1 << bits):
        sign = -1.0 if code >> (bits - 1) else 1.0
        e = (code >> man_bits) & ((1 << exp_bits) - 1)
        m = code & ((1 << man_bits) - 1)
        if e == 0:
            out[code] = sign * m * 2.0 ** (1 - bias - man_bits)
        else:
            out[code] = sign * (1 + m / (1 << man_bits)) * 2.0 ** (e - bias)
    return out


# OCP MX element formats: FP4 E2M1 and FP6 E2M3 / E3M2 have no Inf/NaN codes.
MX_TABLES = {
    "mxfp4": _small_float_table(2, 1, 1),
    "mxfp6_e2m3": _small_float_table(2, 3, 1),
    "mxfp6_e3m2": _small_float_table(3, 2, 3),
}


def round_to_float32(x):
    return np.asarray(x, dtype=np.float64).astype(np.float32).astype(np.float64)


def round_to(dtype, x):
    """Round float64 values to float32 / float16 / bfloat16 (nearest even)."""
    x = np.asarray(x, dtype=np.float64)
    if dtype == "float32":
        return round_to_float32(x)
    if dtype == "float16":
        with np.errstate(over="ignore"):
            return x.astype(np.float16).astype(np.float64)
    if dtype == "bfloat16":
        bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
        # Round the low 16 bits to nearest even; NaN keeps a quiet payload.
        rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
        out = (rounded.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        nan = np.isnan(x)
        out[nan] = np.nan
        return out
    raise ValueError(dtype)


def fp8_e4m3_quantize(x):
    """float64 -> nearest E4M3FN value (ties to even), saturating at +-448."""
    x = np.clip(np.asarray(x, dtype=np.float64), -448.0, 448.0)
    table = FP8_TABLES["F8_E4M3"]
    finite = np.sort(np.unique(table[np.isfinite(table)]))
    idx = np.clip(np.searchsorted(finite, x), 1, len(finite) - 1)
    lo, hi = finite[idx - 1], finite[idx]
    pick_hi = (hi - x) < (x - lo)
    tie = (hi - x) == (x - lo)
    # On a tie, the even code: the one whose last mantissa bit is 0.
    hi_even = _e4m3_code_is_even(hi)
    pick_hi = pick_hi | (tie & hi_even)
    return np.where(pick_hi, hi, lo)


def _e4m3_code_is_even(v):
    codes = {}
    table = FP8_TABLES["F8_E4M3"]
    for c in range(128):
        if np.isfinite(table[c]):
            codes[table[c]] = c
            codes[-table[c]] = c
    return np.vectorize(lambda t: codes[float(t)] % 2 == 0)(v)
