"""How much should the tuner fine-tune on the tuning machine's own measurements? Offline, on programs a tuner
measured on that machine: a pre-trained model is fine-tuned the way the tuner's cost model does it (every 64 new
measurements, on all measured so far, warm start), with several schedules (epochs per fine-tune, learning-rate
scale), and then ranks the programs of one held-out task that it never saw measured. Repeated for the
largest tasks held out in turn and for several arrival orders. With ``--own 64`` the held-out task's first 64
programs (in the order's draw) arrive last, as after its first round, and the rest of its programs are ranked.
``trees`` is the comparison: crosstune's ``xgb`` trained from scratch on the same measurements only (what a
tuner that starts with no model knows).

    crosstune import RUN/xgb/database_tuning_record.json RUN/xgb/database_workload.json --hardware NAME \
        --hardware-spec SPEC.json --out MEASURED
    python benchmarks/tuner_fine_tune.py PRETRAINED_MODEL MEASURED --measured 64,256,640 --json OUT.json

Prints, per number of measurements seen and schedule, the mean over held-out tasks and orders of PCA and of
TLP's Σ top-1 / top-5 beside their exact random floors (one task at a time, so the Σ form is that task's).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from crosstune.dataset import load_dataset
from crosstune.metrics import evaluate
from crosstune.models import FitOptions, load_model

EVERY = 64  # the tuner's --fine-tune-every default
# (epochs per fine-tune, learning rate as a fraction of the model's): "1@0.25" is what the tuner does today
SCHEDULES = {"none": None, "1@0.25": (1, 0.25), "2@0.5": (2, 0.5), "4@0.5": (4, 0.5), "4@1": (4, 1.0), "trees": "trees",
             "blend": "blend"}
BLEND_TRIALS = 64  # "blend": the trees' share of the score after n measurements is n / (n + BLEND_TRIALS)


class Blend:
    """crossfeat fine-tuned as the tuner does ("1@0.25") and the trees, each standardised over the programs
    scored, mixed n / (n + BLEND_TRIALS) towards the trees (the tuner's online-trees blend, over the run)."""

    def __init__(self, model, trees, measured: int):
        self.model, self.trees, self.weight = model, trees, measured / (measured + BLEND_TRIALS)

    def predict(self, programs) -> np.ndarray:
        z = [(s - s.mean()) / (s.std() or 1.0) for s in (self.model.predict(programs), self.trees.predict(programs))]
        return (1 - self.weight) * z[0] + self.weight * z[1]


def fine_tuned(model_dir: str, ds, arrived: np.ndarray, schedule) -> object:
    """The pre-trained model after the tuner's fine-tunes on ``arrived`` (rows of ``ds``, in arrival order)."""
    if schedule == "blend":
        return Blend(fine_tuned(model_dir, ds, arrived, SCHEDULES["1@0.25"]), fine_tuned(model_dir, ds, arrived, "trees"),
                     len(arrived))
    if schedule == "trees":
        from crosstune.models import create_model
        from crosstune.train import TrainConfig

        trees = create_model("xgb", TrainConfig())
        trees.fit(ds.select(arrived), None, FitOptions(progress=False))
        return trees
    model = load_model(model_dir)
    if schedule is None:
        return model
    epochs, scale = schedule
    for end in range(EVERY, len(arrived) + 1, EVERY):
        model.fit(ds.select(arrived[:end]), None, FitOptions(progress=False, warm_start=True, epochs=epochs,
                                                            lr=model.train_config.lr * scale))
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir", help="the pre-trained model the tuner starts from")
    parser.add_argument("datasets", nargs="+", help="programs measured on the tuning machine (one hardware)")
    parser.add_argument("--measured", default="64,256,640", help="measurements seen before the held-out task")
    parser.add_argument("--held-out", type=int, default=4, help="the N tasks with the most records, one at a time")
    parser.add_argument("--orders", type=int, default=3, help="arrival orders (seeds) per held-out task")
    parser.add_argument("--own", type=int, default=0, help="the held-out task's own programs measured last")
    parser.add_argument("--schedules", default=",".join(SCHEDULES))
    parser.add_argument("--json")
    args = parser.parse_args()
    ds = load_dataset(args.datasets)
    counts = np.bincount(ds.task, minlength=len(ds.task_ids))
    held_out = np.argsort(-counts, kind="stable")[:args.held_out]
    sizes = [int(k) for k in args.measured.split(",")]
    schedules = {name: SCHEDULES[name] for name in args.schedules.split(",")}
    rows = []
    started = time.perf_counter()
    for task in held_out:
        others = np.flatnonzero(ds.task != task)
        for order in range(args.orders):
            rng = np.random.default_rng(order)
            arrival = rng.permutation(others)
            own = rng.permutation(np.flatnonzero(ds.task == task))
            test = ds.select(np.sort(own[args.own:]))
            for size in sizes:
                for name, schedule in schedules.items():
                    if schedule is None and (size != sizes[0] or (order and not args.own)):
                        continue  # no fine-tuning: the same scores whatever arrived
                    arrived = np.concatenate([arrival[:size - args.own], own[:args.own]])
                    result = evaluate(test, fine_tuned(args.model_dir, ds, arrived, schedule).predict(test))
                    overall = result["overall"]
                    rows.append({"task": ds.task_ids[task], "order": order, "measured": 0 if schedule is None else size,
                                 "schedule": name, "pca": overall["pca"], "top1": overall["top1"],
                                 "top5": overall["top5"], "floor_top1": overall["random"]["top1"],
                                 "floor_top5": overall["random"]["top5"]})
    print(f"{len(held_out)} held-out tasks x {args.orders} arrival orders, {time.perf_counter() - started:.0f} s")
    print(f"{'measured':>8}  {'schedule':<8}  {'PCA':>6}  {'top-1':>6} {'floor':>6}  {'top-5':>6} {'floor':>6}")
    summary = []
    for size in [0] + sizes:
        for name in schedules:
            mine = [r for r in rows if r["measured"] == size and r["schedule"] == name]
            if not mine:
                continue
            mean = {key: float(np.mean([r[key] for r in mine])) for key in ("pca", "top1", "floor_top1", "top5", "floor_top5")}
            summary.append({"measured": size, "schedule": name, "runs": len(mine), **mean})
            print(f"{size:>8}  {name:<8}  {mean['pca']:6.3f}  {mean['top1']:6.3f} {mean['floor_top1']:6.3f}  "
                  f"{mean['top5']:6.3f} {mean['floor_top5']:6.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"summary": summary, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
