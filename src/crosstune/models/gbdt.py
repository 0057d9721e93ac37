"""`xgb`: TenSet's tree baseline on crosstune tokens, with XGBoost's ranking objective.

Features: the first ``max_steps`` tokens flattened by position (kind, category, 8 arguments each),
position-independent per-kind aggregates (count and mean arguments of each primitive kind, so that a
step shifted by one position is still recognised), the operator vector and the hardware vector.
Trained with ``rank:pairwise`` grouped by (task, hardware), pairs drawn uniformly over each group
(``lambdarank_pair_method=mean``): XGBoost's default draws them from the top of each group only, which
on the roller-ansor K80 -> V100 split gave PCA 0.659 against 0.720 with two uniform pairs per program
(top-1 0.862 vs 0.915).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from .. import tokens
from ..dataset import Dataset
from ..errors import CrosstuneError
from ..features import Normalizer, featurize, kind_counts_and_means, spec_vectors
from .base import CostModel, write_config

MODEL_FILE = "model.json"


@dataclass
class XGBConfig:
    max_steps: int = 40
    n_estimators: int = 300
    max_depth: int = 8
    learning_rate: float = 0.1
    subsample: float = 0.8
    pairs_per_program: int = 2
    seed: int = 0
    threads: int = 0  # 0 = all cores


class XGBModel(CostModel):
    kind = "xgb"

    def __init__(self, config: XGBConfig | None = None):
        self.config = config or XGBConfig()
        self.normalizer: Normalizer | None = None
        self.booster = None
        self.hardware_seen: dict[str, list[float]] = {}
        self.history: dict = {}

    def features(self, ds: Dataset) -> np.ndarray:
        feats = featurize(ds, self.normalizer)
        n, steps = len(feats), self.config.max_steps
        kinds, cats, args, mask = feats.padded(np.arange(n), max_len=steps)
        positional = np.concatenate([kinds[..., None].astype(np.float32), cats[..., None].astype(np.float32), args],
                                    axis=-1).reshape(n, steps * (tokens.NUM_ARGS + 2))
        positional[~np.repeat(mask, tokens.NUM_ARGS + 2, axis=1)] = np.nan  # missing, not zero
        counts, means = kind_counts_and_means(feats.offsets, feats.kinds, feats.args)
        return np.concatenate([positional, counts, means, feats.op,
                               feats.op_kind[:, None].astype(np.float32), feats.hw, feats.lengths[:, None]], axis=1)

    def fit(self, train: Dataset, valid: Dataset | None = None, progress: bool = True, **_options) -> dict:
        import xgboost

        self.normalizer = Normalizer.fit(train)
        self.hardware_seen = spec_vectors({n: train.specs[n] for n in train.hardware_names if n in train.specs})
        rows = np.flatnonzero(train.valid)
        rows = rows[np.argsort(train.group[rows], kind="stable")]  # XGBoost wants query groups contiguous
        if len(rows) < 2:
            raise CrosstuneError("the training split has fewer than two valid measurements")
        x = self.features(train.select(rows))
        y = train.labels()[rows]
        matrix = xgboost.DMatrix(x, label=y, qid=train.group[rows])
        params = {"objective": "rank:pairwise", "max_depth": self.config.max_depth, "eta": self.config.learning_rate,
                  "subsample": self.config.subsample, "tree_method": "hist", "seed": self.config.seed,
                  "lambdarank_pair_method": "mean", "lambdarank_num_pair_per_sample": self.config.pairs_per_program,
                  "verbosity": 0}
        if self.config.threads:
            params["nthread"] = self.config.threads
        with _RoundsBar(self.config.n_estimators, progress) as bar:
            self.booster = xgboost.train(params, matrix, num_boost_round=self.config.n_estimators, callbacks=[bar.callback()])
        self.history = {"records": int(len(rows))}
        return self.history

    def predict(self, programs: Dataset) -> np.ndarray:
        import xgboost

        if self.booster is None:
            raise CrosstuneError("model is not trained or loaded")
        return self.booster.predict(xgboost.DMatrix(self.features(programs))).astype(np.float64)

    def save(self, directory: str | Path) -> None:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        tmp = directory / f".{MODEL_FILE}.tmp.json"
        self.booster.save_model(str(tmp))
        tmp.replace(directory / MODEL_FILE)
        write_config(directory, {"kind": self.kind, "model": asdict(self.config),
                                 "normalizer": self.normalizer.to_json(), "hardware_seen": self.hardware_seen,
                                 "history": self.history})

    @classmethod
    def from_config(cls, directory: Path, config: dict) -> "XGBModel":
        import xgboost

        try:
            model = cls(XGBConfig(**config["model"]))
        except (TypeError, KeyError) as err:
            raise CrosstuneError(f"{directory}: model config does not match this crosstune ({err})") from None
        model.normalizer = Normalizer.from_json(config.get("normalizer", {}))
        model.hardware_seen = config.get("hardware_seen", {})
        booster = xgboost.Booster()
        try:
            booster.load_model(str(directory / MODEL_FILE))
        except xgboost.core.XGBoostError as err:
            raise CrosstuneError(f"{directory}: {MODEL_FILE} is missing or corrupt ({str(err).splitlines()[0][:200]})") from None
        model.booster = booster
        return model


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
