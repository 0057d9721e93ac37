"""The one list of model kinds: the CLI's --model/--models choices and help, ``create_model`` and
``load_model`` are all built from it. Adding a model = one new module + one line in ``REGISTRY``.

Classes are imported on first use: PyTorch takes seconds to import, and ``crosstune info`` should not
pay for it.
"""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass
from pathlib import Path

from ..errors import CrosstuneError
from .base import CostModel, read_config


@dataclass(frozen=True)
class ModelKind:
    name: str
    module: str
    class_name: str
    summary: str  # one line for --help

    def load_class(self) -> type[CostModel]:
        return getattr(importlib.import_module(self.module), self.class_name)


REGISTRY: dict[str, ModelKind] = {kind.name: kind for kind in (
    ModelKind("crossfeat", "crosstune.models.crossfeat", "CrossFeatModel",
              "attention over program, operator and hardware tokens"),
    ModelKind("crossfeat-nohw", "crosstune.models.crossfeat", "CrossFeatNoHwModel",
              "crossfeat without the hardware and operator tokens (the ablation)"),
    ModelKind("tlp", "crosstune.models.tlp", "TLPModel", "TLP (ASPLOS'23): self-attention over schedule steps"),
    ModelKind("xgb", "crosstune.models.gbdt", "XGBModel", "TenSet's gradient-boosted trees, ranking objective"),
    ModelKind("xgb+hw", "crosstune.models.gbdt", "XGBHardwareModel", "xgb with the hardware vector appended"),
    ModelKind("nearest", "crosstune.models.nearest", "NearestModel",
              "baseline: copy the program's rank on the most similar training device that measured it"),
    ModelKind("nearest-mean", "crosstune.models.nearest", "NearestMeanModel",
              "baseline: the program's mean rank over the training devices that measured it"),
    ModelKind("random", "crosstune.models.random_baseline", "RandomModel", "baseline: a seeded random score"),
    ModelKind("ensemble", "crosstune.models.ensemble", "EnsembleModel",
              "the mean score of several crossfeat (--arch member=KIND) models trained with seeds seed, seed+1, ..."
              " (--arch members=N, default 3)"),
)}
MODEL_KINDS = tuple(REGISTRY)
# Models that learn nothing (they copy known measurements or guess): what a learned model must beat.
BASELINE_KINDS = ("nearest", "nearest-mean", "random")

# Settings that are not architecture: the ablation switch is the model kind, seed and device are
# --seed and --device.
_NOT_ARCHITECTURE = {"use_cross_features", "seed", "threads", "device", "use_hardware", "mean"}


def model_class(kind: str) -> type[CostModel]:
    if kind not in REGISTRY:
        raise CrosstuneError(f"unknown model {kind!r}; choose one of {', '.join(MODEL_KINDS)}")
    return REGISTRY[kind].load_class()


def models_help() -> str:
    return "; ".join(f"{kind.name}: {kind.summary}" for kind in REGISTRY.values())


def create_model(kind: str, train_config=None) -> CostModel:
    """A fresh, untrained model of the given kind (its architecture defaults overridden by
    ``train_config.architecture``). The caller's ``train_config`` is not changed."""
    cls = model_class(kind)
    overrides = train_config.architecture if train_config is not None else {}
    return cls(model_config(cls.config_cls, overrides, kind), train_config)


def model_config(config_cls: type, overrides: dict, kind: str):
    """``config_cls`` with the user's ``overrides`` (each converted to the field's type; integers
    must be >= 1, numbers >= 0). Unknown names are refused with the list of settings the model has."""
    defaults = config_cls()
    settable = _settable(config_cls)
    values = {}
    for name, value in overrides.items():
        if name not in settable:
            raise CrosstuneError(f"{kind} has no architecture setting {name!r}; it has: {', '.join(settable)}")
        default = getattr(defaults, name)
        try:
            values[name] = _parse_bool(value) if isinstance(default, bool) else type(default)(value)
        except (TypeError, ValueError):
            raise CrosstuneError(f"{kind}: {name}={value!r} is not a valid {type(default).__name__}") from None
        if isinstance(default, (int, float)) and not isinstance(default, bool) \
                and values[name] < (1 if isinstance(default, int) else 0):
            raise CrosstuneError(f"{kind}: {name}={value!r} is out of range")
    config = config_cls(**values)
    problem = config.problem() if hasattr(config, "problem") else None
    if problem:
        raise CrosstuneError(f"{kind}: {problem}")
    return config


def _parse_bool(value: object) -> bool:
    """``bool("false")`` is True, so a switch takes the words a user would type."""
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower()
    if word in ("1", "true", "yes", "on"):
        return True
    if word in ("0", "false", "no", "off"):
        return False
    raise ValueError(word)


def architecture_settings(kind: str) -> list[str]:
    """The names ``--arch`` may set for a model kind."""
    return _settable(model_class(kind).config_cls)


def training_options(kind: str) -> frozenset[str]:
    """The command-line training options (epochs, loss, lr, device, resume) the model honours."""
    return model_class(kind).options


def _settable(config_cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(config_cls) if f.name not in _NOT_ARCHITECTURE]


def load_model(directory: str | Path) -> CostModel:
    """Load a model directory written by ``save`` (any kind)."""
    directory = Path(directory)
    kind = read_config(directory)["kind"]
    if kind not in REGISTRY:
        raise CrosstuneError(f"{directory}: unknown model kind {kind!r}")
    return REGISTRY[kind].load_class().load(directory)
