"""The one interface every cost model implements, and its on-disk format.

A model directory holds ``config.json`` (model kind, sizes, token vocabulary, normalisation
statistics, hardware descriptors seen, crosstune version, format version) and its weights:
``weights.safetensors`` for PyTorch models, ``model.json`` (XGBoost's own format) for trees. No pickle.
"""

from __future__ import annotations

import contextlib
import copy
import json
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from .. import __version__, tokens
from ..atomic import staged_directory, write_text
from ..dataset import Dataset
from ..errors import CrosstuneError

MODEL_FORMAT_VERSION = 1
CONFIG = "config.json"
# Left in an output folder by a run that did not finish (``--resume`` continues from them).
CHECKPOINT_DIRS = ("checkpoint", "checkpoint-finetune")


@dataclass(frozen=True)
class FitOptions:
    """How one call of ``fit`` runs; none of it is a hyper-parameter of the model.

    ``warm_start`` continues from the model's current weights and normalisation (fine-tuning);
    ``epochs`` / ``lr`` replace the model's training schedule for this call only, so the model's saved
    ``train`` config keeps describing how it was (pre-)trained. ``few_shot``: bool per training record,
    True for the measured records of the unseen device that a model which trains once on everything
    (the trees) is given next to the others, so that it can weigh them up."""

    progress: bool = True
    checkpoint_dir: Path | None = None
    resume: bool = False
    hooks: Any = None  # crosstune.train.TrainHooks
    warm_start: bool = False
    epochs: int | None = None
    lr: float | None = None
    few_shot: Any = None  # np.ndarray of bool, one per training record


class CostModel(ABC):
    """Ranks the programs of a task: ``predict`` returns one score per program, higher = faster.

    The contract, as in scikit-learn and MetaSchedule's CostModel: hyper-parameters go in
    ``__init__(config, train_config)`` and are copied there, never changed afterwards (the caller's
    objects stay as they were); learning happens in ``fit(train, valid, options)``; ``predict`` has
    no side effects; ``save(dir)`` writes the whole model directory as a unit, ``load(dir)`` reads it.
    """

    kind: ClassVar[str] = "base"
    config_cls: ClassVar[type]
    # Command-line training options this model honours (the CLI refuses the others for it).
    options: ClassVar[frozenset[str]] = frozenset()
    # Whether ``fit`` with ``FitOptions(warm_start=True)`` continues from the learned weights.
    warm_starts: ClassVar[bool] = False

    config: Any
    hardware_seen: dict[str, list[float]]  # name -> feature vector, of the training hardware
    hardware_descriptors: dict[str, dict]  # name -> the descriptor trained with (config.json form)
    history: dict

    @abstractmethod
    def __init__(self, config=None, train_config=None): ...

    @abstractmethod
    def fit(self, train: Dataset, valid: Dataset | None = None, options: FitOptions | None = None) -> dict:
        """Learn from ``train`` (validated on ``valid``); returns this fit's history."""

    @abstractmethod
    def predict(self, programs: Dataset) -> np.ndarray:
        """Scores for every record of ``programs`` (batched internally)."""

    @property
    def max_steps(self) -> int | None:
        """Programs longer than this many steps are cropped by the model (None: any length is read)."""
        return None

    def cropped(self, programs: Dataset) -> dict:
        """How many of ``programs`` this model crops (reported in its history and by ``eval``)."""
        if self.max_steps is None or len(programs) == 0:
            return {}
        return {"cropped_programs": int(np.count_nonzero(programs.seq_len > self.max_steps)),
                "programs": len(programs), "max_steps": self.max_steps}

    def _keep_history(self, history: dict, fine_tuned: bool) -> None:
        """This fit's history as the model's; a fine-tune's goes beside the pre-training's."""
        if fine_tuned:
            history = {"pretrain": self.history.get("pretrain", self.history), "fine_tune": history}
        self.history = history

    def _learn_hardware(self, train: Dataset, add: bool = False) -> None:
        """Remember the hardware that has records in ``train`` (``add``: next to what was seen before)."""
        from ..features import spec_vectors, training_hardware

        specs = training_hardware(train)
        vectors, descriptors = spec_vectors(specs), {name: spec.to_json() for name, spec in specs.items()}
        if add:
            vectors, descriptors = {**self.hardware_seen, **vectors}, {**self.hardware_descriptors, **descriptors}
        self.hardware_seen, self.hardware_descriptors = vectors, descriptors

    def _hardware_json(self) -> dict:
        return {"hardware_seen": self.hardware_seen, "hardware_descriptors": self.hardware_descriptors}

    def _restore_hardware(self, config: dict) -> None:
        self.hardware_seen = config.get("hardware_seen", {})
        self.hardware_descriptors = config.get("hardware_descriptors", {})

    def hardware_descriptor(self, name: str):
        """The descriptor of ``name`` the model was trained with (a HardwareSpec), or None."""
        from ..hardware.registry import spec_from_dict

        data = self.hardware_descriptors.get(name)
        return spec_from_dict(data, f"model descriptor {name!r}") if data is not None else None

    @abstractmethod
    def _write(self, directory: Path) -> dict:
        """Write the model's weights into ``directory``; return its config.json entries."""

    @classmethod
    @abstractmethod
    def _read(cls, directory: Path, config: dict) -> "CostModel":
        """The model whose directory is ``directory`` (``config``: its parsed config.json)."""

    def save(self, directory: str | Path, extra_files: dict[str, str] | None = None) -> None:
        """Write the model directory as one unit (staged, then renamed into place): a killed save
        leaves the previous directory or none, never a mix. ``extra_files`` (name -> text) go in with
        it. An unfinished run's checkpoints in ``directory`` are removed with it."""
        directory = Path(directory)
        check_model_out(directory)
        with staged_directory(directory) as staging:
            write_config(staging, self._write(staging))
            for name, text in (extra_files or {}).items():
                write_text(staging / name, text)

    @classmethod
    def load(cls, directory: str | Path) -> "CostModel":
        directory = Path(directory)
        from .registry import model_class  # the registry lists the classes, so it is imported late

        config = read_config(directory)
        stored = model_class(config["kind"])  # a registered kind may share its class with another kind
        if not issubclass(stored, cls):
            raise CrosstuneError(f"{directory}: holds a {config['kind']} model, not {cls.kind}")
        return stored._read(directory, config)


def check_model_out(directory: Path) -> None:
    """Refuse an output folder that saving a model would wrongly replace: anything but an earlier
    model directory, an unfinished run's checkpoints or an empty folder."""
    if not directory.exists():
        return
    if not directory.is_dir():
        raise CrosstuneError(f"{directory}: exists and is not a directory; choose another --out")
    if (directory / CONFIG).is_file():
        return
    foreign = [p.name for p in directory.iterdir() if p.name not in CHECKPOINT_DIRS]
    if foreign:
        raise CrosstuneError(f"{directory}: exists and is not a crosstune model directory (it holds "
                             f"{', '.join(sorted(foreign)[:3])}); choose another --out")


@contextlib.contextmanager
def saved_config_read(directory: Path) -> Iterator[None]:
    """Around reading a model's saved config: a missing or foreign field becomes one clear error."""
    try:
        yield
    except (TypeError, KeyError) as err:
        raise CrosstuneError(f"{directory}: model config does not match this crosstune ({err})") from None


def copied(config, config_cls: type):
    """The caller's hyper-parameters as the model's own copy (a default one when None)."""
    return copy.deepcopy(config) if config is not None else config_cls()


def vocabulary_json() -> dict:
    return {"version": tokens.VOCAB_VERSION, "kinds": list(tokens.KINDS), "categories": list(tokens.CATEGORIES),
            "num_args": tokens.NUM_ARGS}


def write_config(directory: Path, config: dict) -> None:
    full = {"format_version": MODEL_FORMAT_VERSION, "crosstune_version": __version__,
            "vocabulary": vocabulary_json(), **config}
    write_text(directory / CONFIG, json.dumps(full, indent=1))


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
