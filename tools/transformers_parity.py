#!/usr/bin/env python3
"""quantd's float forward against Hugging Face Transformers, per architecture.

For each architecture quantd loads, builds a small random checkpoint with
Transformers' own classes (config -> model -> save_pretrained, safetensors),
runs Transformers' forward and quantd's (dump_logits) on the same tokens and
compares the float32 logits; then quantizes the checkpoint with quantd
(quantd-quantize, W8 per-channel round-to-nearest, exported as fake-quantized
Hugging Face weights), loads that export in Transformers and compares again.

Transformers is not installable on the build machines; the GPU machines have
it. One command there (tools/gpu_check.sh builds the binaries):

  tools/gpu_check.sh --parity [--deps DEPS.tar.xz]

or, with binaries built already:

  python3 tools/transformers_parity.py --dump-logits BIN --quantize BIN \\
      [--report docs/transformers_parity.md] [--only llama,gemma2]

Prints a markdown table (and writes it to --report with the date and the
versions). Exit status 1 when any architecture is off or fails.
"""

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKENIZER = os.path.join(ROOT, "models", "stories260K", "tokenizer.model")
VOCAB = 512  # stories260K's vocabulary, so quantd's jobs can tokenize
# float32 logits through two blocks: relative to the largest logit.
TOLERANCE = 1e-4

COMMON = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
              tie_word_embeddings=False, bos_token_id=1, eos_token_id=2)


def configs(t):
    """name -> (model class, config), for the architectures quantd loads."""
    moe = dict(num_experts_per_tok=2)
    out = {
        "llama": (t.LlamaForCausalLM, t.LlamaConfig(**COMMON)),
        "llama-rope-llama3": (t.LlamaForCausalLM, t.LlamaConfig(
            **COMMON, rope_scaling={"rope_type": "llama3", "factor": 8.0,
                                    "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                    "original_max_position_embeddings": 64})),
        "mistral": (t.MistralForCausalLM, t.MistralConfig(**COMMON, sliding_window=8)),
        "qwen2": (t.Qwen2ForCausalLM, t.Qwen2Config(**COMMON)),
        "qwen2-yarn": (t.Qwen2ForCausalLM, t.Qwen2Config(
            **COMMON, rope_scaling={"rope_type": "yarn", "factor": 4.0,
                                    "original_max_position_embeddings": 64})),
        "qwen3": (t.Qwen3ForCausalLM, t.Qwen3Config(**COMMON, head_dim=16)),
        "phi3": (t.Phi3ForCausalLM, t.Phi3Config(**COMMON, pad_token_id=0)),
        "gemma2": (t.Gemma2ForCausalLM, t.Gemma2Config(
            **{**COMMON, "tie_word_embeddings": True}, head_dim=16, query_pre_attn_scalar=16,
            sliding_window=8, final_logit_softcapping=30.0, attn_logit_softcapping=50.0)),
        "gpt2": (t.GPT2LMHeadModel, t.GPT2Config(
            vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4, n_positions=256)),
        "opt": (t.OPTForCausalLM, t.OPTConfig(
            vocab_size=VOCAB, hidden_size=64, ffn_dim=128, num_hidden_layers=2,
            num_attention_heads=4, max_position_embeddings=256, word_embed_proj_dim=64)),
        "mixtral": (t.MixtralForCausalLM, t.MixtralConfig(
            **COMMON, num_local_experts=4, **moe)),
        "qwen2_moe": (t.Qwen2MoeForCausalLM, t.Qwen2MoeConfig(
            **COMMON, num_experts=4, moe_intermediate_size=32,
            shared_expert_intermediate_size=64, **moe)),
        "qwen3_moe": (t.Qwen3MoeForCausalLM, t.Qwen3MoeConfig(
            **COMMON, head_dim=16, num_experts=8, moe_intermediate_size=32, **moe)),
        # OLMoE: q/k norms over the whole projections, experts of
        # intermediate_size; then clip_qkv (at 1.0 it clamps a share of the
        # O(1) q, k and v), attention biases and renormalised weights.
        "olmoe": (t.OlmoeForCausalLM, t.OlmoeConfig(**COMMON, num_experts=4, **moe)),
        "olmoe-clip": (t.OlmoeForCausalLM, t.OlmoeConfig(
            **COMMON, num_experts=4, clip_qkv=1.0, attention_bias=True, norm_topk_prob=True,
            **moe)),
    }
    if hasattr(t, "Gemma3ForCausalLM"):
        out["gemma3"] = (t.Gemma3ForCausalLM, t.Gemma3TextConfig(
            **{**COMMON, "tie_word_embeddings": True}, head_dim=16, query_pre_attn_scalar=16,
            sliding_window=8))
    return out


def randomize(torch, model, seed):
    """Weights of standard deviation 1/sqrt(in) (activations stay O(1));
    biases and norm offsets small but not zero, so that they are checked."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 2:
                p.copy_(torch.randn(p.shape, generator=g) / p.shape[1] ** 0.5)
            else:
                p.add_(torch.randn(p.shape, generator=g) * 0.05)


def logits_of(torch, model_class, directory, ids):
    model = model_class.from_pretrained(directory, torch_dtype=torch.float32,
                                        attn_implementation="eager")
    model.eval()
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].float().numpy()


def quantd_logits(np, binary, directory, ids, work):
    out = os.path.join(work, "quantd_logits.npy")
    subprocess.run([binary, "--model", directory, "--ids", ",".join(map(str, ids)),
                    "--out", out], check=True, capture_output=True, text=True)
    return np.load(out)


def relative_error(np, a, b):
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dump-logits", required=True)
    parser.add_argument("--quantize", required=True)
    parser.add_argument("--report", default="")
    parser.add_argument("--only", default="", help="comma-separated architecture names")
    parser.add_argument("--tokens", type=int, default=24)
    args = parser.parse_args()

    import numpy as np
    import torch
    import transformers as t

    ids = [1] + [int(x) for x in np.random.default_rng(7).integers(3, VOCAB, args.tokens - 1)]
    rows = []
    failed = False
    for seed, (name, (model_class, config)) in enumerate(sorted(configs(t).items())):
        if args.only and name not in args.only.split(","):
            continue
        work = tempfile.mkdtemp(prefix="parity-" + name + "-")
        row = {"name": name, "class": model_class.__name__}
        try:
            torch.manual_seed(seed)
            model = model_class(config)
            randomize(torch, model, seed)
            ckpt = os.path.join(work, "float")
            model.save_pretrained(ckpt, safe_serialization=True)
            shutil.copy(TOKENIZER, ckpt)
            ref = logits_of(torch, model_class, ckpt, ids)
            row["float"] = relative_error(np, quantd_logits(np, args.dump_logits, ckpt, ids, work), ref)
            out = os.path.join(work, "w8")
            job = subprocess.run([args.quantize, "--model", ckpt, "--scheme",
                                  "w_int8_per_channel_sym", "--no-eval", "--format", "hf",
                                  "--output", out], capture_output=True, text=True)
            if job.returncode != 0:
                raise RuntimeError("quantd-quantize: " + job.stderr.strip()[-500:])
            ref_q = logits_of(torch, model_class, out, ids)
            row["w8"] = relative_error(np, quantd_logits(np, args.dump_logits, out, ids, work), ref_q)
            row["w8_vs_float"] = relative_error(np, ref_q, ref)
            row["ok"] = row["float"] <= TOLERANCE and row["w8"] <= TOLERANCE
        except Exception as e:  # one architecture's failure is a row, not the end
            row["error"] = str(e).splitlines()[-1][:300] if str(e) else type(e).__name__
            row["ok"] = False
        failed |= not row["ok"]
        rows.append(row)
        print(json.dumps(row), flush=True)
        shutil.rmtree(work, ignore_errors=True)

    lines = [
        "| architecture | Transformers class | float logits: max rel. diff | W8 RTN export: max rel. diff | W8 vs float (Transformers) | within %g |" % TOLERANCE,
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "error" in r:
            lines.append("| %s | %s | error: %s | | | no |" % (r["name"], r["class"], r["error"]))
        else:
            lines.append("| %s | %s | %.2e | %.2e | %.2e | %s |" % (
                r["name"], r["class"], r["float"], r["w8"], r["w8_vs_float"],
                "yes" if r["ok"] else "**no**"))
    header = [
        "# Parity with Hugging Face Transformers",
        "",
        "Written by `tools/transformers_parity.py` (%s, %s; transformers %s, torch %s, %s)." % (
            datetime.date.today().isoformat(), platform.node(), t.__version__,
            torch.__version__, "CUDA " + str(torch.version.cuda) if torch.cuda.is_available() else "CPU"),
        "Random checkpoints built with Transformers' classes (hidden 64, 2 layers, vocab %d), "
        "%d tokens; differences are max |quantd - Transformers| / max |Transformers| over "
        "the logits, both in float32." % (VOCAB, len(ids)),
        "",
    ]
    report = "\n".join(header + lines) + "\n"
    print(report)
    if args.report:
        with open(args.report, "w", encoding="utf-8") as f:
            f.write(report)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
