"""Restate a saved leave-one-hardware-out comparison (compare --json of the code before the metrics fix) in
TLP's Σ form with the exact random floor.

The saved files hold each model's Σ-form top-k as ``top{k}_sum`` (computed from the model's own picks, which was
right) and the per-task mean under ``top{k}`` (shown unnamed as "top-k" before); only their random floor of the
Σ form was wrong (best / E[ratio] in place of E[best of a random k-subset]). The floor depends on the test records
alone, so it is recomputed here from the dataset.

    python benchmarks/restate_topk.py DS docs/results/gpu-compare-k80-to-v100.json --test-hardware v100
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from crosstune.dataset import load_dataset
from crosstune.metrics import TOPK, random_group_scores, summarize


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset")
    parser.add_argument("compare_json")
    parser.add_argument("--test-hardware", required=True)
    args = parser.parse_args()
    data = json.loads(open(args.compare_json).read())
    ds = load_dataset([args.dataset], hardware=[args.test_hardware])
    floor = summarize(random_group_scores(ds))
    runs = [run["results"] for run in data["runs"]]
    print(f"{args.compare_json}: {len(runs)} seed(s), test {args.test_hardware} ({floor.records} valid records)")
    print("| model | PCA | top-1 | top-5 | top-10 | top-1 mean | top-5 mean |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for kind in runs[0]:
        overall = [r[kind]["overall"] for r in runs]
        cells = [_mean_std([o["pca"] for o in overall])]
        cells += [_mean_std([o[f"top{k}_sum"] for o in overall]) for k in TOPK]
        cells += [_mean_std([o[f"top{k}"] for o in overall]) for k in (1, 5)]
        print(f"| {kind} | " + " | ".join(cells) + " |")
    print("| random (exact floor) | 0.500 | " + " | ".join(f"{floor.topk[k]:.3f}" for k in TOPK)
          + " | " + " | ".join(f"{floor.topk_mean[k]:.3f}" for k in (1, 5)) + " |")


def _mean_std(values: list[float]) -> str:
    return f"{np.mean(values):.3f} ± {np.std(values):.3f}"


if __name__ == "__main__":
    main()
