"""The ensemble model: members trained alike but for the seed, scored by the mean of their raw scores,
saved as model directories inside its own, fine-tuned together."""

from __future__ import annotations

import json

import numpy as np
import pytest

from crosstune.dataset import load_dataset
from crosstune.errors import CrosstuneError
from crosstune.models import FitOptions, create_model, load_model
from crosstune.train import TrainConfig

pytestmark = pytest.mark.slow  # trains two crossfeat members


@pytest.fixture(scope="module")
def tiny(tiny_dataset):
    return load_dataset([tiny_dataset])


@pytest.fixture(scope="module")
def ensemble(tiny):
    model = create_model("ensemble", TrainConfig(epochs=1, seed=7, architecture={"members": 2}))
    model.fit(tiny, None, FitOptions(progress=False))
    return model


def test_members_differ_by_seed_and_the_score_is_their_mean(ensemble, tiny):
    assert [m.train_config.seed for m in ensemble.members] == [7, 8]
    first, second = (m.predict(tiny) for m in ensemble.members)
    assert not np.allclose(first, second)  # different initial weights and batch order
    assert np.allclose(ensemble.predict(tiny), (first + second) / 2)
    # a program's score does not depend on what else is scored with it
    assert np.allclose(ensemble.predict(tiny.select(np.arange(5))), ensemble.predict(tiny)[:5])
    assert len(ensemble.history["epochs"]) == 2 and {e["member"] for e in ensemble.history["epochs"]} == {0, 1}


def test_saved_ensemble_is_members_model_directories(ensemble, tiny, tmp_path):
    ensemble.save(tmp_path / "ens")
    loaded = load_model(tmp_path / "ens")
    assert loaded.kind == "ensemble" and len(loaded.members) == 2
    assert np.allclose(loaded.predict(tiny), ensemble.predict(tiny), atol=1e-5)
    member = load_model(tmp_path / "ens" / "member-1")  # each member is a model of its own
    assert member.kind == "crossfeat" and np.allclose(member.predict(tiny), ensemble.members[1].predict(tiny), atol=1e-5)
    config = json.loads((tmp_path / "ens" / "config.json").read_text())
    assert config["model"] == {"member": "crossfeat", "members": 2} and config["hardware_seen"]


def test_a_lost_member_is_a_clear_error(ensemble, tmp_path):
    ensemble.save(tmp_path / "ens")
    (tmp_path / "ens" / "member-1" / "weights.safetensors").unlink()
    with pytest.raises(CrosstuneError, match="weights.safetensors is missing"):
        load_model(tmp_path / "ens")


def test_fine_tuning_continues_every_member(tiny, tmp_path):
    model = create_model("ensemble", TrainConfig(epochs=1, architecture={"members": 2}))
    model.fit(tiny, None, FitOptions(progress=False))
    before = [m.predict(tiny) for m in model.members]
    nets = [m.net for m in model.members]
    model.fit(tiny.select(np.arange(50)), None, FitOptions(progress=False, warm_start=True, epochs=1, lr=1e-3))
    assert [m.net for m in model.members] == nets  # the same members, not new ones
    assert all(not np.allclose(b, m.predict(tiny)) for b, m in zip(before, model.members))
    assert set(model.history) == {"pretrain", "fine_tune"} and model.train_config.epochs == 1


@pytest.mark.parametrize("member", ["xgb", "ensemble", "nope"])
def test_a_member_kind_that_cannot_be_seeded_apart_is_refused(member):
    with pytest.raises(CrosstuneError, match="member"):
        create_model("ensemble", TrainConfig(architecture={"member": member}))
