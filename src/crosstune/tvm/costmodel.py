"""A crosstune model as MetaSchedule's cost model (``PyCostModel``), for ``ms.tune_tasks``.

``predict`` turns every candidate's trace into crosstune tokens and scores all candidates in one
batched call. ``update`` can fine-tune the model on the tuner's own measurements. Any failure inside
the adapter is logged and answered with neutral scores: the cost model never stops a tuning run.

MetaSchedule reads a cost model's scores as normalised throughputs: its evolutionary search clamps them
at 0 and draws each generation's parents with probability proportional to them (``PredictNormalizedScore``
and ``MakeMultinomialSampler`` in TVM). A ranking model's raw scores have no fixed offset, so they are
mapped into (0, 1) in the same order first (``search_scores``).

Tasks are told apart by the structural hash of their module: ``context.mod`` returns a new Python
wrapper at every access and ``id()`` values are reused, so an id would let tasks share an operator
descriptor and a fine-tuning group.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np

from .. import tokens
from ..hardware.registry import HardwareSpec
from ..models.base import CostModel, FitOptions
from .convert import operator_of, programs_dataset, run_dataset
from .online_trees import TaskTrees
from .trace_text import trace_tokens

log = logging.getLogger("crosstune.tvm.costmodel")


def scoring_descriptor(model: CostModel, config_name: str, here: HardwareSpec) -> tuple[HardwareSpec, str | None]:
    """The descriptor a model scores ``config_name`` on this machine with, and a note when it is not simply
    this machine's own.

    A local configuration is a name (``local-avx2-2c``) that every CPU has. The same CPU measured afresh
    need not match to the digit what the model learned (memory bandwidth moves between days): then the
    model's own descriptor, which its hardware token was trained on. Another CPU under the same name
    (vendor or model differ) is other hardware: then this machine's descriptor, unseen by the model."""
    trained = model.hardware_descriptor(config_name)
    if trained is None or trained == here:
        return here, None
    if (trained.vendor, trained.arch) != (here.vendor, here.arch):
        return here, (f"{config_name}: the model's descriptor of that name is another CPU ({trained.vendor} "
                      f"{trained.arch}); this one ({here.vendor} {here.arch}) is scored as unseen hardware")
    return trained, f"{config_name}: using the descriptor the model was trained with"


@dataclass(frozen=True)
class FineTune:
    """How the tuner fine-tunes the model on the run's measurements: epochs per fine-tune, and the learning
    rate as a fraction of the model's own. The default, one short epoch at a quarter of the rate, is the one
    every tuning figure before session 35 used; offline it teaches crossfeat little of the tuning machine
    (docs/BENCHMARKS.md, "What the tuning machine's own measurements teach")."""

    epochs: int = 1
    lr_scale: float = 0.25


NEUTRAL_SCORE = 0.5  # every candidate alike: parents drawn uniformly (all zeros would make the first the only one)


def score_scale(raw: np.ndarray) -> tuple[float, float]:
    """The centre and spread that ``search_scores`` maps a task's raw scores with: those of one batch of its
    candidates (the first of a round: the initial population, a sample of the space)."""
    spread = float(np.std(raw))
    return float(np.mean(raw)), spread if spread > 1e-9 else 1.0  # one candidate, or all alike: no spread


def standardised(raw: np.ndarray, centre: float, spread: float) -> np.ndarray:
    return (np.asarray(raw, dtype="float64") - centre) / spread


def logistic(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))  # no overflow for any z


def search_scores(raw: np.ndarray, centre: float, spread: float) -> np.ndarray:
    """Raw ranking scores as MetaSchedule's search needs them: in (0, 1), in the same order, a candidate one
    spread above the centre drawn as a parent 2.7x as often as one a spread below. Raw, every candidate
    scored below 0 was clamped to 0: tied with the others in the search's top-k heap and never a parent,
    and when all were below 0 the first candidate was the only parent of a whole generation."""
    return logistic(standardised(raw, centre, spread))


def make_cost_model(model: CostModel, hardware: HardwareSpec, fine_tune_every: int = 0, online_trees: bool = False,
                    fine_tune: FineTune | None = None):
    """A ``PyCostModel`` subclass instance wrapping ``model`` (TVM imported lazily); with ``online_trees``
    its scores are blended with per-task trees fitted on the run's measurements (``online_trees``); every
    ``fine_tune_every`` measurements it is fine-tuned on all of them, as ``fine_tune`` says."""
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.cost_model import PyCostModel

    @derived_object
    class CrosstuneCostModel(PyCostModel):
        def __init__(self):
            super().__init__()
            self.model = model
            self.hardware = hardware
            self.fine_tune_every = fine_tune_every
            self.operators: dict[int, object] = {}  # structural hash of the task's module -> operator
            # task -> (operator, token lists, latencies) of every program measured in this run
            self.measured: dict[int, tuple[object, list, list[float]]] = {}
            # task -> ((centre, spread) of the model's scores, of the trees' or None): fixed from a task's
            # first batch until a model changes, because the search compares a round's batches in one heap
            self.score_scales: dict[int, tuple] = {}
            self.trees = TaskTrees(hardware, self.measured) if online_trees else None
            self.fine_tune = fine_tune or FineTune()
            self.tree_seconds = 0.0  # fitting the trees: in the tuning timeline like fine-tuning
            self.new_since_fine_tune = 0
            self.failures = 0
            self.predict_seconds = 0.0
            self.predict_calls = 0
            self.predicted = 0
            self.fine_tunes = 0
            self.fine_tune_seconds = 0.0  # online fine-tuning's share of the tuning timeline

        def load(self, path: str) -> None:  # the model comes from its own directory
            pass

        def save(self, path: str) -> None:
            pass

        def _task(self, context) -> int:
            from tvm_ffi import structural_hash

            mod = context.mod
            key = int(structural_hash(mod))
            if key not in self.operators:
                self.operators[key] = operator_of(mod)
            return key

        def _tokens(self, candidates) -> list[list[tokens.Token]]:
            return [trace_tokens(c.sch.trace) for c in candidates]

        def predict(self, context, candidates) -> np.ndarray:
            started = time.perf_counter()
            try:
                if not candidates:
                    return np.zeros(0, dtype="float64")
                task = self._task(context)
                programs = programs_dataset(self._tokens(candidates), self.operators[task], self.hardware)
                raw = np.asarray(self.model.predict(programs), dtype="float64")
                weight = self.trees.weight(task) if self.trees is not None else 0.0
                trees = self.trees.predict(task, programs) if weight else None
                if not np.all(np.isfinite(raw)) or (trees is not None and not np.all(np.isfinite(trees))):
                    raise ValueError("non-finite scores")
                if task not in self.score_scales:
                    self.score_scales[task] = (score_scale(raw), None if trees is None else score_scale(trees))
                own, of_trees = self.score_scales[task]
                z = standardised(raw, *own)
                if trees is not None:
                    z = (1 - weight) * z + weight * standardised(trees, *of_trees)
                self.predicted += len(candidates)
                return logistic(z)
            except Exception as err:  # noqa: BLE001 - by design: the tuner must go on
                self.failures += 1
                log.warning("crosstune cost model failed in predict (%s); neutral scores used", err)
                return np.full(len(candidates), NEUTRAL_SCORE, dtype="float64")
            finally:
                self.predict_seconds += time.perf_counter() - started
                self.predict_calls += 1

        def update(self, context, candidates, results) -> None:
            if not self.fine_tune_every and self.trees is None:
                return
            try:
                task = self._task(context)
                for candidate, result in zip(candidates, results):
                    if result.run_secs:
                        latency = float(np.mean([float(s) for s in result.run_secs]))
                        _, token_lists, latencies = self.measured.setdefault(task, (self.operators[task], [], []))
                        token_lists.append(self._tokens([candidate])[0])
                        latencies.append(latency)
                        self.new_since_fine_tune += 1
                if self.trees is not None:
                    started = time.perf_counter()
                    try:
                        self.trees.refit(task)
                    finally:
                        self.score_scales.pop(task, None)  # the trees changed: scale afresh
                        self.tree_seconds += time.perf_counter() - started
                if self.fine_tune_every and self.new_since_fine_tune >= self.fine_tune_every:
                    started = time.perf_counter()
                    try:
                        self._fine_tune()
                    finally:
                        self.score_scales.clear()  # the model's raw scores moved: scale them afresh
                        self.fine_tune_seconds += time.perf_counter() - started
                        self.fine_tunes += 1
                    self.new_since_fine_tune = 0
            except Exception as err:  # noqa: BLE001
                self.failures += 1
                log.warning("crosstune cost model failed in update (%s); continuing without fine-tuning", err)

        def _fine_tune(self) -> None:
            if not getattr(self.model, "warm_starts", False):
                return
            data = run_dataset(self.measured, self.hardware)  # all measured so far
            # The schedule is an option of this fit: the model's own training settings are not touched.
            self.model.fit(data, None, FitOptions(progress=False, warm_start=True, epochs=self.fine_tune.epochs,
                                                  lr=self.model.train_config.lr * self.fine_tune.lr_scale))

    return CrosstuneCostModel()
