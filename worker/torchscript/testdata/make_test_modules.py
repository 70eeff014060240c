#!/usr/bin/python3
"""Writes the small TorchScript modules the worker/torchscript tests load.

Usage: make_test_modules.py OUT_DIR. Each module is scripted (or traced) from
a seeded random initialisation; the tests compare quantd against float64
references computed from the same files, so the weights need no training.
"""
import os
import sys

import torch
from torch import nn


class ConvBnNet(nn.Module):
    """Conv -> BN -> ReLU twice (one conv without bias), then a classifier;
    the two blocks share a module type, so folding must fold both."""

    def __init__(self):
        super().__init__()
        self.block1 = ConvBn(1, 4, bias=True)
        self.block2 = ConvBn(4, 8, bias=False)
        self.up = nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        x = self.block1(x)
        x = self.block2(x)
        x = torch.relu(self.up(x))
        return self.fc(torch.flatten(self.pool(x), 1))


class ConvBn(nn.Module):
    def __init__(self, cin, cout, bias):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1, bias=bias)
        self.bn = nn.BatchNorm2d(cout)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


class TwoInputs(nn.Module):
    """EmbeddingBag (sum) over a fixed-length bag, an Embedding, and a float
    input: several forward arguments."""

    def __init__(self):
        super().__init__()
        self.bag = nn.EmbeddingBag(20, 6, mode="sum")
        self.emb = nn.Embedding(10, 6)
        self.fc = nn.Linear(6, 2)

    def forward(self, items: torch.Tensor, ids: torch.Tensor, scale: torch.Tensor):
        return self.fc(self.bag(items) + self.emb(ids) * scale)


class WhileLoop(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        while bool(x.sum() > -1e30):
            x = self.fc(x)
        return x


class ReadsAFile(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        leak = torch.from_file("/etc/hostname", False, 4, dtype=torch.uint8)
        return self.fc(x) + leak.sum()


class CumSum(nn.Module):
    def forward(self, x):
        return torch.cumsum(x, 1)


class UnsupportedOp(nn.Module):
    """A Linear, then an operator the onnx export does not translate
    (aten::cumsum), in a submodule the refusal must name."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.head = CumSum()

    def forward(self, x):
        return self.head(self.fc(x))


class Single(nn.Module):
    """One layer: the quantized forward must be the quant module's."""

    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    def forward(self, x):
        return self.layer(x)


def randomize_bn(model):
    g = torch.Generator().manual_seed(1)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
            m.weight.data.copy_(torch.rand(m.num_features, generator=g) + 0.5)
            m.bias.data.copy_(torch.randn(m.num_features, generator=g) * 0.1)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    net = ConvBnNet()
    randomize_bn(net)
    net.eval()
    torch.jit.script(net).save(os.path.join(out, "conv_bn_scripted.pt"))
    torch.jit.trace(net, torch.randn(2, 1, 8, 8)).save(os.path.join(out, "conv_bn_traced.pt"))
    two = TwoInputs().eval()
    torch.jit.script(two).save(os.path.join(out, "two_inputs.pt"))
    torch.jit.script(WhileLoop().eval()).save(os.path.join(out, "while_loop.pt"))
    torch.jit.script(ReadsAFile().eval()).save(os.path.join(out, "reads_a_file.pt"))
    torch.jit.script(UnsupportedOp().eval()).save(os.path.join(out, "unsupported_op.pt"))
    conv = nn.Conv2d(4, 6, 3, stride=2, padding=1, dilation=2, groups=2)
    torch.jit.script(Single(conv).eval()).save(os.path.join(out, "single_conv.pt"))
    up = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2)
    torch.jit.script(Single(up).eval()).save(os.path.join(out, "single_conv_transpose.pt"))
    frozen = torch.jit.freeze(torch.jit.script(ConvBnNet().eval()))
    frozen.save(os.path.join(out, "frozen.pt"))


if __name__ == "__main__":
    main()
