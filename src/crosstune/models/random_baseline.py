"""``random``: a seeded random score per program, so the harness shows chance like any model.

The score of a record depends only on its record id and the seed (a hash, not a random stream), so a
program gets the same score whatever else is scored with it and in whatever order.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ..dataset import Dataset
from ..errors import CrosstuneError
from ..programs import mix64
from .base import CostModel, write_config


def random_scores(programs: Dataset, seed: int) -> np.ndarray:
    """Uniform scores in [0, 1), one per record, fixed by (record id, seed)."""
    with np.errstate(over="ignore"):
        mixed = mix64(programs.record_id.astype(np.uint64) ^ mix64(np.array([seed], dtype=np.uint64)))
    return (mixed >> np.uint64(11)).astype(np.float64) / 2.0 ** 53


@dataclass
class RandomConfig:
    seed: int = 0


class RandomModel(CostModel):
    kind = "random"

    def __init__(self, config: RandomConfig | None = None):
        self.config = config or RandomConfig()

    def fit(self, train: Dataset, valid: Dataset | None = None, **_options) -> dict:
        return {}  # nothing to learn

    def predict(self, programs: Dataset) -> np.ndarray:
        return random_scores(programs, self.config.seed)

    def save(self, directory: str | Path) -> None:
        write_config(Path(directory), {"kind": self.kind, "model": asdict(self.config)})

    @classmethod
    def from_config(cls, directory: Path, config: dict) -> "RandomModel":
        try:
            return cls(RandomConfig(**config["model"]))
        except (TypeError, KeyError) as err:
            raise CrosstuneError(f"{directory}: model config does not match this crosstune ({err})") from None
