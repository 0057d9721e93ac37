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

import numpy as np

from crosstune.compare import OPERATOR_METRICS
from crosstune.reporting import below_floor, below_floor_line
from crosstune.tables import format_table

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
    # Per operator: each model's mean over its own seeds (deterministic baselines have one).
    operators = sorted(per_model[kinds[0]][0]["result"]["per_operator"])
    rows, notes = [], []
    for scope in ["all"] + operators:
        for kind in kinds:
            parts = [r["result"]["overall"] if scope == "all" else r["result"]["per_operator"].get(scope) for r in per_model[kind]]
            parts = [p for p in parts if p is not None]
            if not parts:
                continue
            mean = {m: float(np.mean([p[m] for p in parts])) for m in parts[0] if isinstance(parts[0][m], float)}
            if kind != "random":  # a random model sits on its floor, either side of it
                notes += below_floor(f"{kind} on {scope}", mean, parts[0]["random"])
            if scope != "all":
                rows.append([scope, kind, *(mean[m] for m, _ in OPERATOR_METRICS)])
        if scope != "all":
            low = per_model[kinds[0]][0]["result"]["per_operator"][scope]["random"]
            rows.append([scope, "random floor", *(low[m] for m, _ in OPERATOR_METRICS)])
    print("\nper operator (each model's mean over its seeds; random floor exact):")
    print(format_table(("operator", "model") + tuple(h for _, h in OPERATOR_METRICS), rows, digits=3))
    print("\n" + below_floor_line(notes))


if __name__ == "__main__":
    main()
