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
from .convert import measured_dataset, run_dataset

BLEND_TRIALS = 64  # after one full round of measurements the trees weigh as much as the pre-trained model
MIN_PROGRAMS = 8  # fewer measured programs of a task: no trees yet
TREES = XGBConfig(n_estimators=100, max_depth=6)  # a few hundred programs at most: smaller than the xgb model


class TaskTrees:
    """The tree ranker of every task of a run, fitted on the adapter's measurements (``measured``: task ->
    (operator, token lists, latencies), the adapter's own store, shared with its fine-tuning)."""

    shared = False  # a refit changes one task's scores

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


RUN_TREES = XGBConfig()  # crosstune's xgb as it is: the rows are the whole run's, up to a few thousand
REFIT_EVERY = 64  # measurements between two fits of the run's ranker (a round of a heavy task)


class RunTrees:
    """One tree ranker over every task's measurements of the run (the ``run-trees`` option), grouped by task.

    Unlike a task's own trees it scores a task before anything of it is measured, from what the run measured
    of the other tasks on this machine. Offline, on 2,828 programs a tuner measured on this VM's AMD EPYC
    (docs/BENCHMARKS.md, "What the tuning machine's own measurements teach"), such trees fitted on 256 programs
    of other tasks ranked a held-out heavy convolution's programs at PCA 0.62 and Σ top-1 0.90, against 0.56
    and 0.60 for the pre-trained crossfeat fine-tuned as the tuner does; with the task's own first 64
    programs added, 0.77 against 0.58. Blended like the per-task trees, over the run's measurements: the
    trees' share is n / (n + BLEND_TRIALS) after n."""

    shared = True  # a refit changes every task's scores

    def __init__(self, hardware, measured: dict[int, tuple[object, list, list[float]]]):
        self.hardware = hardware
        self.measured = measured
        self.ranker: XGBModel | None = None
        self.fitted_on = 0
        self.fits = 0

    def refit(self, task: int) -> None:
        """Fit the ranker afresh on all measurements once REFIT_EVERY new ones have come since the last fit."""
        n = sum(len(latencies) for _, _, latencies in self.measured.values())
        if n < MIN_PROGRAMS or (self.ranker is not None and n - self.fitted_on < REFIT_EVERY):
            return
        data = run_dataset(self.measured, self.hardware)
        if len(np.unique(data.latency)) < 2:
            return
        ranker = XGBModel(RUN_TREES)
        ranker.fit(data, None, FitOptions(progress=False))
        self.ranker, self.fitted_on = ranker, n
        self.fits += 1

    def weight(self, task: int) -> float:
        if self.ranker is None:
            return 0.0
        return self.fitted_on / (self.fitted_on + BLEND_TRIALS)

    def predict(self, task: int, programs) -> np.ndarray:
        return self.ranker.predict(programs)
