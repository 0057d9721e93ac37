"""`crosstune demo`: the main job on a fresh machine. On the bundled dataset, train the cross-feature
model on all hardware configurations but one, evaluate it on the held-out one next to the baselines,
print the table and write an HTML report with a plot."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from .dataset import load_dataset
from .errors import CrosstuneError
from .experiment import SplitOptions, compare_models
from .report import LABELS, headline
from .reporting import write_json
from .tables import format_table
from .train import TrainConfig

DEMO_MODELS = ("crossfeat", "crossfeat-nohw", "tlp", "xgb")
DEFAULT_HELD_OUT = "local-avx512-2c"
COLUMNS = ("pca", "pca_mean", "top1", "top5", "top10", "top1_mean", "peak@5")
TERMINAL_LEGEND = ("PCA: pairs ordered right (0.5 = coin toss); top-k (Σ): Σ best / Σ best of the top k picks "
                   "(1 = perfect); top-1 mean: per-task average; random: the exact random floor")


def run_demo(out: str | Path = "crosstune-demo", held_out: str | None = None, epochs: int = 6, seed: int = 0,
             dataset: str | None = None, progress: bool = True, print_fn=print, command: str | None = None) -> dict:
    from . import __version__
    from .data import bundled_dataset
    from .report import write_report

    started = time.perf_counter()
    out = Path(out)
    path = Path(dataset) if dataset else bundled_dataset()
    ds = load_dataset([str(path)])
    held_out = held_out or (DEFAULT_HELD_OUT if DEFAULT_HELD_OUT in ds.hardware_names else ds.hardware_names[-1])
    if held_out not in ds.hardware_names:  # before the plan is printed or anything is written
        raise CrosstuneError(f"--held-out {held_out}: not in the dataset; choose one of {', '.join(ds.hardware_names)}")
    if len(ds.hardware_names) < 2:
        raise CrosstuneError(f"{path}: holds one hardware configuration; the demo needs two or more")
    trained_on = [h for h in ds.hardware_names if h != held_out]
    from .report import shown_path

    label = "the bundled dataset (local-cpu)" if dataset is None else shown_path(dataset)
    print_fn(f"dataset {label}: {len(ds)} programs of {len(ds.task_ids)} tasks on {', '.join(ds.hardware_names)}")
    print_fn(f"training on {', '.join(trained_on)}; testing on unseen {held_out}")

    def config_for(kind: str) -> TrainConfig:
        return TrainConfig(epochs=epochs, seed=seed)  # each model's own learning rate

    comparison = compare_models(ds, DEMO_MODELS, SplitOptions("by-hardware", [held_out]), config_for, seed=seed,
                                progress=progress)
    rows = [{"model": kind, **{c: headline(result["overall"])[c] for c in COLUMNS},
             "train_seconds": round(comparison.timings[kind]["train_seconds"], 1)}
            for kind, result in comparison.results.items()]
    floor = headline(next(iter(comparison.results.values()))["overall"]["random"])
    rows.append({"model": "random", **{c: floor[c] for c in COLUMNS}})
    table = format_table(("model",) + tuple(LABELS[c] for c in COLUMNS) + ("train s",),
                         [[r["model"]] + [r[c] for c in COLUMNS] + [r.get("train_seconds", float("nan"))] for r in rows])
    print_fn(table)
    print_fn(TERMINAL_LEGEND)
    per_operator = []
    for kind, result in comparison.results.items():
        for op, m in sorted(result["per_operator"].items()):
            view = headline(m)
            per_operator.append({"operator": op, "model": kind, "pca": view["pca"], "top1": view["top1"],
                                 "top5": view["top5"], "random_top1": headline(m["random"])["top1"]})
    split = comparison.split
    train_rows = split.train
    summary = {
        "dataset": str(path) if dataset else "bundled local-cpu", "dataset_label": label, "held_out": held_out,
        "trained_on": trained_on, "split": split.description,
        "counts": {"train_records": int(len(train_rows)), "test_records": int(len(split.test)),
                   "tasks": int(len(np.unique(ds.task[split.test])))},
        "rows": rows, "per_operator": per_operator, "epochs": epochs, "seed": seed,
        "command": command or _command(held_out, epochs, seed, dataset), "crosstune_version": __version__,
    }
    out.mkdir(parents=True, exist_ok=True)
    _plot(rows, out / "demo-models.png", held_out)
    summary["seconds"] = round(time.perf_counter() - started, 1)
    write_json(out / "demo.json", summary)
    page = write_report(out)
    print_fn(f"report: {page} ({summary['seconds']:.0f} s in all)")
    return summary


def _command(held_out: str, epochs: int, seed: int, dataset: str | None) -> str:
    parts = ["crosstune demo", f"--held-out {held_out}", f"--epochs {epochs}", f"--seed {seed}"]
    if dataset:
        parts.append(f"--dataset {dataset}")
    return " ".join(parts)


def _plot(rows: list[dict], path: Path, held_out: str) -> None:
    plot_models(rows, path, f"Transfer to unseen hardware: {held_out}")


def plot_models(rows: list[dict], path: Path, title: str) -> None:
    """Grouped bars of PCA, top-1 (Σ) and top-5 (Σ) per model (the random floor is one of the rows)."""
    from .plotting import pyplot, save_figure

    plt = pyplot()

    metrics = [m for m in ("pca", "top1", "top5") if all(r.get(m) is not None for r in rows)]
    fig, ax = plt.subplots(figsize=(8, 4))
    x = np.arange(len(rows))
    width = 0.8 / max(1, len(metrics))
    for i, metric in enumerate(metrics):
        ax.bar(x + i * width, [r[metric] for r in rows], width, label=LABELS[metric])
    ax.set_xticks(x + width * (len(metrics) - 1) / 2, [r["model"] for r in rows])
    ax.set_ylabel("score on the held-out records (1 = perfect)")
    ax.set_xlabel("cost model")
    ax.set_ylim(0.0, 1.05)
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    save_figure(fig, path)
