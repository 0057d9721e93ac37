"""Batched prediction throughput of each model (the tuner's hot path) and training throughput.

    python benchmarks/bench_predict.py DATASET [--batch 512] [--train-hardware k80] [--epochs 1]
        [--models crossfeat,xgb] [--arch crossfeat:d_model=32,layers=1 ...] [--rounds 5] [--repeat 10]

Trains each model briefly on one hardware of DATASET (prediction speed does not depend on how well the
model was trained), then times ``predict`` on two batches of up to ``--batch`` programs of the other
hardware: "mixed", a seeded sample of all its tasks (programs of many lengths), and "one task", the
programs of its largest task (what one call of the tuner's search scores: candidates of similar lengths).
The models take turns, ``--rounds`` rounds of ``--repeat`` calls each after a warm-up, so that a
drift in the machine's speed (a shared VM's is large) hits every model alike; best and median over
all calls. ``--arch KIND:NAME=VALUE,...`` adds a sized variant of a model (repeatable).
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


def _variant(text: str) -> tuple[str, dict[str, str]]:
    kind, _, settings = text.partition(":")
    return kind, parse_settings(settings)


def prediction_batches(programs, size: int) -> dict:
    """"mixed": a seeded sample of ``size`` programs of every task; "one task": the largest task's first
    ``size`` programs. A sample of the whole set, not its first rows: records come sorted by task, and the
    first tasks' programs (pooling) are a third as long as the average, which a batch's speed depends on."""
    picked = np.random.default_rng(0).choice(len(programs), size=min(size, len(programs)), replace=False)
    groups, sizes = np.unique(programs.group, return_counts=True)
    largest = np.flatnonzero(programs.group == groups[sizes.argmax()])[:size]
    return {"mixed": programs.select(np.sort(picked)), "one task": programs.select(largest)}


def variant_benchmark_setup(description: str):
    """The command line of a script that compares scorings of one crossfeat (int8_predict.py,
    bf16_predict.py): its arguments, the crossfeat trained 1 epoch on ``--train-hardware`` and the
    other hardware's programs."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("dataset", nargs="?", default="src/crosstune/data/local-cpu")
    parser.add_argument("--train-hardware", default="local-sse-2c")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    ds = load_dataset([args.dataset])
    train = ds.select(ds.hardware_mask([args.train_hardware]))
    others = ds.select(~ds.hardware_mask([args.train_hardware]))
    model, _ = fit_model("crossfeat", train, TrainConfig(epochs=1))
    return args, model, others


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset")
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--train-hardware", default=None)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--models", default="crossfeat,crossfeat-nohw,tlp,xgb")
    parser.add_argument("--arch", type=_variant, action="append", default=[], metavar="KIND:NAME=VALUE,...")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    ds = load_dataset([args.dataset])
    train_hw = args.train_hardware or ds.hardware_names[0]
    train = ds.select(ds.hardware_mask([train_hw]))
    others = ds.select(~ds.hardware_mask([train_hw]))
    if not len(others):
        # One hardware only (a partial copy of the records): time the batch on programs of the training
        # hardware; how fast a batch is scored depends on its programs' lengths, not on how well it is scored.
        print(f"only {train_hw} in {args.dataset}: the prediction batch is {train_hw} programs")
        others = train
    batches = prediction_batches(others, args.batch)
    print(f"torch threads: {torch.get_num_threads()}; train on {train_hw} ({len(train)} records); predict "
          + "; ".join(f"{name}: {len(b)} programs, {b.seq_len.mean():.1f} tokens on average (max {b.seq_len.max()})"
                      for name, b in batches.items()))
    variants = [(kind, {}) for kind in args.models.split(",") if kind] + args.arch
    trained = []
    for kind, arch in variants:
        cfg = TrainConfig(epochs=args.epochs, architecture=arch)
        model, seconds = fit_model(kind, train, cfg)
        samples = int(train.valid.sum() * 0.9) * (args.epochs if kind != "xgb" else 1)
        label = kind + (" " + ",".join(f"{k}={v}" for k, v in arch.items()) if arch else "")
        model.predict(batches["mixed"])
        trained.append((label, model, f"train {seconds:6.1f} s ({samples / seconds:6.0f} samples/s)"))
    times = {(label, name): [] for label, _, _ in trained for name in batches}
    for _ in range(args.rounds):
        for label, model, _ in trained:
            for name, batch in batches.items():
                for _ in range(args.repeat):
                    started = time.perf_counter()
                    model.predict(batch)
                    times[label, name].append(time.perf_counter() - started)
    for label, _, training in trained:
        print(f"{label:45s} {training}")
        for name, batch in batches.items():
            t = np.asarray(times[label, name])
            print(f"    {name:9s} predict {len(batch) / t.min():8.0f} programs/s best, "
                  f"{len(batch) / np.median(t):8.0f} median ({len(t)} calls of {len(batch)})")


if __name__ == "__main__":
    main()
