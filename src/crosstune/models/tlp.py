"""TLP (Zhai et al., ASPLOS'23) re-implemented on crosstune tokens.

As in TLP: the step sequence is cropped/padded to a fixed length (25 steps x 22 features for CPU
hardware, 40 x 20 for GPUs); each step is a one-hot of its kind plus its numeric arguments; a
per-token MLP 64 -> 128 -> 256 -> 256, one multi-head self-attention layer with a residual, two
residual blocks, a per-token linear decoder summed over tokens; LambdaRank over the (mixed) batch;
Adam with lr 7e-4. TLP has no padding mask: padded steps are zero vectors that still pass through
attention, exactly as in the original.

Mapping our 30 primitive kinds onto TLP's fixed width: the kinds below get one-hot slots, every other
kind shares an ``other`` slot; the step's string category becomes one scaled number; the 8 argument
slots follow. CPU: 13 + 1 + 8 = 22 features; GPU: 11 + 1 + 8 = 20.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch
from torch import nn

from .. import tokens
from ..dataset import Dataset
from ..features import Features
from .neural import NeuralCostModel

_GPU_KINDS = (("split",), ("follow_split",), ("follow_fused_split",), ("reorder",), ("fuse",), ("bind", "vthread"),
              ("unroll", "parallel", "vectorize"), ("compute_at", "reverse_compute_at"),
              ("compute_inline", "compute_root", "reverse_compute_inline"), ("cache_read", "cache_write"))
_CPU_KINDS = (("split",), ("follow_split",), ("follow_fused_split",), ("reorder",), ("fuse",), ("parallel",),
              ("vectorize",), ("unroll",), ("compute_at", "reverse_compute_at"),
              ("compute_inline", "compute_root", "reverse_compute_inline"), ("cache_read", "cache_write"), ("rfactor",))


@dataclass
class TLPConfig:
    # "cpu": 25 steps x 22 features; "gpu": 40 x 20; "auto": by the training hardware (most records
    # decide), resolved by ``fit`` and saved as the model's ``input_target``.
    target: str = "auto"
    heads: int = 8

    def problem(self) -> str | None:
        if self.target not in ("auto", "cpu", "gpu"):
            return f"target must be auto, cpu or gpu, not {self.target!r}"
        if 256 % self.heads:
            return f"heads ({self.heads}) must divide 256"
        return None

    @property
    def max_steps(self) -> int:
        return 25 if self.target == "cpu" else 40

    @property
    def buckets(self) -> tuple[tuple[str, ...], ...]:
        return _CPU_KINDS if self.target == "cpu" else _GPU_KINDS

    @property
    def features(self) -> int:
        return len(self.buckets) + 1 + 1 + tokens.NUM_ARGS  # kind slots + other + category + args


class TLPNet(nn.Module):
    def __init__(self, cfg: TLPConfig):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(cfg.features, 64), nn.ReLU(), nn.Linear(64, 128), nn.ReLU(),
                                     nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU())
        self.attention = nn.MultiheadAttention(256, cfg.heads, batch_first=True)
        self.residual1 = nn.Sequential(nn.Linear(256, 256), nn.ReLU())
        self.residual2 = nn.Sequential(nn.Linear(256, 256), nn.ReLU())
        self.decoder = nn.Linear(256, 1)

    def forward(self, steps: torch.Tensor) -> torch.Tensor:
        h = self.encoder(steps)
        attended, _ = self.attention(h, h, h, need_weights=False)
        h = h + attended
        h = h + self.residual1(h)
        h = h + self.residual2(h)
        return self.decoder(h).sum(dim=(1, 2))


class TLPModel(NeuralCostModel):
    kind = "tlp"
    config_cls = TLPConfig
    # TLP's published training: Adam at 7e-4, one LambdaRank over the whole mixed batch.
    train_defaults = {"lr": 7e-4, "optimizer": "adam", "batch_across_groups": True, "loss": "lambdarank"}

    def __init__(self, config: TLPConfig | None = None, train_config=None):
        super().__init__(config, train_config)
        self.input_target = None if self.config.target == "auto" else self.config.target

    @property
    def shape(self) -> TLPConfig:
        """The config with the input target resolved. Before ``fit`` an ``auto`` model has the GPU
        shape (what the benchmark's roofline probe of an untrained model measures)."""
        return replace(self.config, target=self.input_target or "gpu")

    @property
    def max_steps(self) -> int:
        return self.shape.max_steps

    def _prepare(self, train: Dataset, warm: bool) -> None:
        if warm or self.config.target != "auto":
            return  # fine-tuning keeps the network's input shape
        gpu = sum(int(np.sum(train.hardware == i)) for i, n in enumerate(train.hardware_names)
                  if n in train.specs and train.specs[n].kind == "gpu")
        self.input_target = "gpu" if gpu * 2 >= len(train) else "cpu"

    def _fitted_json(self) -> dict:
        return {"input_target": self.shape.target}

    def _restore_fitted(self, config: dict) -> None:
        self.input_target = config.get("input_target", self.input_target)

    @property
    def _bucket_of(self) -> np.ndarray:
        shape = self.shape
        bucket = np.full(len(tokens.KINDS), len(shape.buckets), dtype=np.int64)
        for slot, names in enumerate(shape.buckets):
            for name in names:
                bucket[tokens.KIND_ID[name]] = slot
        return bucket

    def build_net(self) -> nn.Module:
        return TLPNet(self.shape)

    def batch_tensors(self, feats: Features, rows: np.ndarray, device: torch.device) -> dict[str, torch.Tensor]:
        shape = self.shape
        kinds, cats, args, mask = feats.padded(rows, max_len=shape.max_steps)
        bucket_of = self._bucket_of
        n_slots = len(shape.buckets) + 1
        onehot = np.zeros(kinds.shape + (n_slots,), dtype=np.float32)
        np.put_along_axis(onehot, bucket_of[kinds][..., None], 1.0, axis=-1)
        onehot *= mask[..., None]
        category = (cats / tokens.BASE_CATEGORIES).astype(np.float32)[..., None] * mask[..., None]
        steps = np.concatenate([onehot, category, args], axis=-1)
        return {"steps": torch.from_numpy(steps).to(device)}
