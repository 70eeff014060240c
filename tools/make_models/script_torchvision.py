#!/usr/bin/python3
"""Scripts an untrained torchvision classifier for the tests (nothing committed).

    /usr/bin/python3 tools/make_models/script_torchvision.py --arch resnet18 --out DIR \
        [--image-size 64] [--samples 8]

torchvision.models.<arch>(weights=None, num_classes=10) built after
torch.manual_seed(0), in eval mode, scripted and saved to DIR/model.pt
(TorchScript, float32, forward(x [B,3,S,S]) -> logits [B,10]); DIR/data.safetensors
holds `input` float32 [samples,3,S,S] (unit normal, as normalized images are
about) and `label` int64 [samples] in 0..9, from torch.Generator seed 1. The
float logits' mean and standard deviation and the agreement of argmax with
`label` (chance) go to stdout. Takes seconds: ResNet-18 is 45 MB, so tests make
it instead of committing it.

Untrained, MobileNetV2's eval-mode logits are about 1e-10 (its depthwise
convolutions are initialised with fan_out = channels x 9, and eval BatchNorm,
at running mean 0 and variance 1, does not renormalise): degenerate for a
float-vs-quantized comparison. --bn-warmup sets every BatchNorm's running
statistics from one train-mode pass (no gradients) over 16 other random
images (seed 2) before eval; the logits are then of order 1. Off by default:
the default model is torchvision's, as built.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402  (first: it makes OpenBLAS single-threaded before torch loads)
import safetensors_file  # noqa: E402
import torch  # noqa: E402
import torchvision  # noqa: E402

ARCHS = ("resnet18", "mobilenet_v2")
SEED = 0
DATA_SEED = 1
WARMUP_SEED = 2


def bn_warmup(model, image_size):
    """BatchNorm running statistics = those of one train-mode pass over 16 random images."""
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # a cumulative average: after one pass, that batch's statistics
    gen = torch.Generator().manual_seed(WARMUP_SEED)
    model.train()
    with torch.no_grad():
        model(torch.randn(16, 3, image_size, image_size, generator=gen))
    for m in norms:
        m.momentum = 0.1
    model.eval()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", required=True, choices=ARCHS)
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--image-size", type=int, default=64)
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--bn-warmup", action="store_true",
                        help="set the BatchNorm running statistics from random images first")
    args = parser.parse_args()
    if args.image_size < 32 or args.samples < 1:
        parser.error("--image-size must be >= 32 and --samples >= 1")
    os.makedirs(args.out, exist_ok=True)
    common.setup(SEED)
    start = time.process_time()

    model = getattr(torchvision.models, args.arch)(weights=None, num_classes=10)
    if args.bn_warmup:
        bn_warmup(model, args.image_size)
    scripted = common.save_scripted(model, os.path.join(args.out, "model.pt"))
    gen = torch.Generator().manual_seed(DATA_SEED)
    data = {
        "input": torch.randn(args.samples, 3, args.image_size, args.image_size, generator=gen),
        "label": torch.randint(0, 10, (args.samples,), generator=gen),
    }
    safetensors_file.save(os.path.join(args.out, "data.safetensors"), data)

    with torch.no_grad():
        logits = scripted(data["input"])
    metrics = common.classifier_metrics(scripted, safetensors_file.load(
        os.path.join(args.out, "data.safetensors")))
    print(f"{args.arch}: {common.count_parameters(model)} parameters, "
          f"{os.path.getsize(os.path.join(args.out, 'model.pt'))} bytes, logits "
          f"{list(logits.shape)} mean {float(logits.mean()):.6g} std {float(logits.std()):.6g}, "
          f"accuracy_percent "
          f"{metrics['accuracy_percent']:.2f} (random labels), "
          f"{'BatchNorm warmed up' if args.bn_warmup else 'BatchNorm as built'}, "
          f"{time.process_time() - start:.1f} s CPU")


if __name__ == "__main__":
    main()
