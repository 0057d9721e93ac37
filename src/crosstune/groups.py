"""Runs of equal keys in a sorted array: where each group of records starts and ends.

Rankings, labels, metrics, splits and pruning all work within groups (one task on one hardware); this
is the one place that finds their boundaries.
"""

from __future__ import annotations

import numpy as np


def run_bounds(sorted_keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of every run of equal values in ``sorted_keys`` (ends exclusive)."""
    if len(sorted_keys) == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])
    return starts, np.r_[starts[1:], len(sorted_keys)]


def grouped(keys: np.ndarray, rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``rows`` (default: all) ordered by ``keys[rows]``, stably, and the (starts, ends) of each key's run."""
    rows = np.arange(len(keys)) if rows is None else np.asarray(rows)
    order = rows[np.argsort(keys[rows], kind="stable")]
    starts, ends = run_bounds(keys[order])
    return order, starts, ends


def rank_in_run(sorted_keys: np.ndarray) -> np.ndarray:
    """For each element of ``sorted_keys``, its position within its run (0 for the first)."""
    starts, ends = run_bounds(sorted_keys)
    return np.arange(len(sorted_keys)) - np.repeat(starts, ends - starts)
