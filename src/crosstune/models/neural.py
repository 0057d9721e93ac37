"""What the PyTorch cost models share: featurising, batched prediction, saving and loading."""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from .. import tokens
from ..dataset import Dataset
from ..errors import CrosstuneError
from ..features import Features, Normalizer, featurize, spec_vectors
from ..train import TrainConfig, train_neural
from .base import CostModel, write_config

PREDICT_BATCH = 512
WEIGHTS = "weights.safetensors"


class NeuralCostModel(CostModel):
    """Subclasses define ``build_net`` (an nn.Module whose forward takes the tensors of
    ``batch_tensors`` and returns one score per program) and their config dataclass."""

    config_cls: type

    def __init__(self, config=None, train_config: TrainConfig | None = None):
        self.config = config if config is not None else self.config_cls()
        self.train_config = train_config or TrainConfig()
        self.normalizer: Normalizer | None = None
        self.net: torch.nn.Module | None = None
        self.history: dict = {}
        self.hardware_seen: dict[str, list[float]] = {}

    @abstractmethod
    def build_net(self) -> torch.nn.Module: ...

    @abstractmethod
    def batch_tensors(self, feats: Features, rows: np.ndarray, device: torch.device) -> dict[str, torch.Tensor]: ...

    def fit(self, train: Dataset, valid: Dataset | None = None, checkpoint_dir: str | Path | None = None,
            resume: bool = False, progress: bool = True, hooks=None, warm_start: bool = False) -> dict:
        seen = spec_vectors({n: train.specs[n] for n in train.hardware_names if n in train.specs})
        self.hardware_seen = {**self.hardware_seen, **seen} if warm_start else seen
        self.history = train_neural(self, train, valid, self.train_config,
                                    Path(checkpoint_dir) if checkpoint_dir else None, resume, progress, hooks,
                                    warm_start=warm_start)
        return self.history

    def predict(self, programs: Dataset) -> np.ndarray:
        if self.net is None or self.normalizer is None:
            raise CrosstuneError("model is not trained or loaded")
        return self.predict_features(featurize(programs, self.normalizer))

    @torch.inference_mode()
    def predict_features(self, feats: Features) -> np.ndarray:
        net = self.net.eval()
        device = next(net.parameters()).device
        # Similar lengths in one batch waste less padding.
        order = np.argsort(feats.lengths, kind="stable")
        scores = np.empty(len(feats), dtype=np.float64)
        for start in range(0, len(order), PREDICT_BATCH):
            rows = order[start:start + PREDICT_BATCH]
            scores[rows] = net(**self.batch_tensors(feats, rows, device)).float().cpu().numpy()
        return scores

    def save(self, directory: str | Path) -> None:
        directory = Path(directory)
        if self.net is None or self.normalizer is None:
            raise CrosstuneError("cannot save a model that was not trained")
        directory.mkdir(parents=True, exist_ok=True)
        tmp = directory / f".{WEIGHTS}.tmp"
        save_file({k: v.detach().cpu().contiguous() for k, v in self.net.state_dict().items()}, str(tmp))
        tmp.replace(directory / WEIGHTS)
        write_config(directory, {
            "kind": self.kind, "model": asdict(self.config), "train": asdict(self.train_config),
            "normalizer": self.normalizer.to_json(), "hardware_seen": self.hardware_seen,
            "history": self.history,
        })

    @classmethod
    def from_config(cls, directory: Path, config: dict) -> "NeuralCostModel":
        try:
            model = cls(cls.config_cls(**config["model"]), TrainConfig(**config.get("train", {})))
        except (TypeError, KeyError) as err:
            raise CrosstuneError(f"{directory}: model config does not match this crosstune ({err})") from None
        model.normalizer = Normalizer.from_json(config.get("normalizer", {}))
        model.hardware_seen = config.get("hardware_seen", {})
        model.history = config.get("history", {})
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

    def to_device(self, device: str) -> None:
        if self.net is not None:
            self.net.to(device)


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
