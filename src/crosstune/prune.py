"""Dataset pruning: keep a fraction of the records that keeps ranking accuracy.

Every strategy is a function ``(dataset, keep, seed) -> Pruning``: the records to keep, why the others
were removed, and (for ``dedup``) the averaged latency of merged duplicates. Pruning is deterministic
for a seed and never modifies its input: :func:`write_pruned` writes a new dataset whose manifest says
what was removed and why.

Strategies:

- ``random``: a uniform sample of every task (the control);
- ``cap``: at most N programs per (task, hardware), N chosen so that about ``keep`` of the records stay;
- ``dedup``: programs with identical (or, at coarser levels, nearly identical) token sequences within
  a task are merged into one whose latency is their mean;
- ``task-redundancy``: tasks whose operator descriptor is (nearly) identical to a kept task's on the
  same hardware are dropped whole;
- ``informative``: failed and outlier measurements go first, then flat tasks (latency spread within
  measurement noise), then the least spread-out tasks;
- ``diverse``: per task, a maximally spread subset (farthest-point sampling on token features);
- ``stratified`` (ours): per task, programs are binned by log-latency and sampled round-robin over the
  bins, always keeping the fastest. Tuning trajectories are dense in near-identical good programs (the
  pairs a ranker learns least from: many differ by less than the measurement noise); thinning the dense
  bins and keeping the sparse ones keeps every level of quality the ranker must separate.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from . import tokens
from .atomic import staged_directory
from .atomic import write_text as atomic_write_text
from .dataset import FORMAT_NAME, MANIFEST, Dataset, manifest_counts, read_manifest
from .errors import CrosstuneError
from .features import kind_counts_and_means
from .groups import grouped

NOISE = 0.02  # relative latency spread treated as measurement noise


@dataclass
class Pruning:
    keep: np.ndarray  # indices of kept records
    removed: Counter = field(default_factory=Counter)  # reason -> records removed
    merged_latency: dict[int, float] = field(default_factory=dict)  # kept index -> averaged latency

    @property
    def kept(self) -> int:
        return len(self.keep)


def _groups(ds: Dataset, rows: np.ndarray | None = None) -> list[np.ndarray]:
    order, starts, ends = grouped(ds.group, rows)
    return [order[s:e] for s, e in zip(starts, ends)]


def _finish(ds: Dataset, keep: np.ndarray, removed: Counter, reason: str = "", merged=None) -> Pruning:
    keep = np.unique(keep)
    accounted = sum(removed.values())
    leftover = len(ds) - len(keep) - accounted
    if leftover and reason:
        removed[reason] += leftover
    return Pruning(keep, removed, merged or {})


def prune_random(ds: Dataset, keep: float, seed: int) -> Pruning:
    rng = np.random.default_rng(seed)
    kept = [rng.permutation(g)[:max(1, int(round(len(g) * keep)))] for g in _groups(ds)]
    return _finish(ds, np.concatenate(kept), Counter(), "random sample")


def prune_cap(ds: Dataset, keep: float, seed: int) -> Pruning:
    groups = _groups(ds)
    sizes = np.array([len(g) for g in groups])
    target = keep * len(ds)
    low, high = 1, int(sizes.max())
    while low < high:  # the largest cap whose total stays within the target
        mid = (low + high + 1) // 2
        if np.minimum(sizes, mid).sum() <= target:
            low = mid
        else:
            high = mid - 1
    rng = np.random.default_rng(seed)
    kept = [rng.permutation(g)[:low] for g in groups]
    return _finish(ds, np.concatenate(kept), Counter(), f"over the cap of {low} programs per task")


def program_keys(ds: Dataset, decimals: int | None) -> np.ndarray:
    """One hash per program of its token sequence, arguments rounded to ``decimals`` (None: exact)."""
    args = ds.args if decimals is None else np.round(ds.args, decimals)
    token_hash = (ds.kinds.astype(np.int64) * 1_000_003 + ds.cats.astype(np.int64) * 7919
                  + np.ascontiguousarray(args).view(np.uint32).reshape(len(args), -1).astype(np.int64)
                  @ (np.arange(1, tokens.NUM_ARGS + 1, dtype=np.int64) * 2654435761))
    position = np.arange(len(token_hash)) - np.repeat(ds.offsets[:-1], np.diff(ds.offsets))
    mixed = token_hash * (position * 31 + 17)
    starts = ds.offsets[:-1]
    sums = np.add.reduceat(mixed, starts) if len(mixed) else np.zeros(len(ds), np.int64)
    sums[np.diff(ds.offsets) == 0] = 0
    return sums ^ np.diff(ds.offsets).astype(np.int64)


def _merge_duplicates(ds: Dataset, keys: np.ndarray) -> tuple[np.ndarray, dict[int, float]]:
    """Within each group, one kept record per distinct key (the first), and for keys shared by several
    records the mean of their finite latencies. Vectorised: tasks hold thousands of programs."""
    key_ids = np.unique(keys, return_inverse=True)[1].astype(np.int64)
    pair = ds.group.astype(np.int64) * (int(key_ids.max(initial=0)) + 1) + key_ids
    _, first, inverse, counts = np.unique(pair, return_index=True, return_inverse=True, return_counts=True)
    finite = np.isfinite(ds.latency)
    sums = np.bincount(inverse, weights=np.where(finite, ds.latency, 0.0), minlength=len(first))
    measured = np.bincount(inverse, weights=finite.astype(float), minlength=len(first))
    shared = (counts > 1) & (measured > 0)
    merged = dict(zip(first[shared].tolist(), (sums[shared] / measured[shared]).tolist()))
    return np.sort(first), merged


def prune_dedup(ds: Dataset, keep: float, seed: int) -> Pruning:
    """Merge duplicates at the coarsest rounding level that still leaves at least ``keep`` of the
    records (exact duplicates always merge), then sample the rest down to ``keep`` at random."""
    target = keep * len(ds)
    for decimals in (None, 2, 1, 0):
        candidate = _merge_duplicates(ds, program_keys(ds, decimals))
        if decimals is not None and len(candidate[0]) < target:
            break  # this level merges more than may go: stay at the finer one
        kept, merged = candidate
        level = "identical" if decimals is None else f"nearly identical (arguments rounded to {decimals} decimals)"
        removed = Counter({f"duplicate program ({level}), merged": len(ds) - len(kept)})
    if len(kept) > target:  # duplicates alone do not get there: fill with a random sample of the rest
        rng = np.random.default_rng(seed)
        chosen = rng.permutation(kept)[: int(round(target))]
        removed["random sample after merging duplicates"] += len(kept) - len(chosen)
        kept = chosen
        chosen_set = set(chosen.tolist())
        merged = {k: v for k, v in merged.items() if k in chosen_set}
    return Pruning(np.unique(kept), removed, merged)


def prune_task_redundancy(ds: Dataset, keep: float, seed: int) -> Pruning:
    """Greedy: visit tasks largest first; drop a task if a kept task on the same hardware has the same
    operator kind and shape arguments within ``tolerance`` (log2 units). The tolerance grows until
    about ``keep`` of the records stay; at the step that would drop too many, only as many of that
    step's redundant tasks go as needed (a seeded random choice among them)."""
    groups = _groups(ds)
    info = [(int(ds.hardware[g[0]]), int(ds.op_kind[g[0]]), ds.op_args[g[0]], len(g)) for g in groups]
    order = sorted(range(len(groups)), key=lambda i: -info[i][3])
    target = keep * len(ds)
    kept_groups: list[int] = []
    for tolerance in (0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0):
        kept_groups = []
        for i in order:
            hw, kind, args, _ = info[i]
            if any(info[j][0] == hw and info[j][1] == kind and np.max(np.abs(info[j][2] - args)) <= tolerance
                   for j in kept_groups):
                continue
            kept_groups.append(i)
        total = sum(info[i][3] for i in kept_groups)
        if total <= target:  # a coarser tolerance would only drop more
            # this step may drop too many: give back a seeded random share of its drops
            kept_set = set(kept_groups)
            for i in np.random.default_rng(seed).permutation([i for i in order if i not in kept_set]):
                if total >= target:
                    break
                kept_groups.append(int(i))
                total += info[i][3]
            break
    keep_rows = np.concatenate([groups[i] for i in kept_groups]) if kept_groups else np.array([], int)
    removed = Counter({"task with a near-identical operator on the same hardware": len(ds) - len(keep_rows)})
    if len(keep_rows) > target:  # thin the kept tasks uniformly down to the target
        part = prune_random(ds.select(keep_rows), target / len(keep_rows), seed)
        removed["random sample of the remaining tasks"] = len(keep_rows) - part.kept
        keep_rows = keep_rows[part.keep]
    return Pruning(np.unique(keep_rows), removed)


def prune_informative(ds: Dataset, keep: float, seed: int) -> Pruning:
    removed = Counter()
    valid = ds.valid.copy()
    removed["failed measurement"] = int((~valid).sum())
    candidates = []
    for rows in _groups(ds, np.flatnonzero(valid)):
        log_lat = np.log(ds.latency[rows])
        q1, q3 = np.percentile(log_lat, [25, 75])
        outlier = log_lat > q3 + 3 * max(q3 - q1, NOISE)
        removed["outlier measurement (beyond 3 IQR in log latency)"] += int(outlier.sum())
        rows = rows[~outlier]
        p10, p90 = np.percentile(ds.latency[rows], [10, 90])
        spread = (p90 - p10) / max(np.median(ds.latency[rows]), 1e-30)
        candidates.append((spread, rows))
    target = keep * len(ds)
    candidates.sort(key=lambda c: c[0])  # flattest first
    total = sum(len(r) for _, r in candidates)
    kept = []
    for spread, rows in candidates:
        if total > target and (spread < NOISE or total - len(rows) >= target):
            removed["flat task (latency spread within noise)" if spread < NOISE else "least spread-out task"] += len(rows)
            total -= len(rows)
            continue
        kept.append(rows)
    keep_rows = np.concatenate(kept) if kept else np.array([], int)
    if len(keep_rows) > target:
        part = prune_random(ds.select(keep_rows), target / len(keep_rows), seed)
        removed["random sample of the informative tasks"] = len(keep_rows) - part.kept
        keep_rows = keep_rows[part.keep]
    return Pruning(np.unique(keep_rows), removed)


def program_vectors(ds: Dataset) -> np.ndarray:
    """A fixed-length summary per program: count and mean arguments of each primitive kind."""
    counts, means = kind_counts_and_means(ds.offsets, ds.kinds, np.nan_to_num(ds.args))
    vectors = np.concatenate([counts, means], axis=1)
    std = vectors.std(axis=0)
    return (vectors - vectors.mean(axis=0)) / np.where(std > 1e-6, std, 1.0)


def _farthest_points(vectors: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """k-center greedy. Once every program left is a copy of a chosen one (distance 0), the rest of the
    k are drawn at random from the unchosen, so that ``keep`` is honoured on sets with repeated programs."""
    chosen = [int(rng.integers(len(vectors)))]
    distance = np.linalg.norm(vectors - vectors[chosen[0]], axis=1)
    while len(chosen) < k:
        nxt = int(np.argmax(distance))
        if distance[nxt] <= 0.0:
            rest = np.setdiff1d(np.arange(len(vectors)), chosen)
            chosen.extend(rng.permutation(rest)[: k - len(chosen)].tolist())
            break
        chosen.append(nxt)
        distance = np.minimum(distance, np.linalg.norm(vectors - vectors[nxt], axis=1))
    return np.array(chosen)


def prune_diverse(ds: Dataset, keep: float, seed: int, progress: bool = False) -> Pruning:
    from tqdm import tqdm

    rng = np.random.default_rng(seed)
    vectors = program_vectors(ds)
    kept = []
    with tqdm(total=len(ds), unit=" programs", unit_scale=True, desc="diverse: farthest points per task",
              disable=not progress, mininterval=0.5) as bar:
        for rows in _groups(ds):
            k = max(1, int(round(len(rows) * keep)))
            kept.append(rows[_farthest_points(vectors[rows], k, rng)] if k < len(rows) else rows)
            bar.update(len(rows))
    return _finish(ds, np.concatenate(kept), Counter(), "close to an already kept program (k-center)")


def prune_stratified(ds: Dataset, keep: float, seed: int, bins: int = 16) -> Pruning:
    rng = np.random.default_rng(seed)
    kept = []
    removed = Counter({"failed measurement": int((~ds.valid).sum())})
    for rows in _groups(ds, np.flatnonzero(ds.valid)):
        k = max(1, int(round(len(rows) * keep)))
        if k >= len(rows):
            kept.append(rows)
            continue
        log_lat = np.log(ds.latency[rows])
        edges = np.linspace(log_lat.min(), log_lat.max() + 1e-12, bins + 1)
        which = np.clip(np.digitize(log_lat, edges) - 1, 0, bins - 1)
        queues = [list(rng.permutation(rows[which == b])) for b in range(bins)]
        best = rows[np.argmin(log_lat)]
        picked = [best]
        for queue in queues:
            if best in queue:
                queue.remove(best)
        while len(picked) < k:  # round-robin over the bins: sparse bins are kept whole, dense ones thinned
            for queue in queues:
                if queue and len(picked) < k:
                    picked.append(queue.pop())
        kept.append(np.array(picked))
    return _finish(ds, np.concatenate(kept), removed, "dense latency bin thinned")


STRATEGIES: dict[str, Callable[[Dataset, float, int], Pruning]] = {
    "random": prune_random, "cap": prune_cap, "dedup": prune_dedup, "task-redundancy": prune_task_redundancy,
    "informative": prune_informative, "diverse": prune_diverse, "stratified": prune_stratified,
}


def check_request(strategy: str, keep: float, records: int | None = None) -> None:
    """Clear errors for a bad request; ``records`` (when known) checks the dataset is big enough."""
    if strategy not in STRATEGIES:
        raise CrosstuneError(f"unknown pruning strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    if not 0.0 < keep <= 1.0:
        raise CrosstuneError(f"--keep must be in (0, 1], not {keep}")
    if records is not None and int(round(records * keep)) < 2:
        raise CrosstuneError(f"keeping {keep:.0%} of {records} records leaves fewer than 2: the dataset is too small")


def prune(ds: Dataset, strategy: str, keep: float, seed: int = 0, progress: bool = False) -> Pruning:
    check_request(strategy, keep, len(ds))
    if keep == 1.0:
        return Pruning(np.arange(len(ds)))
    if strategy == "diverse":  # the one strategy slow enough (minutes on big sets) to need a progress bar
        return prune_diverse(ds, keep, seed, progress)
    return STRATEGIES[strategy](ds, keep, seed)


def apply_pruning(ds: Dataset, pruning: Pruning) -> Dataset:
    """The pruned dataset in memory (merged duplicates carry their averaged latency)."""
    pruned = ds.select(pruning.keep)
    if pruning.merged_latency:
        latency = pruned.latency.copy()
        position = {int(r): i for i, r in enumerate(pruning.keep)}
        for row, value in pruning.merged_latency.items():
            latency[position[row]] = value
        pruned.latency = latency
    return pruned


def write_pruned(source: Path, ds: Dataset, pruning: Pruning, out: Path, strategy: str, keep: float, seed: int) -> dict:
    """Write the kept records of the dataset at ``source`` as a new dataset at ``out``."""
    if out.exists() and any(out.iterdir()):
        raise CrosstuneError(f"{out}: already exists; pruning never overwrites a dataset")
    if out.resolve() == source.resolve():
        raise CrosstuneError("--out must differ from the input dataset")
    manifest = read_manifest(source)
    kept_ids = ds.record_id[pruning.keep]
    merged = {int(ds.record_id[r]): v for r, v in pruning.merged_latency.items()}
    # Written in a staging folder that takes the name ``out`` only when complete: a killed prune leaves
    # no half dataset under ``out``, and the same command simply runs again.
    with staged_directory(out, replaceable=lambda existing: not any(existing.iterdir())) as staging:
        parts = []
        for part in manifest["parts"]:
            table = pq.read_table(source / part["path"])
            table = table.filter(pc.is_in(table.column("record_id"), value_set=pa.array(kept_ids, pa.uint64())))
            if merged and table.num_rows:
                ids = table.column("record_id").to_numpy()
                latency = table.column("latency").to_numpy().copy()
                for i, rid in enumerate(ids):
                    if int(rid) in merged:
                        latency[i] = merged[int(rid)]
                table = table.set_column(table.schema.get_field_index("latency"), "latency", pa.array(latency))
            if table.num_rows:
                path = staging / part["path"]
                path.parent.mkdir(parents=True, exist_ok=True)
                pq.write_table(table, path, compression="lz4")
                parts.append({**part, "records": table.num_rows})
        new = {key: value for key, value in manifest.items() if key not in ("parts", "counts")}
        new.update({"format": FORMAT_NAME, "parts": parts, "pruning": {
            "source": str(source), "strategy": strategy, "keep": keep, "seed": seed, "records_in": len(ds),
            "records_kept": pruning.kept, "removed": dict(pruning.removed),
            "merged_duplicates": len(pruning.merged_latency)}})
        new["counts"] = manifest_counts(staging, new)
        atomic_write_text(staging / MANIFEST, json.dumps(new, indent=1))
    return new
