"""Train, evaluate and compare cost models on honest splits (the library behind train/eval/compare).

A trained model directory also records which records it learned from (``train_records.json``), so
that ``evaluate`` leaves them out by default: a few-shot model is never scored on its own fine-tuning
programs.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from .dataset import Dataset, load_dataset
from .errors import CrosstuneError
from .metrics import evaluate
from .models import CostModel, FitOptions, create_model, load_model
from .models.base import CHECKPOINT_DIRS, check_model_out
from .splits import Split, holdout_groups, load_network_map, make_split, sample_per_group
from .train import TrainConfig

TRAIN_RECORDS = "train_records.json"
VALID_FRACTION = 0.1


@dataclass
class SplitOptions:
    kind: str = "by-hardware"
    test_hardware: list[str] = field(default_factory=list)
    test_fraction: float = 0.2
    test_operators: list[str] = field(default_factory=list)
    network_map: str | None = None
    test_networks: list[str] = field(default_factory=list)
    target_fraction: float = 0.0  # few-shot: this share of each test group is given to training

    def make(self, ds: Dataset, seed: int) -> tuple[Split, np.ndarray]:
        """(split, few-shot records taken from the test side)."""
        split = make_split(ds, self.kind, seed=seed, test_fraction=self.test_fraction,
                           test_hardware=self.test_hardware or None, test_operators=self.test_operators or None,
                           network_map=load_network_map(self.network_map) if self.network_map else None,
                           test_networks=self.test_networks or None)
        few_shot = np.array([], dtype=np.int64)
        if self.target_fraction:
            if not 0.0 < self.target_fraction < 1.0:
                raise CrosstuneError(f"--target-fraction must be in (0, 1), not {self.target_fraction}")
            few_shot = sample_per_group(ds, split.test, self.target_fraction, seed)
            split = Split(split.kind, split.train, np.setdiff1d(split.test, few_shot),
                          f"{split.description}; {self.target_fraction:.0%} of each test task given for fine-tuning")
        return split, few_shot


@dataclass
class TrainOutcome:
    model: CostModel
    split: Split
    few_shot: np.ndarray
    seconds: float
    samples_per_second: float
    history: dict


# Fine-tuning passes over this many samples when the few-shot set is large (see _fine_tune_options).
FINE_TUNE_SAMPLES = 100_000


def _fine_tune_options(model: CostModel, records: int, checkpoint: Path | None, resume: bool,
                       progress: bool) -> FitOptions:
    # The few-shot set is small (5% of the K80 -> V100 target is ~9 batches an epoch), so fine-tuning
    # needs many short epochs to take enough steps; a lower rate keeps what pre-training learned, and
    # best-epoch selection on held-out target tasks stops it overfitting. Measured, crossfeat, 3 seeds:
    # 20 epochs at lr/2 gave PCA 0.756 / top-5 0.962 against 0.741 / 0.955 for epochs//3 at lr/4.
    # A large set (hundreds of programs of every task) needs no more passes than pre-training took:
    # 20 epochs of it would cost more than pre-training itself, so the 20 shrink to ~FINE_TUNE_SAMPLES.
    # The schedule is this fit's option: the model's own train config keeps describing pre-training.
    cfg = model.train_config
    epochs = max(cfg.epochs, min(20, -(-FINE_TUNE_SAMPLES // max(1, records))))
    return FitOptions(progress=progress, checkpoint_dir=checkpoint, resume=resume, warm_start=True,
                      epochs=epochs, lr=cfg.lr / 2)


def fine_tune(model: CostModel, ds: Dataset, few_shot: np.ndarray, seed: int, checkpoint: Path | None = None,
              resume: bool = False, progress: bool = True) -> dict:
    """Continue training ``model`` (one that warm-starts) on the ``few_shot`` records of ``ds``, with
    best-epoch selection on held-out groups of them; returns the fit's history."""
    rows, valid = holdout_groups(ds, few_shot, VALID_FRACTION, seed)
    return model.fit(ds.select(rows), ds.select(valid if len(valid) else rows),
                     _fine_tune_options(model, len(rows), checkpoint, resume, progress))


def fit_model(kind: str, train: Dataset, cfg: TrainConfig, progress: bool = False) -> tuple[CostModel, float]:
    """Train a fresh model on all of ``train`` (validating on held-out groups of it); (model, seconds)."""
    model = create_model(kind, cfg)
    fit_rows, valid_rows = holdout_groups(train, np.arange(len(train)), VALID_FRACTION, cfg.seed)
    started = time.perf_counter()
    model.fit(train.select(fit_rows), train.select(valid_rows), FitOptions(progress=progress))
    return model, time.perf_counter() - started


def train_on_split(ds: Dataset, kind: str, split: Split, few_shot: np.ndarray, cfg: TrainConfig,
                   out: Path | None = None, resume: bool = False, progress: bool = True) -> TrainOutcome:
    """Train ``kind`` on ``split.train`` (validating on held-out groups of it); with few-shot records,
    models that fine-tune (the neural ones) are then fine-tuned on them, the others are trained on
    both. With ``out``, checkpoints go to ``out/checkpoint*`` while training and the finished model
    directory replaces them."""
    if out is not None:
        check_model_out(Path(out))  # before hours of training, not after
    model = create_model(kind, cfg)
    fit_rows, valid_rows = holdout_groups(ds, split.train, VALID_FRACTION, cfg.seed)
    started = time.perf_counter()
    pretrain, fine_tune_dir = (Path(out) / name for name in CHECKPOINT_DIRS) if out is not None else (None, None)
    fine_tunes = model.warm_starts
    if len(few_shot) and not fine_tunes:
        rows = np.union1d(fit_rows, few_shot)
        history = model.fit(ds.select(rows), ds.select(valid_rows),
                            FitOptions(progress=progress, few_shot=np.isin(rows, few_shot)))
    else:
        history = model.fit(ds.select(fit_rows), ds.select(valid_rows),
                             FitOptions(progress=progress, checkpoint_dir=pretrain, resume=resume))
    if len(few_shot) and fine_tunes:
        history = {"pretrain": history, "fine_tune": fine_tune(model, ds, few_shot, cfg.seed, fine_tune_dir, resume,
                                                               progress)}
    seconds = time.perf_counter() - started
    epochs = len(history.get("pretrain", history).get("epochs", [])) or 1
    trained = int(ds.valid[fit_rows].sum()) * epochs
    outcome = TrainOutcome(model, split, few_shot, seconds, trained / seconds if seconds else 0.0, history)
    if out is not None:
        save_trained(outcome, ds, Path(out))
    return outcome


def save_trained(outcome: TrainOutcome, ds: Dataset, out: Path) -> None:
    """The model directory, with the ids of the records it learned from, written as one unit."""
    trained_on = np.union1d(outcome.split.train, outcome.few_shot)
    outcome.model.save(out, extra_files={TRAIN_RECORDS: json.dumps({
        "split": outcome.split.kind, "description": outcome.split.description,
        "record_ids": [f"{int(r):016x}" for r in ds.record_id[trained_on]],
        "train_seconds": outcome.seconds, "samples_per_second": outcome.samples_per_second,
    })})


def trained_record_ids(model_dir: Path) -> set[int]:
    path = Path(model_dir) / TRAIN_RECORDS
    if not path.is_file():
        return set()
    try:
        return {int(r, 16) for r in json.loads(path.read_text())["record_ids"]}
    except (OSError, ValueError, KeyError, json.JSONDecodeError) as err:
        raise CrosstuneError(f"{path}: corrupt ({err})") from None


def evaluate_model_dir(model_dir: str | Path, datasets: Sequence[str], hardware: Sequence[str] | None = None,
                       include_training_records: bool = False, progress: bool = False) -> tuple[dict, dict]:
    """Metrics of a saved model on ``datasets`` (optionally some hardware only); records the model
    was trained on are left out unless asked. Returns (metrics, notes)."""
    model = load_model(model_dir)
    ds = load_dataset(datasets, hardware=list(hardware) if hardware else None)
    notes = {"records": len(ds)}
    if not include_training_records:
        keep = ~trained_record_mask(ds, Path(model_dir))
        if not keep.all():
            notes["left_out_training_records"] = int((~keep).sum())
            ds = ds.select(keep)
    if len(ds) == 0 or not ds.valid.any():
        raise CrosstuneError("nothing to evaluate: no valid records left (all were training records or failed)")
    return evaluate_model(model, ds, notes, progress)


def trained_record_mask(ds: Dataset, model_dir: Path) -> np.ndarray:
    """True at the records of ``ds`` that the model in ``model_dir`` was trained on."""
    seen = trained_record_ids(model_dir)
    if not seen:
        return np.zeros(len(ds), dtype=bool)
    return np.isin(ds.record_id, np.fromiter(seen, dtype=np.uint64, count=len(seen)))


PREDICT_CHUNK = 32768


def predict_in_chunks(model: CostModel, ds: Dataset, progress: bool = False) -> np.ndarray:
    """``model.predict(ds)`` in slices, with a progress bar on sets big enough to take a while (a
    program's score does not depend on the other programs predicted with it)."""
    if len(ds) <= PREDICT_CHUNK:
        return model.predict(ds)
    from tqdm import tqdm

    scores = []
    with tqdm(total=len(ds), unit=" programs", unit_scale=True, desc="predicting", disable=not progress,
              mininterval=0.5) as bar:
        for start in range(0, len(ds), PREDICT_CHUNK):
            rows = np.arange(start, min(start + PREDICT_CHUNK, len(ds)))
            scores.append(np.asarray(model.predict(ds.select(rows))))
            bar.update(len(rows))
    return np.concatenate(scores)


def evaluate_model(model: CostModel, ds: Dataset, notes: dict | None = None,
                   progress: bool = False) -> tuple[dict, dict]:
    notes = dict(notes or {})
    from .features import featurize

    cropped = model.cropped(ds)
    if cropped.get("cropped_programs"):
        notes[f"programs_cropped_to_{cropped['max_steps']}_steps"] = cropped["cropped_programs"]

    normalizer = getattr(model, "normalizer", None)
    if normalizer is not None:
        feats = featurize(ds, normalizer)
        if feats.unseen_kind_tokens:
            notes["tokens_of_kinds_never_seen_in_training"] = feats.unseen_kind_tokens
        if feats.nonfinite_values:
            notes["non_finite_feature_values_zeroed"] = feats.nonfinite_values
    scores = predict_in_chunks(model, ds, progress)
    return evaluate(ds, scores), notes


@dataclass
class Comparison:
    split: Split
    results: dict[str, dict] = field(default_factory=dict)  # model kind -> metrics
    timings: dict[str, dict] = field(default_factory=dict)


def compare_models(ds: Dataset, kinds: Sequence[str], split_options: SplitOptions,
                   config_for: Callable[[str], TrainConfig], seed: int = 0, progress: bool = True,
                   out: Path | None = None) -> Comparison:
    """Train every model kind on the same split and evaluate all of them on the same test records."""
    split, few_shot = split_options.make(ds, seed)
    test = ds.select(split.test)
    comparison = Comparison(split)
    for kind in kinds:
        cfg = replace(config_for(kind), seed=seed)
        outcome = train_on_split(ds, kind, split, few_shot, cfg, out / kind if out else None, progress=progress)
        started = time.perf_counter()
        scores = outcome.model.predict(test)
        predict_s = time.perf_counter() - started
        comparison.results[kind] = evaluate(test, scores)
        comparison.timings[kind] = {"train_seconds": outcome.seconds, "train_samples_per_second": outcome.samples_per_second,
                                    "predict_programs_per_second": len(test) / predict_s if predict_s else 0.0}
    return comparison
