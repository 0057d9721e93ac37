"""crossfeat's attention (PyTorch's ``scaled_dot_product_attention``) against the same attention written out.

    python benchmarks/attention_kernels.py [DATASET] [--train-hardware local-sse-2c] [--rounds 6] [--repeat 10]

Trains crossfeat for one epoch on one hardware of DATASET (default: the bundled MetaSchedule dataset), then
scores the other hardware's "mixed" batch (a seeded sample of 512 programs of every task) and "one task"
batch (the largest task's programs, up to 512) with each attention in turn: the encoder's own (PyTorch's
fused kernel) and the same attention written out as two batched products around a softmax (tried as a
faster path for sequences this short; measured here, it is not faster, so the encoder keeps the kernel). The two take turns, ``--rounds`` rounds of
``--repeat`` calls, so that this VM's drifting speed hits both alike; prints the largest score difference,
best and median programs/s, and the training time of one epoch with each.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
import torch.nn.functional as F

from bench_predict import prediction_batches  # this folder: the same batches as bench_predict.py
from crosstune.data import bundled_dataset
from crosstune.dataset import load_dataset
from crosstune.experiment import fit_model
from crosstune.models import encoder
from crosstune.train import TrainConfig


def written_out_forward(self, x: torch.Tensor, attend: torch.Tensor) -> torch.Tensor:
    """SelfAttention.forward with the attention as two batched products around a softmax."""
    batch, length, d_model = x.shape
    head_dim = d_model // self.heads
    qkv = F.linear(x, self.in_proj_weight, self.in_proj_bias)
    q, k, v = qkv.view(batch, length, 3, self.heads, head_dim).permute(2, 0, 3, 1, 4)
    scores = torch.matmul(q, k.transpose(-1, -2)).mul_(head_dim ** -0.5).masked_fill_(~attend, float("-inf"))
    weights = F.dropout(torch.softmax(scores, dim=-1), self.dropout, self.training)
    return self.out_proj(torch.matmul(weights, v).transpose(1, 2).reshape(batch, length, d_model))


VARIANTS = {"fused kernel": encoder.SelfAttention.forward, "written out": written_out_forward}


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
    batches = prediction_batches(others, 512)
    print(f"torch threads: {torch.get_num_threads()}; train on {args.train_hardware} ({len(train)} records)")
    fit_model("crossfeat", train, TrainConfig(epochs=1, seed=0))  # the process's warm-up: the first fit pays it
    models = {}
    for name, forward in VARIANTS.items():
        encoder.SelfAttention.forward = forward
        model, seconds = fit_model("crossfeat", train, TrainConfig(epochs=1, seed=0))
        models[name] = model.with_unseen_hardware("own")  # one pass per program: the network's own speed
        print(f"{name:12s} one epoch of training: {seconds:.1f} s")
    model = models["fused kernel"]  # both attentions score with the same weights
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
    encoder.SelfAttention.forward = VARIANTS["fused kernel"]
    for label, batch in batches.items():
        difference = np.abs(scores["fused kernel", label] - scores["written out", label]).max()
        print(f"{label}: {len(batch)} programs, {batch.seq_len.mean():.1f} tokens on average; "
              f"largest score difference {difference:.2e}")
        for name in VARIANTS:
            t = np.asarray(times[name, label])
            print(f"    {name:12s} {len(batch) / t.min():7.0f} programs/s best, {len(batch) / np.median(t):7.0f} median"
                  f" ({len(t)} calls)")


if __name__ == "__main__":
    main()
