"""Ranking metrics, one module for every model (definitions in ../shared/DESIGN.md).

All metrics are computed within a group = one task on one hardware, over valid measurements only:

- PCA (pairwise comparison accuracy, TenSet): the fraction of program pairs whose predicted order
  matches the measured order. Pairs with equal measured latency are not counted; a tie in the
  prediction counts half. Averaged over groups weighted by record count (``pca``) and unweighted
  (``pca_unweighted``). Groups with one program have no pairs: skipped and counted.
- top-k (TLP): best latency / best latency among the model's k highest-scored programs, reported as
  the mean of per-group ratios (``topk``) and as sum(best) / sum(top-k best) (``topk_sum``), the
  latter optionally weighted per task (a task's count in a network).
- peak@k (TenSet): mean over i <= k of best latency / best latency among the top-i predictions.

The random-ranker floor is computed exactly (expectation over random orderings), not sampled.
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
    """Per-group metric values (arrays aligned by group)."""

    group: np.ndarray
    hardware: np.ndarray
    task: np.ndarray
    op_kind: np.ndarray
    size: np.ndarray
    pca: np.ndarray  # NaN where the group has no comparable pair
    topk: dict[int, np.ndarray]
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


def group_scores(ds: Dataset, scores: np.ndarray, ks: tuple[int, ...] = TOPK, peak_k: int = PEAK_K) -> GroupScores:
    """Metrics of ``scores`` (one per record of ``ds``, higher = predicted faster) per group."""
    scores = np.asarray(scores, dtype=np.float64)
    if len(scores) != len(ds):
        raise ValueError(f"{len(scores)} scores for {len(ds)} records")
    valid = ds.valid & np.isfinite(scores)
    index, starts, ends = _group_slices(ds, valid)
    n_groups = len(starts)
    out = {name: np.full(n_groups, np.nan) for name in ("pca", "best", "peak")}
    topk = {k: np.full(n_groups, np.nan) for k in ks}
    topk_best = {k: np.full(n_groups, np.nan) for k in ks}
    for g, (s, e) in enumerate(zip(starts, ends)):
        rows = index[s:e]
        lat, sc = ds.latency[rows], scores[rows]
        best = lat.min()
        out["best"][g] = best
        out["pca"][g] = _pairwise_accuracy(lat, sc) if len(rows) > 1 else np.nan
        # Stable order on ties in score: the first-listed program wins, never the best by luck.
        ranked = lat[np.argsort(-sc, kind="stable")]
        running_best = np.minimum.accumulate(ranked)
        for k in ks:
            topk_best[k][g] = running_best[min(k, len(ranked)) - 1]
            topk[k][g] = best / topk_best[k][g]
        depth = min(peak_k, len(ranked))
        out["peak"][g] = np.mean(np.r_[best / running_best[:depth], np.full(peak_k - depth, best / running_best[depth - 1])])
    first = index[starts] if n_groups else np.array([], int)
    return GroupScores(group=ds.group[first], hardware=ds.hardware[first], task=ds.task[first],
                       op_kind=ds.op_kind[first], size=(ends - starts), pca=out["pca"], topk=topk,
                       topk_best=topk_best, best=out["best"], peak=out["peak"])


def random_group_scores(ds: Dataset, ks: tuple[int, ...] = TOPK, peak_k: int = PEAK_K) -> GroupScores:
    """The exact expected metrics of a uniformly random ranker, per group."""
    index, starts, ends = _group_slices(ds, ds.valid)
    n_groups = len(starts)
    pca = np.full(n_groups, np.nan)
    best = np.full(n_groups, np.nan)
    peak = np.full(n_groups, np.nan)
    topk = {k: np.full(n_groups, np.nan) for k in ks}
    topk_best = {k: np.full(n_groups, np.nan) for k in ks}
    for g, (s, e) in enumerate(zip(starts, ends)):
        lat = np.sort(ds.latency[index[s:e]])
        n = len(lat)
        best[g] = lat[0]
        pca[g] = 0.5 if n > 1 and lat[-1] > lat[0] else np.nan
        ratios = lat[0] / lat

        def expected_ratio(k: int) -> float:
            # P(min of a random k-subset is the i-th fastest) = C(n-i, k-1) / C(n, k), i = 1..n
            k = min(k, n)
            i = np.arange(1, n + 1)
            with np.errstate(divide="ignore"):
                log_p = _log_comb(n - i, k - 1) - _log_comb(n, k)
            return float(np.sum(np.exp(log_p) * ratios))

        for k in ks:
            topk[k][g] = expected_ratio(k)
            topk_best[k][g] = lat[0] / topk[k][g]
        peak[g] = np.mean([expected_ratio(i) for i in range(1, peak_k + 1)])
    first = index[starts] if n_groups else np.array([], int)
    return GroupScores(group=ds.group[first], hardware=ds.hardware[first], task=ds.task[first],
                       op_kind=ds.op_kind[first], size=(ends - starts), pca=pca, topk=topk,
                       topk_best=topk_best, best=best, peak=peak)


def _log_comb(n: np.ndarray | int, k: int) -> np.ndarray:
    from scipy.special import gammaln

    n = np.asarray(n, dtype=np.float64)
    valid = (n >= k) & (k >= 0)
    out = np.full(n.shape, -np.inf)
    out[valid] = gammaln(n[valid] + 1) - gammaln(k + 1) - gammaln(n[valid] - k + 1)
    return out if out.shape else float(out)


@dataclass
class Summary:
    """Aggregated metrics of a set of groups."""

    groups: int
    records: int
    skipped_single: int  # groups with one program (no pairs, no ranking)
    pca: float
    pca_unweighted: float
    topk: dict[int, float] = field(default_factory=dict)
    topk_sum: dict[int, float] = field(default_factory=dict)
    peak: float = float("nan")

    def to_json(self) -> dict:
        data = {"groups": self.groups, "records": self.records, "skipped_single_program_tasks": self.skipped_single,
                "pca": self.pca, "pca_unweighted": self.pca_unweighted, "peak@5": self.peak}
        for k, v in self.topk.items():
            data[f"top{k}"] = v
        for k, v in self.topk_sum.items():
            data[f"top{k}_sum"] = v
        return data


def summarize(scores: GroupScores, select: np.ndarray | None = None,
              task_weight: Mapping[int, float] | None = None) -> Summary:
    """Aggregate per-group metrics (optionally a subset of groups; ``task_weight`` maps a task index to
    its weight for the sum form of top-k)."""
    select = np.ones(len(scores.size), dtype=bool) if select is None else select
    multi = select & (scores.size > 1)
    size = scores.size[multi]
    pca = scores.pca[multi]
    has_pairs = np.isfinite(pca)
    weights = np.array([task_weight.get(int(t), 1.0) for t in scores.task[multi]]) if task_weight else np.ones(len(size))
    summary = Summary(
        groups=int(select.sum()), records=int(scores.size[select].sum()),
        skipped_single=int((select & (scores.size <= 1)).sum()),
        pca=float(np.average(pca[has_pairs], weights=size[has_pairs])) if has_pairs.any() else float("nan"),
        pca_unweighted=float(pca[has_pairs].mean()) if has_pairs.any() else float("nan"),
        peak=float(scores.peak[multi].mean()) if multi.any() else float("nan"),
    )
    for k, values in scores.topk.items():
        summary.topk[k] = float(values[multi].mean()) if multi.any() else float("nan")
        picked = scores.topk_best[k][multi]
        summary.topk_sum[k] = float(np.sum(weights * scores.best[multi]) / np.sum(weights * picked)) if multi.any() else float("nan")
    return summary


def evaluate(ds: Dataset, scores: np.ndarray, task_weight: Mapping[int, float] | None = None) -> dict:
    """Metrics of a model's scores and of the random floor: overall, per hardware, per operator kind."""
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
