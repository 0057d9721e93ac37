"""The cross-feature cost model: attention over program x operator x hardware features.

A program is a sequence of schedule-primitive tokens; each becomes an embedding of its kind and string
category plus an MLP of its numeric arguments, plus a sinusoidal position (any length, no cropping).
The hardware descriptor and the operator descriptor each get their own learned embedding and enter the
sequence as two extra tokens, so that self-attention lets every program token look at the machine and
the operator it is scheduled for. A padding mask keeps padded positions out of attention. The head
reads the pooled program tokens next to the hardware and operator tokens and gives one score.

``crossfeat-nohw`` is the same network without the hardware and operator tokens (the ablation).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import torch
from torch import nn

from .. import tokens
from ..features import OP_FEATURES, SUMMARY_FEATURES, Features
from ..hardware.registry import FEATURE_NAMES
from ..records.operators import OP_KINDS
from .encoder import Encoder
from .neural import NeuralCostModel


@dataclass
class CrossFeatConfig:
    d_model: int = 64
    heads: int = 2  # 2 heads of 32 rank as well as 4 of 16 and predict 1.16-1.31x faster on CPU (BENCHMARKS.md)
    layers: int = 2
    ff_dim: int = 128
    dropout: float = 0.0
    use_cross_features: bool = True  # False = crossfeat-nohw
    max_ordinal: int = 32  # "i-th token of this kind" embeddings; later ones share the last
    # Regularisers of the hardware token while training (0 = off), tried for transfer to unseen devices:
    # with a handful of training devices the descriptor can act as a device identifier. Noise shifts each
    # device's normalised features (one draw per device and batch, so a group's programs share it) and
    # asks for rankings that change smoothly with the specs; dropout replaces a device's token by a
    # learned "unknown device" token that carries no hardware information.
    hardware_noise: float = 0.0
    hardware_dropout: float = 0.0

    def problem(self) -> str | None:
        if self.d_model % self.heads or self.d_model % 2:
            return f"d_model ({self.d_model}) must be even and a multiple of heads ({self.heads})"
        if not 0.0 <= self.hardware_dropout < 1.0:
            return f"hardware_dropout ({self.hardware_dropout}) must be in [0, 1)"
        if self.hardware_noise < 0:
            return f"hardware_noise ({self.hardware_noise}) must not be negative"
        return None


def _mlp(n_in: int, n_hidden: int, n_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(n_in, n_hidden), nn.GELU(), nn.Linear(n_hidden, n_out))


def sinusoidal_positions(length: int, dim: int, device: torch.device) -> torch.Tensor:
    position = torch.arange(length, device=device, dtype=torch.float32)[:, None]
    freq = torch.exp(torch.arange(0, dim, 2, device=device, dtype=torch.float32) * (-math.log(10000.0) / dim))
    table = torch.zeros(length, dim, device=device)
    table[:, 0::2] = torch.sin(position * freq)
    table[:, 1::2] = torch.cos(position * freq[: dim // 2])
    return table


class CrossFeatNet(nn.Module):
    def __init__(self, cfg: CrossFeatConfig):
        super().__init__()
        d = cfg.d_model
        self.cfg = cfg
        self.kind_embedding = nn.Embedding(len(tokens.KINDS), d, padding_idx=0)
        self.cat_embedding = nn.Embedding(len(tokens.CATEGORIES), d)
        self.ordinal_embedding = nn.Embedding(cfg.max_ordinal, d)
        self.arg_mlp = _mlp(tokens.NUM_ARGS, d, d)
        self.encoder = Encoder(d, cfg.heads, cfg.ff_dim, cfg.dropout, cfg.layers)
        self.norm = nn.LayerNorm(d)
        extra = 0
        if cfg.use_cross_features:
            self.hardware_mlp = _mlp(len(FEATURE_NAMES), d, d)
            self.operator_mlp = _mlp(OP_FEATURES, d, d)
            self.op_kind_embedding = nn.Embedding(len(OP_KINDS), d)
            self.type_embedding = nn.Embedding(2, d)  # marks the hardware and operator tokens
            if cfg.hardware_dropout:  # only then, so that weights saved without it still load
                self.unknown_hardware = nn.Parameter(torch.zeros(d))
            extra = 2
        # A position-free summary of the program (count and mean arguments per primitive kind) enters
        # as one more token: what a tree model reads well, next to what attention reads.
        self.summary_mlp = _mlp(SUMMARY_FEATURES, d, d)
        self.head = _mlp(d * (2 + extra), d, 1)

    def forward(self, kinds, cats, args, mask, ordinal, summary, op_kind, op, hw) -> torch.Tensor:
        ordinal = ordinal.clamp_max(self.cfg.max_ordinal - 1)
        x = self.kind_embedding(kinds) + self.cat_embedding(cats) + self.arg_mlp(args) + self.ordinal_embedding(ordinal)
        x = x + sinusoidal_positions(x.shape[1], x.shape[2], x.device)
        lead = [self.summary_mlp(summary)]
        if self.cfg.use_cross_features:
            lead.append(self._hardware_token(hw) + self.type_embedding.weight[0])
            lead.append(self.operator_mlp(op) + self.op_kind_embedding(op_kind) + self.type_embedding.weight[1])
        extra = len(lead)
        x = torch.cat([t[:, None] for t in lead] + [x], dim=1)
        keep = torch.cat([torch.ones_like(mask[:, :1]).expand(-1, extra), mask], dim=1)
        h = self.norm(self.encoder(x, keep))
        program = h[:, extra:]
        weights = mask.unsqueeze(-1).to(h.dtype)
        pooled = (program * weights).sum(1) / weights.sum(1).clamp_min(1.0)
        parts = [pooled] + [h[:, i] for i in range(extra)]
        return self.head(torch.cat(parts, dim=-1)).squeeze(-1)


    def _hardware_token(self, hw: torch.Tensor) -> torch.Tensor:
        noise, dropout = (self.cfg.hardware_noise, self.cfg.hardware_dropout) if self.training else (0.0, 0.0)
        if not noise and not dropout:
            return self.hardware_mlp(hw)
        devices, device_of_row = torch.unique(hw, dim=0, return_inverse=True)
        if noise:
            hw = hw + noise * torch.randn_like(devices)[device_of_row]
        token = self.hardware_mlp(hw)
        if dropout:
            dropped = (torch.rand(len(devices), device=hw.device) < dropout)[device_of_row]
            token = torch.where(dropped[:, None], self.unknown_hardware.expand_as(token), token)
        return token


class CrossFeatModel(NeuralCostModel):
    kind = "crossfeat"
    config_cls = CrossFeatConfig

    def build_net(self) -> nn.Module:
        return CrossFeatNet(self.config)

    def batch_tensors(self, feats: Features, rows: np.ndarray, device: torch.device) -> dict[str, torch.Tensor]:
        kinds, cats, args, mask, ordinal = feats.padded(rows, with_ordinal=True)
        return {
            "kinds": torch.from_numpy(kinds).to(device), "cats": torch.from_numpy(cats).to(device),
            "args": torch.from_numpy(args).to(device), "mask": torch.from_numpy(mask).to(device),
            "ordinal": torch.from_numpy(ordinal).to(device),
            "summary": torch.from_numpy(feats.summary[rows]).to(device),
            "op_kind": torch.from_numpy(feats.op_kind[rows]).to(device),
            "op": torch.from_numpy(feats.op[rows]).to(device), "hw": torch.from_numpy(feats.hw[rows]).to(device),
        }


class CrossFeatNoHwModel(CrossFeatModel):
    kind = "crossfeat-nohw"

    def __init__(self, config: CrossFeatConfig | None = None, train_config=None):
        super().__init__(config, train_config)
        self.config = replace(self.config, use_cross_features=False)  # on the model's own copy
