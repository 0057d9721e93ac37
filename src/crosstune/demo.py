"""`crosstune demo`: the main job on a fresh machine. On the bundled dataset, train the cross-feature
model on all hardware configurations but one, evaluate it on the held-out one next to the baselines,
print the table and write an HTML report with plots."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from .dataset import load_dataset
from .experiment import SplitOptions, compare_models
from .reporting import write_json
from .tables import format_table
from .train import TrainConfig

DEMO_MODELS = ("crossfeat", "crossfeat-nohw", "tlp", "xgb")
DEFAULT_HELD_OUT = "local-avx512-2c"


def run_demo(out: str | Path = "crosstune-demo", held_out: str | None = None, epochs: int = 6, seed: int = 0,
             dataset: str | None = None, progress: bool = True, print_fn=print) -> dict:
    from .data import bundled_dataset
    from .report import write_report

    started = time.perf_counter()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    path = Path(dataset) if dataset else bundled_dataset()
    ds = load_dataset([str(path)])
    held_out = held_out or (DEFAULT_HELD_OUT if DEFAULT_HELD_OUT in ds.hardware_names else ds.hardware_names[-1])
    print_fn(f"dataset {path}: {len(ds)} programs of {len(ds.task_ids)} tasks on {', '.join(ds.hardware_names)}")
    print_fn(f"training on {', '.join(h for h in ds.hardware_names if h != held_out)}; testing on unseen {held_out}")

    def config_for(kind: str) -> TrainConfig:
        return TrainConfig(epochs=epochs, seed=seed)  # each model's own learning rate

    comparison = compare_models(ds, DEMO_MODELS, SplitOptions("by-hardware", [held_out]), config_for, seed=seed,
                                progress=progress)
    rows = []
    for kind, result in comparison.results.items():
        o = result["overall"]
        rows.append({"model": kind, "pca": o["pca"], "top1": o["top1"], "top5": o["top5"], "top10": o["top10"],
                     "peak@5": o["peak@5"], "train_seconds": comparison.timings[kind]["train_seconds"]})
    floor = next(iter(comparison.results.values()))["overall"]["random"]
    rows.append({"model": "random", "pca": floor["pca"], "top1": floor["top1"], "top5": floor["top5"],
                 "top10": floor["top10"], "peak@5": floor["peak@5"], "train_seconds": 0.0})
    table = format_table(("model", "PCA", "top-1", "top-5", "top-10", "peak@5", "train s"),
                         [[r["model"], r["pca"], r["top1"], r["top5"], r["top10"], r["peak@5"], r["train_seconds"]] for r in rows])
    print_fn(table)
    per_operator = [{"operator": op, "model": kind, "pca": m["pca"], "top1": m["top1"], "top5": m["top5"],
                     "random_top1": m["random"]["top1"]}
                    for kind, result in comparison.results.items() for op, m in sorted(result["per_operator"].items())]
    summary = {"dataset": str(path), "held_out": held_out, "split": comparison.split.description, "rows": rows,
               "per_operator": per_operator, "table": table, "seconds": time.perf_counter() - started}
    write_json(out / "demo.json", summary)
    _plot(rows, out / "demo-models.png", held_out)
    page = write_report(out)
    print_fn(f"report: {page} ({summary['seconds']:.0f} s in all)")
    return summary


def _plot(rows: list[dict], path: Path, held_out: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = ("pca", "top1", "top5")
    fig, ax = plt.subplots(figsize=(8, 4))
    x = np.arange(len(rows))
    width = 0.8 / len(metrics)
    for i, metric in enumerate(metrics):
        ax.bar(x + i * width, [r[metric] for r in rows], width, label={"pca": "PCA", "top1": "top-1", "top5": "top-5"}[metric])
    ax.set_xticks(x + width, [r["model"] for r in rows])
    ax.set_ylabel("score on the unseen configuration (1 = perfect)")
    ax.set_xlabel("cost model")
    ax.set_ylim(0.0, 1.05)
    ax.set_title(f"Transfer to unseen hardware: {held_out}")
    ax.grid(axis="y", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
