"""The training loop of the neural cost models, readable top to bottom.

The loop knows nothing of model classes: a model hands it a function that builds its network and one
that turns featurised rows into the network's inputs, and gets back the trained network, the
normalisation it used and the history (models use the loop, never the other way round).

Batches are built from groups (one task on one hardware): each batch holds ``groups_per_batch`` chunks
of up to ``group_size`` programs of one group, and the ranking loss is computed within each chunk.
Every epoch: train, validate (PCA on held-out groups), keep the best epoch, write a checkpoint.
``resume`` continues from the last checkpoint after the process was killed. Under torchrun every
rank takes its share of the epoch's batches and DistributedDataParallel averages the gradients.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from tqdm import tqdm

from . import distributed
from .atomic import staged_file, write_text
from .dataset import Dataset
from .errors import CrosstuneError
from .features import Features, Normalizer, featurize
from .groups import grouped
from .losses import LOSSES
from .metrics import validation_pca

# (features, rows, device) -> the keyword tensors of the network's forward for those rows
BatchTensors = Callable[[Features, np.ndarray, torch.device], dict]
PREDICT_BATCH = 512
# A prediction batch ends where a program is more than this much longer than the batch's shortest, once it
# holds PREDICT_MIN_BATCH programs: every program is padded to the batch's longest, and a call that mixes
# tasks (10 to 48 tokens) spent most of its time on padding (1.3-1.8x faster bucketed; BENCHMARKS.md).
PREDICT_LENGTH_SLACK = 0.25
PREDICT_MIN_BATCH = 16


class TrainHooks:
    """Optional callbacks of the training loop (the MLPerf-style benchmark logs through them)."""

    def epoch_start(self, epoch: int) -> None:
        pass

    def eval_start(self, epoch: int) -> None:
        pass

    def epoch_end(self, record: dict) -> bool:
        """Called with the epoch's record (epoch, loss, valid_pca, samples, seconds); True stops training."""
        return False


@dataclass(frozen=True)
class TrainConfig:
    """How a neural model is trained. ``None`` fields take the model's own default (TLP: LambdaRank,
    Adam at 7e-4 over mixed batches; crossfeat: pairwise, AdamW at 5e-3 within groups); a model
    resolves them once, on a copy, when it is constructed, so the saved config says what was used."""

    epochs: int = 12
    lr: float | None = None
    weight_decay: float = 1e-4
    optimizer: str | None = None  # adamw | adam
    loss: str | None = None  # lambdarank | pairwise | mse (crossfeat: pairwise; TLP: lambdarank)
    group_size: int = 64
    groups_per_batch: int = 8
    batch_across_groups: bool | None = None  # True (TLP): one ranking over the whole (mixed) batch
    grad_clip: float = 1.0
    seed: int = 0
    device: str = "cpu"
    # Overrides of the model's own architecture defaults (``--arch d_model=32,layers=1``); kept here
    # so that every path that builds a model from a TrainConfig carries them.
    architecture: dict = field(default_factory=dict)

    def with_defaults(self, defaults: dict) -> "TrainConfig":
        """A copy with every ``None`` field taken from ``defaults``."""
        return replace(self, **{k: v for k, v in defaults.items() if getattr(self, k) is None})

    def check(self) -> None:
        if self.loss is not None and self.loss not in LOSSES:
            raise CrosstuneError(f"unknown loss {self.loss!r}; choose {', '.join(LOSSES)}")
        if self.epochs < 1:
            raise CrosstuneError("--epochs must be at least 1")
        if self.device.startswith("cuda") and not torch.cuda.is_available():
            raise CrosstuneError("--device cuda asked for, but PyTorch sees no CUDA device")
        if self.lr is not None and not self.lr > 0:
            raise CrosstuneError(f"--lr must be positive, not {self.lr}")
        if self.optimizer not in (None, "adamw", "adam"):
            raise CrosstuneError(f"unknown optimizer {self.optimizer!r}; choose adamw or adam")


def make_batches(group: np.ndarray, rows: np.ndarray, rng: np.random.Generator, cfg: TrainConfig) -> list[np.ndarray]:
    """One epoch of batches; each batch is a (chunks, group_size) array of row indices, -1 = padding."""
    if cfg.batch_across_groups:
        order = rng.permutation(rows)
        size = cfg.group_size * cfg.groups_per_batch
        return [order[i:i + size][None, :] for i in range(0, len(order), size)]
    order, starts, ends = grouped(group, rows[rng.permutation(len(rows))])
    chunks = []
    for start, end in zip(starts, ends):
        for s in range(start, end, cfg.group_size):
            if end - s >= 2:  # a single program has nothing to be ranked against
                chunks.append(order[s:min(s + cfg.group_size, end)])
    chunks = [chunks[i] for i in rng.permutation(len(chunks))]
    return pack_batches(chunks, cfg)


def pack_batches(chunks: list[np.ndarray], cfg: TrainConfig) -> list[np.ndarray]:
    """Chunks (record indices of one group each) packed ``groups_per_batch`` to a batch, as rows of a
    ``group_size``-wide matrix padded with -1."""
    batches = []
    for i in range(0, len(chunks), cfg.groups_per_batch):
        part = chunks[i:i + cfg.groups_per_batch]
        matrix = np.full((len(part), cfg.group_size), -1, dtype=np.int64)
        for j, chunk in enumerate(part):
            matrix[j, :len(chunk)] = chunk
        batches.append(matrix)
    return batches


class _Checkpoint:
    """Model, best model and optimizer state in safetensors; progress in JSON written last."""

    def __init__(self, directory: Path):
        self.directory = directory

    def save(self, epoch: int, net: torch.nn.Module, best_state: dict, optimizer: torch.optim.Optimizer,
             history: list, best: dict, normalizer: Normalizer) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        tensors = {f"model.{k}": v.detach().cpu().contiguous() for k, v in net.state_dict().items()}
        tensors.update({f"best.{k}": v.detach().cpu().contiguous() for k, v in best_state.items()})
        opt = optimizer.state_dict()
        scalars = {}
        for index, state in opt["state"].items():
            for name, value in state.items():
                if torch.is_tensor(value) and value.dim() > 0:
                    tensors[f"opt.{index}.{name}"] = value.detach().cpu().contiguous()
                else:
                    scalars[f"{index}.{name}"] = float(value)
        name = f"state-{epoch:04d}.safetensors"
        with staged_file(self.directory / name) as tmp:
            save_file(tensors, str(tmp))
        write_text(self.directory / "progress.json", json.dumps({
            "epoch": epoch, "tensors": name, "history": history, "best": best, "opt_scalars": scalars,
            "param_groups": opt["param_groups"], "normalizer": normalizer.to_json()}))
        for old in self.directory.glob("state-*.safetensors"):
            if old.name != name:
                old.unlink(missing_ok=True)

    def load(self) -> tuple[dict, dict] | None:
        progress_path = self.directory / "progress.json"
        if not progress_path.is_file():
            return None
        try:
            progress = json.loads(progress_path.read_text())
            tensors = load_file(str(self.directory / progress["tensors"]))
        except (OSError, ValueError, KeyError, json.JSONDecodeError) as err:
            raise CrosstuneError(f"{self.directory}: checkpoint is corrupt ({err}); delete it to start over") from None
        return progress, tensors


def _restore_optimizer(optimizer: torch.optim.Optimizer, progress: dict, tensors: dict) -> None:
    state: dict[int, dict] = {}
    for key, value in tensors.items():
        if key.startswith("opt."):
            _, index, name = key.split(".", 2)
            state.setdefault(int(index), {})[name] = value
    for key, value in progress["opt_scalars"].items():
        index, name = key.split(".", 1)
        state.setdefault(int(index), {})[name] = torch.tensor(value)
    optimizer.load_state_dict({"state": state, "param_groups": progress["param_groups"]})


@dataclass
class TrainingState:
    """Optimizer, history and best weights of a run, fresh or restored from a checkpoint."""

    optimizer: torch.optim.Optimizer
    history: list
    best: dict
    best_state: dict
    first_epoch: int


def require_resolved(cfg: TrainConfig) -> None:
    """Training needs the fields a model fills (``model.train_config``); a bare TrainConfig has None there."""
    unresolved = [name for name in ("lr", "optimizer", "batch_across_groups", "loss") if getattr(cfg, name) is None]
    if unresolved:
        raise ValueError(f"training needs a resolved TrainConfig: pass model.train_config (the model fills "
                         f"{', '.join(unresolved)})")


def start_training(net: torch.nn.Module, cfg: TrainConfig, saved) -> TrainingState:
    """A new optimizer for ``net``; with ``saved`` (a checkpoint's (progress, tensors)), the weights,
    optimizer state, history and best epoch of the interrupted run, continuing after its last epoch."""
    optimizer_cls = torch.optim.AdamW if cfg.optimizer == "adamw" else torch.optim.Adam
    optimizer = optimizer_cls(net.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay if cfg.optimizer == "adamw" else 0.0)
    state = TrainingState(optimizer, [], {"epoch": -1, "valid_pca": -1.0},
                          {k: v.detach().clone() for k, v in net.state_dict().items()}, 0)
    if saved:
        progress_data, tensors = saved
        net.load_state_dict({k[6:]: v for k, v in tensors.items() if k.startswith("model.")})
        state.best_state = {k[5:]: v for k, v in tensors.items() if k.startswith("best.")}
        _restore_optimizer(optimizer, progress_data, tensors)
        state.history, state.best = progress_data["history"], progress_data["best"]
        state.first_epoch = progress_data["epoch"] + 1
    return state


def _scores_matrix(scores: torch.Tensor, batch: np.ndarray) -> torch.Tensor:
    matrix = torch.zeros(batch.shape, dtype=scores.dtype, device=scores.device)
    matrix[torch.from_numpy(batch >= 0).to(scores.device)] = scores
    return matrix


def optimizer_step(train_net: torch.nn.Module, net: torch.nn.Module, batch_tensors: BatchTensors, feats: Features,
                   batch: np.ndarray, labels: torch.Tensor, loss_fn, optimizer: torch.optim.Optimizer,
                   cfg: TrainConfig, device: torch.device) -> tuple[float, int]:
    """One optimizer step on a batch matrix (rows = groups, -1 = padding) of ``feats``' records; ``train_net``
    scores them (``net`` itself or its DDP wrapper). Returns (loss summed over the records, their number)."""
    flat = batch[batch >= 0]
    mask = torch.from_numpy(batch >= 0)
    label_matrix = torch.zeros(batch.shape, dtype=torch.float32)
    label_matrix[mask] = labels[flat]
    loss = loss_fn(_scores_matrix(train_net(**batch_tensors(feats, flat, device)), batch), label_matrix.to(device), mask.to(device))
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if cfg.grad_clip:
        torch.nn.utils.clip_grad_norm_(net.parameters(), cfg.grad_clip)
    optimizer.step()
    return float(loss.detach()) * len(flat), len(flat)


@dataclass
class Trained:
    net: torch.nn.Module  # holding its best-validated weights, in eval mode
    normalizer: Normalizer
    history: dict


@torch.inference_mode()
def predict_scores(net: torch.nn.Module, batch_tensors: BatchTensors, feats: Features) -> np.ndarray:
    """One score per row of ``feats``, batched (similar lengths together: less padding)."""
    net = net.eval()
    device = next(net.parameters()).device
    order = np.argsort(feats.lengths, kind="stable")
    scores = np.empty(len(feats), dtype=np.float64)
    for start, stop in length_buckets(feats.lengths[order]):
        rows = order[start:stop]
        scores[rows] = net(**batch_tensors(feats, rows, device)).float().cpu().numpy()
    return scores


def length_buckets(sorted_lengths: np.ndarray, max_batch: int = PREDICT_BATCH,
                   slack: float = PREDICT_LENGTH_SLACK, min_batch: int = PREDICT_MIN_BATCH) -> list[tuple[int, int]]:
    """[start, stop) slices of ascending ``sorted_lengths``: at most ``max_batch`` each, and a slice of at
    least ``min_batch`` ends before a length above (1 + ``slack``) x its first."""
    slices, start, n = [], 0, len(sorted_lengths)
    while start < n:
        limit = sorted_lengths[start] * (1.0 + slack)
        stop = min(start + min_batch, n)
        # the first index past ``limit`` (lengths ascend), within the size cap
        stop = max(stop, int(np.searchsorted(sorted_lengths, limit, side="right")))
        stop = min(stop, start + max_batch, n)
        slices.append((start, stop))
        start = stop
    return slices


def train_neural(build_net: Callable[[], torch.nn.Module], batch_tensors: BatchTensors, train: Dataset,
                 valid: Dataset | None, cfg: TrainConfig, *, net: torch.nn.Module | None = None,
                 normalizer: Normalizer | None = None, checkpoint_dir: Path | None = None, resume: bool = False,
                 progress: bool = True, hooks: TrainHooks | None = None, label: str = "model") -> Trained:
    """Train a network (a fresh ``build_net()``, or ``net`` to continue from its weights) and return it
    holding its best-validated weights.

    ``cfg`` must be resolved (no ``None`` fields). ``normalizer``: the statistics to featurise with
    (fine-tuning keeps the pre-trained ones); by default they are fitted on ``train`` (or restored
    from the checkpoint on ``resume``). ``hooks`` see every epoch start, validation and end and may
    stop training early (the MLPerf-style benchmark stops at its quality target)."""
    cfg.check()
    require_resolved(cfg)
    hooks = hooks or TrainHooks()
    ctx = distributed.context(cfg.device)
    device = distributed.device_for(ctx, cfg.device)
    torch.manual_seed(cfg.seed)
    checkpoint = _Checkpoint(checkpoint_dir) if checkpoint_dir is not None else None
    if int(np.count_nonzero(train.valid)) < 2:
        raise CrosstuneError("the training split has fewer than two valid measurements")
    saved = checkpoint.load() if (checkpoint is not None and resume) else None
    if saved:
        normalizer = Normalizer.from_json(saved[0]["normalizer"])
    elif normalizer is None:
        normalizer = Normalizer.fit(train)
    feats: Features = featurize(train, normalizer)
    valid_feats = featurize(valid, normalizer) if valid is not None and len(valid) else None
    labels = torch.from_numpy(train.labels())
    rows = np.flatnonzero(train.valid)

    net = (net if net is not None else build_net()).to(device)
    state = start_training(net, cfg, saved)
    optimizer, history, best, best_state, first_epoch = (state.optimizer, state.history, state.best,
                                                         state.best_state, state.first_epoch)
    train_net = torch.nn.parallel.DistributedDataParallel(net) if ctx.distributed else net
    loss_fn = LOSSES[cfg.loss]
    total_steps = max(1, cfg.epochs)

    epochs = range(first_epoch, cfg.epochs)
    bar = tqdm(epochs, desc=f"training {label}", disable=not (progress and ctx.is_main), unit="epoch")
    for epoch in bar:
        hooks.epoch_start(epoch)
        started = time.perf_counter()
        for group in optimizer.param_groups:  # cosine decay, set per epoch so resume lands on the same value
            group["lr"] = cfg.lr * 0.5 * (1 + np.cos(np.pi * epoch / total_steps))
        rng = np.random.default_rng(cfg.seed * 1_000_003 + epoch)
        batches = make_batches(train.group, rows, rng, cfg)
        if ctx.distributed:  # every rank the same number of batches, so collectives line up
            usable = len(batches) - len(batches) % ctx.world_size
            batches = batches[ctx.rank:usable:ctx.world_size]
        train_net.train()
        loss_sum, samples = 0.0, 0
        for batch in batches:
            loss, n = optimizer_step(train_net, net, batch_tensors, feats, batch, labels, loss_fn, optimizer, cfg,
                                     device)
            loss_sum += loss
            samples += n
        seconds = time.perf_counter() - started
        mean_loss = distributed.all_reduce_mean(ctx, loss_sum / max(samples, 1), device)
        valid_pca = float("nan")
        if valid_feats is not None:
            hooks.eval_start(epoch)
            valid_pca = validation_pca(valid, predict_scores(net, batch_tensors, valid_feats))
        record = {"epoch": epoch, "loss": mean_loss, "valid_pca": valid_pca, "samples": samples * ctx.world_size,
                  "seconds": seconds, "lr": optimizer.param_groups[0]["lr"]}
        history.append(record)
        score = valid_pca if np.isfinite(valid_pca) else -mean_loss
        if score > best["valid_pca"] or best["epoch"] < 0:
            best = {"epoch": epoch, "valid_pca": score}
            best_state = {k: v.detach().clone() for k, v in net.state_dict().items()}
        if checkpoint is not None and ctx.is_main:
            checkpoint.save(epoch, net, best_state, optimizer, history, best, normalizer)
        bar.set_postfix(loss=f"{mean_loss:.4f}", valid_pca=f"{valid_pca:.4f}")
        if hooks.epoch_end(record):
            break
    net.load_state_dict(best_state)
    distributed.barrier(ctx)
    return Trained(net.eval(), normalizer, {
        "epochs": history, "best_epoch": best["epoch"], "best_valid_pca": best["valid_pca"],
        "config": asdict(cfg), "world_size": ctx.world_size})
