#!/usr/bin/python3
"""Trains models/digits_cnn: a small CNN on sklearn's 8x8 digits.

    /usr/bin/python3 tools/make_models/make_digits_cnn.py --out models/digits_cnn \
        > models/digits_cnn/README.md

Writes DIR/model.pt (TorchScript, scripted, eval, float32) and the datasets
calibration.safetensors (256 train images), test.safetensors (the 360 test
images) and train.safetensors (the 1437 train images), each with `input`
float32 [N,1,8,8] in [0,1] and `label` int64 [N]. Progress goes to stderr;
stdout is the directory's README.md with the float metrics of the saved
model on test.safetensors.
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402  (first: it makes OpenBLAS single-threaded before torch loads)
import numpy as np  # noqa: E402
import safetensors_file  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

SEED = 0
EPOCHS = 40
BATCH = 64
CALIBRATION = 256


class DigitsCNN(nn.Module):
    """conv3x3(1->16, pad 1)+BN+ReLU, conv3x3(16->32, stride 2, pad 1)+BN+ReLU,
    conv3x3(32->32, pad 1)+ReLU, maxpool 2, flatten, Linear(128->64)+ReLU, Linear(64->10)."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1, bias=False),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1, bias=False),  # 8x8 -> 4x4
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.Conv2d(32, 32, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),  # 4x4 -> 2x2
        )
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Linear(32 * 2 * 2, 64),
            nn.ReLU(),
            nn.Linear(64, 10),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


def main():
    args, start = common.start(__doc__, SEED)

    x_train, y_train, x_test, y_test = common.load_digits_split()
    xt, yt = torch.from_numpy(x_train), torch.from_numpy(y_train)
    model = DigitsCNN()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=EPOCHS)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(EPOCHS):
        model.train()
        perm = torch.randperm(len(xt))
        total = 0.0
        for i in range(0, len(xt), BATCH):
            idx = perm[i:i + BATCH]
            opt.zero_grad()
            loss = loss_fn(model(xt[idx]), yt[idx])
            loss.backward()
            opt.step()
            total += float(loss) * len(idx)
        sched.step()
        if epoch % 10 == 9 or epoch == EPOCHS - 1:
            common.log(f"epoch {epoch + 1}: train loss {total / len(xt):.4f}")

    rng = np.random.default_rng(SEED)
    calib = np.sort(rng.permutation(len(x_train))[:CALIBRATION])
    safetensors_file.save(os.path.join(args.out, "train.safetensors"),
                          {"input": x_train, "label": y_train})
    safetensors_file.save(os.path.join(args.out, "calibration.safetensors"),
                          {"input": x_train[calib], "label": y_train[calib]})
    safetensors_file.save(os.path.join(args.out, "test.safetensors"),
                          {"input": x_test, "label": y_test})

    scripted = common.save_scripted(model, os.path.join(args.out, "model.pt"))
    test = safetensors_file.load(os.path.join(args.out, "test.safetensors"))
    train = safetensors_file.load(os.path.join(args.out, "train.safetensors"))
    metrics = common.classifier_metrics(scripted, test)
    train_acc = common.classifier_metrics(scripted, train)["accuracy_percent"]
    cpu = time.process_time() - start
    common.log(f"test accuracy {metrics['accuracy_percent']:.2f}%, train accuracy "
               f"{train_acc:.2f}%, {cpu:.1f} s CPU")

    print(f"""# digits_cnn

A small CNN classifier of sklearn's 8x8 handwritten digits
(`sklearn.datasets.load_digits`, 1 channel, pixels scaled to [0,1] by /16), for
quantizing a real non-LLM model: convolutions with BatchNorm to fold, padding,
a stride-2 convolution, a max pool and two Linear layers.

{common.made_by(SEED, cpu, 'make_digits_cnn.py', 'digits_cnn',
                'python3-torch, python3-numpy and python3-sklearn')}

## Model

`model.pt`: TorchScript (`torch.jit.script`, eval mode, float32),
`forward(x: float32 [B,1,8,8]) -> logits float32 [B,10]`.
Conv2d(1->16, 3x3, padding 1, no bias) + BatchNorm2d + ReLU,
Conv2d(16->32, 3x3, stride 2, padding 1, no bias) + BatchNorm2d + ReLU,
Conv2d(32->32, 3x3, padding 1) + ReLU, MaxPool2d(2), Flatten,
Linear(128->64) + ReLU, Linear(64->10); {common.count_parameters(model)} parameters.
Trained {EPOCHS} epochs of Adam (lr 3e-3, cosine, weight decay 1e-4, batch {BATCH}) with
cross-entropy.

## Data

The split: `train_test_split(test_size=360, random_state={common.DIGITS_SPLIT_SEED},
stratify=labels)`, 1437 train / 360 test images. The calibration set is 256 train
images (a seed-{SEED} permutation's first 256, in train order).

{common.dataset_lines(args.out)}

Files:

{common.file_sizes(args.out)}

## Float metrics

Of `model.pt` on `test.safetensors` (the 360 test images; `accuracy_percent` is
top-1 accuracy in percent; the train split's is {train_acc:.2f}%):

{common.metric_rows(metrics)}
""")


if __name__ == "__main__":
    main()
