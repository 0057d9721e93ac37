"""One table from several `crosstune compare --json` files of the same split (seeds or models run as separate
processes, e.g. side by side on one GPU): mean ± std over each model's seeds, TLP's Σ top-k beside the exact
random floor, per operator, and every place a model is below its floor.

    python benchmarks/merge_compare.py A.json B.json C.json:+drop0.3

``FILE:SUFFIX`` renames every model of that file (``crossfeat`` -> ``crossfeat+drop0.3``), for variants run
with different ``--arch`` settings. Files must share the split (same test records), else the floors differ
and the script refuses.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from types import SimpleNamespace

import numpy as np

from crosstune.compare import floor_notes, operator_table
from crosstune.reporting import below_floor_line

HEADLINE = ("pca", "top1", "top5", "top10", "top1_mean", "top5_mean")


def load_runs(specs: list[str]) -> tuple[dict, dict[str, list[dict]]]:
    """(the split, model -> list of per-seed results)."""
    split, per_model = None, defaultdict(list)
    for spec in specs:
        path, _, suffix = spec.partition(":")
        data = json.loads(open(path).read())
        if split is None:
            split = data["split"]
        elif data["split"] != split:
            sys.exit(f"{path}: another split ({data['split']['description']}) than {specs[0]}")
        for run in data["runs"]:
            for kind, result in run["results"].items():
                per_model[kind + suffix].append({"result": result, "timing": run["timings"][kind]})
    return split, per_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", metavar="FILE[:SUFFIX]")
    args = parser.parse_args()
    split, per_model = load_runs(args.files)
    kinds = list(per_model)
    floor = per_model[kinds[0]][0]["result"]["overall"]["random"]
    print(f"split: {split['description']}")
    print("| model | seeds | " + " | ".join(HEADLINE) + " | train s |")
    print("|" + " --- |" * (len(HEADLINE) + 3))
    for kind in kinds:
        runs = per_model[kind]
        cells = []
        for metric in HEADLINE:
            values = [r["result"]["overall"][metric] for r in runs]
            cells.append(f"{np.mean(values):.3f} ± {np.std(values):.3f}" if len(values) > 1 else f"{values[0]:.3f}")
        seconds = np.mean([r["timing"]["train_seconds"] for r in runs])
        print(f"| {kind} | {len(runs)} | " + " | ".join(cells) + f" | {seconds:.0f} |")
    print("| random floor (exact) | – | " + " | ".join(f"{floor[m]:.3f}" for m in HEADLINE) + " | – |")
    # The library's per-operator table and floor notes want runs holding every model: use the seeds all have.
    seeds = min(len(per_model[k]) for k in kinds)
    runs = [SimpleNamespace(results={k: per_model[k][i]["result"] for k in kinds}) for i in range(seeds)]
    operators = sorted(runs[0].results[kinds[0]]["per_operator"])
    print(f"\nper operator (mean over the first {seeds} seed(s) of every model; random = the exact floor):")
    print(operator_table(runs, kinds, operators))
    notes = floor_notes(runs, kinds)
    print("\n" + below_floor_line(notes))


if __name__ == "__main__":
    main()
