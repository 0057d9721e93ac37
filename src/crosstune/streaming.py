"""Training on datasets larger than memory: batches streamed from the Parquet parts.

Memory holds the per-group statistics (a few numbers per (task, hardware) pair), a bounded sample of
validation records and one shuffle buffer of ``buffer_records`` training records, never the whole
dataset. Three kinds of pass read the parts row group by row group:

1. **scan** (once): record ids (duplicates across datasets are read once, as ``load_dataset`` does),
   tasks and hardware in order of appearance, the best latency and the number of valid records of
   every group, so that labels (best / latency) are exact;
2. **statistics** (once): input normalisation over the training records, and the validation sample;
3. **epochs**: tables of training rows in a seeded random order fill the buffer; a full buffer is cut
   into chunks of one group (up to ``group_size`` programs, sizes balanced so that no record is left
   out), the chunks are shuffled and batched ``groups_per_batch`` at a time. A group with a single
   record in the buffer waits for the next fill (it has nothing to be ranked against yet), so every
   valid training record is in exactly one batch per epoch.

Where the tables come from decides how honest the shuffle is. When the buffer holds every training
record, they are the dataset's row groups (one buffer, shuffled whole). When it does not, a row group
would be a poor unit: an import writes up to 20,000 records of a few consecutive input files per row
group, often the layers of one network. So the statistics pass also spills the training rows to disk
in buckets of whole (task, hardware) groups chosen by a seeded hash (``shuffle_spill``), about half a
buffer each; every bucket is then a uniform random sample of the groups of the whole dataset, and
every epoch reads the buckets in a new order, so two of them share a buffer. The buffer size and the
number of buckets are reported with the result.

Splits: ``by-hardware`` and ``by-task`` choose exactly what the in-memory split chooses (they depend
on tasks and hardware only, taken in the same order); ``within-task`` holds out records by a seeded hash
of the record id (the same fraction, a different draw than in memory). The validation groups are drawn
as ``holdout_groups`` draws them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch
from tqdm import tqdm

from . import distributed, tokens
from .dataset import (SCHEMA, Dataset, IdSet, _NOT_LOADED, _table_to_dataset, add_descriptors, new_rows,
                      read_manifest)
from .errors import CrosstuneError
from .features import Normalizer, featurize, operator_matrix
from .hardware.registry import builtin_specs
from .metrics import validation_pca
from .losses import LOSSES
from .models.base import CHECKPOINT_DIRS
from .splits import check_test_fraction, check_test_hardware, held_out_tasks
from .shuffle_spill import MAX_BUCKETS, GroupBuckets
from .train import TrainConfig, _Checkpoint, optimizer_step, pack_batches, require_resolved, start_training

STREAM_SPLITS = ("by-hardware", "by-task", "within-task")
DEFAULT_BUFFER = 200_000
VALID_SAMPLE = 50_000  # validation records kept in memory for the per-epoch PCA
AUTO_STREAM_RECORDS = 20_000_000  # `crosstune train` streams by itself above this many records
_COLUMNS = [c for c in SCHEMA.names if c not in _NOT_LOADED]
_SPILL_SCHEMA = pa.schema([SCHEMA.field(c) for c in _COLUMNS])
TRAIN, VALID, TEST = 0, 1, 2


@dataclass
class _RowGroup:
    path: Path
    index: int
    rows: int
    keep: np.ndarray | None = None  # rows to read (None = all); duplicates of earlier datasets dropped


@dataclass
class StreamSource:
    """What the scan learned about one or more datasets (see the module docstring)."""

    row_groups: list[_RowGroup]
    specs: dict
    hardware_names: list[str]
    task_ids: list[str]
    task_op_kind: list[str]
    best: np.ndarray  # per group: best valid latency (inf when none)
    valid_count: np.ndarray  # per group: valid records
    records: int
    sources: list[str] = field(default_factory=list)
    _task_index: dict = field(default_factory=dict)
    _hw_index: dict = field(default_factory=dict)

    @property
    def n_groups(self) -> int:
        return len(self.task_ids) * max(len(self.hardware_names), 1)

    def groups(self, table: pa.Table) -> np.ndarray:
        """Global group id of every row (task index * hardware count + hardware index)."""
        task = _indices(table.column("task_id"), self._task_index)
        hw = _indices(table.column("hardware"), self._hw_index)
        return task.astype(np.int64) * max(len(self.hardware_names), 1) + hw

    @classmethod
    def scan(cls, paths: Sequence[str | Path]) -> "StreamSource":
        if not paths:
            raise CrosstuneError("no dataset given")
        row_groups, specs, sources = [], {}, []
        seen = IdSet()
        task_index: dict[str, int] = {}
        hw_index: dict[str, int] = {}
        task_op: list[str] = []
        best: dict[tuple[int, int], float] = {}
        count: dict[tuple[int, int], int] = {}
        records = 0
        for raw in paths:
            root = Path(raw)
            manifest = read_manifest(root)
            add_descriptors(specs, root, manifest)
            for part in manifest.get("parts", []):
                path = root / part["path"]
                if not path.is_file():
                    raise CrosstuneError(f"{root}: part file {part['path']} listed in the manifest is missing")
                parquet = pq.ParquetFile(path)
                for index in range(parquet.num_row_groups):
                    table = parquet.read_row_group(index, columns=["record_id", "hardware", "task_id", "op_kind",
                                                                   "latency", "error_no"])
                    keep = new_rows(table.column("record_id").to_numpy(), seen)
                    if not keep.all():
                        table = table.filter(pa.array(keep))
                    row_groups.append(_RowGroup(path, index, table.num_rows, None if keep.all() else keep))
                    records += table.num_rows
                    for task, op_kind in zip(*(pc_unique_pairs(table))):
                        if task not in task_index:
                            task_index[task] = len(task_index)
                            task_op.append(op_kind)
                    for name in table.column("hardware").unique().to_pylist():
                        hw_index.setdefault(name, len(hw_index))
                    task = _indices(table.column("task_id"), task_index)
                    hw = _indices(table.column("hardware"), hw_index)
                    latency = table.column("latency").to_numpy()
                    valid = np.isfinite(latency) & (table.column("error_no").to_numpy() == 0)
                    keys = task[valid].astype(np.int64) * 1_000_003 + hw[valid]
                    for key, lat in zip(*_group_min(keys, latency[valid])):
                        k = (int(key) // 1_000_003, int(key) % 1_000_003)
                        best[k] = min(best.get(k, np.inf), lat)
                    for key, n in zip(*np.unique(keys, return_counts=True)):
                        k = (int(key) // 1_000_003, int(key) % 1_000_003)
                        count[k] = count.get(k, 0) + int(n)
            sources.append(str(root))
        if not records:
            raise CrosstuneError(f"no records in {', '.join(map(str, paths))}")
        n_hw = max(len(hw_index), 1)
        best_arr = np.full(len(task_index) * n_hw, np.inf)
        count_arr = np.zeros(len(task_index) * n_hw, dtype=np.int64)
        for (t, h), value in best.items():
            best_arr[t * n_hw + h] = value
        for (t, h), value in count.items():
            count_arr[t * n_hw + h] = value
        return cls(row_groups, specs, list(hw_index), list(task_index), task_op, best_arr, count_arr, records,
                   sources, task_index, hw_index)

    def read(self, row_group: _RowGroup) -> pa.Table:
        table = pq.ParquetFile(row_group.path).read_row_group(row_group.index, columns=_COLUMNS)
        return table.filter(pa.array(row_group.keep)) if row_group.keep is not None else table

    def labels(self, table: pa.Table, group: np.ndarray) -> np.ndarray:
        latency = table.column("latency").to_numpy()
        valid = np.isfinite(latency) & (table.column("error_no").to_numpy() == 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(valid, self.best[group] / latency, 0.0).astype(np.float32)

    def dataset(self, table: pa.Table) -> Dataset:
        return _table_to_dataset(table, self.specs, self.sources)


def pc_unique_pairs(table: pa.Table) -> tuple[list[str], list[str]]:
    """(task_id, op_kind) of each task of the table, in order of first appearance."""
    task_ids = table.column("task_id").to_numpy(zero_copy_only=False)
    _, first = np.unique(task_ids, return_index=True)
    first = np.sort(first)
    op = table.column("op_kind").to_numpy(zero_copy_only=False)
    return task_ids[first].tolist(), op[first].tolist()


def _indices(column: pa.ChunkedArray, index: dict[str, int]) -> np.ndarray:
    encoded = column.combine_chunks().dictionary_encode()
    lookup = np.array([index[name] for name in encoded.dictionary.to_pylist()] or [0], dtype=np.int64)
    return lookup[encoded.indices.to_numpy()]


def _group_min(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    uniq, inverse = np.unique(keys, return_inverse=True)
    out = np.full(len(uniq), np.inf)
    np.minimum.at(out, inverse, values)
    return uniq, out


def _hash01(record_id: np.ndarray, seed: int) -> np.ndarray:
    """A seeded uniform number in [0, 1) per record id (splitmix64), the same wherever it is computed."""
    x = record_id.astype(np.uint64) ^ np.uint64((seed * 0x9E3779B97F4A7C15) % (1 << 64))
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        x = x ^ (x >> np.uint64(31))
    return (x >> np.uint64(11)).astype(np.float64) / float(1 << 53)


@dataclass
class StreamSplit:
    """Which records are trained on, validated on and held out, decided per row from group and id."""

    kind: str
    description: str
    test_groups: np.ndarray  # bool per group (by-hardware, by-task)
    valid_groups: np.ndarray  # bool per group
    test_fraction: float = 0.0  # within-task
    seed: int = 0

    def roles(self, table: pa.Table, group: np.ndarray) -> np.ndarray:
        role = np.where(self.valid_groups[group], VALID, TRAIN).astype(np.int8)
        if self.kind == "within-task":
            test = _hash01(table.column("record_id").to_numpy(), self.seed) < self.test_fraction
        else:
            test = self.test_groups[group]
        role[test] = TEST
        return role


def make_stream_split(source: StreamSource, kind: str, seed: int, test_fraction: float = 0.2,
                      test_hardware: Sequence[str] = (), valid_fraction: float = 0.1) -> StreamSplit:
    if kind not in STREAM_SPLITS:
        raise CrosstuneError(f"--stream supports the splits {', '.join(STREAM_SPLITS)}, not {kind!r}")
    check_test_fraction(test_fraction)
    n_hw = max(len(source.hardware_names), 1)
    group_task = np.arange(source.n_groups) // n_hw
    group_hw = np.arange(source.n_groups) % n_hw
    test_groups = np.zeros(source.n_groups, dtype=bool)
    if kind == "by-hardware":
        check_test_hardware(test_hardware, source.hardware_names)
        test_groups = np.isin(group_hw, [source.hardware_names.index(h) for h in test_hardware])
        description = f"test hardware {', '.join(test_hardware)}"
    elif kind == "by-task":  # the draw of splits.make_split, over tasks in the same order
        held_out = held_out_tasks(len(source.task_ids), test_fraction, seed)
        test_groups = np.isin(group_task, held_out)
        description = f"{len(held_out)} of {len(source.task_ids)} tasks held out"
    else:
        description = f"{test_fraction:.0%} of each task (by record-id hash)"
    # Groups that hold records: the in-memory holdout draws among the training split's groups.
    present = source.valid_count > 0
    candidates = np.flatnonzero(present & ~test_groups)
    valid_groups = np.zeros(source.n_groups, dtype=bool)
    if len(candidates) >= 2:
        rng = np.random.default_rng(seed + 7919)
        n_valid = max(1, int(round(len(candidates) * valid_fraction)))
        valid_groups[rng.permutation(candidates)[:n_valid]] = True
    return StreamSplit(kind, description, test_groups, valid_groups, test_fraction, seed)


def training_mask(table: pa.Table, role: np.ndarray) -> np.ndarray:
    """Bool per row: a valid measurement of the training split (what the epochs train on); ``role``
    from ``StreamSplit.roles``."""
    latency = table.column("latency").to_numpy()
    return (role == TRAIN) & np.isfinite(latency) & (table.column("error_no").to_numpy() == 0)


def spill_bucket_count(source: StreamSource, split: StreamSplit, buffer_records: int) -> int:
    """How many group buckets to spill the training rows into: 0 when one buffer holds them all (no
    spill needed), else enough for about half a buffer each (at most MAX_BUCKETS; a bucket larger than
    the buffer is read in slices, each still a random sample of groups)."""
    trained_groups = ~split.test_groups & ~split.valid_groups
    expected = float(source.valid_count[trained_groups].sum())
    if split.kind == "within-task":
        expected *= 1.0 - split.test_fraction
    if expected <= buffer_records:
        return 0
    return int(min(MAX_BUCKETS, np.ceil(2 * expected / buffer_records)))


def _bucket_of(group: np.ndarray, n_buckets: int, seed: int) -> np.ndarray:
    return np.minimum((_hash01(group, seed + 2) * n_buckets).astype(np.int64), n_buckets - 1)


# ---------------------------------------------------------------------------------------------------
# statistics pass
# ---------------------------------------------------------------------------------------------------

def _statistics(source: StreamSource, split: StreamSplit, seed: int, valid_sample: int = VALID_SAMPLE,
                spill: GroupBuckets | None = None) -> tuple[Normalizer, Dataset | None, int, np.ndarray]:
    """(normaliser over the training records, validation sample, valid training records,
    training record ids) in one pass; with ``spill``, the training rows also go to its buckets."""
    n_kinds = len(tokens.KINDS)
    t_n = np.zeros(n_kinds)
    t_sum = np.zeros((n_kinds, tokens.NUM_ARGS))
    t_sq = np.zeros((n_kinds, tokens.NUM_ARGS))
    op_n, op_sum, op_sq = 0, 0.0, 0.0
    valid_tables, trained = [], 0
    train_ids = []
    n_valid_total = int(source.valid_count[split.valid_groups].sum())
    keep_fraction = min(1.0, valid_sample / max(n_valid_total, 1))
    for row_group in source.row_groups:
        table = source.read(row_group)
        group = source.groups(table)
        role = split.roles(table, group)
        train_rows = np.flatnonzero(role == TRAIN)
        if len(train_rows):
            part = source.dataset(table.take(pa.array(train_rows)))
            kinds = part.kinds.astype(np.int64)
            t_n += np.bincount(kinds, minlength=n_kinds)
            args = part.args.astype(np.float64)
            for slot in range(tokens.NUM_ARGS):  # bincount with weights: a scatter-add at C speed
                t_sum[:, slot] += np.bincount(kinds, weights=args[:, slot], minlength=n_kinds)
                t_sq[:, slot] += np.bincount(kinds, weights=args[:, slot] ** 2, minlength=n_kinds)
            op = operator_matrix(part).astype(np.float64)
            op_n, op_sum, op_sq = op_n + len(op), op_sum + op.sum(axis=0), op_sq + (op * op).sum(axis=0)
            trained += int(np.count_nonzero(part.valid))
            train_ids.append(part.record_id)
        if spill is not None:
            rows = np.flatnonzero(training_mask(table, role))
            spill.add(table.take(pa.array(rows)), _bucket_of(group[rows], spill.n_buckets, seed))
        valid_rows = np.flatnonzero((role == VALID) & (_hash01(table.column("record_id").to_numpy(), seed + 1)
                                                       < keep_fraction))
        if len(valid_rows):
            valid_tables.append(table.take(pa.array(valid_rows)))
    if spill is not None:
        spill.finish()
    if trained < 2:
        raise CrosstuneError("the training split has fewer than two valid measurements")
    seen = t_n > 0
    mean = np.where(seen[:, None], t_sum / np.maximum(t_n, 1)[:, None], 0.0)
    var = np.where(seen[:, None], t_sq / np.maximum(t_n, 1)[:, None] - mean ** 2, 1.0)
    std = np.sqrt(np.maximum(var, 0.0))
    token_std = np.where(std > 1e-6, std, 1.0)
    op_mean = op_sum / op_n
    op_std = np.sqrt(np.maximum(op_sq / op_n - op_mean ** 2, 0.0))
    hw_rows = [s.feature_vector() for s in builtin_specs().values()]
    hw_rows += [source.specs[name].feature_vector() for name in source.hardware_names if name in source.specs]
    hw = np.asarray(hw_rows, np.float64)
    hw_std = hw.std(axis=0)
    normalizer = Normalizer(mean.astype(np.float32), token_std.astype(np.float32), op_mean.astype(np.float32),
                            np.where(op_std > 1e-6, op_std, 1.0).astype(np.float32), hw.mean(axis=0).astype(np.float32),
                            np.where(hw_std > 1e-6, hw_std, 1.0).astype(np.float32), seen)
    valid = source.dataset(pa.concat_tables(valid_tables)) if valid_tables else None
    return normalizer, valid, trained, np.concatenate(train_ids)


# ---------------------------------------------------------------------------------------------------
# epochs
# ---------------------------------------------------------------------------------------------------

@dataclass
class StreamBuffer:
    """One fill of the shuffle buffer and the batches cut from it."""

    dataset: Dataset  # the buffer's records
    labels: np.ndarray  # per buffer record
    batches: list[np.ndarray]  # each (chunks, group_size): row indices into ``dataset``, -1 = padding


def _chunks(group: np.ndarray, rows: np.ndarray, rng: np.random.Generator, size: int) -> list[np.ndarray]:
    """Rows cut into chunks of one group each, at most ``size`` long, sizes balanced (65 rows of a
    group with size 64 become 33 + 32, not 64 + a lone record)."""
    rows = rows[rng.permutation(len(rows))]
    rows = rows[np.argsort(group[rows], kind="stable")]
    g = group[rows]
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    chunks = []
    for start, end in zip(starts, np.r_[starts[1:], len(rows)]):
        n_chunks = -(-(end - start) // size)
        chunks.extend(np.array_split(rows[start:end], n_chunks))
    return chunks


def _row_group_tables(source: StreamSource, split: StreamSplit, rng: np.random.Generator) -> Iterator[pa.Table]:
    for index in rng.permutation(len(source.row_groups)):
        table = source.read(source.row_groups[index])
        yield table.filter(pa.array(training_mask(table, split.roles(table, source.groups(table)))))


def epoch_buffers(source: StreamSource, split: StreamSplit, cfg: TrainConfig, epoch: int,
                  buffer_records: int, spill: GroupBuckets | None = None) -> Iterator[StreamBuffer]:
    """The batches of one epoch (see the module docstring); deterministic for (seed, epoch). The
    buffer holds at most ``buffer_records`` records plus the lone records waiting for a partner (at
    most one per group). ``spill``: read the training rows from its buckets instead of the row groups."""
    rng = np.random.default_rng(cfg.seed * 1_000_003 + epoch)
    state = {"waiting": [], "rows": 0, "carried": None}

    def flush(last: bool) -> Iterator[StreamBuffer]:
        tables = ([state["carried"]] if state["carried"] is not None else []) + state["waiting"]
        state["waiting"], state["rows"], state["carried"] = [], 0, None
        if not tables:
            return
        buffer = pa.concat_tables(tables)
        group = source.groups(buffer)
        counts = np.bincount(group, minlength=source.n_groups)
        lone = (counts[group] == 1) if not last else np.zeros(len(group), dtype=bool)
        if lone.any():
            state["carried"] = buffer.filter(pa.array(lone))
        rows = np.flatnonzero(~lone)
        if not len(rows):
            return
        chunks = _chunks(group, rows, rng, cfg.group_size)
        chunks = [chunks[i] for i in rng.permutation(len(chunks))]
        labels = source.labels(buffer, group)
        batches = pack_batches(chunks, cfg)
        dataset = source.dataset(buffer)
        del buffer, chunks, group
        yield StreamBuffer(dataset, labels, batches)

    tables = (spill.tables(rng.permutation(spill.n_buckets)) if spill is not None
              else _row_group_tables(source, split, rng))
    for table in tables:
        while table.num_rows:
            take = min(table.num_rows, buffer_records - state["rows"])
            state["waiting"].append(table.slice(0, take))
            state["rows"] += take
            table = table.slice(take)
            if state["rows"] >= buffer_records:
                yield from flush(last=False)
    yield from flush(last=True)


def train_streaming(model, datasets: Sequence[str | Path], cfg: TrainConfig, split_kind: str = "by-hardware",
                    test_hardware: Sequence[str] = (), test_fraction: float = 0.2,
                    buffer_records: int = DEFAULT_BUFFER, checkpoint_dir: Path | None = None, resume: bool = False,
                    progress: bool = True, max_batches: int | None = None, on_buffer=None,
                    spill_dir: str | Path | None = None) -> dict:
    """Fit ``model`` (a NeuralCostModel) on ``datasets`` streamed from disk; leaves it holding its
    best-validated weights. ``on_buffer(StreamBuffer)`` sees every buffer; ``max_batches`` stops
    each epoch early (benchmarks). ``cfg`` must be resolved (``model.train_config``). ``spill_dir``:
    the folder for the shuffle buckets when the buffer is smaller than the training set (default:
    ``checkpoint_dir``/shuffle-buckets, else a new temporary folder); removed at the end."""
    cfg.check()
    require_resolved(cfg)
    if buffer_records < 2:
        raise CrosstuneError("--shuffle-buffer must be at least 2 records")
    ctx = distributed.context(cfg.device)
    if ctx.distributed:
        raise CrosstuneError("--stream does not run under torchrun yet; train in one process")
    started_all = time.perf_counter()
    source = StreamSource.scan(datasets)
    split = make_stream_split(source, split_kind, cfg.seed, test_fraction, test_hardware)
    n_buckets = spill_bucket_count(source, split, buffer_records)
    if spill_dir is None and checkpoint_dir is not None:
        spill_dir = Path(checkpoint_dir) / "shuffle-buckets"
    # rows waiting to be written: at most half a buffer, or 256 per bucket when the buffer is tiny
    spill = (GroupBuckets(n_buckets, _SPILL_SCHEMA, spill_dir, flush_rows=max(256, buffer_records // (2 * n_buckets)))
             if n_buckets else None)
    try:
        result = _train(model, source, split, cfg, distributed.device_for(ctx, cfg.device), buffer_records,
                        checkpoint_dir, resume, progress, max_batches, on_buffer, spill)
    finally:
        if spill is not None:
            spill.remove()
    result["seconds"] = time.perf_counter() - started_all
    return result


def _train(model, source: StreamSource, split: StreamSplit, cfg: TrainConfig, device, buffer_records: int,
           checkpoint_dir: Path | None, resume: bool, progress: bool, max_batches: int | None, on_buffer,
           spill: GroupBuckets | None) -> dict:
    torch.manual_seed(cfg.seed)
    checkpoint = _Checkpoint(checkpoint_dir) if checkpoint_dir is not None else None
    saved = checkpoint.load() if (checkpoint is not None and resume) else None
    normalizer, valid, trained, train_ids = _statistics(source, split, cfg.seed, spill=spill)
    model.normalizer = Normalizer.from_json(saved[0]["normalizer"]) if saved else normalizer
    n_hw = max(len(source.hardware_names), 1)
    trained_groups = (source.valid_count > 0) & ~split.test_groups
    trained_hardware = [name for h, name in enumerate(source.hardware_names)
                        if name in source.specs and trained_groups[h::n_hw].any()]
    model.hardware_seen = {name: source.specs[name].feature_vector() for name in trained_hardware}
    model.hardware_descriptors = {name: source.specs[name].to_json() for name in trained_hardware}
    valid_feats = featurize(valid, model.normalizer) if valid is not None else None

    net = model.build_net().to(device)
    state = start_training(net, cfg, saved)
    optimizer, history, best, best_state, first_epoch = (state.optimizer, state.history, state.best,
                                                         state.best_state, state.first_epoch)
    loss_fn = LOSSES[cfg.loss]
    bar = tqdm(range(first_epoch, cfg.epochs), desc=f"training {model.kind} (streamed)", disable=not progress,
               unit="epoch")
    for epoch in bar:
        started = time.perf_counter()
        for group in optimizer.param_groups:  # the cosine schedule of train_neural
            group["lr"] = cfg.lr * 0.5 * (1 + np.cos(np.pi * epoch / max(1, cfg.epochs)))
        net.train()
        loss_sum, samples, batches = 0.0, 0, 0
        stop = False
        for buffer in epoch_buffers(source, split, cfg, epoch, buffer_records, spill):
            if on_buffer is not None:
                on_buffer(buffer)
            feats = featurize(buffer.dataset, model.normalizer)
            labels = torch.from_numpy(buffer.labels)
            for batch in buffer.batches:
                if max_batches is not None and batches >= max_batches:
                    stop = True
                    break
                loss, n = optimizer_step(net, net, model.batch_tensors, feats, batch, labels, loss_fn, optimizer,
                                         cfg, device)
                loss_sum += loss
                samples += n
                batches += 1
            del feats, labels, buffer  # this buffer's memory goes before the next one is filled
            if stop:
                break
        seconds = time.perf_counter() - started
        mean_loss = loss_sum / max(samples, 1)
        valid_pca = float("nan")
        if valid_feats is not None:
            model.net = net
            valid_pca = validation_pca(valid, model.predict_features(valid_feats))
        record = {"epoch": epoch, "loss": mean_loss, "valid_pca": valid_pca, "samples": samples, "seconds": seconds,
                  "lr": optimizer.param_groups[0]["lr"]}
        history.append(record)
        score = valid_pca if np.isfinite(valid_pca) else -mean_loss
        if score > best["valid_pca"] or best["epoch"] < 0:
            best = {"epoch": epoch, "valid_pca": score}
            best_state = {k: v.detach().clone() for k, v in net.state_dict().items()}
        if checkpoint is not None:
            checkpoint.save(epoch, net, best_state, optimizer, history, best, model.normalizer)
        bar.set_postfix(loss=f"{mean_loss:.4f}", valid_pca=f"{valid_pca:.4f}")
    net.load_state_dict(best_state)
    model.net = net.eval()
    model.history = {"epochs": history, "best_epoch": best["epoch"], "best_valid_pca": best["valid_pca"],
                     "config": asdict(cfg), "world_size": 1, "streamed": True, "shuffle_buffer_records": buffer_records,
                     "shuffle_buckets": spill.n_buckets if spill is not None else 0,
                     "split": split.description, "valid_sample_records": 0 if valid is None else len(valid)}
    return {"history": model.history, "split": split, "source": source, "train_ids": train_ids,
            "trained_valid_records": trained}


def write_train_records(out: Path, split: StreamSplit, train_ids: np.ndarray, seconds: float,
                        samples_per_second: float) -> None:
    """train_records.json as ``experiment.save_trained`` writes it (eval leaves these out), written
    in pieces so that millions of ids do not become one huge string in memory."""
    from .experiment import TRAIN_RECORDS

    out.mkdir(parents=True, exist_ok=True)
    tmp = out / f".{TRAIN_RECORDS}.tmp"
    with open(tmp, "w") as stream:
        stream.write(json.dumps({"split": split.kind, "description": split.description, "streamed": True,
                                 "train_seconds": seconds, "samples_per_second": samples_per_second})[:-1])
        stream.write(', "record_ids": [')
        for start in range(0, len(train_ids), 100_000):
            chunk = train_ids[start:start + 100_000]
            text = ", ".join(f'"{int(r):016x}"' for r in chunk)
            stream.write(("" if start == 0 else ", ") + text)
        stream.write("]}")
    tmp.replace(out / TRAIN_RECORDS)


def total_records(datasets: Sequence[str | Path]) -> int:
    """Records listed in the manifests (without reading any part)."""
    return sum(int(read_manifest(Path(d)).get("counts", {}).get("records", 0)) for d in datasets)


def train_command(datasets: Sequence[str], kind: str, cfg: TrainConfig, out: Path, split_kind: str,
                  test_hardware: Sequence[str], test_fraction: float, buffer_records: int, resume: bool,
                  progress: bool) -> str:
    """`crosstune train --stream`: train, save the model and its train_records.json; one line to print."""
    from .models import create_model
    from .models.neural import NeuralCostModel

    model = create_model(kind, cfg)
    if not isinstance(model, NeuralCostModel):
        raise CrosstuneError(f"--stream trains the neural models; {kind} needs its records in memory")
    # the model's own training settings: the user's, with the model's defaults (e.g. its learning rate) filled in
    result = train_streaming(model, datasets, model.train_config, split_kind, test_hardware, test_fraction,
                             buffer_records, out / CHECKPOINT_DIRS[0], resume, progress)
    model.save(out)
    seconds = result["seconds"]
    samples = sum(e["samples"] for e in result["history"]["epochs"])
    epoch_seconds = sum(e["seconds"] for e in result["history"]["epochs"])
    write_train_records(out, result["split"], result["train_ids"], seconds, samples / epoch_seconds if epoch_seconds else 0.0)
    buckets = result["history"]["shuffle_buckets"]
    spilled = f" (training rows shuffled through {buckets} group buckets on disk)" if buckets else ""
    return (f"{result['split'].description}; streamed {result['source'].records} records from disk, shuffle buffer "
            f"{buffer_records} records{spilled}; trained {kind} in {seconds:.1f} s; saved to {out}")
