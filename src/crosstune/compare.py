"""`crosstune compare`: every model on the same split, several seeds, one table with mean and spread."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from .dataset import load_dataset
from .errors import CrosstuneError
from .experiment import SplitOptions, compare_models
from .models import MODEL_KINDS
from .reporting import LEGEND, below_floor, below_floor_line, write_json
from .tables import format_table
from .train import TrainConfig

# Headline first: TLP's sum-form top-k; the mean of per-task ratios is labelled "mean".
SUMMARY_METRICS = ("pca", "pca_mean", "top1", "top5", "top10", "top1_mean", "top5_mean", "peak@5")
SUMMARY_HEADERS = ("PCA", "PCA mean", "top-1", "top-5", "top-10", "top-1 mean", "top-5 mean", "peak@5")
OPERATOR_METRICS = (("pca", "PCA"), ("top1", "top-1"), ("top5", "top-5"), ("top1_mean", "top-1 mean"))


def run_comparison(datasets: Sequence[str], kinds: Sequence[str], split_options: SplitOptions,
                   config_for: Callable[[str], TrainConfig], seeds: int = 1, progress: bool = True,
                   json_path: str | None = None, out: Path | None = None, print_fn=print) -> dict:
    unknown = [k for k in kinds if k not in MODEL_KINDS]
    if unknown:
        raise CrosstuneError(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(MODEL_KINDS)}")
    if seeds < 1:
        raise CrosstuneError("--seeds must be at least 1")
    for kind in kinds:
        config_for(kind).check()
    ds = load_dataset(datasets)
    base_seed = config_for(kinds[0]).seed
    runs = []
    for seed in range(base_seed, base_seed + seeds):
        comparison = compare_models(ds, kinds, split_options, config_for, seed=seed, progress=progress,
                                    out=out / f"seed{seed}" if out else None)
        runs.append(comparison)
        if json_path:  # after every seed, so a long comparison that is stopped keeps what it measured
            write_json(json_path, _runs_json(runs, complete=False))
        if seed == base_seed:
            print_fn(f"split {comparison.split.kind}: {comparison.split.description}; "
                     f"train {len(comparison.split.train)} records, test {len(comparison.split.test)}")
    summary = summarize_runs(runs, kinds)
    print_fn(summary_table(summary))
    operators = sorted(runs[0].results[kinds[0]]["per_operator"])
    print_fn("\nper operator (mean over seeds; random = the exact floor):")
    print_fn(operator_table(runs, kinds, operators))
    print_fn(below_floor_line(floor_notes(runs, kinds)))
    print_fn(LEGEND)
    data = {**_runs_json(runs, complete=True), "seeds": list(range(base_seed, base_seed + seeds)), "summary": summary}
    if json_path:
        write_json(json_path, data)
    return data


def _runs_json(runs: list, complete: bool) -> dict:
    """The split and every seed's results so far, as written to ``--json``."""
    return {"split": {"kind": runs[0].split.kind, "description": runs[0].split.description}, "complete": complete,
            "runs": [{"results": r.results, "timings": r.timings} for r in runs]}


def floor_name(kinds: Sequence[str]) -> str:
    """The row of the exact random floor: "random", unless the `random` model is one of the kinds."""
    return "random floor" if "random" in kinds else "random"


def summarize_runs(runs: list, kinds: Sequence[str]) -> dict:
    summary = {}
    floor = floor_name(kinds)
    for kind in list(kinds) + [floor]:
        source = [r.results[kinds[0]]["overall"]["random"] if kind == floor else r.results[kind]["overall"] for r in runs]
        entry = {}
        for metric in SUMMARY_METRICS:
            values = np.array([s[metric] for s in source], dtype=float)
            entry[metric] = {"mean": float(np.mean(values)), "std": float(np.std(values)), "values": values.tolist()}
        if kind != floor:
            for key in ("train_seconds", "train_samples_per_second", "predict_programs_per_second"):
                entry[key] = float(np.mean([r.timings[kind][key] for r in runs]))
        summary[kind] = entry
    return summary


def summary_table(summary: dict) -> str:
    """Mean ± std over seeds; the ``random`` row is the exact floor (no spread: the test set is the same)."""
    rows = []
    for kind, entry in summary.items():
        row = [kind] + [f"{entry[m]['mean']:.4f} ± {entry[m]['std']:.4f}" for m in SUMMARY_METRICS]
        row += [f"{entry['train_seconds']:.0f}" if "train_seconds" in entry else "-",
                f"{entry['predict_programs_per_second']:.0f}" if "predict_programs_per_second" in entry else "-"]
        rows.append(row)
    return format_table(("model",) + SUMMARY_HEADERS + ("train s", "predict/s"), rows)


def _operator_metrics(run, kinds: Sequence[str], kind: str, op: str) -> dict:
    first = run.results[kinds[0]]["per_operator"][op]
    return first["random"] if kind == floor_name(kinds) else run.results[kind]["per_operator"][op]


def operator_table(runs: list, kinds: Sequence[str], operators: Sequence[str]) -> str:
    rows = []
    for op in operators:
        for kind in list(kinds) + [floor_name(kinds)]:
            values = [[_operator_metrics(r, kinds, kind, op)[key] for key, _ in OPERATOR_METRICS] for r in runs]
            rows.append([op, kind, *np.mean(values, axis=0).tolist()])
    return format_table(("operator", "model") + tuple(h for _, h in OPERATOR_METRICS), rows, digits=4)


def floor_notes(runs: list, kinds: Sequence[str]) -> list[str]:
    """Where a model's mean over seeds is below the random floor, overall or on one operator."""
    notes = []
    scopes = [("all", lambda r, k: r.results[k]["overall"])] + [
        (op, lambda r, k, op=op: r.results[k]["per_operator"][op]) for op in sorted(runs[0].results[kinds[0]]["per_operator"])]
    for scope, get in scopes:
        floor = get(runs[0], kinds[0])["random"]
        for kind in kinds:
            if kind == "random":  # a random model sits on its floor by construction, either side of it
                continue
            mean = {key: float(np.mean([get(r, kind)[key] for r in runs])) for key in floor if key in get(runs[0], kind)}
            notes += below_floor(f"{kind} on {scope}", mean, floor)
    return notes
