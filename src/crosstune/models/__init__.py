"""Cost models: the cross-feature model, its ablation, TLP and XGBoost, behind one interface."""

from __future__ import annotations

from pathlib import Path

from ..errors import CrosstuneError
from ..train import TrainConfig
from .base import CostModel, read_config

MODEL_KINDS = ("crossfeat", "crossfeat-nohw", "tlp", "xgb")


def create_model(kind: str, train_config: TrainConfig | None = None, seed: int = 0) -> CostModel:
    """A fresh, untrained model of the given kind."""
    from .crossfeat import CrossFeatModel, CrossFeatNoHwModel
    from .gbdt import XGBConfig, XGBModel
    from .tlp import TLPModel

    if train_config is None:
        train_config = TrainConfig(seed=seed, lr=7e-4 if kind == "tlp" else TrainConfig.lr)  # TLP's published rate
    if kind == "crossfeat":
        return CrossFeatModel(train_config=train_config)
    if kind == "crossfeat-nohw":
        return CrossFeatNoHwModel(train_config=train_config)
    if kind == "tlp":
        return TLPModel(train_config=train_config)
    if kind == "xgb":
        return XGBModel(XGBConfig(seed=train_config.seed))
    raise CrosstuneError(f"unknown model {kind!r}; choose one of {', '.join(MODEL_KINDS)}")


def load_model(directory: str | Path) -> CostModel:
    """Load a model directory written by ``save`` (any kind)."""
    from .crossfeat import CrossFeatModel, CrossFeatNoHwModel
    from .gbdt import XGBModel
    from .tlp import TLPModel

    directory = Path(directory)
    config = read_config(directory)
    classes = {"crossfeat": CrossFeatModel, "crossfeat-nohw": CrossFeatNoHwModel, "tlp": TLPModel, "xgb": XGBModel}
    cls = classes.get(config["kind"])
    if cls is None:
        raise CrosstuneError(f"{directory}: unknown model kind {config['kind']!r}")
    return cls.from_config(directory, config)


__all__ = ["MODEL_KINDS", "CostModel", "create_model", "load_model"]
