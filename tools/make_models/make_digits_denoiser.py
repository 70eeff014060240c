#!/usr/bin/python3
"""Trains models/digits_denoiser: a small DDPM noise predictor on the 8x8 digits.

    /usr/bin/python3 tools/make_models/make_digits_denoiser.py --out models/digits_denoiser \
        > models/digits_denoiser/README.md

A UNet (Conv2d down, ConvTranspose2d up, the skip concatenated, a sinusoidal
timestep embedding -> Linear added as per-channel biases, SiLU) trained with
the DDPM epsilon loss: T = 100 steps, linear betas 1e-4..0.02, on the digits
train split scaled to [-1,1]. Writes DIR/model.pt (TorchScript, scripted, eval,
float32; forward(x_t float32 [B,1,8,8], t int64 [B]) -> noise [B,1,8,8]) and
calibration.safetensors (256 train samples) / test.safetensors (the 360 test
images), each with input.0 = x_t, input.1 = t, target = the true noise and
bucket = t*4//T. Progress goes to stderr; stdout is the directory's README.md
with the float noise-prediction MSE per bucket.
"""

import math
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
CALIBRATION_SEED = 1
TEST_SEED = 2
T = 100
BETA_START, BETA_END = 1e-4, 0.02
BUCKETS = 4
STEPS = 4000
BATCH = 128
LR = 2e-3
CALIBRATION = 256
CHANNELS = 16


class DigitsDenoiser(nn.Module):
    """A two-level UNet for 8x8 images predicting the DDPM noise."""

    def __init__(self, channels: int = 16, emb_dim: int = 32, num_steps: int = T):
        super().__init__()
        half = emb_dim // 2
        freqs = torch.exp(-math.log(1000.0) * torch.arange(half, dtype=torch.float32) / half)
        self.register_buffer("freqs", freqs)
        self.num_steps = num_steps
        self.time_mlp = nn.Sequential(nn.Linear(emb_dim, 64), nn.SiLU())
        c, c2 = channels, 2 * channels
        self.conv_in = nn.Conv2d(1, c, 3, padding=1)
        self.temb_in = nn.Linear(64, c)
        self.down = nn.Conv2d(c, c2, 3, stride=2, padding=1)  # 8x8 -> 4x4
        self.mid = nn.Conv2d(c2, c2, 3, padding=1)
        self.temb_mid = nn.Linear(64, c2)
        self.up = nn.ConvTranspose2d(c2, c, 4, stride=2, padding=1)  # 4x4 -> 8x8
        self.temb_up = nn.Linear(64, c)
        self.merge = nn.Conv2d(2 * c, c, 3, padding=1)  # [up, skip] concatenated
        self.conv_out = nn.Conv2d(c, 1, 3, padding=1)
        self.act = nn.SiLU()

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        angles = t.to(torch.float32).unsqueeze(1) * self.freqs.unsqueeze(0)
        emb = self.time_mlp(torch.cat([torch.sin(angles), torch.cos(angles)], dim=1))
        skip = self.act(self.conv_in(x) + self.temb_in(emb)[:, :, None, None])
        h = self.act(self.down(skip))
        h = self.act(self.mid(h) + self.temb_mid(emb)[:, :, None, None])
        h = self.act(self.up(h) + self.temb_up(emb)[:, :, None, None])
        h = self.act(self.merge(torch.cat([h, skip], dim=1)))
        return self.conv_out(h)


def alphas_cumprod():
    betas = torch.linspace(BETA_START, BETA_END, T, dtype=torch.float64)
    return torch.cumprod(1.0 - betas, dim=0).to(torch.float32)


def noised(x0, t, noise, abar):
    a = abar[t][:, None, None, None]
    return a.sqrt() * x0 + (1.0 - a).sqrt() * noise


def make_dataset(x0, seed, abar):
    """x_t, t, noise and bucket for each image of x0, from a seeded generator."""
    gen = torch.Generator().manual_seed(seed)
    x0 = torch.from_numpy(x0)
    t = torch.randint(0, T, (len(x0),), generator=gen)
    noise = torch.randn(x0.shape, generator=gen)
    return {
        "input.0": noised(x0, t, noise, abar),
        "input.1": t,
        "target": noise,
        "bucket": t * BUCKETS // T,
    }


def main():
    args, start = common.start(__doc__, SEED)

    x_train, _, x_test, _ = common.load_digits_split()
    x_train, x_test = x_train * 2.0 - 1.0, x_test * 2.0 - 1.0  # [0,1] -> [-1,1]
    abar = alphas_cumprod()
    data = torch.from_numpy(x_train)
    model = DigitsDenoiser(CHANNELS)
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=LR, total_steps=STEPS, pct_start=0.05)
    running = 0.0
    for step in range(STEPS):
        model.train()
        x0 = data[torch.randint(0, len(data), (BATCH,))]
        t = torch.randint(0, T, (BATCH,))
        noise = torch.randn_like(x0)
        loss = torch.mean((model(noised(x0, t, noise, abar), t) - noise) ** 2)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        running += float(loss)
        if step % 500 == 499:
            common.log(f"step {step + 1}: train loss {running / 500:.4f}")
            running = 0.0

    rng = np.random.default_rng(SEED)
    calib = np.sort(rng.permutation(len(x_train))[:CALIBRATION])
    safetensors_file.save(os.path.join(args.out, "calibration.safetensors"),
                          make_dataset(x_train[calib], CALIBRATION_SEED, abar))
    safetensors_file.save(os.path.join(args.out, "test.safetensors"),
                          make_dataset(x_test, TEST_SEED, abar))

    scripted = common.save_scripted(model, os.path.join(args.out, "model.pt"))
    test = safetensors_file.load(os.path.join(args.out, "test.safetensors"))
    metrics = common.denoiser_metrics(scripted, test, BUCKETS)
    counts = [int((test["bucket"] == b).sum()) for b in range(BUCKETS)]
    cpu = time.process_time() - start
    c, c2 = CHANNELS, 2 * CHANNELS
    common.log("test noise MSE " + ", ".join(f"{k} {v:.4f}" for k, v in metrics.items())
               + f"; {cpu:.1f} s CPU")

    print(f"""# digits_denoiser

A small DDPM-style noise predictor for sklearn's 8x8 handwritten digits
(`sklearn.datasets.load_digits`, the digits_cnn train split, pixels scaled to
[-1,1] by /8 - 1), for quantizing a real non-LLM model with two inputs, a
timestep embedding, a transposed convolution and a concatenated skip.

{common.made_by(SEED, cpu, 'make_digits_denoiser.py', 'digits_denoiser',
                'python3-torch, python3-numpy and python3-sklearn')}

## Model

`model.pt`: TorchScript (`torch.jit.script`, eval mode, float32),
`forward(x_t: float32 [B,1,8,8], t: int64 [B]) -> predicted noise float32 [B,1,8,8]`.
A two-level UNet: a sinusoidal embedding of t (32) -> Linear(32->64) + SiLU, whose
Linear projections are added as per-channel biases after conv_in, mid and up;
conv_in Conv2d(1->{c}, 3x3, pad 1) + SiLU (the skip), down Conv2d({c}->{c2}, 3x3,
stride 2) + SiLU (8x8 -> 4x4), mid Conv2d({c2}->{c2}, 3x3) + SiLU, up
ConvTranspose2d({c2}->{c}, 4x4, stride 2) + SiLU (4x4 -> 8x8), concatenated with the
skip, merge Conv2d({c2}->{c}, 3x3) + SiLU, conv_out Conv2d({c}->1, 3x3);
{common.count_parameters(model)} parameters.
DDPM: T = {T}, linear betas {BETA_START}..{BETA_END},
x_t = sqrt(abar_t) x_0 + sqrt(1 - abar_t) noise, t in [0, {T - 1}].
Trained {STEPS} steps of Adam (one-cycle, max lr {LR}, batch {BATCH}) on the
noise MSE, with t uniform and fresh noise each step.

## Data

Keys: `input.0` = x_t, `input.1` = t, `target` = the true noise, `bucket` =
t*4//T (0..3). `calibration.safetensors`: 256 train images (a seed-{SEED}
permutation's first 256, in train order) with t and noise from
`torch.Generator().manual_seed({CALIBRATION_SEED})`; `test.safetensors`: the 360
test images with t and noise from seed {TEST_SEED} (samples per bucket: {counts}).

{common.dataset_lines(args.out)}

Files:

{common.file_sizes(args.out)}

## Float metrics

Of `model.pt` on `test.safetensors`: the noise-prediction MSE (mean over
samples of each sample's mean squared error), overall and per bucket
(an all-zero prediction scores 1.0):

{common.metric_rows(metrics)}
""")


if __name__ == "__main__":
    main()
