"""``ensemble``: several models of one neural kind, trained alike but for the seed, scoring together.

In the tuner the pre-training seed of crossfeat moved ResNet-18's first tuning pass from 5.8% to 21.0%
above the baseline's final latency, while the seeds' offline figures were too close to tell the better
one in advance (docs/BENCHMARKS.md, "The same 8-epoch recipe with pre-training seeds 1, 2 and 3"). The
ensemble's score is the mean of its members' raw scores: trained with the pairwise loss, a score
difference is the log-odds of a pair's order, on one scale for every member, so the mean is the
members' log-odds averaged (a geometric mean of the odds). Raw scores, not ones standardised per call,
so that a program's score does not depend on what else is scored with it.

Member ``i`` is trained with seed ``seed + i`` on the same records (initial weights and batch order
differ). Its directory is ``member-<i>/`` inside the ensemble's, a model directory of its own.
Prediction costs one member's time per member; featurising is shared by members with the same
normalisation (all of them, when trained together).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from ..dataset import Dataset
from ..errors import CrosstuneError
from ..features import featurize
from ..train import TrainConfig
from .base import CostModel, FitOptions, copied, saved_config_read, write_config

MEMBER_DIR = "member-{}"


@dataclass(frozen=True)
class EnsembleConfig:
    member: str = "crossfeat"  # a neural model kind
    members: int = 3

    def problem(self) -> str | None:
        from .neural import NeuralCostModel
        from .registry import MODEL_KINDS, model_class

        if self.member not in MODEL_KINDS or self.member == EnsembleModel.kind:
            return f"member ({self.member!r}) must be one of {', '.join(k for k in MODEL_KINDS if k != 'ensemble')}"
        if not issubclass(model_class(self.member), NeuralCostModel):
            return f"member ({self.member!r}) must be a neural model: the members differ by their training seed"
        return None


class EnsembleModel(CostModel):
    kind = "ensemble"
    config_cls = EnsembleConfig
    # The members' own options; --resume is not one: each member has a checkpoint of its own, but the
    # ensemble does not track which of them finished.
    options = frozenset({"epochs", "loss", "lr", "device"})
    warm_starts = True

    def __init__(self, config: EnsembleConfig | None = None, train_config: TrainConfig | None = None):
        from .registry import model_class

        self.config = copied(config, EnsembleConfig)
        train_config = train_config or TrainConfig()
        # The architecture overrides are the ensemble's own (member kind and count); members take their
        # defaults. The learning rate and the rest: the member kind's defaults, filled in as it would.
        self.train_config = replace(train_config.with_defaults(model_class(self.config.member).train_defaults),
                                    architecture=dict(train_config.architecture))
        self.members: list[CostModel] = []
        self.history: dict = {}
        self.hardware_seen: dict[str, list[float]] = {}
        self.hardware_descriptors: dict[str, dict] = {}

    def member_train_config(self, index: int) -> TrainConfig:
        return replace(self.train_config, seed=self.train_config.seed + index, architecture={})

    def fit(self, train: Dataset, valid: Dataset | None = None, options: FitOptions | None = None) -> dict:
        from .registry import create_model

        options = options or FitOptions()
        warm = options.warm_start and len(self.members) == self.config.members
        if not warm:
            self.members = [create_model(self.config.member, self.member_train_config(i))
                            for i in range(self.config.members)]
        histories = []
        for index, member in enumerate(self.members):
            checkpoint = Path(options.checkpoint_dir) / MEMBER_DIR.format(index) if options.checkpoint_dir else None
            histories.append(member.fit(train, valid, replace(options, checkpoint_dir=checkpoint)))
        self.hardware_seen = dict(self.members[0].hardware_seen)
        self.hardware_descriptors = dict(self.members[0].hardware_descriptors)
        # Every member's epochs, each tagged with its member (a member's full history is in its own config):
        # the training throughput counts all of them.
        history = {"members": len(histories),
                   "epochs": [{**epoch, "member": i} for i, h in enumerate(histories) for epoch in h.get("epochs", [])]}
        self._keep_history(history, warm)
        return history

    def predict(self, programs: Dataset) -> np.ndarray:
        if not self.members:
            raise CrosstuneError("model is not trained or loaded")
        featurised: list[tuple[dict, object]] = []  # (normaliser as JSON, its features): one per normaliser
        total = np.zeros(len(programs), dtype=np.float64)
        for member in self.members:
            key = member.normalizer.to_json()
            feats = next((f for k, f in featurised if k == key), None)
            if feats is None:
                feats = featurize(programs, member.normalizer)
                featurised.append((key, feats))
            total += member.predict_features(feats)
        return total / len(self.members)

    @property
    def max_steps(self) -> int | None:
        return self.members[0].max_steps if self.members else None

    def _write(self, directory: Path) -> dict:
        if not self.members:
            raise CrosstuneError("cannot save a model that was not trained")
        for index, member in enumerate(self.members):
            folder = directory / MEMBER_DIR.format(index)
            folder.mkdir()
            write_config(folder, member._write(folder))
        return {"kind": self.kind, "model": asdict(self.config), "train": asdict(self.train_config),
                **self._hardware_json(), "history": self.history}

    @classmethod
    def _read(cls, directory: Path, config: dict) -> "EnsembleModel":
        from .registry import load_model

        with saved_config_read(directory):
            model = cls(EnsembleConfig(**config["model"]), TrainConfig(**config.get("train", {})))
        model._restore_hardware(config)
        model.history = config.get("history", {})
        model.members = [load_model(directory / MEMBER_DIR.format(i)) for i in range(model.config.members)]
        kinds = {member.kind for member in model.members}
        if kinds != {model.config.member}:
            raise CrosstuneError(f"{directory}: members are {', '.join(sorted(kinds))}, the config says {model.config.member}")
        return model
