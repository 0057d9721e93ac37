"""How far any transfer can go: pairwise-order agreement of devices on the programs they share.

For two hardware A and B, take every task both measured and, within it, the programs both measured
validly (same task, same token sequence: :func:`crosstune.programs.program_keys`). Over the pairs of
such programs whose latencies differ on both devices, the agreement is the fraction that A and B order
the same way; the matrix entry is the mean of that fraction over tasks (tasks with fewer than two shared
programs say nothing and are left out). 1 = B's ranking is A's, 0.5 = unrelated, 0 = reversed.

The diagonal is each device's own noise ceiling where the data has repeats: the same agreement between
two measurements of one program on one device -- repeats kept as separate records in the dataset, or
the repeats a reader merged at import (AutoTVM), whose agreement the import report keeps
(``repeat_pairs``). A model that ranks a device better than its noise ceiling is measuring luck.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .atomic import write_text as atomic_write_text
from .dataset import Dataset, load_dataset, read_manifest
from .errors import CrosstuneError
from .programs import program_keys


def concordance(first: np.ndarray, second: np.ndarray) -> tuple[float, float]:
    """(concordant, concordant + discordant) pairs of two latency vectors over the same programs;
    pairs tied in either vector are neither (they say nothing about order)."""
    n = len(first)
    if n < 2:
        return 0.0, 0.0
    from scipy.stats import kendalltau

    pairs = n * (n - 1) / 2
    ties_1, ties_2 = _tied_pairs(first), _tied_pairs(second)
    ties_both = _tied_pairs(first + 1j * second) if ties_1 and ties_2 else 0.0
    decided = pairs - ties_1 - ties_2 + ties_both
    if decided <= 0:
        return 0.0, 0.0
    tau = kendalltau(first, second, variant="b").statistic
    if not np.isfinite(tau):
        return 0.0, 0.0
    # tau-b = (C - D) / sqrt((pairs - ties_1) (pairs - ties_2)), and C + D = decided
    difference = tau * np.sqrt((pairs - ties_1) * (pairs - ties_2))
    return float(round((decided + difference) / 2)), float(decided)  # counts: round off float error


def _tied_pairs(values: np.ndarray) -> float:
    _, counts = np.unique(values, return_counts=True)
    return float(np.sum(counts * (counts - 1) / 2))


@dataclass
class SimilarityMatrix:
    hardware: list[str]
    agreement: np.ndarray  # (h, h); NaN where two devices share no task with two programs
    shared_programs: np.ndarray  # (h, h) int; diagonal: programs with repeats
    tasks: np.ndarray  # (h, h) int: tasks the agreement is the mean over
    noise_source: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict:
        def clean(x):
            return None if not np.isfinite(x) else round(float(x), 6)
        return {
            "definition": "mean over tasks of the fraction of program pairs (distinct latency on both) that two "
                          "devices order alike; diagonal: two measurements of one program on one device",
            "hardware": self.hardware,
            "agreement": [[clean(v) for v in row] for row in self.agreement],
            "shared_programs": self.shared_programs.tolist(),
            "tasks": self.tasks.tolist(),
            "noise_ceiling": {h: {"agreement": clean(self.agreement[i, i]), "tasks": int(self.tasks[i, i]),
                                  "source": self.noise_source.get(h, "no repeats")}
                              for i, h in enumerate(self.hardware)},
        }

    def table(self) -> str:
        width = max(8, *(len(h) for h in self.hardware))
        lines = [" " * width + "".join(f"{h:>{width + 2}}" for h in self.hardware)]
        for i, h in enumerate(self.hardware):
            cells = []
            for j in range(len(self.hardware)):
                v = self.agreement[i, j]
                text = "-" if not np.isfinite(v) else f"{v:.3f}"
                cells.append(f"{text + ('*' if i == j and np.isfinite(v) else ''):>{width + 2}}")
            lines.append(f"{h:<{width}}" + "".join(cells))
        lines.append("pairwise-order agreement on shared programs, mean over tasks; * = the device's own noise "
                     "ceiling (two measurements of the same programs); - = nothing shared")
        return "\n".join(lines)


def _mean_over_tasks(task: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[float, int]:
    order = np.argsort(task, kind="stable")
    task, a, b = task[order], a[order], b[order]
    starts = np.flatnonzero(np.r_[True, task[1:] != task[:-1]])
    ends = np.r_[starts[1:], len(task)]
    values = []
    for s, e in zip(starts, ends):
        agree, decided = concordance(a[s:e], b[s:e])
        if decided:
            values.append(agree / decided)
    return (float(np.mean(values)) if values else float("nan")), len(values)


def device_similarity(ds: Dataset, reported_repeats: dict[str, dict] | None = None) -> SimilarityMatrix:
    """The similarity matrix of every hardware in ``ds``. ``reported_repeats`` (hardware -> task_id ->
    [agree, pairs]) adds the repeats that were merged at import, for the diagonal."""
    keys = program_keys(ds)
    valid = ds.valid
    names = ds.hardware_names
    h = len(names)
    per_device = []
    for i in range(h):
        rows = np.flatnonzero(valid & (ds.hardware == i))
        rows = rows[np.argsort(keys[rows], kind="stable")]
        per_device.append(rows)
    agreement = np.full((h, h), np.nan)
    shared = np.zeros((h, h), dtype=np.int64)
    tasks = np.zeros((h, h), dtype=np.int64)
    noise_source: dict[str, str] = {}
    unique = []
    for i in range(h):
        rows = per_device[i]
        k = keys[rows]
        first = np.r_[True, k[1:] != k[:-1]] if len(k) else np.zeros(0, dtype=bool)
        # repeats in the dataset: the first two records of a program on this device
        starts = np.flatnonzero(first)
        counts = np.diff(np.r_[starts, len(k)])
        repeated = starts[counts >= 2]
        if len(repeated):
            agreement[i, i], tasks[i, i] = _mean_over_tasks(ds.task[rows[repeated]], ds.latency[rows[repeated]],
                                                            ds.latency[rows[repeated + 1]])
            shared[i, i] = len(repeated)
            noise_source[names[i]] = "repeated records in the dataset"
        # programs measured more than once count once, by their mean latency
        sums = np.add.reduceat(ds.latency[rows], starts) if len(rows) else np.zeros(0)
        unique.append((k[starts], sums / np.maximum(counts, 1), ds.task[rows[starts]]))
    for name, task_pairs in (reported_repeats or {}).items():
        if name in names and task_pairs and not noise_source.get(name):
            i = names.index(name)
            ratios = [a / p for a, p in task_pairs.values() if p]
            if ratios:
                agreement[i, i], tasks[i, i] = float(np.mean(ratios)), len(ratios)
                noise_source[name] = "repeats merged at import (import report)"
    for i in range(h):
        for j in range(i + 1, h):
            ki, li, ti = unique[i]
            kj, lj, _ = unique[j]
            common, at_i, at_j = np.intersect1d(ki, kj, assume_unique=True, return_indices=True)
            shared[i, j] = shared[j, i] = len(common)
            if len(common) >= 2:
                value, n_tasks = _mean_over_tasks(ti[at_i], li[at_i], lj[at_j])
                agreement[i, j] = agreement[j, i] = value
                tasks[i, j] = tasks[j, i] = n_tasks
    return SimilarityMatrix(list(names), agreement, shared, tasks, noise_source)


def reported_repeats(paths: list[str | Path]) -> dict[str, dict]:
    """hardware -> task_id -> [agree, pairs], summed over every import of the given datasets."""
    out: dict[str, dict] = {}
    for path in paths:
        for entry in read_manifest(Path(path)).get("imports", []):
            pairs = entry.get("report", {}).get("repeat_pairs") or {}
            mine = out.setdefault(entry.get("hardware", "?"), {})
            for task, (agree, total) in pairs.items():
                slot = mine.setdefault(task, [0, 0])
                slot[0] += agree
                slot[1] += total
    return out


def similarity_of_datasets(paths: list[str | Path]) -> SimilarityMatrix:
    ds = load_dataset([str(p) for p in paths])
    if len(ds.hardware_names) < 1:
        raise CrosstuneError("no hardware in the dataset(s)")
    return device_similarity(ds, reported_repeats(paths))


def write_heatmap(matrix: SimilarityMatrix, path: str | Path) -> None:
    from .plotting import pyplot, save_figure

    plt = pyplot()
    n = len(matrix.hardware)
    fig, ax = plt.subplots(figsize=(1.2 * n + 2.5, 1.1 * n + 1.5))
    image = ax.imshow(np.ma.masked_invalid(matrix.agreement), vmin=0.5, vmax=1.0, cmap="viridis")
    ax.set_xticks(range(n), matrix.hardware, rotation=45, ha="right")
    ax.set_yticks(range(n), matrix.hardware)
    for i in range(n):
        for j in range(n):
            v = matrix.agreement[i, j]
            ax.text(j, i, "-" if not np.isfinite(v) else f"{v:.2f}{'*' if i == j else ''}", ha="center",
                    va="center", color="white" if np.isfinite(v) and v < 0.8 else "black", fontsize=9)
    fig.colorbar(image, ax=ax, label="pairwise-order agreement")
    ax.set_title("device similarity on shared programs (* = noise ceiling)", fontsize=10)
    fig.tight_layout()
    save_figure(fig, path)


def write_json(matrix: SimilarityMatrix, path: str | Path) -> None:
    atomic_write_text(Path(path), json.dumps(matrix.to_json(), indent=1))
