#!/usr/bin/python3
"""Trains models/recommender: a click model with two EmbeddingBags on synthetic data.

    /usr/bin/python3 tools/make_models/make_recommender.py --out models/recommender \
        > models/recommender/README.md

The synthetic world (fixed seed): 1000 items, 50 tags, 4 distinct tags per
item; hidden latent vectors for tags, items (the mean of their tags' vectors
plus a little noise) and users (their taste). A sample is a user's history of
8 items drawn with probability softmax(taste . item) and a candidate item drawn
uniformly; it is a click when sigmoid(taste . candidate) > uniform(0,1).
The model sees only the history's item ids and the candidate's tag ids:
forward(history int64 [B,8], tags int64 [B,4]) -> click logits float32 [B].
Writes DIR/model.pt (TorchScript, scripted, eval, float32) and
calibration.safetensors (256 samples) / test.safetensors (1000 samples) with
input.0 = history, input.1 = tags, target = the click as float32 0/1.
Progress goes to stderr; stdout is the directory's README.md with the float
AUC and accuracy.
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402  (first: it makes OpenBLAS single-threaded before torch loads)
import safetensors_file  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

SEED = 0
ITEMS = 1000
TAGS = 50
TAGS_PER_ITEM = 4
HISTORY = 8
LATENT = 8
ITEM_NOISE = 0.3
TRAIN = 400000
CALIBRATION = 256
TEST = 1000
EMBED = 32
HIDDEN = 128
EPOCHS = 12
BATCH = 512


class ClickModel(nn.Module):
    """EmbeddingBag(sum) of the history's items and EmbeddingBag(mean) of the candidate's
    tags, concatenated, then Linear + ReLU + Linear -> one logit per sample."""

    def __init__(self, items: int = ITEMS, tags: int = TAGS, embed: int = EMBED,
                 hidden: int = HIDDEN):
        super().__init__()
        self.history = nn.EmbeddingBag(items, embed, mode="sum")
        self.tags = nn.EmbeddingBag(tags, embed, mode="mean")
        self.mlp = nn.Sequential(nn.Linear(2 * embed, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, history: torch.Tensor, tags: torch.Tensor) -> torch.Tensor:
        user = self.history(history)
        item = self.tags(tags)
        return self.mlp(torch.cat([user, item], dim=1)).squeeze(1)


class World:
    """The hidden tag, item and user vectors, and the samples drawn from them."""

    def __init__(self, gen):
        self.gen = gen
        tag_vecs = torch.randn(TAGS, LATENT, generator=gen)
        self.item_tags = torch.argsort(torch.rand(ITEMS, TAGS, generator=gen),
                                       dim=1)[:, :TAGS_PER_ITEM]
        # The mean of 4 unit normals has std 1/2: doubled, item vectors are about unit normal.
        self.item_vecs = 2.0 * tag_vecs[self.item_tags].mean(dim=1) \
            + ITEM_NOISE * torch.randn(ITEMS, LATENT, generator=gen)

    def samples(self, n):
        """A dataset of n fresh users, and each sample's true click probability."""
        taste = torch.randn(n, LATENT, generator=self.gen)
        history = torch.cat([  # in chunks: the [n, ITEMS] probabilities of all at once are large
            torch.multinomial(torch.softmax(chunk @ self.item_vecs.T, dim=1), HISTORY,
                              replacement=True, generator=self.gen)
            for chunk in taste.split(10000)])
        candidate = torch.randint(0, ITEMS, (n,), generator=self.gen)
        prob = torch.sigmoid((taste * self.item_vecs[candidate]).sum(dim=1))
        click = (prob > torch.rand(n, generator=self.gen)).to(torch.float32)
        data = {"input.0": history, "input.1": self.item_tags[candidate], "target": click}
        return data, prob


def main():
    args, start = common.start(__doc__, SEED)

    world = World(torch.Generator().manual_seed(SEED))
    train, _ = world.samples(TRAIN)
    calibration = {k: v[:CALIBRATION] for k, v in train.items()}
    test, test_prob = world.samples(TEST)

    model = ClickModel()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=EPOCHS)
    loss_fn = nn.BCEWithLogitsLoss()
    for epoch in range(EPOCHS):
        model.train()
        perm = torch.randperm(TRAIN)
        total = 0.0
        for i in range(0, TRAIN, BATCH):
            idx = perm[i:i + BATCH]
            opt.zero_grad()
            logits = model(train["input.0"][idx], train["input.1"][idx])
            loss = loss_fn(logits, train["target"][idx])
            loss.backward()
            opt.step()
            total += float(loss) * len(idx)
        sched.step()
        common.log(f"epoch {epoch + 1}: train loss {total / TRAIN:.4f}")

    safetensors_file.save(os.path.join(args.out, "calibration.safetensors"), calibration)
    safetensors_file.save(os.path.join(args.out, "test.safetensors"), test)

    scripted = common.save_scripted(model, os.path.join(args.out, "model.pt"))
    test = safetensors_file.load(os.path.join(args.out, "test.safetensors"))
    metrics = common.recommender_metrics(scripted, test)
    bayes_auc = common.roc_auc(test_prob.numpy(), test["target"])
    bayes_acc = float(((test_prob.numpy() > 0.5) == (test["target"] > 0.5)).mean() * 100.0)
    click_rate = float(test["target"].mean() * 100.0)
    cpu = time.process_time() - start
    common.log(f"test AUC {metrics['auc']:.4f}, accuracy {metrics['accuracy_percent']:.2f}% "
               f"(true probabilities: AUC {bayes_auc:.4f}, accuracy {bayes_acc:.2f}%); "
               f"{cpu:.1f} s CPU")

    print(f"""# recommender

A click model in the shape of a small recommender, trained on synthetic data,
for quantizing a real non-LLM model whose inputs are indices: two
`nn.EmbeddingBag`s (modes "sum" and "mean") and an MLP.

{common.made_by(SEED, cpu, 'make_recommender.py', 'recommender',
                'python3-torch and python3-numpy')}

## Model

`model.pt`: TorchScript (`torch.jit.script`, eval mode, float32),
`forward(history: int64 [B,{HISTORY}], tags: int64 [B,{TAGS_PER_ITEM}])
-> click logits float32 [B]`.
EmbeddingBag({ITEMS}, {EMBED}, mode "sum") of the user's history of {HISTORY} item ids
and EmbeddingBag({TAGS}, {EMBED}, mode "mean") of the candidate item's {TAGS_PER_ITEM} tag ids
(2-D inputs, no offsets), concatenated, then Linear({2 * EMBED}->{HIDDEN}) + ReLU +
Linear({HIDDEN}->1); {common.count_parameters(model)} parameters. Trained {EPOCHS} epochs of Adam
(lr 3e-3, cosine, batch {BATCH}) with BCEWithLogitsLoss on {TRAIN} samples.

## Data

The synthetic world, from `torch.Generator().manual_seed({SEED})`: {ITEMS} items, {TAGS}
tags, {TAGS_PER_ITEM} distinct tags per item; hidden {LATENT}-d vectors: tags unit
normal, an item's vector twice the mean of its tags' plus {ITEM_NOISE} x unit
normal noise, a user's taste unit normal. A sample is a fresh user: a history
of {HISTORY} items drawn (with replacement) with probability softmax(taste . item)
and a uniform candidate item, clicked when sigmoid(taste . candidate) >
uniform(0,1). Keys: `input.0` = history, `input.1` = the candidate's tags,
`target` = the click (0/1 as float32). `calibration.safetensors`: the first 256
training samples; `test.safetensors`: {TEST} further samples ({click_rate:.1f}% clicks).

{common.dataset_lines(args.out)}

Files:

{common.file_sizes(args.out)}

## Float metrics

Of `model.pt` on `test.safetensors`: ROC AUC of the logits and accuracy in
percent of logit > 0 against the clicks. The clicks are random draws: the
true probabilities themselves score AUC {bayes_auc:.4f} and accuracy {bayes_acc:.2f}%
on the same samples.

{common.metric_rows(metrics)}
""")


if __name__ == "__main__":
    main()
