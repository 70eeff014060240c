"""A tiny safetensors writer (F32 and I64 tensors) and reader (also I8, U8
I32, and F8_E4M3 as its raw bytes: the codes of quantized exports).

The layout is the one of the safetensors format: an 8-byte little-endian
header length N, N bytes of JSON header

    {"name": {"dtype": "F32" | "I64", "shape": [...], "data_offsets": [b, e]}, ...}

with the names in sorted order, then the raw little-endian tensor bytes, each
tensor at [b, e) of that data section, packed in name order. The header is
padded with spaces to a multiple of 8 bytes (as the reference writer does), so
every tensor starts 8-byte aligned in the file. No "__metadata__" is written;
the reader skips one if present.

Only numpy is needed (the tests read the datasets without torch); save() also
takes torch tensors.
"""

import json
import struct

import numpy as np

_DTYPES = {"F32": np.dtype("<f4"), "I64": np.dtype("<i8"), "I32": np.dtype("<i4"),
           "I8": np.dtype("i1"), "U8": np.dtype("u1"), "F8_E4M3": np.dtype("u1")}
_NAMES = {np.dtype("<f4"): "F32", np.dtype("<i8"): "I64"}


def _as_array(value):
    if hasattr(value, "detach"):  # a torch tensor
        value = value.detach().cpu().contiguous().numpy()
    array = np.asarray(value)
    dtype = array.dtype.newbyteorder("<")
    if dtype not in _NAMES:
        raise TypeError(f"unsupported dtype {array.dtype}: only float32 and int64")
    return np.ascontiguousarray(array, dtype=dtype)


def encode(tensors):
    """Returns the bytes of a safetensors file holding `tensors` (name -> array)."""
    header = {}
    chunks = []
    offset = 0
    for name in sorted(tensors):
        if name == "__metadata__":
            raise ValueError("__metadata__ is not a tensor name")
        array = _as_array(tensors[name])
        data = array.tobytes()
        header[name] = {
            "dtype": _NAMES[array.dtype],
            "shape": list(array.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-(8 + len(text)) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(chunks)


def save(path, tensors):
    """Writes `tensors` (name -> numpy array or torch tensor) to `path`."""
    with open(path, "wb") as f:
        f.write(encode(tensors))


def decode(blob):
    """Parses the bytes of a safetensors file: name -> numpy array (a copy)."""
    if len(blob) < 8:
        raise ValueError("truncated safetensors file: no header length")
    (n,) = struct.unpack("<Q", blob[:8])
    if 8 + n > len(blob):
        raise ValueError(f"header length {n} runs past the end of the file")
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    data = blob[8 + n:]
    out = {}
    end_max = 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = _DTYPES.get(info["dtype"])
        if dtype is None:
            raise ValueError(f"{name}: unsupported dtype {info['dtype']}")
        shape = tuple(int(d) for d in info["shape"])
        begin, end = (int(o) for o in info["data_offsets"])
        count = int(np.prod(shape, dtype=np.int64))
        if not 0 <= begin <= end <= len(data) or end - begin != count * dtype.itemsize:
            raise ValueError(f"{name}: data_offsets {[begin, end]} do not fit shape {list(shape)}"
                             f" {info['dtype']} in {len(data)} data bytes")
        array = np.frombuffer(data, dtype=dtype, count=count, offset=begin)
        out[name] = array.reshape(shape).copy()
        end_max = max(end_max, end)
    if end_max != len(data):
        raise ValueError(f"{len(data) - end_max} bytes after the last tensor")
    return out


def load(path):
    """Reads a safetensors file: name -> numpy array."""
    with open(path, "rb") as f:
        return decode(f.read())


def load_torch(path):
    """Reads a safetensors file: name -> torch tensor."""
    import torch
    return {name: torch.from_numpy(array) for name, array in load(path).items()}


def inputs(tensors):
    """The forward arguments of a dataset, in order: `input`, or `input.0`, `input.1`, ..."""
    if "input" in tensors:
        return [tensors["input"]]
    args = []
    while f"input.{len(args)}" in tensors:
        args.append(tensors[f"input.{len(args)}"])
    if not args:
        raise ValueError("no input or input.0 in the dataset")
    return args
