"""A crosstune model as MetaSchedule's cost model (``PyCostModel``), for ``ms.tune_tasks``.

``predict`` turns every candidate's trace into crosstune tokens and scores all candidates in one
batched call. ``update`` can fine-tune the model on the tuner's own measurements. Any failure inside
the adapter is logged and answered with neutral scores: the cost model never stops a tuning run.
"""

from __future__ import annotations

import logging
import time

import numpy as np

from .. import tokens
from ..hardware.registry import HardwareSpec
from ..models.base import CostModel
from .convert import operator_of, plain, programs_dataset

log = logging.getLogger("crosstune.tvm.costmodel")


def make_cost_model(model: CostModel, hardware: HardwareSpec, fine_tune_every: int = 0):
    """A ``PyCostModel`` subclass instance wrapping ``model`` (TVM imported lazily)."""
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.cost_model import PyCostModel

    @derived_object
    class CrosstuneCostModel(PyCostModel):
        def __init__(self):
            super().__init__()
            self.model = model
            self.hardware = hardware
            self.fine_tune_every = fine_tune_every
            self.operators: dict[int, object] = {}
            self.history: list[tuple] = []  # (operator, tokens, latency, task) of every measured program
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

        def _operator(self, context):
            key = id(context.mod)
            if key not in self.operators:
                self.operators[key] = operator_of(context.mod)
            return self.operators[key]

        def _tokens(self, candidates) -> list[list[tokens.Token]]:
            return [tokens.tokenize_ms_trace(plain(c.sch.trace.as_json())) for c in candidates]

        def predict(self, context, candidates) -> np.ndarray:
            started = time.perf_counter()
            try:
                if not candidates:
                    return np.zeros(0, dtype="float64")
                programs = programs_dataset(self._tokens(candidates), self._operator(context), self.hardware)
                scores = np.asarray(self.model.predict(programs), dtype="float64")
                if not np.all(np.isfinite(scores)):
                    raise ValueError("non-finite scores")
                self.predicted += len(candidates)
                return scores
            except Exception as err:  # noqa: BLE001 - by design: the tuner must go on
                self.failures += 1
                log.warning("crosstune cost model failed in predict (%s); neutral scores used", err)
                return np.zeros(len(candidates), dtype="float64")
            finally:
                self.predict_seconds += time.perf_counter() - started
                self.predict_calls += 1

        def update(self, context, candidates, results) -> None:
            if not self.fine_tune_every:
                return
            try:
                for candidate, result in zip(candidates, results):
                    if result.run_secs:
                        latency = float(np.mean([float(s) for s in result.run_secs]))
                        self.history.append((self._operator(context), self._tokens([candidate])[0], latency, id(context.mod)))
                        self.new_since_fine_tune += 1
                if self.new_since_fine_tune >= self.fine_tune_every:
                    started = time.perf_counter()
                    try:
                        self._fine_tune()
                    finally:
                        self.fine_tune_seconds += time.perf_counter() - started
                        self.fine_tunes += 1
                    self.new_since_fine_tune = 0
            except Exception as err:  # noqa: BLE001
                self.failures += 1
                log.warning("crosstune cost model failed in update (%s); continuing without fine-tuning", err)

        def _fine_tune(self) -> None:
            from ..models.neural import NeuralCostModel

            if not isinstance(self.model, NeuralCostModel):
                return
            by_task: dict[int, list] = {}
            for operator, toks, latency, task in self.history:  # all of this run's measurements so far
                by_task.setdefault(task, []).append((operator, toks, latency))
            parts = []
            for task_index, entries in enumerate(by_task.values()):
                part = programs_dataset([e[1] for e in entries], entries[0][0], self.hardware)
                part.latency = np.array([e[2] for e in entries])
                part.task = np.full(len(entries), task_index, np.int32)
                parts.append(part)
            data = _concat(parts)
            data.task_ids = [f"task{i}" for i in range(len(parts))]
            data.workload_keys = data.task_ids
            config = self.model.train_config
            epochs, lr = config.epochs, config.lr
            config.epochs, config.lr = 1, lr / 4
            try:
                self.model.fit(data, None, progress=False, warm_start=True)
            finally:
                config.epochs, config.lr = epochs, lr

    return CrosstuneCostModel()


def _concat(parts):
    from dataclasses import replace

    first = parts[0]
    offsets = [np.zeros(1, np.int64)]
    total = 0
    for part in parts:
        offsets.append(part.offsets[1:] + total)
        total += part.offsets[-1]
    cat = lambda name: np.concatenate([getattr(p, name) for p in parts])  # noqa: E731
    return replace(first, record_id=np.arange(sum(len(p) for p in parts), dtype=np.uint64), hardware=cat("hardware"),
                   task=cat("task"), op_kind=cat("op_kind"), op_args=cat("op_args"), flops=cat("flops"),
                   latency=cat("latency"), error_no=cat("error_no"), offsets=np.concatenate(offsets),
                   kinds=cat("kinds"), cats=cat("cats"), args=cat("args"))
