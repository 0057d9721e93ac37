"""crossfeat's written-out attention against PyTorch's ``scaled_dot_product_attention``, same weights.

    python benchmarks/attention_kernels.py [DATASET] [--train-hardware local-sse-2c] [--rounds 6] [--repeat 10]

Trains crossfeat for one epoch on one hardware of DATASET (default: the bundled MetaSchedule dataset), then
scores the other hardware's "mixed" batch (a seeded sample of 512 programs of every task) and "one task"
batch (the largest task's programs, up to 512) with each attention in turn: the encoder's own (two batched
products around a softmax) and the fused kernel it replaced. The two take turns, ``--rounds`` rounds of
``--repeat`` calls, so that this VM's drifting speed hits both alike; prints the largest score difference,
best and median programs/s, and the training time of one epoch with each.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
import torch.nn.functional as F

from crosstune.data import bundled_dataset
from crosstune.dataset import load_dataset
from crosstune.experiment import fit_model
from crosstune.models import encoder
from crosstune.train import TrainConfig


def fused_kernel_forward(self, x: torch.Tensor, key_bias: torch.Tensor) -> torch.Tensor:
    """SelfAttention.forward as it was before: PyTorch's fused kernel with a boolean key mask."""
    batch, length, d_model = x.shape
    qkv = F.linear(x, self.in_proj_weight, self.in_proj_bias)
    q, k, v = qkv.view(batch, length, 3, self.heads, d_model // self.heads).permute(2, 0, 3, 1, 4)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=torch.isfinite(key_bias),
                                         dropout_p=self.dropout if self.training else 0.0)
    return self.out_proj(out.transpose(1, 2).reshape(batch, length, d_model))


VARIANTS = {"written out": encoder.SelfAttention.forward, "fused kernel": fused_kernel_forward}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", nargs="?", default=None)
    parser.add_argument("--train-hardware", default="local-sse-2c")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    ds = load_dataset([args.dataset or str(bundled_dataset())])
    train = ds.select(ds.hardware_mask([args.train_hardware]))
    others = ds.select(~ds.hardware_mask([args.train_hardware]))
    picked = np.random.default_rng(0).choice(len(others), size=min(512, len(others)), replace=False)
    groups, sizes = np.unique(others.group, return_counts=True)
    largest = np.flatnonzero(others.group == groups[sizes.argmax()])[:512]
    batches = {"mixed": others.select(np.sort(picked)), "one task": others.select(largest)}
    print(f"torch threads: {torch.get_num_threads()}; train on {args.train_hardware} ({len(train)} records)")
    models = {}
    for name, forward in VARIANTS.items():
        encoder.SelfAttention.forward = forward
        model, seconds = fit_model("crossfeat", train, TrainConfig(epochs=1, seed=0))
        models[name] = model.with_unseen_hardware("own")  # one pass per program: the network's own speed
        print(f"{name:12s} one epoch of training: {seconds:.1f} s")
    model = models["written out"]  # both attentions score with the same weights
    scores, times = {}, {(v, b): [] for v in VARIANTS for b in batches}
    for _ in range(args.rounds):
        for name, forward in VARIANTS.items():
            encoder.SelfAttention.forward = forward
            for label, batch in batches.items():
                scores[name, label] = model.predict(batch)
                for _ in range(args.repeat):
                    started = time.perf_counter()
                    model.predict(batch)
                    times[name, label].append(time.perf_counter() - started)
    encoder.SelfAttention.forward = VARIANTS["written out"]
    for label, batch in batches.items():
        difference = np.abs(scores["written out", label] - scores["fused kernel", label]).max()
        print(f"{label}: {len(batch)} programs, {batch.seq_len.mean():.1f} tokens on average; "
              f"largest score difference {difference:.2e}")
        for name in VARIANTS:
            t = np.asarray(times[name, label])
            print(f"    {name:12s} {len(batch) / t.min():7.0f} programs/s best, {len(batch) / np.median(t):7.0f} median"
                  f" ({len(t)} calls)")


if __name__ == "__main__":
    main()
