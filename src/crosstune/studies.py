"""The pruning study and the split-strategy study: tables (CSV/JSON) and plots (PNG) in a study dir."""

from __future__ import annotations

import csv
import io
import json
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from .atomic import write_text
from .dataset import Dataset, load_dataset
from .errors import CrosstuneError
from .experiment import fit_model
from .metrics import evaluate
from .prune import STRATEGIES, apply_pruning, check_request, program_keys, prune
from .reporting import write_json
from .splits import SPLIT_KINDS, load_network_map, make_split
from .plotting import pyplot, save_figure
from .tables import format_table
from .train import TrainConfig

PCA_TOLERANCE = 0.005  # "within 0.005 PCA of full data"


def _train_and_score(kind: str, train: Dataset, test: Dataset, cfg: TrainConfig) -> dict:
    model, seconds = fit_model(kind, train, cfg)
    result = evaluate(test, model.predict(test))["overall"]
    # top1/top5: TLP's sum form (the headline), with its exact random floor; the per-task mean beside it.
    return {"pca": result["pca"], "top1": result["top1"], "top5": result["top5"], "top1_mean": result["top1_mean"],
            "top5_mean": result["top5_mean"], "train_seconds": seconds,
            "random_top1": result["random"]["top1"], "random_top5": result["random"]["top5"]}


def _mean_over_seeds(scores: list[dict]) -> dict:
    """Mean of every score over seeds, plus the spread of PCA (the figure the study's verdict rests on)."""
    mean = {key: float(np.mean([s[key] for s in scores])) for key in scores[0]}
    mean["pca_std"] = float(np.std([s["pca"] for s in scores]))
    return mean


def prune_study(datasets: Sequence[str], test_hardware: Sequence[str], model_kind: str, keeps: Sequence[float],
                out: Path, strategies: Sequence[str] | None = None, cfg: TrainConfig | None = None,
                seeds: int = 1, resume: bool = False, redo: Sequence[str] = (), print_fn=print) -> dict:
    """Train on each pruned training part, evaluate on the untouched test part (unseen hardware).

    With ``seeds`` > 1 every point (full data included) is the mean over that many pruning and
    training seeds: a single seed's PCA moves by about as much as the 0.005 PCA tolerance.
    ``resume`` reuses the points an earlier run of the same study (same model, test hardware,
    training records, seeds and epochs) saved in ``out``, except those of the strategies in ``redo``."""
    cfg = cfg or TrainConfig()
    strategies = list(strategies or STRATEGIES)
    if seeds < 1:
        raise CrosstuneError("--seeds must be at least 1")
    ds = load_dataset(datasets)
    split = make_split(ds, "by-hardware", test_hardware=list(test_hardware), seed=cfg.seed)
    train, test = ds.select(split.train), ds.select(split.test)
    for strategy in strategies:  # every request checked before any work
        for keep in keeps:
            check_request(strategy, keep, len(train))
    out.mkdir(parents=True, exist_ok=True)
    seed_list = [cfg.seed + i for i in range(seeds)]
    settings = {"model": model_kind, "test_hardware": list(test_hardware), "seeds": seed_list,
                "epochs": cfg.epochs, "train_records": len(train)}
    done = _finished_points(out / "prune-study.json", settings, redo) if resume else {}
    started = time.perf_counter()
    if ("full", 1.0) in done:
        full = {k: v for k, v in done[("full", 1.0)].items() if k not in ("strategy", "keep", "kept_fraction", "records")}
    else:
        full = _mean_over_seeds([_train_and_score(model_kind, train, test, replace(cfg, seed=s)) for s in seed_list])
    print_fn(f"full data ({len(train)} records, {seeds} seed(s)): PCA {full['pca']:.4f} ± {full['pca_std']:.4f}, "
             f"top-5 {full['top5']:.4f} (random {full['random_top5']:.4f}), trained in {full['train_seconds']:.0f} s")
    rows = [{"strategy": "full", "keep": 1.0, "kept_fraction": 1.0, "records": len(train), **full}]
    for strategy in strategies:
        for keep in sorted(k for k in keeps if k < 1.0):
            if (strategy, keep) in done:
                rows.append(done[(strategy, keep)])
                print_fn(f"{strategy:16s} keep {keep:.2f}: reused from the earlier run")
                continue
            kept, scores = [], []
            for seed in seed_list:
                pruning = prune(train, strategy, keep, seed)
                kept.append(pruning.kept)
                scores.append(_train_and_score(model_kind, apply_pruning(train, pruning), test, replace(cfg, seed=seed)))
            score = _mean_over_seeds(scores)
            records = float(np.mean(kept))
            rows.append({"strategy": strategy, "keep": keep, "kept_fraction": records / len(train),
                         "records": round(records), **score})
            print_fn(f"{strategy:16s} keep {keep:.2f}: {round(records)} records, PCA {score['pca']:.4f} ± "
                     f"{score['pca_std']:.4f}, top-5 {score['top5']:.4f}, {score['train_seconds']:.0f} s")
            # a study cut short keeps the points it finished (and --resume continues from them)
            write_csv(out / "prune-study.csv", rows)
            write_json(out / "prune-study.json", {**settings, "complete": False, "rows": rows})
    best = best_reduction(rows, full["pca"])
    summary = {**settings, "complete": True, "full": full, "rows": rows, "best": best,
               "seconds": time.perf_counter() - started}
    write_csv(out / "prune-study.csv", rows)
    write_json(out / "prune-study.json", summary)
    plot_prune_study(rows, full, out / "prune-study.png", model_kind, test_hardware)
    if best:
        print_fn(f"largest reduction within {PCA_TOLERANCE:g} PCA of full data: {best['strategy']} keeps "
                 f"{best['kept_fraction']:.0%} of the records ({1 - best['kept_fraction']:.0%} smaller), PCA "
                 f"{best['pca']:.4f} vs {full['pca']:.4f}; training time {best['train_seconds']:.0f} s vs "
                 f"{full['train_seconds']:.0f} s ({1 - best['train_seconds'] / full['train_seconds']:.0%} saved)")
    else:
        print_fn(f"no pruned training set stayed within {PCA_TOLERANCE:g} PCA of full data")
    print_fn(f"study took {summary['seconds']:.0f} s")
    return summary


def _finished_points(path: Path, settings: dict, redo: Sequence[str]) -> dict:
    """(strategy, keep) -> row saved by an earlier run of the same study; empty when there is none."""
    if not path.is_file():
        return {}
    try:
        earlier = json.loads(path.read_text())
        # model, test hardware and seeds must match; epochs and training records wherever the file says
        same = all(earlier.get(key, value if key in ("epochs", "train_records") else None) == value
                   for key, value in settings.items())
        rows = earlier["rows"] if same else []
    except (ValueError, KeyError, TypeError):
        raise CrosstuneError(f"{path} is not a prune-study result; remove it or use another --out") from None
    if not same:
        raise CrosstuneError(f"{path} comes from a different study (model, test hardware, seeds, epochs or training "
                             "records differ); --resume needs the same settings")
    redo = set(redo)
    return {(r["strategy"], float(r["keep"])): r for r in rows if r["strategy"] not in redo}


def best_reduction(rows: list[dict], full_pca: float) -> dict | None:
    good = [r for r in rows if r["strategy"] != "full" and r["pca"] >= full_pca - PCA_TOLERANCE]
    return min(good, key=lambda r: (r["kept_fraction"], -r["pca"])) if good else None


def write_csv(path: Path, rows: list[dict]) -> None:
    """``rows`` (dicts with the same keys) as a CSV file with a header, written atomically."""
    text = io.StringIO(newline="")
    if rows:
        writer = csv.DictWriter(text, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    write_text(path, text.getvalue())


def plot_prune_study(rows: list[dict], full: dict, path: Path, model_kind: str, test_hardware) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, metric, label in ((axes[0], "pca", "PCA on unseen hardware"), (axes[1], "top5", "top-5 (TLP's Σ form) on unseen hardware")):
        for strategy in sorted({r["strategy"] for r in rows if r["strategy"] != "full"}):
            points = sorted((r["kept_fraction"], r[metric]) for r in rows if r["strategy"] == strategy)
            points.append((1.0, full[metric]))
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=strategy)
        ax.axhline(full[metric], color="black", linestyle="--", label="full data")
        if metric == "pca":
            ax.axhline(full[metric] - PCA_TOLERANCE, color="grey", linestyle=":", label=f"full - {PCA_TOLERANCE:g} PCA")
        ax.set_xlabel("fraction of training records kept")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)  # the left panel also carries the tolerance line
    fig.suptitle(f"Pruning study: {model_kind}, test hardware {', '.join(test_hardware)}")
    fig.tight_layout()
    save_figure(fig, path)


def leakage(ds: Dataset, train: np.ndarray, test: np.ndarray) -> dict:
    keys = program_keys(ds, None)
    return {
        "workload_keys_on_both_sides": len(set(ds.task[train].tolist()) & set(ds.task[test].tolist())),
        "identical_programs_on_both_sides": int(np.isin(keys[test], keys[train]).sum()),
        "operators_on_both_sides": len(set(ds.op_kind[train].tolist()) & set(ds.op_kind[test].tolist())),
        "test_records": int(len(test)),
    }


def split_study(datasets: Sequence[str], model_kind: str, out: Path, test_hardware: Sequence[str] | None = None,
                network_map: str | None = None, cfg: TrainConfig | None = None, test_fraction: float = 0.2,
                print_fn=print) -> dict:
    cfg = cfg or TrainConfig()
    ds = load_dataset(datasets)
    kinds = [k for k in SPLIT_KINDS if k != "by-network" or network_map]
    if not test_hardware and len(ds.hardware_names) >= 2:
        test_hardware = [ds.hardware_names[-1]]
    if not test_hardware:
        kinds.remove("by-hardware")
    mapping = load_network_map(network_map) if network_map else None
    splits = {kind: make_split(ds, kind, seed=cfg.seed, test_fraction=test_fraction,
                               test_hardware=list(test_hardware or []) or None, network_map=mapping)
              for kind in kinds}  # all checked before training
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for kind, split in splits.items():
        score = _train_and_score(model_kind, ds.select(split.train), ds.select(split.test), replace(cfg))
        rows.append({"split": kind, "description": split.description, **score, **leakage(ds, split.train, split.test)})
        print_fn(f"{kind:12s} PCA {score['pca']:.4f} top-1 {score['top1']:.4f} (random {score['random_top1']:.4f}) "
                 f"top-5 {score['top5']:.4f} (random {score['random_top5']:.4f})")
    skipped = [] if network_map else ["by-network (no --network-map given)"]
    table = format_table(("split", "PCA", "top-1", "floor", "top-5", "floor", "shared tasks", "identical programs",
                          "shared operators"),
                         [[r["split"], r["pca"], r["top1"], r["random_top1"], r["top5"], r["random_top5"],
                           r["workload_keys_on_both_sides"],
                           r["identical_programs_on_both_sides"], r["operators_on_both_sides"]] for r in rows], digits=4)
    print_fn(table)
    print_fn("top-k: TLP's Σ form (Σ best / Σ best of the k picks); floor: its exact value for a random ranking")
    for note in skipped:
        print_fn(f"skipped: {note}")
    summary = {"model": model_kind, "rows": rows, "skipped": skipped}
    write_csv(out / "split-study.csv", rows)
    write_json(out / "split-study.json", summary)
    plot_split_study(rows, out / "split-study.png", model_kind)
    return summary


def plot_split_study(rows: list[dict], path: Path, model_kind: str) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4))
    metrics = ("pca", "top1", "top5")
    width = 0.8 / len(metrics)
    x = np.arange(len(rows))
    for i, metric in enumerate(metrics):
        ax.bar(x + i * width, [r[metric] for r in rows], width, label=metric.upper() if metric == "pca" else f"top-{metric[3:]} (Σ)")
    ax.set_xticks(x + width, [r["split"] for r in rows])
    ax.set_ylabel("score on the test side (1 = perfect)")
    ax.set_xlabel("split strategy")
    ax.set_ylim(0.0, 1.1)  # from 0: held-out operators can score far below 0.5; headroom for the legend
    ax.legend(loc="upper center", ncol=len(metrics))
    ax.grid(axis="y", alpha=0.3)
    ax.set_title(f"How the split flatters {model_kind}")
    fig.tight_layout()
    save_figure(fig, path)


def parse_keeps(text: str) -> list[float]:
    try:
        keeps = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise CrosstuneError(f"--keep must be a comma-separated list of fractions, not {text!r}") from None
    for keep in keeps:
        if not 0.0 < keep <= 1.0:
            raise CrosstuneError(f"--keep fractions must be in (0, 1], not {keep}")
    return keeps
