"""The command line: every command has --help; user mistakes are one clear line, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from crosstune.cli import build_parser, main


def test_every_command_has_help(capsys):
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices  # noqa: SLF001 (argparse keeps them here)
    assert {"import", "info", "train", "eval", "compare", "collect"} <= set(commands)
    for name in commands:
        with pytest.raises(SystemExit) as done:
            main([name, "--help"])
        assert done.value.code == 0
        assert "usage: crosstune" in capsys.readouterr().out


def test_import_and_info_on_real_records(tmp_path, small_roller, capsys):
    out = tmp_path / "ds"
    assert main(["import", str(small_roller / "k80"), "--hardware", "k80", "--out", str(out), "--quiet"]) == 0
    assert "+4000 records of k80" in capsys.readouterr().out
    assert main(["info", str(out)]) == 0
    text = capsys.readouterr().out
    assert "records: 4000" in text and "matmul" in text and "program length" in text


@pytest.mark.parametrize("argv, message", [
    (["import", "/no/such/dir", "--hardware", "k80", "--out", "x"], "no such file"),
    (["import", "README.md", "--hardware", "quantum-9000", "--out", "x"], "unknown hardware"),
    (["info", "/no/such/dataset"], "no such dataset"),
    (["eval", "/no/model", "/no/dataset"], "no such model"),
])
def test_user_mistakes_exit_2_without_traceback(argv, message):
    result = subprocess.run([sys.executable, "-m", "crosstune", *argv], capture_output=True, text=True)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_train_then_eval_json(tmp_path, small_dataset, capsys):
    model = tmp_path / "model"
    assert main(["train", str(small_dataset), "--model", "xgb", "--split", "by-hardware", "--test-hardware", "v100",
                 "--out", str(model), "--quiet"]) == 0
    report = tmp_path / "eval.json"
    assert main(["eval", str(model), str(small_dataset), "--hardware", "v100", "--json", str(report)]) == 0
    data = json.loads(report.read_text())
    assert {"pca", "top1", "top5", "top10"} <= set(data["v100"])
    assert 0.5 < data["v100"]["pca"] <= 1.0
    printed = capsys.readouterr().out
    assert "v100" in printed and "top-1 mean" in printed and "floor" in printed and "random floor" in printed.lower()


@pytest.mark.parametrize("arch, message", [
    ("d_model=33", "must be even and a multiple of heads"),
    ("colour=blue", "is not a setting of crossfeat"),
    ("layers=0", "out of range"),
    ("heads=four", "not a valid int"),
    ("layers", "is not NAME=VALUE"),
])
def test_bad_architecture_settings_are_refused_before_training(arch, message, tmp_path):
    result = subprocess.run([sys.executable, "-m", "crosstune", "train", "/no/such/dataset", "--out",
                             str(tmp_path / "m"), "--arch", arch], capture_output=True, text=True)
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr


def test_architecture_settings_reach_the_saved_model(tmp_path, small_dataset, capsys):
    model = tmp_path / "small"
    assert main(["train", str(small_dataset), "--test-hardware", "v100", "--epochs", "1", "--quiet",
                 "--arch", "d_model=16,heads=2,layers=1,ff_dim=32", "--out", str(model)]) == 0
    config = json.loads((model / "config.json").read_text())["model"]
    assert (config["d_model"], config["heads"], config["layers"], config["ff_dim"]) == (16, 2, 1, 32)
    assert main(["eval", str(model), str(small_dataset), "--hardware", "v100"]) == 0
    assert "v100" in capsys.readouterr().out


@pytest.mark.parametrize("extra, message", [
    (["--split", "by-hardwre"], "--split 'by-hardwre'"),
    (["--split", "by-hardware", "--test-hardware", "v1000"], "not v1000"),
    (["--test-hardware", "v100"], "by-hardware only"),
])
def test_bench_checks_its_split_before_starting_workers(extra, message, tmp_path, tiny_dataset):
    out = tmp_path / "bench"
    result = subprocess.run([sys.executable, "-m", "crosstune", "bench", "--dataset", str(tiny_dataset),
                             "--target-pca", "0.6", "--seeds", "1", "--no-roofline", "--out", str(out), *extra],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not any(out.glob("*.log")) if out.exists() else True  # no run was started


@pytest.mark.parametrize("option", [["--epochs", "3"], ["--loss", "mse"], ["--lr", "0.01"], ["--resume"]])
def test_xgb_refuses_training_options_it_cannot_honour(option, tmp_path):
    result = subprocess.run([sys.executable, "-m", "crosstune", "train", "/no/such/dataset", "--model", "xgb",
                             "--test-hardware", "v100", "--out", str(tmp_path / "m"), *option],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and f"{option[0]} does not apply to xgb" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_compare_names_the_models_an_option_does_not_reach(tmp_path, tiny_dataset, capsys):
    assert main(["compare", str(tiny_dataset), "--models", "xgb,crossfeat", "--test-hardware", "v100",
                 "--epochs", "1", "--quiet", "--arch", "d_model=16,layers=1"]) == 0
    assert "note: --epochs applies to crossfeat only (xgb does not use it)" in capsys.readouterr().err
