"""Cost models: the cross-feature model, its ablation, TLP and XGBoost, behind one interface."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ..errors import CrosstuneError
from ..train import TrainConfig
from .base import CostModel, read_config

MODEL_KINDS = ("crossfeat", "crossfeat-nohw", "tlp", "xgb", "xgb+hw", "nearest", "nearest-mean", "random")
# Models that learn nothing (they copy known measurements or guess): what a learned model must beat.
BASELINE_KINDS = ("nearest", "nearest-mean", "random")


def create_model(kind: str, train_config: TrainConfig | None = None, seed: int = 0) -> CostModel:
    """A fresh, untrained model of the given kind (its architecture defaults overridden by
    ``train_config.architecture``)."""
    from .crossfeat import CrossFeatConfig, CrossFeatModel, CrossFeatNoHwModel
    from .gbdt import XGBConfig, XGBModel
    from .tlp import TLPConfig, TLPModel

    if train_config is None:
        train_config = TrainConfig(seed=seed, lr=7e-4 if kind == "tlp" else TrainConfig.lr)  # TLP's published rate
    arch = train_config.architecture
    if kind == "crossfeat":
        return CrossFeatModel(model_config(CrossFeatConfig, arch, kind), train_config)
    if kind == "crossfeat-nohw":
        return CrossFeatNoHwModel(model_config(CrossFeatConfig, arch, kind), train_config)
    if kind == "tlp":
        return TLPModel(model_config(TLPConfig, arch, kind), train_config)
    if kind in ("xgb", "xgb+hw"):
        return XGBModel(model_config(XGBConfig, arch, kind, seed=train_config.seed, use_hardware=kind == "xgb+hw"))
    if kind in ("nearest", "nearest-mean"):
        from .nearest import NearestConfig, NearestModel

        return NearestModel(model_config(NearestConfig, arch, kind, mean=kind == "nearest-mean"))
    if kind == "random":
        from .random_baseline import RandomConfig, RandomModel

        return RandomModel(model_config(RandomConfig, arch, kind, seed=train_config.seed))
    raise CrosstuneError(f"unknown model {kind!r}; choose one of {', '.join(MODEL_KINDS)}")


# Settings that are not architecture: the ablation switch is the model kind, the seed is --seed.
_NOT_ARCHITECTURE = {"use_cross_features", "seed", "threads", "use_hardware", "mean"}


def model_config(config_cls: type, overrides: dict, kind: str, **fixed):
    """``config_cls`` with the user's ``overrides`` (each converted to the field's type; integers
    must be >= 1, numbers >= 0) and then ``fixed`` applied. Unknown names are refused with the list
    of settings the model has."""
    defaults = config_cls()
    settable = _settable(config_cls)
    values = {}
    for name, value in overrides.items():
        if name not in settable:
            raise CrosstuneError(f"{kind} has no architecture setting {name!r}; it has: {', '.join(settable)}")
        default = getattr(defaults, name)
        try:
            values[name] = type(default)(value)
        except (TypeError, ValueError):
            raise CrosstuneError(f"{kind}: {name}={value!r} is not a valid {type(default).__name__}") from None
        if isinstance(default, (int, float)) and not isinstance(default, bool) \
                and values[name] < (1 if isinstance(default, int) else 0):
            raise CrosstuneError(f"{kind}: {name}={value!r} is out of range")
    config = config_cls(**values, **fixed)
    problem = config.problem() if hasattr(config, "problem") else None
    if problem:
        raise CrosstuneError(f"{kind}: {problem}")
    return config


def architecture_settings(kind: str) -> list[str]:
    """The names ``--arch`` may set for a model kind."""
    from .crossfeat import CrossFeatConfig
    from .gbdt import XGBConfig
    from .nearest import NearestConfig
    from .random_baseline import RandomConfig
    from .tlp import TLPConfig

    return _settable({"crossfeat": CrossFeatConfig, "crossfeat-nohw": CrossFeatConfig, "tlp": TLPConfig,
                      "xgb": XGBConfig, "xgb+hw": XGBConfig, "nearest": NearestConfig, "nearest-mean": NearestConfig,
                      "random": RandomConfig}[kind])


def _settable(config_cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(config_cls) if f.name not in _NOT_ARCHITECTURE]


def load_model(directory: str | Path) -> CostModel:
    """Load a model directory written by ``save`` (any kind)."""
    from .crossfeat import CrossFeatModel, CrossFeatNoHwModel
    from .gbdt import XGBModel
    from .nearest import NearestModel
    from .random_baseline import RandomModel
    from .tlp import TLPModel

    directory = Path(directory)
    config = read_config(directory)
    classes = {"crossfeat": CrossFeatModel, "crossfeat-nohw": CrossFeatNoHwModel, "tlp": TLPModel, "xgb": XGBModel,
               "xgb+hw": XGBModel, "nearest": NearestModel, "nearest-mean": NearestModel, "random": RandomModel}
    cls = classes.get(config["kind"])
    if cls is None:
        raise CrosstuneError(f"{directory}: unknown model kind {config['kind']!r}")
    return cls.from_config(directory, config)


__all__ = ["BASELINE_KINDS", "MODEL_KINDS", "CostModel", "architecture_settings", "create_model", "load_model"]
