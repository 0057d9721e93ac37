"""The one interface every cost model implements, and its on-disk format.

A model directory holds ``config.json`` (model kind, sizes, token vocabulary, normalisation
statistics, hardware descriptors seen, crosstune version, format version) and its weights:
``weights.safetensors`` for PyTorch models, ``model.json`` (XGBoost's own format) for trees. No pickle.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from pathlib import Path

import numpy as np

from .. import __version__, tokens
from ..dataset import Dataset, atomic_write_text
from ..errors import CrosstuneError

MODEL_FORMAT_VERSION = 1
CONFIG = "config.json"


class CostModel(ABC):
    """Ranks the programs of a task: ``predict`` returns one score per program, higher = faster.

    Hyper-parameters go in ``__init__``, learning in ``fit``; ``predict`` has no side effects.
    """

    kind: str = "base"

    @abstractmethod
    def fit(self, train: Dataset, valid: Dataset | None = None, **options) -> dict:
        """Learn from ``train`` (validated per epoch on ``valid``); returns the training history."""

    @abstractmethod
    def predict(self, programs: Dataset) -> np.ndarray:
        """Scores for every record of ``programs`` (batched internally)."""

    @abstractmethod
    def save(self, directory: str | Path) -> None:
        """Write the model directory (weights + config.json)."""

    def describe(self) -> dict:
        return {"kind": self.kind}


def vocabulary_json() -> dict:
    return {"version": tokens.VOCAB_VERSION, "kinds": list(tokens.KINDS), "categories": list(tokens.CATEGORIES),
            "num_args": tokens.NUM_ARGS}


def write_config(directory: Path, config: dict) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    full = {"format_version": MODEL_FORMAT_VERSION, "crosstune_version": __version__,
            "vocabulary": vocabulary_json(), **config}
    atomic_write_text(directory / CONFIG, json.dumps(full, indent=1))


def read_config(directory: str | Path) -> dict:
    directory = Path(directory)
    path = directory / CONFIG
    if not directory.is_dir():
        raise CrosstuneError(f"{directory}: no such model directory")
    if not path.is_file():
        raise CrosstuneError(f"{directory}: not a crosstune model (no {CONFIG}); was training interrupted?")
    try:
        config = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise CrosstuneError(f"{path}: corrupt model config ({err})") from None
    if not isinstance(config, dict) or "kind" not in config:
        raise CrosstuneError(f"{path}: corrupt model config (no model kind)")
    version = config.get("format_version")
    if not isinstance(version, int) or version > MODEL_FORMAT_VERSION:
        raise CrosstuneError(f"{directory}: model format version {version!r} is not supported by crosstune "
                             f"{__version__} (supports <= {MODEL_FORMAT_VERSION}); upgrade crosstune or retrain")
    vocab = config.get("vocabulary", {})
    if vocab.get("version") != tokens.VOCAB_VERSION or vocab.get("kinds") != list(tokens.KINDS):
        raise CrosstuneError(f"{directory}: model was trained with token vocabulary v{vocab.get('version')}, "
                             f"this crosstune uses v{tokens.VOCAB_VERSION}; retrain the model")
    return config
