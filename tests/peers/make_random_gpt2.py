"""Writes a random GPT-2 checkpoint (config.json, model.safetensors) with
GPT-2's own tensor names and its Conv1D layout: every linear weight stored
as [in, out]. Widths are multiples of 256 so llama.cpp's K-quants apply.

    make_random_gpt2.py OUT_DIR

The vocabulary is 512 tokens (pair it with stories260K's tokenizer.model).
Only numpy: the safetensors file is written by hand (an 8-byte header
length, the JSON header, the raw little-endian data).
"""
import json
import struct
import sys

import numpy as np

D, LAYERS, VOCAB, POSITIONS, INNER = 256, 2, 512, 256, 1024


def main(out):
    rng = np.random.default_rng(5)
    tensors = {}

    def put(name, shape, std, mean=0.0):
        tensors[name] = (rng.standard_normal(shape) * std + mean).astype("<f4")

    put("transformer.wte.weight", (VOCAB, D), 0.05)
    put("transformer.wpe.weight", (POSITIONS, D), 0.1)
    for i in range(LAYERS):
        p = "transformer.h.%d." % i
        put(p + "ln_1.weight", (D,), 0.1, 1.0)
        put(p + "ln_1.bias", (D,), 0.05)
        put(p + "attn.c_attn.weight", (D, 3 * D), 0.06)
        put(p + "attn.c_attn.bias", (3 * D,), 0.02)
        put(p + "attn.c_proj.weight", (D, D), 0.06)
        put(p + "attn.c_proj.bias", (D,), 0.02)
        put(p + "ln_2.weight", (D,), 0.1, 1.0)
        put(p + "ln_2.bias", (D,), 0.05)
        put(p + "mlp.c_fc.weight", (D, INNER), 0.06)
        put(p + "mlp.c_fc.bias", (INNER,), 0.02)
        put(p + "mlp.c_proj.weight", (INNER, D), 0.03)
        put(p + "mlp.c_proj.bias", (D,), 0.02)
    put("transformer.ln_f.weight", (D,), 0.1, 1.0)
    put("transformer.ln_f.bias", (D,), 0.05)

    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        data = tensors[name].tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(out + "/model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for data in blobs:
            f.write(data)
    config = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": D,
              "n_layer": LAYERS, "n_head": 4, "n_positions": POSITIONS, "n_inner": INNER,
              "vocab_size": VOCAB, "layer_norm_epsilon": 1e-5,
              "activation_function": "gelu_new", "tie_word_embeddings": True,
              "bos_token_id": 1, "eos_token_id": 2}
    with open(out + "/config.json", "w") as f:
        json.dump(config, f)


if __name__ == "__main__":
    main(sys.argv[1])
