"""Metric tables for the terminal and JSON files (one layout for eval, compare and the studies)."""

from __future__ import annotations

import json
from pathlib import Path

from .dataset import atomic_write_text
from .tables import format_table

METRIC_COLUMNS = ("pca", "pca_unweighted", "top1", "top5", "top10", "top5_sum", "peak@5")
HEADERS = ("PCA", "PCA(unw)", "top-1", "top-5", "top-10", "top-5 sum", "peak@5", "rand top-1", "rand top-5")


def metric_row(label: str, metrics: dict) -> list:
    random = metrics.get("random", {})
    return [label, metrics.get("groups", 0), metrics.get("records", 0)] + [metrics.get(c, float("nan")) for c in METRIC_COLUMNS] + [
        random.get("top1", float("nan")), random.get("top5", float("nan"))]


def eval_table(result: dict) -> str:
    rows = [metric_row(name, m) for name, m in sorted(result["per_hardware"].items())]
    rows.append(metric_row("all", result["overall"]))
    lines = [format_table(("hardware", "tasks", "records") + HEADERS, rows)]
    op_rows = [metric_row(name, m) for name, m in sorted(result["per_operator"].items())]
    lines.append(format_table(("operator", "tasks", "records") + HEADERS, op_rows))
    return "\n\n".join(lines)


def eval_json(result: dict, notes: dict) -> dict:
    """Keys ``pca``, ``top1``, ``top5``, ``top10`` per hardware name, plus the details."""
    per_hw = {name: {k: m[k] for k in ("pca", "pca_unweighted", "top1", "top5", "top10", "top1_sum", "top5_sum",
                                          "top10_sum", "peak@5", "groups", "records", "skipped_single_program_tasks")}
              | {"random": m["random"]} for name, m in result["per_hardware"].items()}
    return {**per_hw, "overall": result["overall"], "per_operator": result["per_operator"], "notes": notes}


def write_json(path: str | Path, data: dict) -> None:
    atomic_write_text(Path(path), json.dumps(data, indent=1, default=float))


def compare_table(results: dict[str, dict], timings: dict[str, dict]) -> str:
    rows = []
    for kind, result in results.items():
        row = metric_row(kind, result["overall"])
        rows.append(row[:1] + row[3:-2] + [timings[kind]["train_seconds"], timings[kind]["predict_programs_per_second"]])
    first = next(iter(results.values()))["overall"]["random"]
    rows.append(["random"] + [first.get(c, float("nan")) for c in METRIC_COLUMNS] + [float("nan"), float("nan")])
    return format_table(("model",) + HEADERS[:-2] + ("train s", "predict/s"), rows)
