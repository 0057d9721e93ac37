"""Metric tables for the terminal and JSON files (one layout for eval, compare and the studies).

Every table names the top-k form it shows: "top-k" is TLP's sum form (DESIGN's headline), "top-k mean" the
mean of per-task ratios; "floor" columns and "random" rows are the exact expectation of a random ranker.
"""

from __future__ import annotations

import json
from pathlib import Path

from .atomic import write_text as atomic_write_text
from .tables import format_table

NAN = float("nan")

# (JSON key, column header, whether the random floor is shown beside it)
EVAL_COLUMNS = (("pca", "PCA", False), ("pca_mean", "PCA mean", False), ("top1", "top-1", True),
                ("top5", "top-5", True), ("top10", "top-10", False), ("top1_mean", "top-1 mean", True),
                ("top5_mean", "top-5 mean", True), ("peak@5", "peak@5", False))
# The metrics a model can fall below a random ranker on (the floor of PCA is 0.5).
FLOOR_CHECKED = ("pca", "top1", "top5", "top10", "top1_mean", "top5_mean")
LEGEND = ("PCA: share of program pairs ordered right (record-weighted; 'PCA mean' averages tasks; random = 0.5). "
          "top-k: TLP's score, sum of each task's best latency / sum of the best latency among the model's k "
          "picks (slow tasks weigh by their latency). top-k mean: mean of per-task ratios. peak@5: TenSet's mean "
          "of top-1..top-5 ratios. floor/random: the exact expectation of a random ranking.")


def metric_cells(metrics: dict) -> list:
    random = metrics.get("random", {})
    cells = []
    for key, _, with_floor in EVAL_COLUMNS:
        cells.append(metrics.get(key, NAN))
        if with_floor:
            cells.append(random.get(key, NAN))
    return cells


def metric_headers() -> tuple[str, ...]:
    headers = []
    for _, header, with_floor in EVAL_COLUMNS:
        headers += [header, "floor"] if with_floor else [header]
    return tuple(headers)


def below_floor(label: str, metrics: dict, floor: dict) -> list[str]:
    """'label top-1 0.150 < floor 0.160' for every metric where ``metrics`` is below the random ``floor``."""
    notes = []
    for key in FLOOR_CHECKED:
        value, low = metrics.get(key, NAN), floor.get(key, NAN)
        if value == value and low == low and value < low:
            name = next(header for k, header, _ in EVAL_COLUMNS if k == key)
            notes.append(f"{label} {name} {value:.3f} < floor {low:.3f}")
    return notes


def below_floor_line(notes: list[str]) -> str:
    return ("BELOW THE RANDOM FLOOR: " + "; ".join(notes)) if notes else "no metric is below its random floor"


def eval_table(result: dict) -> str:
    headers = metric_headers()
    sections, notes = [], []
    for title, entries in (("hardware", sorted(result["per_hardware"].items()) + [("all", result["overall"])]),
                           ("operator", sorted(result["per_operator"].items()))):
        rows = [[name, m.get("groups", 0), m.get("records", 0)] + metric_cells(m) for name, m in entries]
        sections.append(format_table((title, "tasks", "records") + headers, rows))
        notes += [n for name, m in entries for n in below_floor(name, m, m.get("random", {}))]
    sections.append(below_floor_line(notes) + "\n" + LEGEND)
    return "\n\n".join(sections)


def eval_json(result: dict, notes: dict) -> dict:
    """Per hardware name the keys of metrics.Summary.to_json (``pca``, ``pca_mean``, ``top1``, ``top1_mean``, ...)
    with the random floor under ``random``; plus ``overall``, ``per_operator`` and notes."""
    return {**result["per_hardware"], "overall": result["overall"], "per_operator": result["per_operator"],
            "notes": notes}


def write_json(path: str | Path, data: dict) -> None:
    atomic_write_text(Path(path), json.dumps(data, indent=1, default=float))
