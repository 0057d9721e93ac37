"""Scoring through ``torch.compile``: the same network and weights, its elementwise work fused.

Profiled on 2 CPU cores (crossfeat's default, batches of 512 programs), about half of a prediction is
spent outside the matrix products: layer norms, GELUs, residual adds and copies, each one more pass in
eager PyTorch over a (programs x tokens x d_model) tensor. Inductor fuses them into a few generated
loops; the scores are the eager network's up to float rounding (tests/test_compiled.py).

Compiling costs tens of seconds once per process (less with Inductor's on-disk cache), so it pays in a
long-lived scorer that is called many times, such as the tuner's cost model, not in one ``eval``.
"""

from __future__ import annotations

import logging
import time

import torch

log = logging.getLogger("crosstune.models.compiled")

# Smaller batches are scored eagerly: they gain little, and sizes 0 and 1 are specialised by the compiler
# even with dynamic shapes, so a one-program call (the tuner's one-program tasks) would compile again.
SMALLEST_COMPILED_BATCH = 16


class CompiledForward:
    """Calls ``net`` compiled (weights shared: fine-tuning ``net`` in place is seen) on batches of at least
    SMALLEST_COMPILED_BATCH rows, and ``net`` itself on smaller ones and after compilation failed once."""

    def __init__(self, net: torch.nn.Module):
        self.net = net
        self._compiled = torch.compile(net, dynamic=True)
        self.failed = False
        self.compile_seconds: float | None = None  # of the first compiled call, compilation included

    def __call__(self, **inputs: torch.Tensor) -> torch.Tensor:
        rows = len(next(iter(inputs.values())))
        if self.failed or rows < SMALLEST_COMPILED_BATCH:
            return self.net(**inputs)
        first = self.compile_seconds is None
        started = time.perf_counter()
        try:
            out = self._compiled(**inputs)
        except Exception as err:  # noqa: BLE001 - no compiler, an unsupported op: score eagerly instead
            self.failed = True
            log.warning("torch.compile failed (%s); scoring with the eager network from now on", str(err)[:300])
            return self.net(**inputs)
        if first:
            self.compile_seconds = time.perf_counter() - started
        return out
