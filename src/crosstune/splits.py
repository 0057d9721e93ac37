"""Train/test splits of a dataset, all seeded and reproducible.

- ``within-task``: a random fraction of every (task, hardware) group's programs is held out (TenSet's
  random split; the same tasks are on both sides, so it flatters every model);
- ``by-task``: whole workloads are held out, on every hardware;
- ``by-operator``: whole operator kinds (conv2d, matmul, ...) are held out;
- ``by-network``: the tasks of whole networks are held out (needs a task -> network map); a task used
  by a held-out network goes to the test side even if a training network uses it too;
- ``by-hardware``: named hardware is held out ("unseen hardware": it contributes nothing to training).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .dataset import Dataset
from .errors import CrosstuneError
from .groups import rank_in_run, run_bounds
from .records.operators import OP_KINDS

SPLIT_KINDS = ("within-task", "by-task", "by-operator", "by-network", "by-hardware")


@dataclass
class Split:
    kind: str
    train: np.ndarray  # record indices
    test: np.ndarray
    description: str


def _check(split: Split) -> Split:
    if len(split.train) == 0:
        raise CrosstuneError(f"{split.kind} split ({split.description}) leaves the training side empty")
    if len(split.test) == 0:
        raise CrosstuneError(f"{split.kind} split ({split.description}) leaves the test side empty")
    return split


def load_network_map(path: str | Path) -> dict[str, list[str]]:
    """A JSON object mapping a task id or workload key to a network name or a list of names."""
    try:
        data = json.loads(Path(path).read_text())
    except OSError as err:
        raise CrosstuneError(f"{path}: cannot read network map ({err.strerror or err})") from None
    except json.JSONDecodeError as err:
        raise CrosstuneError(f"{path}: network map is not valid JSON ({err})") from None
    if not isinstance(data, dict):
        raise CrosstuneError(f"{path}: network map must be a JSON object {{task: network}}")
    return {str(k): [v] if isinstance(v, str) else [str(x) for x in v] for k, v in data.items()}


def _task_networks(ds: Dataset, network_map: dict[str, list[str]]) -> list[list[str]]:
    return [network_map.get(tid) or network_map.get(key) or [] for tid, key in zip(ds.task_ids, ds.workload_keys)]


def check_test_fraction(test_fraction: float) -> None:
    if not 0.0 < test_fraction < 1.0:
        raise CrosstuneError(f"test fraction must be in (0, 1), not {test_fraction}")


def check_test_hardware(test_hardware: Sequence[str] | None, present: Sequence[str]) -> None:
    if not test_hardware:
        raise CrosstuneError("by-hardware split needs --test-hardware NAME")
    unknown = [h for h in test_hardware if h not in present]
    if unknown:
        raise CrosstuneError(f"test hardware {', '.join(unknown)} not in the dataset; present: {', '.join(present)}")


def held_out_tasks(n_tasks: int, test_fraction: float, seed: int) -> np.ndarray:
    """The task indices a by-task split holds out (the same draw in memory and streamed)."""
    tasks = np.random.default_rng(seed).permutation(n_tasks)
    return tasks[:max(1, int(round(n_tasks * test_fraction)))]


def make_split(ds: Dataset, kind: str, *, seed: int = 0, test_fraction: float = 0.2,
               test_hardware: Sequence[str] | None = None, test_operators: Sequence[str] | None = None,
               network_map: dict[str, list[str]] | None = None,
               test_networks: Sequence[str] | None = None) -> Split:
    """Split ``ds`` into train and test record indices. Raises CrosstuneError for an impossible split
    (unknown names, an empty side) before any work is done."""
    if kind not in SPLIT_KINDS:
        raise CrosstuneError(f"unknown split {kind!r}; choose one of {', '.join(SPLIT_KINDS)}")
    check_test_fraction(test_fraction)
    rng = np.random.default_rng(seed)
    n = len(ds)
    if kind == "by-hardware":
        check_test_hardware(test_hardware, ds.hardware_names)
        test = ds.hardware_mask(test_hardware)
        return _check(Split(kind, np.flatnonzero(~test), np.flatnonzero(test), f"test hardware {', '.join(test_hardware)}"))
    if kind == "within-task":
        test = np.zeros(n, dtype=bool)
        order = rng.permutation(n)
        group = ds.group[order]
        ranked = np.argsort(group, kind="stable")  # shuffled records, grouped
        sorted_group = group[ranked]
        starts, ends = run_bounds(sorted_group)
        sizes = ends - starts
        rank_in_group = rank_in_run(sorted_group)
        n_test = np.where(sizes >= 2, np.maximum(1, np.round(sizes * test_fraction)), 0).astype(int)
        chosen = rank_in_group < np.repeat(n_test, sizes)
        test[order[ranked[chosen]]] = True
        return _check(Split(kind, np.flatnonzero(~test), np.flatnonzero(test), f"{test_fraction:.0%} of each task"))
    if kind == "by-task":
        held_out = held_out_tasks(len(ds.task_ids), test_fraction, seed)
        test = np.isin(ds.task, held_out)
        return _check(Split(kind, np.flatnonzero(~test), np.flatnonzero(test),
                            f"{len(held_out)} of {len(ds.task_ids)} tasks held out"))
    if kind == "by-operator":
        present = sorted({OP_KINDS[k] for k in np.unique(ds.op_kind)})
        if test_operators:
            unknown = [o for o in test_operators if o not in present]
            if unknown:
                raise CrosstuneError(f"operator kind(s) {', '.join(unknown)} not in the dataset; present: {', '.join(present)}")
            chosen = list(test_operators)
        else:  # random kinds until the test side holds about test_fraction of the records
            counts = {k: int(np.sum(ds.op_kind == OP_KINDS.index(k))) for k in present}
            chosen, held = [], 0
            for k in rng.permutation(present):
                if held >= test_fraction * n:
                    break
                if held + counts[k] < n:
                    chosen.append(str(k))
                    held += counts[k]
        test = np.isin(ds.op_kind, [OP_KINDS.index(k) for k in chosen])
        return _check(Split(kind, np.flatnonzero(~test), np.flatnonzero(test), f"operators {', '.join(chosen)} held out"))
    # by-network
    if not network_map:
        raise CrosstuneError("by-network split needs --network-map FILE.json (task id or workload key -> network)")
    per_task = _task_networks(ds, network_map)
    networks = sorted({net for nets in per_task for net in nets})
    if not networks:
        raise CrosstuneError("the network map names none of the dataset's tasks")
    if test_networks:
        unknown = [t for t in test_networks if t not in networks]
        if unknown:
            raise CrosstuneError(f"network(s) {', '.join(unknown)} not in the network map; known: {', '.join(networks)}")
        chosen = set(test_networks)
    else:
        count = max(1, int(round(len(networks) * test_fraction)))
        chosen = set(rng.permutation(networks)[:count].tolist())
    test_tasks = [i for i, nets in enumerate(per_task) if chosen.intersection(nets)]
    mapped = [i for i, nets in enumerate(per_task) if nets]
    test = np.isin(ds.task, test_tasks)
    train = ~test & np.isin(ds.task, mapped)
    return _check(Split(kind, np.flatnonzero(train), np.flatnonzero(test), f"networks {', '.join(sorted(chosen))} held out"))


def holdout_groups(ds: Dataset, index: np.ndarray, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Split record indices into (fit, validation) by whole (task, hardware) groups, for per-epoch
    validation and best-epoch selection on tasks the model does not fit."""
    groups = np.unique(ds.group[index])
    if len(groups) < 2:
        return index, index[:0]
    rng = np.random.default_rng(seed + 7919)
    n_valid = max(1, int(round(len(groups) * fraction)))
    valid_groups = rng.permutation(groups)[:n_valid]
    is_valid = np.isin(ds.group[index], valid_groups)
    return index[~is_valid], index[is_valid]


def sample_per_group(ds: Dataset, index: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """A seeded sample of ``fraction`` of each (task, hardware) group's records, at least one per
    group (few-shot fine-tuning data from the target hardware)."""
    if not 0.0 < fraction <= 1.0:
        raise CrosstuneError(f"fraction must be in (0, 1], not {fraction}")
    rng = np.random.default_rng(seed + 104729)
    shuffled = index[rng.permutation(len(index))]
    groups = ds.group[shuffled]
    order = np.argsort(groups, kind="stable")
    shuffled, groups = shuffled[order], groups[order]
    starts, ends = run_bounds(groups)
    sizes = ends - starts
    rank = rank_in_run(groups)
    keep = rank < np.repeat(np.maximum(1, np.round(sizes * fraction)).astype(int), sizes)
    return np.sort(shuffled[keep])


@dataclass(frozen=True)
class TargetDraw:
    """One seeded order of each (task, hardware) group of the unseen device's records, for few-shot
    curves: the last ``test_share`` of every group is the common test set, and the first k of the rest
    are the k measured programs of that task. The samples are nested (16 programs are the first 16 of
    the 64) and every point of a curve is scored on the same test records."""

    rows: np.ndarray  # the target's record indices, group by group, each group in its drawn order
    rank: np.ndarray  # per row: its position within its group's order
    size: np.ndarray  # per row: its group's size
    pool: np.ndarray  # per row: how many records of its group may be given (the size less the test share)

    @property
    def test(self) -> np.ndarray:
        return np.sort(self.rows[self.rank >= self.pool])

    def per_task(self, programs: int) -> np.ndarray:
        """Up to ``programs`` records of every group (fewer where its pool is smaller)."""
        return np.sort(self.rows[self.rank < np.minimum(programs, self.pool)])

    def share(self, fraction: float) -> np.ndarray:
        """``fraction`` of every group's records (at least one; at most its pool)."""
        wanted = np.maximum(1, np.round(self.size * fraction)).astype(np.int64)
        return np.sort(self.rows[self.rank < np.minimum(wanted, self.pool)])


def draw_target(ds: Dataset, index: np.ndarray, test_share: float, seed: int) -> TargetDraw:
    """Order every group of ``index`` at random (seeded) and keep ``test_share`` of each (at least one
    record) as the common test set."""
    if not 0.0 < test_share < 1.0:
        raise CrosstuneError(f"test share must be in (0, 1), not {test_share}")
    rng = np.random.default_rng(seed + 15485863)
    shuffled = index[rng.permutation(len(index))]
    rows = shuffled[np.argsort(ds.group[shuffled], kind="stable")]
    groups = ds.group[rows]
    starts, ends = run_bounds(groups)
    sizes = np.repeat(ends - starts, ends - starts)
    n_test = np.maximum(1, np.round(sizes * test_share)).astype(np.int64)
    return TargetDraw(rows, rank_in_run(groups), sizes, sizes - n_test)
