"""`xgb`: TenSet's tree baseline on crosstune tokens, with XGBoost's ranking objective.

Features: the first ``max_steps`` tokens flattened by position (kind, category, 8 arguments each),
position-independent per-kind aggregates (count and mean arguments of each primitive kind, so that a
step shifted by one position is still recognised), the operator vector and the hardware vector.
Trained with ``rank:pairwise`` grouped by (task, hardware), pairs drawn uniformly over each group
(``lambdarank_pair_method=mean``): XGBoost's default draws them from the top of each group only, which
on the roller-ansor K80 -> V100 split gave PCA 0.659 against 0.720 with two uniform pairs per program
(top-1 0.862 vs 0.915).
With validation records their PCA (the neural models' validation metric) is recorded in the history.
Early stopping on it is available (``--arch early_stopping_rounds=N``, the best round is kept) but off:
the validation tasks come from the training hardware, and their PCA peaks long before the trees stop
getting better on an unseen device. K80 -> V100 (docs/BENCHMARKS.md): 13 rounds kept with a patience of
30 gave PCA 0.693 and Σ top-1 0.352, all 300 rounds 0.715 and 0.809.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from ..atomic import staged_file
from ..dataset import Dataset
from ..errors import CrosstuneError
from ..features import Normalizer, featurize, kind_counts_and_means
from .base import CostModel, FitOptions, copied, saved_config_read

MODEL_FILE = "model.json"


@dataclass
class XGBConfig:
    max_steps: int = 40
    n_estimators: int = 300
    max_depth: int = 8
    learning_rate: float = 0.1
    subsample: float = 0.8
    pairs_per_program: int = 2
    # 0 = off (see the module's docstring); N = stop when validation PCA has not improved for N rounds
    # and keep the best round.
    early_stopping_rounds: int = 0
    seed: int = 0
    threads: int = 0  # 0 = all cores
    device: str = "cpu"  # XGBoost's own: cpu, cuda, cuda:N
    # Few-shot (records of the unseen device given with the others, `compare --target-fraction`): the
    # weight of each of their (task, hardware) groups. 0 = as much weight in all as the other records
    # together (with XGBoost 3's pair normalisation, where a group's pull grows with its size); 1 = no
    # more than any group (before this setting: 1% or 5% of the target was drowned among 330k records
    # and changed nothing, docs/BENCHMARKS.md).
    few_shot_weight: float = 0.0
    # Each positional factor's power of two as further features (crossfeat's setting of that name).
    factor_twos: bool = False
    # The hardware vector as features: set by the kind (`xgb+hw`), not by --arch. Models saved before
    # this setting existed were grown with it (see _read).
    use_hardware: bool = False


class XGBModel(CostModel):
    kind = "xgb"
    config_cls = XGBConfig
    # Trees have no epochs, loss choice, learning-rate schedule or checkpoint: only --device applies.
    options = frozenset({"device"})
    uses_hardware = False  # with a handful of training devices the vector acts as a device identifier

    def __init__(self, config: XGBConfig | None = None, train_config=None):
        self.config = copied(config, XGBConfig)
        if train_config is not None:  # the seed and device of a run apply to every model of it
            self.config = replace(self.config, seed=train_config.seed, device=train_config.device)
        self.config = replace(self.config, use_hardware=self.uses_hardware)
        self.normalizer: Normalizer | None = None
        self.booster = None
        self.hardware_seen: dict[str, list[float]] = {}
        self.hardware_descriptors: dict[str, dict] = {}
        self.history: dict = {}

    @property
    def max_steps(self) -> int:
        return self.config.max_steps

    def features(self, ds: Dataset) -> np.ndarray:
        feats = featurize(ds, self.normalizer)
        n, steps = len(feats), self.config.max_steps
        kinds, cats, args, mask = feats.padded(np.arange(n), max_len=steps)
        per_token = [kinds[..., None].astype(np.float32), cats[..., None].astype(np.float32), args]
        if self.config.factor_twos:
            per_token.append(feats.padded_twos(np.arange(n), mask).astype(np.float32))
        width = sum(part.shape[-1] for part in per_token)
        positional = np.concatenate(per_token, axis=-1).reshape(n, steps * width)
        positional[~np.repeat(mask, width, axis=1)] = np.nan  # missing, not zero
        counts, means = kind_counts_and_means(feats.offsets, feats.kinds, feats.args)
        hardware = [feats.hw] if self.config.use_hardware else []
        return np.concatenate([positional, counts, means, feats.op, feats.op_kind[:, None].astype(np.float32),
                               *hardware, feats.lengths[:, None]], axis=1)

    def _matrix(self, ds: Dataset, few_shot: np.ndarray | None = None):
        """(rows sorted so that query groups are contiguous, as XGBoost wants, and their DMatrix);
        with ``few_shot`` (bool per record of ``ds``), the groups of those records weighed up."""
        import xgboost

        rows = np.flatnonzero(ds.valid)
        rows = rows[np.argsort(ds.group[rows], kind="stable")]
        matrix = xgboost.DMatrix(self.features(ds.select(rows)), label=ds.labels()[rows], qid=ds.group[rows])
        if few_shot is not None and few_shot[rows].any():
            matrix.set_weight(self._group_weights(ds.group[rows], few_shot[rows]))
        return rows, matrix

    def _group_weights(self, group: np.ndarray, few_shot: np.ndarray) -> np.ndarray:
        """One weight per query group, in order (XGBoost's ranking objectives weigh groups, not rows).
        Only groups made of few-shot records alone are weighed up: with a within-task split the sample
        shares its groups with ordinary training records, and weighing such a group would weigh those too."""
        starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
        sampled = np.add.reduceat(few_shot.astype(np.int64), starts)
        sizes = np.diff(np.r_[starts, len(group)])
        target = sampled == sizes
        weight = self.config.few_shot_weight
        if weight <= 0:  # the few-shot records weigh as much in all as the rest together
            weight = max(1.0, np.count_nonzero(~few_shot) / np.count_nonzero(few_shot))
        self.history["few_shot"] = {"records": int(np.count_nonzero(few_shot)), "groups": int(target.sum()),
                                    "mixed_groups": int(np.count_nonzero((sampled > 0) & ~target)),
                                    "group_weight": float(weight)}
        return np.where(target, weight, 1.0)

    def fit(self, train: Dataset, valid: Dataset | None = None, options: FitOptions | None = None) -> dict:
        import xgboost

        from ..metrics import validation_pca

        options = options or FitOptions()
        if options.resume or options.warm_start or options.epochs or options.lr:
            raise CrosstuneError("xgb trains in one pass: it has no checkpoint to resume, no fine-tuning and "
                                 "no epochs or learning-rate schedule")
        if int(np.count_nonzero(train.valid)) < 2:
            raise CrosstuneError("the training split has fewer than two valid measurements")
        self.normalizer = Normalizer.fit(train)
        self._learn_hardware(train)
        self.history = {}
        rows, matrix = self._matrix(train, options.few_shot)
        params = {"objective": "rank:pairwise", "max_depth": self.config.max_depth, "eta": self.config.learning_rate,
                  "subsample": self.config.subsample, "tree_method": "hist", "seed": self.config.seed,
                  "lambdarank_pair_method": "mean", "lambdarank_num_pair_per_sample": self.config.pairs_per_program,
                  "device": self.config.device, "verbosity": 0, "disable_default_eval_metric": 1}
        if self.config.threads:
            params["nthread"] = self.config.threads
        has_valid = valid is not None and int(np.count_nonzero(valid.valid)) >= 2
        early = {}
        if has_valid:
            valid_order, valid_matrix = self._matrix(valid)
            ordered = valid.select(valid_order)
        if has_valid and self.config.early_stopping_rounds:
            def pca(predictions, _matrix):  # the validation metric of the neural models too
                return "pca", validation_pca(ordered, predictions)

            early = {"evals": [(valid_matrix, "valid")], "custom_metric": pca, "maximize": True,
                     "early_stopping_rounds": self.config.early_stopping_rounds, "verbose_eval": False}
        with _RoundsBar(self.config.n_estimators, options.progress) as bar:
            booster = xgboost.train(params, matrix, num_boost_round=self.config.n_estimators,
                                    callbacks=[bar.callback()], **early)
        self.history.update({"records": int(len(rows)), "rounds": booster.num_boosted_rounds(), **self.cropped(train)})
        if early:
            best = int(booster.best_iteration)
            self.history.update({"best_round": best + 1, "best_valid_pca": float(booster.best_score)})
            booster = booster[: best + 1]  # the saved model is the best round's, not the last one's
        elif has_valid:
            self.history["valid_pca"] = validation_pca(ordered, booster.predict(valid_matrix).astype(np.float64))
        self.booster = booster
        return self.history

    def predict(self, programs: Dataset) -> np.ndarray:
        import xgboost

        if self.booster is None:
            raise CrosstuneError("model is not trained or loaded")
        return self.booster.predict(xgboost.DMatrix(self.features(programs))).astype(np.float64)

    def _write(self, directory: Path) -> dict:
        if self.booster is None:
            raise CrosstuneError("cannot save a model that was not trained")
        with staged_file(directory / MODEL_FILE) as tmp:  # XGBoost picks its format by the .json suffix
            self.booster.save_model(str(tmp))
        return {"kind": self.kind, "model": asdict(self.config), "normalizer": self.normalizer.to_json(),
                **self._hardware_json(), "history": self.history}

    @classmethod
    def _read(cls, directory: Path, config: dict) -> "XGBModel":
        import xgboost

        with saved_config_read(directory):
            model = cls(XGBConfig(**config["model"]))
        if "use_hardware" not in config["model"]:  # saved before xgb+hw existed: its trees read the vector
            model.config = replace(model.config, use_hardware=True)
        if "few_shot_weight" not in config["model"]:  # saved before the weighting: trained unweighted
            model.config = replace(model.config, few_shot_weight=1.0)
        model.normalizer = Normalizer.from_json(config.get("normalizer", {}))
        model._restore_hardware(config)
        model.history = config.get("history", {})
        booster = xgboost.Booster()
        try:
            booster.load_model(str(directory / MODEL_FILE))
        except xgboost.core.XGBoostError as err:
            raise CrosstuneError(f"{directory}: {MODEL_FILE} is missing or corrupt ({str(err).splitlines()[0][:200]})") from None
        model.booster = booster
        return model


class XGBHardwareModel(XGBModel):
    """``xgb+hw``: the same trees with the hardware vector appended to every program's features."""

    kind = "xgb+hw"
    uses_hardware = True


class _RoundsBar:
    """A progress bar over XGBoost's boosting rounds (minutes on large training sets)."""

    def __init__(self, rounds: int, enabled: bool):
        from tqdm import tqdm

        self.bar = tqdm(total=rounds, unit=" trees", desc="xgb", disable=not enabled, mininterval=0.5)

    def callback(self):
        import xgboost

        bar = self.bar

        class Advance(xgboost.callback.TrainingCallback):
            def after_iteration(self, model, epoch, evals_log) -> bool:
                bar.update(1)
                return False  # never stops training

        return Advance()

    def __enter__(self) -> "_RoundsBar":
        return self

    def __exit__(self, *exc) -> None:
        self.bar.close()
