"""Does a small crossfeat taught by the default one rank unseen hardware as well as the default?

    python benchmarks/distill.py DS --train-hardware k80 --test-hardware v100 [--seeds 3] [--epochs 3]
        [--teacher layers=2] [--student d_model=32,ff_dim=64,layers=1] [--json OUT.json]

Written when the default crossfeat (then two encoder layers) predicted about half as fast as issue 13
asks; a smaller one is faster, and whether it ranks as well is what this measures (docs/BENCHMARKS.md).
Per seed this trains, on the training hardware only: the teacher (the default, or ``--teacher``'s
settings), the student size on the measured latencies, and the student size on the teacher's ranking —
within each (task, hardware) group the group's measured latencies are handed out again in the order of
the teacher's scores, so the student learns the teacher's order with the gains the labels had (failed
measurements stay failed). All three are scored zero-shot on the test hardware: PCA, and top-1/5/10 in
TLP's Σ form beside its exact random floor.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time

import numpy as np

from crosstune.commands import parse_settings
from crosstune.dataset import Dataset, load_dataset
from crosstune.errors import CrosstuneError
from crosstune.experiment import fit_model
from crosstune.metrics import evaluate
from crosstune.train import TrainConfig

KS = (1, 5, 10)


def ranked_by_teacher(train: Dataset, scores: np.ndarray) -> Dataset:
    """``train`` with each group's valid latencies reassigned in the order of the teacher's scores (the
    highest score gets the group's lowest latency)."""
    rows = np.flatnonzero(train.valid)
    group = train.group[rows]
    # both orders sort by group first, so position i of each falls in the same group
    by_score = rows[np.lexsort((-scores[rows], group))]
    by_latency = rows[np.lexsort((train.latency[rows], group))]
    latency = train.latency.copy()
    latency[by_score] = train.latency[by_latency]
    return dataclasses.replace(train, latency=latency)


def row(name: str, metrics: dict, seconds: float) -> dict:
    overall = metrics["overall"]
    return {"model": name, "train_seconds": seconds, "pca": overall["pca"],
            **{f"top{k}": overall[f"top{k}"] for k in KS},
            **{f"floor_top{k}": overall["random"][f"top{k}"] for k in KS}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset")
    parser.add_argument("--train-hardware", required=True)
    parser.add_argument("--test-hardware", required=True)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--teacher", type=parse_settings, default={},
                        help="the teacher's settings (default: crossfeat's defaults)")
    parser.add_argument("--student", type=parse_settings, default="d_model=32,ff_dim=64,layers=1")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    ds = load_dataset([args.dataset])
    train = ds.select(ds.hardware_mask([args.train_hardware]))
    test = ds.select(ds.hardware_mask([args.test_hardware]))
    if not len(train) or not len(test):
        raise SystemExit(f"{args.dataset}: no records of {args.train_hardware} or {args.test_hardware} "
                         f"(it has {', '.join(ds.hardware_names)})")
    student = args.student
    teacher_label = "teacher ({})".format(",".join(f"{k}={v}" for k, v in args.teacher.items()) or "default")
    results = []
    for seed in range(args.seeds):
        teacher, seconds = fit_model("crossfeat", train,
                                     TrainConfig(epochs=args.epochs, seed=seed, architecture=args.teacher))
        results.append({"seed": seed, **row(teacher_label, evaluate(test, teacher.predict(test)), seconds)})
        plain, seconds = fit_model("crossfeat", train, TrainConfig(epochs=args.epochs, seed=seed, architecture=student))
        results.append({"seed": seed, **row("student, measured labels", evaluate(test, plain.predict(test)), seconds)})
        started = time.perf_counter()
        taught_on = ranked_by_teacher(train, teacher.predict(train))
        relabel = time.perf_counter() - started
        taught, seconds = fit_model("crossfeat", taught_on, TrainConfig(epochs=args.epochs, seed=seed, architecture=student))
        results.append({"seed": seed, **row("student, teacher's ranking", evaluate(test, taught.predict(test)),
                                            seconds + relabel)})
        for r in results[-3:]:
            print(f"seed {seed} {r['model']:28s} PCA {r['pca']:.3f}  "
                  + "  ".join(f"Σ top-{k} {r[f'top{k}']:.3f} (floor {r[f'floor_top{k}']:.3f})" for k in KS)
                  + f"  train {r['train_seconds']:.0f} s", flush=True)
    print(f"mean ± std over {args.seeds} seeds, {args.train_hardware} → {args.test_hardware} (top-k: TLP's Σ form):")
    for name in dict.fromkeys(r["model"] for r in results):
        mine = [r for r in results if r["model"] == name]
        cells = [f"{key} {np.mean([r[key] for r in mine]):.3f} ± {np.std([r[key] for r in mine]):.3f}"
                 for key in ("pca", *(f"top{k}" for k in KS))]
        print(f"  {name:28s} " + "  ".join(cells))
    if args.json:
        from crosstune.atomic import write_text

        write_text(args.json, json.dumps({"args": vars(args), "results": results}, indent=1))


if __name__ == "__main__":
    try:
        main()
    except CrosstuneError as error:  # a wrong path or hardware name: say so, no traceback
        raise SystemExit(f"distill.py: {error}")
