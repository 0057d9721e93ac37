"""Splits are seeded and honest; metrics follow their definitions exactly."""

from __future__ import annotations

import json

import numpy as np
import pytest

from crosstune.dataset import load_dataset
from crosstune.errors import CrosstuneError
from crosstune.metrics import evaluate, group_scores, group_slices, min_rank_probabilities, random_group_scores, summarize
from crosstune.splits import holdout_groups, make_split, sample_per_group


@pytest.fixture(scope="module")
def ds(small_dataset):
    return load_dataset([small_dataset])


def test_by_hardware_split_is_leave_hardware_out(ds):
    split = make_split(ds, "by-hardware", test_hardware=["v100"])
    v100 = ds.hardware_names.index("v100")
    assert np.all(ds.hardware[split.test] == v100) and not np.any(ds.hardware[split.train] == v100)
    assert len(split.train) + len(split.test) == len(ds)


@pytest.mark.parametrize("kind", ["within-task", "by-task", "by-operator"])
def test_splits_are_seeded_and_disjoint(ds, kind):
    a = make_split(ds, kind, seed=3, test_fraction=0.25)
    b = make_split(ds, kind, seed=3, test_fraction=0.25)
    assert np.array_equal(a.test, b.test)
    assert len(np.intersect1d(a.train, a.test)) == 0
    if kind == "by-task":
        assert not set(ds.task[a.train]) & set(ds.task[a.test])
    if kind == "by-operator":
        assert not set(ds.op_kind[a.train]) & set(ds.op_kind[a.test])
    if kind == "within-task":  # every group is on both sides
        assert set(ds.group[a.test]) == set(ds.group[a.train])


def test_by_network_split(ds, tmp_path):
    mapping = {key: ("netA" if i % 2 else "netB") for i, key in enumerate(ds.workload_keys)}
    path = tmp_path / "nets.json"
    path.write_text(json.dumps(mapping))
    from crosstune.splits import load_network_map

    split = make_split(ds, "by-network", network_map=load_network_map(path), test_networks=["netA"])
    test_tasks = {ds.workload_keys[t] for t in ds.task[split.test]}
    assert test_tasks and all(mapping[k] == "netA" for k in test_tasks)


def test_impossible_splits_fail_before_work(ds):
    with pytest.raises(CrosstuneError, match="not in the dataset"):
        make_split(ds, "by-hardware", test_hardware=["h100"])
    with pytest.raises(CrosstuneError, match="training side empty"):
        make_split(ds, "by-hardware", test_hardware=["k80", "v100"])
    with pytest.raises(CrosstuneError, match="unknown split"):
        make_split(ds, "by-moon")
    with pytest.raises(CrosstuneError, match="--network-map"):
        make_split(ds, "by-network")


def test_holdout_and_few_shot_sampling(ds):
    fit, valid = holdout_groups(ds, np.arange(len(ds)), 0.25, seed=0)
    assert not set(ds.group[fit]) & set(ds.group[valid])
    sample = sample_per_group(ds, np.arange(len(ds)), 0.05, seed=1)
    per_group = np.bincount(np.searchsorted(np.unique(ds.group), ds.group[sample]))
    assert np.all(per_group == 50)  # 5% of 1000 programs per task
    assert np.array_equal(sample, sample_per_group(ds, np.arange(len(ds)), 0.05, seed=1))


class Toy:
    """The fields the metrics read, for hand-checkable examples (one group per latency list)."""

    def __init__(self, groups):
        self.latency = np.concatenate([np.asarray(g, float) for g in groups])
        self.group = np.concatenate([np.full(len(g), i) for i, g in enumerate(groups)])
        n = len(self.latency)
        self.valid, self.hardware, self.task = np.ones(n, bool), np.zeros(n, int), self.group
        self.op_kind, self.hardware_names = np.zeros(n, int), ["hw"]

    def __len__(self):
        return len(self.latency)


def test_pca_topk_peak_by_definition():
    toy = Toy([[1.0, 2.0, 3.0, 4.0], [5.0, 10.0]])
    perfect = -toy.latency
    scores = group_scores(toy, perfect, ks=(1, 2), peak_k=2)
    assert np.allclose(scores.pca, [1.0, 1.0]) and np.allclose(scores.topk_ratio[1], 1.0)
    reverse = toy.latency.copy()
    scores = group_scores(toy, reverse, ks=(1, 2), peak_k=2)
    assert np.allclose(scores.pca, [0.0, 0.0])
    assert np.allclose(scores.topk_ratio[1], [1 / 4, 5 / 10]) and np.allclose(scores.topk_ratio[2], [1 / 3, 1.0])
    assert np.allclose(scores.peak, [(1 / 4 + 1 / 3) / 2, (0.5 + 1.0) / 2])
    summary = summarize(scores)
    assert np.isclose(summary.pca, 0.0) and np.isclose(summary.topk_mean[1], (0.25 + 0.5) / 2)
    # TLP's form: sum of best over sum of picked (slow tasks weigh by their latency)
    assert np.isclose(summary.topk[1], (1 + 5) / (4 + 10))
    weighted = summarize(scores, task_weight={0: 3.0, 1: 1.0})
    assert np.isclose(weighted.topk[1], (3 * 1 + 5) / (3 * 4 + 10))
    data = summary.to_json()
    assert data["top1"] == summary.topk[1] and data["top1_mean"] == summary.topk_mean[1]
    assert {"pca", "pca_mean", "top2", "top2_mean", "peak@5"} <= set(data)
    # ties in the prediction count half
    tied = group_scores(Toy([[1.0, 2.0]]), np.array([0.0, 0.0]))
    assert np.isclose(tied.pca[0], 0.5)


def monte_carlo_floors(groups: list[np.ndarray], k: int, orders: int, rng) -> tuple[float, float, float, float]:
    """Random orders drawn for real: (sum form, its standard error, mean form, its standard error)."""
    picked, ratios = [], []
    for lat in groups:
        keys = rng.random((orders, len(lat)))
        subset = np.argpartition(keys, k - 1, axis=1)[:, :k] if k < len(lat) else np.argsort(keys, axis=1)
        best_of_subset = lat[subset].min(axis=1)
        picked.append(best_of_subset)
        ratios.append(lat.min() / best_of_subset)
    picked, ratios = np.array(picked), np.array(ratios)  # groups x orders
    best_sum = sum(lat.min() for lat in groups)
    picked_sum = picked.sum(axis=0)  # per random order: the sum over tasks of the latency picked
    mean_form = ratios.mean(axis=0)
    sem = lambda x: x.std() / np.sqrt(orders)  # noqa: E731
    # DESIGN's floor is sum(best) / sum(E[picked]) (not E[sum(best) / sum(picked)]); its error follows
    # from the denominator's by the delta method.
    sum_form = best_sum / picked_sum.mean()
    return float(sum_form), sum_form * sem(picked_sum) / picked_sum.mean(), float(mean_form.mean()), sem(mean_form)


@pytest.mark.parametrize("k", [1, 5])
def test_random_floors_match_monte_carlo_on_real_groups(ds, k):
    """Both exact floors against 10,000 random orders of every real task of the sample (both GPUs)."""
    floor = random_group_scores(ds, ks=(k,), peak_k=1)
    summary = summarize(floor)
    index, starts, ends = group_slices(ds, ds.valid)
    groups = [ds.latency[index[s:e]] for s, e in zip(starts, ends) if e - s > 1]
    sum_form, sum_sem, mean_form, mean_sem = monte_carlo_floors(groups, k, 10_000, np.random.default_rng(k))
    assert abs(summary.topk[k] - sum_form) < 4 * sum_sem + 1e-3, (summary.topk[k], sum_form, sum_sem)
    assert abs(summary.topk_mean[k] - mean_form) < 4 * mean_sem + 1e-4, (summary.topk_mean[k], mean_form)
    # On these trajectories a few very slow programs make a random pick costly: the sum form is far lower.
    assert summary.topk[k] < summary.topk_mean[k]


def test_min_rank_probabilities_sum_to_one_and_match_combinatorics():
    from math import comb

    for n, k in [(1, 1), (7, 1), (7, 3), (7, 7), (7, 10), (40, 5)]:
        p = min_rank_probabilities(n, k)
        kk = min(k, n)
        assert np.isclose(p.sum(), 1.0)
        assert np.allclose(p, [comb(n - i, kk - 1) / comb(n, kk) for i in range(1, n + 1)])


def test_evaluate_reports_per_hardware_operator_and_floor(ds):
    result = evaluate(ds, -ds.latency)
    assert set(result["per_hardware"]) == {"k80", "v100"}
    assert {"conv2d", "matmul", "pool", "depthwise_conv2d"} <= set(result["per_operator"])
    overall = result["overall"]
    assert overall["pca"] == pytest.approx(1.0) and overall["top1"] == pytest.approx(1.0)
    assert overall["top1_mean"] == pytest.approx(1.0) and overall["pca_mean"] == pytest.approx(1.0)
    random = overall["random"]
    assert random["pca"] == 0.5 and 0 < random["top1"] < random["top1_mean"] < 1
    assert random["top1"] < random["top5"] < random["top10"] <= 1
