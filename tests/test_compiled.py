"""Compiled scoring (models/compiled.py) must give the eager network's scores, follow weights changed in
place (online fine-tuning), leave small batches eager, and fall back to eager when compiling fails."""

import numpy as np
import pytest
import torch

from crosstune.data import bundled_dataset
from crosstune.dataset import load_dataset
from crosstune.experiment import fit_model
from crosstune.models import compiled
from crosstune.models.compiled import SMALLEST_COMPILED_BATCH, CompiledForward
from crosstune.models.crossfeat import CrossFeatConfig, CrossFeatNet
from crosstune.train import TrainConfig
from test_encoder import _inputs

pytestmark = pytest.mark.slow  # one compilation: tens of seconds on 2 cores


def test_a_compiled_model_scores_as_eager_follows_in_place_updates_and_leaves_small_batches_eager():
    ds = load_dataset([bundled_dataset()])
    train = ds.select(ds.hardware_mask(["local-sse-2c"]))
    test = ds.select(ds.hardware_mask(["local-avx2-2c"]))
    model, _ = fit_model("crossfeat", train, TrainConfig(epochs=1))  # one compilation in this file: tens of s
    eager = model.predict(test)
    assert model.compile_inference() is model
    assert np.allclose(model.predict(test), eager, atol=1e-5)  # every length bucket of a real dataset
    forward = model._compiled_forward()
    assert forward.compile_seconds is not None and not forward.failed
    with torch.no_grad():
        model.net.head[-1].bias += 1.5  # what a fine-tuning step does to the shared weights
    assert np.allclose(model.predict(test), eager + 1.5, atol=1e-4)
    small = _inputs(SMALLEST_COMPILED_BATCH - 1, 13, torch.Generator().manual_seed(3))

    def never(**inputs):
        raise AssertionError("a small batch must not reach the compiled network")

    forward._compiled = never
    with torch.inference_mode():
        assert np.allclose(forward(**small).numpy(), model.net(**small).numpy())


def test_a_failed_compilation_falls_back_to_eager_once_and_for_all(monkeypatch):
    net = CrossFeatNet(CrossFeatConfig(d_model=16, ff_dim=32, layers=1)).eval()
    forward = CompiledForward(net)
    calls = []

    def broken(**inputs):
        calls.append(1)
        raise RuntimeError("no C++ compiler")

    forward._compiled = broken
    warnings = []
    monkeypatch.setattr(compiled.log, "warning", lambda message, *args: warnings.append(message % args))
    batch = _inputs(SMALLEST_COMPILED_BATCH, 7, torch.Generator().manual_seed(0))
    with torch.inference_mode():
        expected = net(**batch).numpy()
        first = forward(**batch).numpy()
        second = forward(**batch).numpy()
    assert np.allclose(first, expected) and np.allclose(second, expected)
    assert forward.failed and len(calls) == 1
    assert len(warnings) == 1 and "no C++ compiler" in warnings[0]
