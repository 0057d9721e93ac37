"""``random``: a seeded random score per program, so the harness shows chance like any model.

The score of a record depends only on its record id and the seed (a hash, not a random stream), so a
program gets the same score whatever else is scored with it and in whatever order.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from ..dataset import Dataset
from ..programs import mix64
from .base import CostModel, FitOptions, copied, saved_config_read


def random_scores(programs: Dataset, seed: int) -> np.ndarray:
    """Uniform scores in [0, 1), one per record, fixed by (record id, seed)."""
    with np.errstate(over="ignore"):
        mixed = mix64(programs.record_id.astype(np.uint64) ^ mix64(np.array([seed], dtype=np.uint64)))
    return (mixed >> np.uint64(11)).astype(np.float64) / 2.0 ** 53


@dataclass(frozen=True)
class RandomConfig:
    seed: int = 0


class RandomModel(CostModel):
    kind = "random"
    config_cls = RandomConfig

    def __init__(self, config: RandomConfig | None = None, train_config=None):
        self.config = copied(config, RandomConfig)
        if train_config is not None:  # the seed of a run applies to every model of it
            self.config = replace(self.config, seed=train_config.seed)
        self.history: dict = {}
        self.hardware_seen: dict[str, list[float]] = {}
        self.hardware_descriptors: dict[str, dict] = {}

    def fit(self, train: Dataset, valid: Dataset | None = None, options: FitOptions | None = None) -> dict:
        self._learn_hardware(train)
        return {}  # nothing to learn

    def predict(self, programs: Dataset) -> np.ndarray:
        return random_scores(programs, self.config.seed)

    def _write(self, directory: Path) -> dict:
        return {"kind": self.kind, "model": asdict(self.config), **self._hardware_json()}

    @classmethod
    def _read(cls, directory: Path, config: dict) -> "RandomModel":
        with saved_config_read(directory):
            model = cls(RandomConfig(**config["model"]))
        model._restore_hardware(config)
        return model
