"""Pruning strategies, the pruning and split studies, and the HTML report, on real records."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import numpy as np
import pytest

from crosstune.cli import main
from crosstune.dataset import load_dataset, read_manifest
from crosstune.errors import CrosstuneError
from crosstune.importer import import_sources
from crosstune.prune import STRATEGIES, apply_pruning, prune, write_pruned
from crosstune.report import write_report
from crosstune.studies import best_reduction, prune_study, split_study
from crosstune.train import TrainConfig


@pytest.fixture(scope="module")
def ds(small_dataset):
    return load_dataset([small_dataset])


def test_prune_study_resume_from_the_command_line(tmp_path, tiny_dataset, capsys):
    # --resume continues the study; it is not xgb's (absent) training resume, which the CLI refused before
    argv = ["prune-study", str(tiny_dataset), "--test-hardware", "v100", "--model", "xgb", "--keep", "1.0,0.5",
            "--strategies", "random", "--out", str(tmp_path / "study")]
    assert main(argv) == 0
    capsys.readouterr()
    assert main(argv + ["--resume"]) == 0
    assert "reused" in capsys.readouterr().out
    assert main(["train", str(tiny_dataset), "--model", "xgb", "--test-hardware", "v100", "--resume",
                 "--out", str(tmp_path / "m")]) == 2
    assert "--resume does not apply to xgb" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("keep", [0.3, 0.8])
@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_strategies_are_deterministic_and_near_the_requested_size(ds, strategy, keep):
    a = prune(ds, strategy, keep, seed=1)
    b = prune(ds, strategy, keep, seed=1)
    assert np.array_equal(a.keep, b.keep)
    assert (keep - 0.1) * len(ds) <= a.kept <= (keep + 0.01) * len(ds), (strategy, a.kept)
    assert sum(a.removed.values()) == len(ds) - a.kept
    assert len(np.unique(a.keep)) == a.kept


def test_dedup_merges_the_duplicated_reduction_programs(tmp_path, roller):
    out = tmp_path / "red"
    import_sources([roller / "k80" / "ansor_reduction_128_512_1024_axis_2.json.gz"], "k80", out)
    red = load_dataset([out])
    pruning = prune(red, "dedup", 1.0 - 1e-9, seed=0)  # only exact duplicates go
    assert len(red) - pruning.kept >= 70
    pruned = apply_pruning(red, pruning)
    assert len(pruning.merged_latency) > 0 and np.all(np.isfinite(pruned.latency[pruned.valid]))


def test_write_pruned_makes_a_new_dataset_and_says_why(tmp_path, small_dataset, ds):
    before = (small_dataset / "manifest.json").read_text()
    assert main(["prune", str(small_dataset), "--strategy", "stratified", "--keep", "0.4",
                 "--out", str(tmp_path / "p")]) == 0
    assert (small_dataset / "manifest.json").read_text() == before  # input untouched
    manifest = read_manifest(tmp_path / "p")
    assert manifest["pruning"]["strategy"] == "stratified" and manifest["pruning"]["removed"]
    assert len(load_dataset([tmp_path / "p"])) == manifest["pruning"]["records_kept"]
    with pytest.raises(CrosstuneError, match="already exists"):
        write_pruned(small_dataset, ds, prune(ds, "random", 0.5), tmp_path / "p", "random", 0.5, 0)


@pytest.mark.parametrize("argv, message", [
    (["--strategy", "random", "--keep", "1.5"], "in \\(0, 1\\]"),
    (["--strategy", "random", "--keep", "0"], "in \\(0, 1\\]"),
    (["--strategy", "magic", "--keep", "0.5"], "--strategy: invalid choice"),
    (["--strategy", "random", "--keep", "0.0001"], "too small"),
])
def test_bad_prune_requests(small_dataset, tmp_path, capsys, argv, message):
    assert main(["prune", str(small_dataset), *argv, "--out", str(tmp_path / "x")]) == 2
    import re

    assert re.search(message, capsys.readouterr().err)


@pytest.mark.slow
def test_prune_study_resumes_and_redoes(tmp_path, tiny_dataset):
    out, cfg = tmp_path / "study", TrainConfig(epochs=1)
    first = prune_study([str(tiny_dataset)], ["v100"], "xgb", [1.0, 0.5], out, ["random"], cfg, print_fn=lambda *_: None)
    said = []
    second = prune_study([str(tiny_dataset)], ["v100"], "xgb", [1.0, 0.5], out, ["random", "stratified"], cfg,
                         resume=True, print_fn=said.append)
    assert sum("reused" in line for line in said) == 1 and second["rows"][:2] == first["rows"]
    assert [r["strategy"] for r in second["rows"]] == ["full", "random", "stratified"]
    said.clear()
    prune_study([str(tiny_dataset)], ["v100"], "xgb", [1.0, 0.5], out, ["random"], cfg, resume=True, redo=["random"],
                print_fn=said.append)
    assert not any("reused" in line for line in said)
    with pytest.raises(CrosstuneError, match="different study"):
        prune_study([str(tiny_dataset)], ["v100"], "xgb", [1.0, 0.5], out, ["random"], cfg, seeds=2, resume=True)


@pytest.mark.slow
def test_prune_study_and_report(tmp_path, tiny_dataset):
    small_dataset = tiny_dataset
    out = tmp_path / "study"
    summary = prune_study([str(small_dataset)], ["v100"], "xgb", [1.0, 0.5, 0.3], out,
                          strategies=["random", "stratified"], cfg=TrainConfig(epochs=1), seeds=2,
                          print_fn=lambda *_: None)
    rows = list(csv.DictReader(open(out / "prune-study.csv")))
    assert len(rows) == 1 + 2 * 2 and rows[0]["strategy"] == "full"
    assert summary["seeds"] == [0, 1]
    # two seeds prune and train differently: the spread they report is real
    assert any(float(r["pca_std"]) > 0 for r in rows if r["strategy"] == "random")
    assert (out / "prune-study.png").stat().st_size > 10_000
    split_study([str(small_dataset)], "xgb", out, cfg=TrainConfig(epochs=1), print_fn=lambda *_: None)
    data = json.loads((out / "split-study.json").read_text())
    by_kind = {r["split"]: r for r in data["rows"]}
    assert set(by_kind) == {"within-task", "by-task", "by-operator", "by-hardware"}
    assert by_kind["within-task"]["workload_keys_on_both_sides"] > 0
    assert by_kind["by-task"]["workload_keys_on_both_sides"] == 0
    page = write_report(out).read_text()
    assert "prune-study.png" in page and "split-study.png" in page and "<table>" in page


def test_best_reduction_is_the_smallest_set_within_tolerance():
    rows = [{"strategy": "full", "kept_fraction": 1.0, "pca": 0.715},
            {"strategy": "random", "kept_fraction": 0.3, "pca": 0.700},  # smallest, but 0.015 PCA worse
            {"strategy": "cap", "kept_fraction": 0.5, "pca": 0.716},
            {"strategy": "stratified", "kept_fraction": 0.4, "pca": 0.7110},
            {"strategy": "diverse", "kept_fraction": 0.4, "pca": 0.7120}]  # ties on size: the better PCA wins
    assert best_reduction(rows, 0.715)["strategy"] == "diverse"
    assert best_reduction(rows[:2], 0.715) is None


def test_a_killed_prune_can_be_run_again(tmp_path, small_dataset):
    # The process dies hard (no cleanup) just before the manifest is written, as a kill would leave it.
    code = ("import os, sys; import crosstune.prune as prune; from crosstune.cli import main; "
            "prune.atomic_write_text = lambda *a, **k: os._exit(9); "
            "main(['prune', sys.argv[1], '--strategy', 'random', '--keep', '0.5', '--out', sys.argv[2], '--quiet'])")
    killed = subprocess.run([sys.executable, "-c", code, str(small_dataset), str(tmp_path / "p")], timeout=300)
    assert killed.returncode == 9
    assert not (tmp_path / "p").exists() or not any((tmp_path / "p").iterdir())  # no half dataset under the name
    assert main(["prune", str(small_dataset), "--strategy", "random", "--keep", "0.5", "--out", str(tmp_path / "p"),
                 "--quiet"]) == 0
    assert len(load_dataset([tmp_path / "p"])) == read_manifest(tmp_path / "p")["pruning"]["records_kept"]
