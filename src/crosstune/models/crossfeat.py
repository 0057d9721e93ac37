"""The cross-feature cost model: attention over program x operator x hardware features.

A program is a sequence of schedule-primitive tokens; each becomes an embedding of its kind and string
category plus an MLP of its numeric arguments (and of each factor's power of two: whether a tile is a
multiple of the vector width is what a log2 value hides), plus a sinusoidal position (any length, no
cropping).
The hardware descriptor and the operator descriptor each get their own learned embedding and enter the
sequence as two extra tokens, so that self-attention lets every program token look at the machine and
the operator it is scheduled for. A padding mask keeps padded positions out of attention. The head
reads the pooled program tokens next to the hardware and operator tokens and gives one score.

``crossfeat-nohw`` is the same network without the hardware and operator tokens (the ablation).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, replace

import numpy as np
import torch
from torch import nn

from .. import tokens
from ..errors import CrosstuneError
from ..features import LANE_CHANNELS, MAX_TWOS, OP_FEATURES, SUMMARY_FEATURES, Features, normalised_hardware
from ..hardware.registry import FEATURE_NAMES
from ..records.operators import OP_KINDS
from .encoder import Encoder
from .neural import NeuralCostModel


UNSEEN_HARDWARE_MODES = ("own", "nearest", "similar", "mean")


@dataclass
class CrossFeatConfig:
    d_model: int = 64
    heads: int = 2  # 2 heads of 32 rank as well as 4 of 16 and predict 1.16-1.31x faster on CPU (BENCHMARKS.md)
    # One layer, not two: 1.5x faster to score on 2 CPU cores (the tuner calls it hundreds of times) and,
    # over 3 seeds each way on K80 <-> V100, no loss beyond seed noise (docs/BENCHMARKS.md, "One encoder
    # layer"). Models saved with two keep two: config.json records the setting.
    layers: int = 1
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
    # Ways to read a program's arguments that a tree reads well, tried on AutoTVM knob lists (0/False =
    # off): ``flat_tokens`` N adds one more lead token, an MLP of the first N tokens' arguments laid out
    # by position (what xgb reads: on a template's fixed knob order position names the knob);
    # ``category_scaled_args`` multiplies each token's argument embedding by a learned per-category
    # scale, so that the same factor can mean different things for different knobs.
    flat_tokens: int = 0
    category_scaled_args: bool = False
    # Each factor's power of two (features.factor_twos) next to its log2, into the argument MLP: within
    # one device on AutoTVM knobs PCA 0.935 with it against 0.887 without (docs/BENCHMARKS.md).
    factor_twos: bool = True
    # What hardware token scores a program on a machine the model was not trained on (prediction only;
    # a training machine, i.e. one whose descriptor is a training descriptor, always gets its own):
    # "own" its descriptor; or the training machines' tokens, each scoring the program, mixed --
    # "nearest" the most similar machine's (by distance of the normalised descriptors), "similar"
    # weighted by inverse squared distance, "mean" uniformly. A mixture stays inside what training
    # saw: a descriptor outside the training range (an ARM board among x86 CPUs) cannot push the
    # hardware token where the network never learned anything. Scores are mixed as they are: trained
    # with the pairwise loss, a score difference is the log-odds of the pair's order on that machine,
    # the same scale for every training machine (a mixture is a weighted geometric mean of the odds).
    # Set it at training (--arch) or on a loaded model with ``with_unseen_hardware``. "similar" is the
    # default: held out, 3 seeds, it gained 0.027 PCA on cortex-a72 (whose own descriptor lies outside
    # what the training machines span) and Σ top-1 on i7-3770, and lost nothing beyond seed noise
    # elsewhere (docs/BENCHMARKS.md, "Which hardware token scores an unseen machine").
    unseen_hardware: str = "similar"
    # Each split factor's and vectorize extent's distance to the vector lanes of the row's own machine, and
    # whether it is a multiple of them (features.lane_channels), into the argument MLP: the machine's
    # vector width reaches every factor directly, and stays the machine's own when ``unseen_hardware``
    # mixes the training machines' tokens.
    lane_features: bool = False

    def problem(self) -> str | None:
        if self.d_model % self.heads or self.d_model % 2:
            return f"d_model ({self.d_model}) must be even and a multiple of heads ({self.heads})"
        if not 0.0 <= self.hardware_dropout < 1.0:
            return f"hardware_dropout ({self.hardware_dropout}) must be in [0, 1)"
        if self.hardware_noise < 0:
            return f"hardware_noise ({self.hardware_noise}) must not be negative"
        if not 0 <= self.flat_tokens <= 256:
            return f"flat_tokens ({self.flat_tokens}) must be in [0, 256]"
        if self.unseen_hardware not in UNSEEN_HARDWARE_MODES:
            return f"unseen_hardware ({self.unseen_hardware!r}) must be one of {', '.join(UNSEEN_HARDWARE_MODES)}"
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


def flat_by_position(args: torch.Tensor, mask: torch.Tensor, positions: int) -> torch.Tensor:
    """(batch, positions * (NUM_ARGS + 1)): each of the first ``positions`` tokens' arguments and a
    presence bit, zeros past the program's end (cropped or padded to exactly ``positions``)."""
    batch, length, n_args = args.shape
    present = mask[:, :positions, None].to(args.dtype)
    flat = torch.cat([args[:, :positions] * present, present], dim=-1)
    if length < positions:
        flat = torch.nn.functional.pad(flat, (0, 0, 0, positions - length))
    return flat.reshape(batch, positions * (n_args + 1))


class CrossFeatNet(nn.Module):
    def __init__(self, cfg: CrossFeatConfig):
        super().__init__()
        d = cfg.d_model
        self.cfg = cfg
        self.kind_embedding = nn.Embedding(len(tokens.KINDS), d, padding_idx=0)
        self.cat_embedding = nn.Embedding(len(tokens.CATEGORIES), d)
        self.ordinal_embedding = nn.Embedding(cfg.max_ordinal, d)
        arg_inputs = tokens.NUM_ARGS * (2 if cfg.factor_twos else 1) + (LANE_CHANNELS if cfg.lane_features else 0)
        self.arg_mlp = _mlp(arg_inputs, d, d)
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
        if cfg.flat_tokens:
            self.flat_mlp = _mlp(cfg.flat_tokens * (tokens.NUM_ARGS + 1), d, d)
            extra += 1
        if cfg.category_scaled_args:  # starts at 1: the plain argument embedding
            self.cat_arg_scale = nn.Embedding(len(tokens.CATEGORIES), d)
            nn.init.zeros_(self.cat_arg_scale.weight)
        self.head = _mlp(d * (2 + extra), d, 1)

    def forward(self, kinds, cats, args, mask, ordinal, summary, op_kind, op, hw, twos=None,
                lanes=None) -> torch.Tensor:
        ordinal = ordinal.clamp_max(self.cfg.max_ordinal - 1)
        arg_inputs = args
        if self.cfg.factor_twos:  # the arguments' powers of two, scaled to [0, 1]
            if twos is None:
                raise ValueError("this network reads the factors' powers of two: pass twos (batch_tensors does)")
            arg_inputs = torch.cat([args, twos.to(args.dtype) / MAX_TWOS], dim=-1)
        if self.cfg.lane_features:
            if lanes is None:
                raise ValueError("this network reads lane features: pass lanes (batch_tensors does)")
            arg_inputs = torch.cat([arg_inputs, lanes.to(args.dtype)], dim=-1)
        arg_embedding = self.arg_mlp(arg_inputs)
        if self.cfg.category_scaled_args:
            arg_embedding = arg_embedding * (1.0 + self.cat_arg_scale(cats))
        x = self.kind_embedding(kinds) + self.cat_embedding(cats) + arg_embedding + self.ordinal_embedding(ordinal)
        x = x + sinusoidal_positions(x.shape[1], x.shape[2], x.device)
        lead = [self.summary_mlp(summary)]
        if self.cfg.flat_tokens:
            lead.append(self.flat_mlp(flat_by_position(args, mask, self.cfg.flat_tokens)))
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
    # models saved before a setting existed load as they were trained and evaluated
    absent_settings = {"factor_twos": False, "unseen_hardware": "own", "lane_features": False}

    def build_net(self) -> nn.Module:
        return CrossFeatNet(self.config)

    def batch_tensors(self, feats: Features, rows: np.ndarray, device: torch.device) -> dict[str, torch.Tensor]:
        kinds, cats, args, mask, ordinal = feats.padded(rows, with_ordinal=True)
        extra = {}
        if self.config.factor_twos:
            extra["twos"] = torch.from_numpy(feats.padded_twos(rows, mask)).to(device)  # uint8: a quarter to copy
        if self.config.lane_features:
            extra["lanes"] = torch.from_numpy(feats.padded_lanes(rows, kinds, args, mask)).to(device)
        return {**extra,
            "kinds": torch.from_numpy(kinds).to(device), "cats": torch.from_numpy(cats).to(device),
            "args": torch.from_numpy(args).to(device), "mask": torch.from_numpy(mask).to(device),
            "ordinal": torch.from_numpy(ordinal).to(device),
            "summary": torch.from_numpy(feats.summary[rows]).to(device),
            "op_kind": torch.from_numpy(feats.op_kind[rows]).to(device),
            "op": torch.from_numpy(feats.op[rows]).to(device), "hw": torch.from_numpy(feats.hw[rows]).to(device),
        }

    def with_unseen_hardware(self, mode: str) -> "CrossFeatModel":
        """This trained model (weights shared) scoring unseen machines the ``mode`` way."""
        if not self.config.use_cross_features:
            raise CrosstuneError(f"{self.kind} has no hardware token: unseen_hardware does not apply")
        config = replace(self.config, unseen_hardware=mode)
        problem = config.problem()
        if problem:
            raise CrosstuneError(f"{self.kind}: {problem}")
        variant = copy.copy(self)
        variant.config = config  # a new model object: this one's config is left as it was
        return variant

    def predict_features(self, feats: Features) -> np.ndarray:
        mode = self.config.unseen_hardware
        if mode == "own" or not self.config.use_cross_features or not self.hardware_seen:
            return super().predict_features(feats)
        known = normalised_hardware(list(self.hardware_seen.values()), self.normalizer)
        weights = hardware_mix_weights(feats.hw, known, mode)  # (rows, training machines)
        if self.config.factor_twos:
            feats.twos()  # once, shared by every pass below
        scores = np.zeros(len(feats), dtype=np.float64)
        for machine in np.flatnonzero(weights.any(axis=0)):  # one pass per machine some row uses
            as_if = super().predict_features(feats.on_hardware(known[machine]))
            scores += weights[:, machine] * as_if
        return scores


def hardware_mix_weights(hw: np.ndarray, known: np.ndarray, mode: str) -> np.ndarray:
    """(rows, machines) weights summing to 1 per row: how much each training machine's token scores a
    row of normalised hardware vector ``hw`` (see ``CrossFeatConfig.unseen_hardware``). A row on a
    training machine (distance ~0) gets that machine alone, whatever the mode."""
    if mode not in UNSEEN_HARDWARE_MODES[1:]:
        raise ValueError(f"unseen_hardware mode {mode!r}: choose from {', '.join(UNSEEN_HARDWARE_MODES[1:])}")
    distance = np.linalg.norm(hw[:, None, :].astype(np.float64) - known[None, :, :], axis=-1)
    nearest = distance.argmin(axis=1)
    rows = np.arange(len(hw))
    weights = np.zeros_like(distance)
    if mode == "mean":
        weights[:] = 1.0 / known.shape[0]
    elif mode == "similar":
        inverse = 1.0 / np.maximum(distance, 1e-12) ** 2
        weights = inverse / inverse.sum(axis=1, keepdims=True)
    else:  # nearest
        weights[rows, nearest] = 1.0
    seen = distance[rows, nearest] < 1e-6  # the same float32 bits as a training machine's (normalised_hardware)
    weights[seen] = 0.0
    weights[rows[seen], nearest[seen]] = 1.0
    return weights


@dataclass
class CrossFeatNoHwConfig(CrossFeatConfig):
    unseen_hardware: str = "own"  # no hardware token: there is nothing to mix


class CrossFeatNoHwModel(CrossFeatModel):
    kind = "crossfeat-nohw"
    config_cls = CrossFeatNoHwConfig

    def __init__(self, config: CrossFeatConfig | None = None, train_config=None):
        super().__init__(config, train_config)
        if self.config.unseen_hardware != "own":
            raise CrosstuneError("crossfeat-nohw has no hardware token: unseen_hardware does not apply")
        self.config = replace(self.config, use_cross_features=False)  # on the model's own copy
