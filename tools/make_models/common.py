"""What the model scripts and make_models_test share: seeding, the digits
split, the float metrics of each kind of model, and the README metric table
(written by the scripts, read back by the test).

Imports only torch and numpy at the top: sklearn is needed only to train.
"""

import argparse
import os
import re
import sys
import time

# One thread everywhere: torch.set_num_threads(1) does not reach the OpenBLAS
# that Debian's torch calls for matmuls, whose own threads only contend on a
# loaded 2-core machine. Set before torch (and numpy) load it.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

import safetensors_file  # noqa: E402

# The digits split: sklearn.datasets.load_digits (1797 images), 360 of them
# for test, stratified, with this seed; the other 1437 for training.
DIGITS_SPLIT_SEED = 0
DIGITS_TEST_SIZE = 360


def made_by(seed, cpu_seconds, script, name, needs):
    """The README's paragraph on how models/NAME was made by tools/make_models/SCRIPT."""
    return (f"Made by (seed {seed}; `torch.set_num_threads(1)`; {cpu_seconds:.0f} s of CPU):\n\n"
            f"    /usr/bin/python3 tools/make_models/{script} --out models/{name} \\\n"
            f"        > models/{name}/README.md\n\n"
            f"with Debian's {needs}.\n"
            "A rerun reproduces the weights, the datasets and the metrics exactly\n"
            "(model.pt's bytes can differ in the order of the constants in its\n"
            "TorchScript code).")


def setup(seed):
    """One thread and fixed seeds, before anything random."""
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    np.random.seed(seed)


def start(doc, seed):
    """A training script's start: its --out directory (created), one thread
    and fixed seeds; returns (args, process time at the start)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--out", required=True, help="output directory")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    setup(seed)
    return args, time.process_time()


def log(*args):
    """Progress goes to stderr; stdout is the README."""
    print(*args, file=sys.stderr, flush=True)


def load_digits_split():
    """(x_train, y_train, x_test, y_test): float32 [N,1,8,8] in [0,1] (pixels/16), int64 [N]."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    digits = load_digits()
    x = (digits.images.astype(np.float32) / 16.0)[:, None, :, :]
    y = digits.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=DIGITS_TEST_SIZE, random_state=DIGITS_SPLIT_SEED, stratify=y)
    assert len(x_train) == 1437 and len(x_test) == 360
    return x_train, y_train, x_test, y_test


def _torch_inputs(data):
    return [torch.from_numpy(np.asarray(a)) for a in safetensors_file.inputs(data)]


@torch.no_grad()
def classifier_metrics(model, data):
    """Top-1 accuracy in percent of `model` on a dataset with `label`."""
    logits = model(*_torch_inputs(data))
    pred = logits.argmax(dim=1).numpy()
    return {"accuracy_percent": float((pred == data["label"]).mean() * 100.0)}


@torch.no_grad()
def denoiser_metrics(model, data, buckets=4):
    """Noise-prediction MSE overall and per timestep bucket (`bucket`)."""
    pred = model(*_torch_inputs(data)).numpy().astype(np.float64)
    err = ((pred - data["target"]) ** 2).reshape(len(pred), -1).mean(axis=1)
    out = {"mse": float(err.mean())}
    for b in range(buckets):
        mask = data["bucket"] == b
        out[f"mse_bucket{b}"] = float(err[mask].mean()) if mask.any() else float("nan")
    return out


def roc_auc(scores, labels):
    """ROC AUC (Mann-Whitney U, ties counted half) without sklearn."""
    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels) > 0.5
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores), dtype=np.float64)
    sorted_scores = scores[order]
    i = 0
    while i < len(scores):
        j = i
        while j + 1 < len(scores) and sorted_scores[j + 1] == sorted_scores[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    pos = int(labels.sum())
    neg = len(labels) - pos
    return float((ranks[labels].sum() - pos * (pos + 1) / 2.0) / (pos * neg))


@torch.no_grad()
def recommender_metrics(model, data):
    """ROC AUC and accuracy in percent (logit > 0) of click logits against `target`."""
    logits = model(*_torch_inputs(data)).numpy()
    target = data["target"]
    return {
        "auc": roc_auc(logits, target),
        "accuracy_percent": float(((logits > 0) == (target > 0.5)).mean() * 100.0),
    }


METRICS = {
    "classifier": classifier_metrics,
    "denoiser": denoiser_metrics,
    "recommender": recommender_metrics,
}


def metric_rows(metrics):
    """The README's metric table: one `| name | value |` row per metric."""
    lines = ["| metric | value |", "| --- | --- |"]
    lines += [f"| `{name}` | {value:.4f} |" for name, value in metrics.items()]
    return "\n".join(lines)


def parse_metric_rows(text):
    """The metrics of metric_rows() found in a README."""
    return {m.group(1): float(m.group(2))
            for m in re.finditer(r"^\| `(\w+)` \| (-?[0-9.]+|nan) \|$", text, re.M)}


def file_sizes(out_dir):
    """`name: N bytes` lines for the files the script wrote."""
    names = sorted(n for n in os.listdir(out_dir) if n.endswith((".pt", ".safetensors")))
    return "\n".join(f"- `{n}`: {os.path.getsize(os.path.join(out_dir, n))} bytes" for n in names)


def dataset_lines(out_dir):
    """`file: key dtype shape` lines for the datasets in `out_dir`."""
    lines = []
    for n in sorted(os.listdir(out_dir)):
        if n.endswith(".safetensors"):
            data = safetensors_file.load(os.path.join(out_dir, n))
            keys = ", ".join(f"`{k}` {v.dtype.name} {list(v.shape)}"
                             for k, v in sorted(data.items()))
            lines.append(f"- `{n}`: {keys}")
    return "\n".join(lines)


def count_parameters(model):
    return sum(p.numel() for p in model.parameters())


def save_scripted(model, path):
    """Scripts `model` (eval, float32), saves it, and returns the reloaded module."""
    model = model.float().eval()
    torch.jit.script(model).save(path)
    return torch.jit.load(path)
