"""Batched prediction throughput of each model (the tuner's hot path) and training throughput.

    python benchmarks/bench_predict.py DATASET [--batch 512] [--train-hardware k80] [--epochs 1]
        [--models crossfeat,xgb] [--arch d_model=32,layers=2,heads=2] [--repeat 20]

Trains each model briefly on one hardware of DATASET (prediction speed does not depend on how well the
model was trained), then times ``predict`` on batches of ``--batch`` programs of the other hardware,
best and median of ``--repeat`` runs after a warm-up. ``--arch`` sizes the crossfeat models.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from crosstune.commands import parse_settings
from crosstune.dataset import load_dataset
from crosstune.experiment import fit_model
from crosstune.train import TrainConfig


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset")
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--train-hardware", default=None)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--models", default="crossfeat,crossfeat-nohw,tlp,xgb")
    parser.add_argument("--arch", type=parse_settings, default={}, help="crossfeat architecture, NAME=VALUE,...")
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    ds = load_dataset([args.dataset])
    train_hw = args.train_hardware or ds.hardware_names[0]
    train = ds.select(ds.hardware_mask([train_hw]))
    others = ds.select(~ds.hardware_mask([train_hw]))
    batch = others.select(np.arange(min(args.batch, len(others))))
    print(f"torch threads: {torch.get_num_threads()}; train on {train_hw} ({len(train)} records), "
          f"predict batches of {len(batch)}")
    for kind in args.models.split(","):
        cfg = TrainConfig(epochs=args.epochs, lr=7e-4 if kind == "tlp" else TrainConfig.lr,
                          architecture=args.arch if kind.startswith("crossfeat") else {})
        model, seconds = fit_model(kind, train, cfg)
        samples = int(train.valid.sum() * 0.9) * (args.epochs if kind != "xgb" else 1)
        model.predict(batch)
        times = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            model.predict(batch)
            times.append(time.perf_counter() - started)
        print(f"{kind:15s} train {seconds:7.1f} s ({samples / seconds:8.0f} samples/s, {args.epochs} epoch(s)); "
              f"predict {len(batch) / min(times):8.0f} programs/s best, {len(batch) / np.median(times):8.0f} median "
              f"(batch {len(batch)}, {args.repeat} runs)")


if __name__ == "__main__":
    main()
