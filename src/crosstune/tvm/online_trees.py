"""Per-task XGBoost rankers fitted on a tuning run's own measurements, blended with the pre-trained model
(the ``online-trees`` head-start option of `crosstune tune-compare`).

A pre-trained model ranks a task's programs before anything of it is measured; MetaSchedule's XGBoost,
which starts from nothing, catches up as the measurements grow: on ResNet-18 (local-avx512-2c,
docs/BENCHMARKS.md, session 30) crosstune's estimate was ahead of XGBoost's per trial until about 2,000
trials, then level. So each task also gets a small tree ranker on crosstune's own program features (the
``xgb`` model's), refitted after each of its rounds, and the search's scores move from the pre-trained
model's towards the trees' as the task's measurements grow: n / (n + BLEND_TRIALS) of the trees' after n.
Measured there: a first network estimate 6.6% lower, within 5% of XGBoost's final no sooner, so it is off
by default. The trees live in memory: an arm resumed after a kill grows them again from its next round.
"""

from __future__ import annotations

import numpy as np

from ..models.base import FitOptions
from ..models.gbdt import XGBConfig, XGBModel
from .convert import measured_dataset

BLEND_TRIALS = 64  # after one full round of measurements the trees weigh as much as the pre-trained model
MIN_PROGRAMS = 8  # fewer measured programs of a task: no trees yet
TREES = XGBConfig(n_estimators=100, max_depth=6)  # a few hundred programs at most: smaller than the xgb model


class TaskTrees:
    """The tree ranker of every task of a run, fitted on the adapter's measurements (``measured``: task ->
    (operator, token lists, latencies), the adapter's own store, shared with its fine-tuning)."""

    def __init__(self, hardware, measured: dict[int, tuple[object, list, list[float]]]):
        self.hardware = hardware
        self.measured = measured
        self.rankers: dict[int, XGBModel] = {}
        self.fits = 0

    def refit(self, task: int) -> None:
        """Fit the task's ranker afresh on all of its measurements (a few hundred rows: well under a second)."""
        operator, token_lists, latencies = self.measured.get(task, (None, [], []))
        if len(latencies) < MIN_PROGRAMS or len(set(latencies)) < 2:
            return
        ranker = XGBModel(TREES)
        ranker.fit(measured_dataset(token_lists, latencies, operator, self.hardware), None, FitOptions(progress=False))
        self.rankers[task] = ranker
        self.fits += 1

    def weight(self, task: int) -> float:
        """The trees' share of the task's blended score."""
        if task not in self.rankers:
            return 0.0
        n = len(self.measured[task][2])
        return n / (n + BLEND_TRIALS)

    def predict(self, task: int, programs) -> np.ndarray:
        return self.rankers[task].predict(programs)
