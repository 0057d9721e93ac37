"""The few-shot study: how fast each model catches up with an unseen device's own ranking as the user
measures k programs of every task on it.

One device is held out. Per seed, each of its (task, hardware) groups is put in a seeded order; the
last tenth of every group is the common test set of every point, and a point "k programs per task"
gives the model the first k of the rest (nested samples: 16 are the first 16 of 64). "all" gives the
whole rest, so the curve ends at the within-device 90/10 ceiling; "0" is zero-shot transfer. Models that
fine-tune (the neural ones) are pre-trained once per seed on the other devices and fine-tuned from that
for every point; the others train once per point on the other devices plus the sample (xgb weighs the
sample up). Writes few-shot-study.json (every point of every seed, as it finishes, so a stopped study
keeps them and ``--resume`` continues), few-shot-study.csv (mean ± std per model and point) and
few-shot-study.png (PCA and Σ top-1 against measured programs per task).
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from .dataset import Dataset, load_dataset
from .errors import CrosstuneError
from .experiment import fine_tune, predict_in_chunks, train_on_split
from .metrics import evaluate
from .models import CostModel, create_model, load_model
from .plotting import pyplot, save_figure
from .reporting import write_json
from .splits import Split, TargetDraw, draw_target, make_split
from .studies import write_csv
from .tables import format_table
from .train import TrainConfig

TEST_SHARE = 0.1  # of each task of the held-out device: the test records of every point
DEFAULT_SHOTS = "0,16,64,256,all"
METRICS = ("pca", "pca_mean", "top1", "top5", "top10", "top1_mean", "top5_mean")
FLOORS = ("top1", "top5", "top10", "top1_mean")
JSON_NAME, CSV_NAME, PNG_NAME = "few-shot-study.json", "few-shot-study.csv", "few-shot-study.png"


@dataclass(frozen=True)
class Shot:
    """One point of the curve: ``programs`` measured programs per task, a ``fraction`` of every task,
    or (both None) all of the task's records outside the test set."""

    label: str
    programs: int | None = None
    fraction: float | None = None

    def rows(self, draw: TargetDraw) -> np.ndarray:
        if self.programs is not None:
            return draw.per_task(self.programs)
        if self.fraction is not None:
            return draw.share(self.fraction)
        return draw.per_task(int(draw.pool.max(initial=0)))


def parse_shots(text: str) -> list[Shot]:
    """``0,16,64,256,1%,5%,all``: programs per task, percentages of each task, or all (the ceiling)."""
    shots = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        if item == "all":
            shots.append(Shot("all"))
        elif item.endswith("%"):
            try:
                percent = float(item[:-1])
            except ValueError:
                percent = float("nan")
            if not 0.0 < percent < 100.0:
                raise CrosstuneError(f"--shots: {item!r} is not a percentage in (0, 100)")
            shots.append(Shot(f"{percent:g}%", fraction=percent / 100.0))
        elif item.isdigit():
            shots.append(Shot(str(int(item)), programs=int(item)))
        else:
            raise CrosstuneError(f"--shots: {item!r} is not a number of programs per task, a percentage or 'all'")
    labels = [shot.label for shot in shots]
    if not shots or len(set(labels)) < len(labels):
        raise CrosstuneError(f"--shots needs distinct points, got {text!r}")
    return shots


def _config_json(cfg: TrainConfig) -> dict:
    """What must match for an earlier run's points to be reused (not the seed or the device run on)."""
    return {key: value for key, value in asdict(cfg).items() if key not in ("seed", "device")}


def _trained(ds: Dataset, kind: str, split: Split, draw: TargetDraw, shots: Sequence[Shot], cfg: TrainConfig,
             progress: bool) -> Iterator[tuple[Shot, np.ndarray, CostModel, float]]:
    """(shot, its sample, the model trained with it, training seconds) for every shot."""
    if not create_model(kind, cfg).warm_starts:
        for shot in shots:
            sample = shot.rows(draw)
            outcome = train_on_split(ds, kind, split, sample, cfg, progress=progress)
            yield shot, sample, outcome.model, outcome.seconds
        return
    # Pre-train once on the other devices; every point fine-tunes a fresh copy of that model.
    pretrained = train_on_split(ds, kind, split, np.array([], dtype=np.int64), cfg, progress=progress)
    with tempfile.TemporaryDirectory(prefix="crosstune-fewshot-") as tmp:
        pretrained.model.save(Path(tmp) / "model")
        for shot in shots:
            sample = shot.rows(draw)
            if len(sample) == 0:
                yield shot, sample, pretrained.model, pretrained.seconds
                continue
            model = load_model(Path(tmp) / "model")
            started = time.perf_counter()
            fine_tune(model, ds, sample, cfg.seed, progress=progress)
            yield shot, sample, model, pretrained.seconds + time.perf_counter() - started


def _point(seed: int, kind: str, shot: Shot, sample: np.ndarray, draw: TargetDraw, overall: dict,
           seconds: float) -> dict:
    starts = np.flatnonzero(draw.rank == 0)  # each group's first row
    tasks = len(starts)
    capped = int(np.count_nonzero(draw.pool[starts] < shot.programs)) if shot.programs is not None else 0
    return {"seed": seed, "model": kind, "shot": shot.label, "programs_per_task": len(sample) / tasks,
            "given_records": int(len(sample)), "tasks": tasks, "tasks_capped": capped,
            "test_records": int(len(draw.test)), "train_seconds": seconds,
            **{m: overall[m] for m in METRICS}, **{f"floor_{m}": overall["random"][m] for m in FLOORS}}


def _earlier_points(path: Path, settings: dict) -> dict:
    """(seed, model, shot) -> point saved by an earlier run with the same settings."""
    if not path.is_file():
        return {}
    try:
        earlier = json.loads(path.read_text())
        same = (earlier["test_hardware"] == settings["test_hardware"] and earlier["test_share"] == settings["test_share"]
                and all(earlier["configs"].get(kind, config) == config for kind, config in settings["configs"].items()))
        points = earlier["points"]
    except (ValueError, KeyError, TypeError):
        raise CrosstuneError(f"{path} is not a few-shot-study result; remove it or use another --out") from None
    if not same:
        raise CrosstuneError(f"{path} comes from a different study (test hardware or a model's training settings "
                             "differ); --resume needs the same settings")
    return {(p["seed"], p["model"], p["shot"]): p for p in points}


def summarize(points: list[dict], kinds: Sequence[str], shots: Sequence[Shot]) -> list[dict]:
    """Mean ± std over seeds per (model, shot), in the order asked."""
    rows = []
    for kind in kinds:
        for shot in shots:
            mine = [p for p in points if p["model"] == kind and p["shot"] == shot.label]
            if not mine:
                continue
            row = {"model": kind, "shot": shot.label, "seeds": len(mine),
                   "programs_per_task": float(np.mean([p["programs_per_task"] for p in mine]))}
            for m in METRICS:
                values = np.array([p[m] for p in mine], dtype=float)
                row[m], row[f"{m}_std"] = float(values.mean()), float(values.std())
            for m in FLOORS:
                row[f"floor_{m}"] = float(np.mean([p[f"floor_{m}"] for p in mine]))
            rows.append(row)
    return rows


def few_shot_study(datasets: Sequence[str], test_hardware: str, kinds: Sequence[str], shots: Sequence[Shot],
                   out: Path, config_for: Callable[[str], TrainConfig], seeds: int = 1, resume: bool = False,
                   command: str | None = None, progress: bool = False, print_fn=print) -> dict:
    if seeds < 1:
        raise CrosstuneError("--seeds must be at least 1")
    configs = {kind: config_for(kind) for kind in kinds}
    for cfg in configs.values():
        cfg.check()
    ds = load_dataset(datasets)
    base_seed = configs[kinds[0]].seed
    seed_list = list(range(base_seed, base_seed + seeds))
    settings = {"test_hardware": test_hardware, "test_share": TEST_SHARE,
                "configs": {kind: _config_json(cfg) for kind, cfg in configs.items()}}
    out.mkdir(parents=True, exist_ok=True)
    done = _earlier_points(out / JSON_NAME, settings) if resume else {}
    if done:
        print_fn(f"reusing {len(done)} points of the earlier run")
    points = dict(done)
    started = time.perf_counter()

    def save(complete: bool) -> dict:
        chosen = [points[key] for key in sorted(points, key=lambda k: (k[0], kinds.index(k[1]) if k[1] in kinds else
                                                                       len(kinds), k[2]))]
        data = {**settings, "models": list(kinds), "shots": [s.label for s in shots], "seeds": seed_list,
                "complete": complete, "command": command, "points": chosen,
                "summary": summarize(chosen, kinds, shots), "seconds": time.perf_counter() - started}
        write_json(out / JSON_NAME, data)
        write_csv(out / CSV_NAME, data["summary"])
        plot_few_shot(data["summary"], out / PNG_NAME, test_hardware)
        return data

    for seed in seed_list:
        split = make_split(ds, "by-hardware", seed=seed, test_hardware=[test_hardware])
        draw = draw_target(ds, split.test, TEST_SHARE, seed)
        test = ds.select(draw.test)
        for kind in kinds:
            todo = [shot for shot in shots if (seed, kind, shot.label) not in points]
            if not todo:
                continue
            for shot, sample, model, seconds in _trained(ds, kind, split, draw, todo, replace(configs[kind], seed=seed),
                                                         progress):
                overall = evaluate(test, predict_in_chunks(model, test))["overall"]
                point = _point(seed, kind, shot, sample, draw, overall, seconds)
                points[(seed, kind, shot.label)] = point
                save(complete=False)  # a stopped study keeps every finished point
                print_fn(f"seed {seed} {kind:14s} {shot.label:>5s}: {point['programs_per_task']:6.1f} programs/task, "
                         f"PCA {point['pca']:.4f}, top-1 (Σ) {point['top1']:.4f} (floor {point['floor_top1']:.4f}), "
                         f"{seconds:.0f} s")
    data = save(complete=True)
    print_fn(summary_table(data["summary"]))
    print_fn("top-k = TLP's Σ form (Σ best / Σ chosen over tasks); floor = its exact random floor on the same "
             f"test records ({TEST_SHARE:.0%} of each {test_hardware} task); top-1 mean = mean of per-task ratios")
    return data


def summary_table(rows: list[dict]) -> str:
    cells = [[r["model"], r["shot"], f"{r['programs_per_task']:.1f}", f"{r['pca']:.4f} ± {r['pca_std']:.4f}",
              f"{r['top1']:.4f} ± {r['top1_std']:.4f}", f"{r['top5']:.4f} ± {r['top5_std']:.4f}",
              f"{r['top1_mean']:.4f}", f"{r['floor_top1']:.4f} / {r['floor_top5']:.4f}", str(r["seeds"])]
             for r in rows]
    return format_table(("model", "shots", "programs/task", "PCA", "top-1 (Σ)", "top-5 (Σ)", "top-1 mean",
                         "floor top-1 / top-5 (Σ)", "seeds"), cells)


def plot_few_shot(rows: list[dict], path: Path, test_hardware: str) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for kind in dict.fromkeys(r["model"] for r in rows):
        mine = sorted((r for r in rows if r["model"] == kind), key=lambda r: r["programs_per_task"])
        x = [r["programs_per_task"] for r in mine]
        for ax, metric in zip(axes, ("pca", "top1")):
            ax.errorbar(x, [r[metric] for r in mine], yerr=[r[f"{metric}_std"] for r in mine], marker="o",
                        capsize=3, label=kind)
    if rows:
        floor = float(np.mean([r["floor_top1"] for r in rows]))
        axes[1].axhline(floor, color="grey", linestyle=":", label=f"random floor ({floor:.3f})")
    ticks = sorted({round(r["programs_per_task"]) for r in rows})
    for ax, label in zip(axes, ("PCA", "top-1 (Σ)")):
        ax.set_xscale("symlog", linthresh=1)  # linear around 0 (zero-shot), logarithmic beyond
        if ticks:
            ax.set_xlim(-0.4, max(ticks) * 1.4 + 1)
            ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.set_xlabel("measured programs per task of the held-out device")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    axes[1].legend(fontsize=8)
    fig.suptitle(f"Few-shot on {test_hardware}: scored on the same {TEST_SHARE:.0%} of each task; "
                 "the rightmost point is the within-device 90/10 ceiling", fontsize=10)
    fig.tight_layout()
    save_figure(fig, path)
