"""What the PyTorch cost models share: featurising, batched prediction, saving and loading."""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import asdict, replace
from pathlib import Path
from typing import ClassVar

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from .. import tokens
from ..atomic import staged_file
from ..dataset import Dataset
from ..errors import CrosstuneError
from ..features import Features, Normalizer, featurize
from ..train import TrainConfig, predict_scores, train_neural
from .base import CostModel, FitOptions, copied, saved_config_read

WEIGHTS = "weights.safetensors"


class NeuralCostModel(CostModel):
    """Subclasses define ``build_net`` (an nn.Module whose forward takes the tensors of
    ``batch_tensors`` and returns one score per program) and their config dataclass."""

    options = frozenset({"epochs", "loss", "lr", "device", "resume"})
    warm_starts = True
    # Training settings of this model where TrainConfig leaves them None (crossfeat's; TLP has its own).
    # Pairwise (RankNet) at 5e-3: on AutoTVM knobs within one device PCA 0.935 against 0.905 with
    # LambdaRank at 2e-3 (docs/BENCHMARKS.md, "Reading the factors").
    train_defaults: ClassVar[dict] = {"lr": 5e-3, "optimizer": "adamw", "batch_across_groups": False,
                                      "loss": "pairwise"}
    # Architecture settings added after models were saved without them, with the value such a model was
    # trained with (it may differ from today's default).
    absent_settings: ClassVar[dict] = {}

    def __init__(self, config=None, train_config: TrainConfig | None = None):
        self.config = copied(config, self.config_cls)
        # TrainConfig is frozen; with_defaults returns a new one, and the architecture dict is the
        # caller's object, so it is copied too.
        train_config = train_config or TrainConfig()
        self.train_config = replace(train_config.with_defaults(self.train_defaults),
                                    architecture=dict(train_config.architecture))
        self.normalizer: Normalizer | None = None
        self.net: torch.nn.Module | None = None
        self.history: dict = {}
        self.hardware_seen: dict[str, list[float]] = {}
        self.hardware_descriptors: dict[str, dict] = {}

    @abstractmethod
    def build_net(self) -> torch.nn.Module: ...

    @abstractmethod
    def batch_tensors(self, feats: Features, rows: np.ndarray, device: torch.device) -> dict[str, torch.Tensor]: ...

    def _prepare(self, train: Dataset, warm: bool) -> None:
        """Settings a subclass derives from the training data before its network is built."""

    def fit(self, train: Dataset, valid: Dataset | None = None, options: FitOptions | None = None) -> dict:
        options = options or FitOptions()
        warm = options.warm_start and self.net is not None
        self._prepare(train, warm)
        schedule = replace(self.train_config, epochs=options.epochs or self.train_config.epochs,
                           lr=options.lr or self.train_config.lr)
        trained = train_neural(self.build_net, self.batch_tensors, train, valid, schedule,
                               net=self.net if warm else None, normalizer=self.normalizer if warm else None,
                               checkpoint_dir=Path(options.checkpoint_dir) if options.checkpoint_dir else None,
                               resume=options.resume, progress=options.progress, hooks=options.hooks,
                               label=self.kind)
        self.net, self.normalizer = trained.net, trained.normalizer
        self._learn_hardware(train, add=warm)
        history = {**trained.history, **self.cropped(train)}
        self._keep_history(history, warm)
        return history

    def predict(self, programs: Dataset) -> np.ndarray:
        if self.net is None or self.normalizer is None:
            raise CrosstuneError("model is not trained or loaded")
        return self.predict_features(featurize(programs, self.normalizer))

    def predict_features(self, feats: Features) -> np.ndarray:
        return predict_scores(self.net, self.batch_tensors, feats)

    def _write(self, directory: Path) -> dict:
        if self.net is None or self.normalizer is None:
            raise CrosstuneError("cannot save a model that was not trained")
        with staged_file(directory / WEIGHTS) as tmp:
            save_file({k: v.detach().cpu().contiguous() for k, v in self.net.state_dict().items()}, str(tmp))
        return {"kind": self.kind, "model": asdict(self.config), "train": asdict(self.train_config),
                "normalizer": self.normalizer.to_json(), **self._hardware_json(),
                "history": self.history, **self._fitted_json()}

    def _fitted_json(self) -> dict:
        """What the model learned besides its weights (saved in config.json)."""
        return {}

    def _restore_fitted(self, config: dict) -> None:
        pass

    @classmethod
    def _read(cls, directory: Path, config: dict) -> "NeuralCostModel":
        with saved_config_read(directory):
            settings = {**cls.absent_settings, **config["model"]}
            model = cls(cls.config_cls(**settings), TrainConfig(**config.get("train", {})))
        model.normalizer = Normalizer.from_json(config.get("normalizer", {}))
        model._restore_hardware(config)
        model.history = config.get("history", {})
        model._restore_fitted(config)
        net = model.build_net()
        try:
            state = _grown_embeddings(load_file(str(directory / WEIGHTS)), net.state_dict())
            net.load_state_dict(state)
        except FileNotFoundError:
            raise CrosstuneError(f"{directory}: {WEIGHTS} is missing") from None
        except (SafetensorError, OSError, RuntimeError, ValueError) as err:
            raise CrosstuneError(f"{directory}: {WEIGHTS} is corrupt or does not match the config ({str(err)[:200]})") from None
        model.net = net.eval()
        return model


def _grown_embeddings(saved: dict, current: dict) -> dict:
    """The token vocabulary only grows by appending categories (tokens.py), so a model saved before an
    extension has a smaller category embedding: its missing rows become copies of its ``other`` row,
    the category those strings had when it was trained."""
    for name, weight in saved.items():
        if name.endswith("cat_embedding.weight") and name in current:
            rows = current[name].shape[0]
            if weight.ndim == 2 and weight.shape[0] < rows and weight.shape[0] > tokens.OTHER_CAT:
                extra = weight[tokens.OTHER_CAT].expand(rows - weight.shape[0], -1)
                saved[name] = torch.cat([weight, extra], dim=0)
    return saved
