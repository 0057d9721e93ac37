"""The few-shot study: nested samples scored on one common test set, curves per model, resume, report."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from crosstune.cli import main
from crosstune.dataset import load_dataset
from crosstune.errors import CrosstuneError
from crosstune.experiment import FINE_TUNE_SAMPLES, _fine_tune_options
from crosstune.fewshot_study import parse_shots
from crosstune.models import create_model
from crosstune.report import write_report
from crosstune.splits import draw_target, make_split
from crosstune.train import TrainConfig


@pytest.fixture(scope="module")
def ds(small_dataset):
    return load_dataset([small_dataset])


def test_samples_are_nested_disjoint_from_one_common_test_set(ds):
    split = make_split(ds, "by-hardware", test_hardware=["v100"], seed=3)
    draw = draw_target(ds, split.test, 0.1, seed=3)
    test = draw.test
    sizes = np.bincount(ds.group[split.test])
    groups = np.flatnonzero(sizes)
    # a tenth of every group (at least one record) is test, whatever the point
    assert np.array_equal(np.bincount(ds.group[test], minlength=len(sizes))[groups],
                          np.maximum(1, np.round(sizes[groups] * 0.1)))
    previous = np.array([], dtype=np.int64)
    for programs in (0, 16, 64, 256, 10**6):
        sample = draw.per_task(programs)
        assert not np.intersect1d(sample, test).size
        assert np.isin(previous, sample).all()  # nested: 16 are among the 64
        per_group = np.bincount(ds.group[sample], minlength=len(sizes))[groups]
        assert (per_group == np.minimum(programs, sizes[groups] - np.bincount(ds.group[test], minlength=len(sizes))[groups])).all()
        previous = sample
    assert len(previous) + len(test) == len(split.test)  # "all": everything outside the test set
    five = draw.share(0.05)
    assert np.array_equal(np.bincount(ds.group[five], minlength=len(sizes))[groups],
                          np.maximum(1, np.round(sizes[groups] * 0.05)))
    # another seed draws other programs
    assert not np.array_equal(draw_target(ds, split.test, 0.1, seed=4).per_task(16), draw.per_task(16))


@pytest.mark.parametrize("text, labels", [("0,16,64,256,all", ["0", "16", "64", "256", "all"]),
                                          ("1%, 5% ,all", ["1%", "5%", "all"])])
def test_parse_shots(text, labels):
    assert [s.label for s in parse_shots(text)] == labels


@pytest.mark.parametrize("text", ["16,16", "abc", "0%", "150%", "-3", ""])
def test_bad_shots_are_refused(text):
    with pytest.raises(CrosstuneError, match="--shots"):
        parse_shots(text)


def test_a_large_few_shot_set_is_not_fine_tuned_for_twenty_epochs():
    model = create_model("crossfeat", TrainConfig(epochs=3))
    small = _fine_tune_options(model, 2_000, None, False, False)
    large = _fine_tune_options(model, 60_000, None, False, False)
    assert small.epochs == 20 and small.lr == model.train_config.lr / 2
    assert large.epochs == 3  # max(the pre-training epochs, ~FINE_TUNE_SAMPLES of passes)
    assert _fine_tune_options(model, FINE_TUNE_SAMPLES // 10, None, False, False).epochs == 10


def _study(tmp_path, dataset, *extra):
    return main(["few-shot-study", str(dataset), "--test-hardware", "v100", "--shots", "0,16,all",
                 "--out", str(tmp_path / "study"), "--quiet", *extra])


def test_study_curves_resume_and_report(tmp_path, small_dataset, capsys):
    trees = ("--models", "xgb,nearest", "--arch", "n_estimators=100")  # fewer trees: a faster test
    assert _study(tmp_path, small_dataset, *trees) == 0
    data = json.loads((tmp_path / "study" / "few-shot-study.json").read_text())
    assert data["complete"] and len(data["points"]) == 6
    point = {(p["model"], p["shot"]): p for p in data["points"]}
    # every point is scored on the same test records, with the same floor
    assert len({(p["test_records"], p["floor_top1"]) for p in data["points"]}) == 1
    assert point["xgb", "16"]["programs_per_task"] == 16 and point["xgb", "0"]["given_records"] == 0
    # measuring the device pays for the trees (zero-shot K80 -> V100 is far from the ceiling) ...
    assert point["xgb", "all"]["pca"] > point["xgb", "16"]["pca"] > point["xgb", "0"]["pca"] + 0.05
    # ... while copying the nearest other device cannot use the new device's measurements
    assert point["nearest", "0"]["pca"] == point["nearest", "all"]["pca"]
    assert (tmp_path / "study" / "few-shot-study.png").stat().st_size > 10_000
    assert "top-1 (Σ)" in capsys.readouterr().out

    # a second seed reuses the first seed's points; different settings are refused
    assert _study(tmp_path, small_dataset, *trees, "--seeds", "2", "--resume") == 0
    out = capsys.readouterr().out
    assert "reusing 6 points" in out and len(re.findall(r"^seed 1 ", out, re.M)) == 6 and "seed 0 " not in out
    again = json.loads((tmp_path / "study" / "few-shot-study.json").read_text())
    assert again["points"][:6] == data["points"] and len(again["points"]) == 12
    assert _study(tmp_path, small_dataset, "--models", "xgb", "--resume", "--arch", "n_estimators=20") == 2  # not 100
    assert "different study" in capsys.readouterr().err

    page = write_report(tmp_path / "study").read_text()
    assert "Few-shot study" in page and "few-shot-study.png" in page and "v100" in page
    assert "crosstune few-shot-study" in page  # the command that reproduces it


def test_neural_models_pretrain_once_and_fine_tune_per_point(tmp_path, tiny_dataset, capsys):
    assert _study(tmp_path, tiny_dataset, "--models", "crossfeat", "--epochs", "1",
                  "--arch", "d_model=16,layers=1,heads=2") == 0
    data = json.loads((tmp_path / "study" / "few-shot-study.json").read_text())
    point = {p["shot"]: p for p in data["points"]}
    # the zero-shot point is the pre-trained model; the others add their fine-tuning time to it
    assert point["0"]["train_seconds"] < point["16"]["train_seconds"]
    assert point["0"]["pca"] != point["all"]["pca"]


def test_study_input_errors(tmp_path, small_dataset, capsys):
    assert _study(tmp_path, small_dataset, "--models", "xgb", "--shots", "16,x") == 2
    assert "--shots" in capsys.readouterr().err
    assert main(["few-shot-study", str(small_dataset), "--test-hardware", "h100", "--models", "nearest",
                 "--out", str(tmp_path / "s2"), "--quiet"]) == 2
    assert "h100" in capsys.readouterr().err
