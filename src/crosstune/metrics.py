"""Ranking metrics, one module for every model (definitions in ../shared/DESIGN.md).

All metrics are computed within a group = one task on one hardware, over valid measurements only:

- PCA (pairwise comparison accuracy, TenSet): the fraction of program pairs whose predicted order
  matches the measured order. Pairs with equal measured latency are not counted; a tie in the
  prediction counts half. Averaged over groups weighted by record count (``pca``) and unweighted
  (``pca_mean``). Groups with one program have no pairs: skipped and counted.
- top-k (TLP's definition, the headline): the sum over groups of w * best latency divided by the sum
  over groups of w * the best latency among the model's k highest-scored programs (``top1``, ``top5``,
  ...), w = 1 or a task's count in a network. Slow tasks weigh in by their latency, as in a network.
- top-k mean: the mean over groups of best / best-among-top-k (``top1_mean``, ...). It weighs a flat
  0.1 ms task like a 100 ms one and so flatters a model that is wrong on heavy tasks: never the headline.
- peak@k (TenSet): mean over i <= k of best latency / best latency among the top-i predictions.

The random-ranker floor of each is an exact expectation over uniformly random orders, not a sample. For
the sum form it is sum w*best / sum w*E[best of a random k-subset] with E = sum_i P(the subset's best is
the i-th fastest) * lat_i (not best / E[ratio], which is a different and much higher number on
trajectory data); for the mean form E[best / best of the k-subset]. tests/test_splits_metrics.py checks
both against Monte-Carlo estimates on real groups.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from .dataset import Dataset
from .records.operators import OP_KINDS

TOPK = (1, 5, 10)
PEAK_K = 5


@dataclass
class GroupScores:
    """Per-group metric values (arrays aligned by group); for the random floor, expected values."""

    group: np.ndarray
    hardware: np.ndarray
    task: np.ndarray
    op_kind: np.ndarray
    size: np.ndarray
    pca: np.ndarray  # NaN where the group has no comparable pair
    topk_ratio: dict[int, np.ndarray]  # best / best latency among the top-k picks
    topk_best: dict[int, np.ndarray]  # best latency among the top-k picks
    best: np.ndarray
    peak: np.ndarray


def _pairwise_accuracy(latency: np.ndarray, score: np.ndarray, block: int = 1024) -> float:
    """Fraction of pairs with distinct latency ordered like the scores (higher score = faster)."""
    n = len(latency)
    agree, total = 0.0, 0
    for start in range(0, n, block):
        lat_i = latency[start:start + block, None]
        sc_i = score[start:start + block, None]
        faster = lat_i < latency[None, :]  # i strictly faster than j: each distinct pair counted once
        score_diff = sc_i - score[None, :]
        agree += np.count_nonzero(faster & (score_diff > 0)) + 0.5 * np.count_nonzero(faster & (score_diff == 0))
        total += np.count_nonzero(faster)
    return agree / total if total else float("nan")


def _group_slices(ds: Dataset, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    index = np.flatnonzero(mask)
    group = ds.group[index]
    order = np.argsort(group, kind="stable")
    index, group = index[order], group[order]
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]]) if len(group) else np.array([], int)
    ends = np.r_[starts[1:], len(group)]
    return index, starts, ends


def group_slices(ds: Dataset, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Record indices of ``mask`` sorted by group, with each group's start and end in that order."""
    index = np.flatnonzero(mask)
    group = ds.group[index]
    order = np.argsort(group, kind="stable")
    index, group = index[order], group[order]
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]]) if len(group) else np.array([], int)
    ends = np.r_[starts[1:], len(group)]
    return index, starts, ends


def _per_group(ds: Dataset, index: np.ndarray, starts: np.ndarray, ends: np.ndarray, **values) -> GroupScores:
    first = index[starts] if len(starts) else np.array([], int)
    return GroupScores(group=ds.group[first], hardware=ds.hardware[first], task=ds.task[first],
                       op_kind=ds.op_kind[first], size=(ends - starts), **values)


def group_scores(ds: Dataset, scores: np.ndarray, ks: tuple[int, ...] = TOPK, peak_k: int = PEAK_K) -> GroupScores:
    """Metrics of ``scores`` (one per record of ``ds``, higher = predicted faster) per group."""
    scores = np.asarray(scores, dtype=np.float64)
    if len(scores) != len(ds):
        raise ValueError(f"{len(scores)} scores for {len(ds)} records")
    valid = ds.valid & np.isfinite(scores)
    index, starts, ends = group_slices(ds, valid)
    n_groups = len(starts)
    pca, best, peak = (np.full(n_groups, np.nan) for _ in range(3))
    topk_ratio = {k: np.full(n_groups, np.nan) for k in ks}
    topk_best = {k: np.full(n_groups, np.nan) for k in ks}
    for g, (s, e) in enumerate(zip(starts, ends)):
        rows = index[s:e]
        lat, sc = ds.latency[rows], scores[rows]
        best[g] = lat.min()
        pca[g] = _pairwise_accuracy(lat, sc) if len(rows) > 1 else np.nan
        # Stable order on ties in score: the first-listed program wins, never the best by luck.
        ranked = lat[np.argsort(-sc, kind="stable")]
        running_best = np.minimum.accumulate(ranked)
        for k in ks:
            topk_best[k][g] = running_best[min(k, len(ranked)) - 1]
            topk_ratio[k][g] = best[g] / topk_best[k][g]
        depth = min(peak_k, len(ranked))
        peak[g] = np.mean(np.r_[best[g] / running_best[:depth], np.full(peak_k - depth, best[g] / running_best[depth - 1])])
    return _per_group(ds, index, starts, ends, pca=pca, topk_ratio=topk_ratio, topk_best=topk_best, best=best, peak=peak)


def random_group_scores(ds: Dataset, ks: tuple[int, ...] = TOPK, peak_k: int = PEAK_K) -> GroupScores:
    """The exact expected metrics of a uniformly random ranker, per group."""
    index, starts, ends = group_slices(ds, ds.valid)
    n_groups = len(starts)
    pca, best, peak = (np.full(n_groups, np.nan) for _ in range(3))
    topk_ratio = {k: np.full(n_groups, np.nan) for k in ks}
    topk_best = {k: np.full(n_groups, np.nan) for k in ks}
    for g, (s, e) in enumerate(zip(starts, ends)):
        lat = np.sort(ds.latency[index[s:e]])
        best[g] = lat[0]
        pca[g] = 0.5 if len(lat) > 1 and lat[-1] > lat[0] else np.nan
        ratios = lat[0] / lat
        for k in ks:
            p = min_rank_probabilities(len(lat), k)
            topk_ratio[k][g] = p @ ratios
            topk_best[k][g] = p @ lat
        peak[g] = np.mean([min_rank_probabilities(len(lat), i) @ ratios for i in range(1, peak_k + 1)])
    return _per_group(ds, index, starts, ends, pca=pca, topk_ratio=topk_ratio, topk_best=topk_best, best=best, peak=peak)


def min_rank_probabilities(n: int, k: int) -> np.ndarray:
    """P(the fastest of a uniformly random k-subset of n programs is the i-th fastest), for i = 1..n.

    P_i = C(n-i, k-1) / C(n, k); successive terms differ by the factor (n-i-k+1) / (n-i), so a running
    product gives them without factorials of group sizes in the thousands.
    """
    k = min(k, n)
    i = np.arange(1, n)
    factors = np.clip(n - i - k + 1, 0, None) / (n - i)
    return (k / n) * np.cumprod(np.r_[1.0, factors])


@dataclass
class Summary:
    """Aggregated metrics of a set of groups."""

    groups: int
    records: int
    skipped_single: int  # groups with one program (no pairs, no ranking)
    pca: float
    pca_mean: float
    topk: dict[int, float] = field(default_factory=dict)  # TLP's sum form: the headline
    topk_mean: dict[int, float] = field(default_factory=dict)  # mean of per-group ratios
    peak: float = float("nan")

    def to_json(self) -> dict:
        data = {"groups": self.groups, "records": self.records, "skipped_single_program_tasks": self.skipped_single,
                "pca": self.pca, "pca_mean": self.pca_mean, "peak@5": self.peak}
        data.update({f"top{k}": v for k, v in self.topk.items()})
        data.update({f"top{k}_mean": v for k, v in self.topk_mean.items()})
        return data


def summarize(scores: GroupScores, select: np.ndarray | None = None,
              task_weight: Mapping[int, float] | None = None) -> Summary:
    """Aggregate per-group metrics (optionally a subset of groups; ``task_weight`` maps a task index to
    its weight in the sum form of top-k, e.g. its count in a network)."""
    select = np.ones(len(scores.size), dtype=bool) if select is None else select
    multi = select & (scores.size > 1)
    size = scores.size[multi]
    pca = scores.pca[multi]
    has_pairs = np.isfinite(pca)
    weights = np.array([task_weight.get(int(t), 1.0) for t in scores.task[multi]]) if task_weight else np.ones(len(size))
    nan = float("nan")
    summary = Summary(
        groups=int(select.sum()), records=int(scores.size[select].sum()),
        skipped_single=int((select & (scores.size <= 1)).sum()),
        pca=float(np.average(pca[has_pairs], weights=size[has_pairs])) if has_pairs.any() else nan,
        pca_mean=float(pca[has_pairs].mean()) if has_pairs.any() else nan,
        peak=float(scores.peak[multi].mean()) if multi.any() else nan,
    )
    for k in scores.topk_ratio:
        summary.topk_mean[k] = float(scores.topk_ratio[k][multi].mean()) if multi.any() else nan
        picked = weights * scores.topk_best[k][multi]
        summary.topk[k] = float(np.sum(weights * scores.best[multi]) / np.sum(picked)) if multi.any() else nan
    return summary


def evaluate(ds: Dataset, scores: np.ndarray, task_weight: Mapping[int, float] | None = None) -> dict:
    """Metrics of a model's scores and of the exact random floor (under ``"random"``): overall, per hardware,
    per operator kind; keys as in :meth:`Summary.to_json`."""
    model = group_scores(ds, scores)
    floor = random_group_scores(ds)
    result = {"overall": _both(model, floor, None, task_weight), "per_hardware": {}, "per_operator": {}}
    for h, name in enumerate(ds.hardware_names):
        if np.any(model.hardware == h):
            result["per_hardware"][name] = _both(model, floor, ("hardware", h), task_weight)
    for kind in np.unique(model.op_kind):
        result["per_operator"][OP_KINDS[kind]] = _both(model, floor, ("op_kind", kind), task_weight)
    return result


def _both(model: GroupScores, floor: GroupScores, where: tuple[str, int] | None, task_weight) -> dict:
    def mask(scores: GroupScores) -> np.ndarray:
        if where is None:
            return np.ones(len(scores.size), dtype=bool)
        return getattr(scores, where[0]) == where[1]

    data = summarize(model, mask(model), task_weight).to_json()
    data["random"] = summarize(floor, mask(floor), task_weight).to_json()
    return data


def validation_pca(ds: Dataset, scores: np.ndarray) -> float:
    """Record-weighted PCA only (cheap enough to run every epoch)."""
    return summarize(group_scores(ds, scores, ks=(1,), peak_k=1)).pca
