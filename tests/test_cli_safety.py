"""A new user's mistakes: every one ends with one line on stderr and exit 2, no traceback, and nothing
that was already on disk changes. Read-only places are made with a path under a regular file (the
tests run as root, for whom permission bits mean nothing)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from crosstune.cli import build_parser, main
from crosstune.outputs import claim_folder

from conftest import real_lines


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        code = main([str(a) for a in argv])
    except SystemExit as done:  # argparse's own exit (usage errors)
        code = done.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def refused(argv: list[str], capsys, message: str) -> str:
    code, out, err = run(argv, capsys)
    lines = err.strip().splitlines()
    assert code == 2, (code, out, err)
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert re.search(message, lines[0]), lines[0]
    return lines[0]


def snapshot(root: Path) -> dict:
    """Every file under ``root`` (or ``root`` itself) -> (content hash, mode)."""
    if root.is_file():
        return {".": (hashlib.sha256(root.read_bytes()).hexdigest(), root.stat().st_mode)}
    return {str(p.relative_to(root)): (hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir",
                                       p.stat().st_mode) for p in sorted(root.rglob("*"))}


@pytest.fixture
def user_folder(tmp_path) -> Path:
    """A folder of the user's own files that happen to have names crosstune writes."""
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "config.json").write_text('{"my": "settings"}')
    (folder / "index.html").write_text("<p>my page</p>")
    return folder


@pytest.fixture
def blocker(tmp_path) -> Path:
    """A regular file: anything 'under' it can be neither read nor created, even by root."""
    path = tmp_path / "a-file"
    path.write_text("keep me\n")
    return path


@pytest.fixture
def dataset_copy(tmp_path, tiny_dataset) -> Path:
    import shutil

    copy = tmp_path / "ds"
    shutil.copytree(tiny_dataset, copy)
    return copy


# ---------------------------------------------------------------------------------------------------
# output folders: never overwritten, never mixed, never inside a dataset
# ---------------------------------------------------------------------------------------------------

WRITERS = {  # command line with {out} for the output folder and {ds} for a dataset
    "train": "train {ds} --model xgb --test-hardware v100 --out {out}",
    "demo": "demo --dataset {ds} --held-out v100 --out {out}",
    "compare": "compare {ds} --models xgb --test-hardware v100 --out {out}",
    "prune": "prune {ds} --strategy random --keep 0.5 --out {out}",
    "prune-study": "prune-study {ds} --test-hardware v100 --out {out}",
    "split-study": "split-study {ds} --out {out}",
    "bench": "bench --dataset {ds} --target-pca 0.6 --out {out}",
    "collect": "collect --network resnet18 --hardware-config local-sse-2c --programs-per-task 4 --out {out}",
    "tune": "tune --network resnet18 --model xgb --trials 4 --hardware-config local-sse-2c --out {out}",
    "tune-compare": "tune-compare --network resnet18 --trials 4 --hardware-config local-sse-2c --out {out}",
    "import": "import {src} --hardware k80 --out {out} --quiet",
}


def _argv(name: str, out: Path, ds: Path, src: Path | None = None) -> list[str]:
    return WRITERS[name].format(out=out, ds=ds, src=src or ds).split()


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_every_writer_refuses_a_folder_of_other_files(name, user_folder, tiny_dataset, capsys):
    before = snapshot(user_folder)
    refused(_argv(name, user_folder, tiny_dataset), capsys, "already holds other files")
    assert snapshot(user_folder) == before


@pytest.mark.parametrize("name", sorted(set(WRITERS) - {"import"}))
def test_every_writer_refuses_an_output_under_a_file(name, blocker, tiny_dataset, capsys):
    refused(_argv(name, blocker / "out", tiny_dataset), capsys, "is a file")
    assert blocker.read_text() == "keep me\n"


@pytest.mark.parametrize("name", sorted(set(WRITERS) - {"import", "prune"}))
def test_no_command_writes_into_a_dataset(name, dataset_copy, capsys):
    before = snapshot(dataset_copy)
    refused(_argv(name, dataset_copy, dataset_copy), capsys, "holds a crosstune dataset|is an input")
    refused(_argv(name, dataset_copy / "inside", dataset_copy), capsys, "inside the dataset")
    assert snapshot(dataset_copy) == before


def test_train_refuses_an_existing_model_unless_overwrite_and_never_mixes_two(tmp_path, tiny_dataset, capsys):
    model = tmp_path / "model"
    small = ["--arch", "d_model=16,heads=2,layers=1,ff_dim=32", "--epochs", "1", "--quiet"]
    assert run(["train", tiny_dataset, "--model", "crossfeat", "--test-hardware", "v100", "--out", model, *small],
               capsys)[0] == 0
    assert (model / "weights.safetensors").is_file()
    before = snapshot(model)
    refused(["train", tiny_dataset, "--model", "xgb", "--test-hardware", "v100", "--out", model, "--quiet"], capsys,
            "already holds a trained model; give --overwrite")
    assert snapshot(model) == before
    assert run(["train", tiny_dataset, "--model", "xgb", "--test-hardware", "v100", "--out", model, "--quiet",
                "--overwrite"], capsys)[0] == 0
    assert json.loads((model / "config.json").read_text())["kind"] == "xgb"
    assert not (model / "weights.safetensors").exists() and not (model / "checkpoint").exists()
    assert not list(tmp_path.glob(".model.replaced-*"))  # the old one is gone once the new one is in place


def test_overwrite_puts_the_old_output_back_when_the_run_fails(tmp_path):
    folder = tmp_path / "demo"
    folder.mkdir()
    (folder / "demo.json").write_text('{"rows": []}')
    before = snapshot(folder)
    claim = claim_folder(folder, "demo", overwrite=True)
    with pytest.raises(KeyboardInterrupt):
        with claim as out:
            out.mkdir()
            (out / "demo.json").write_text("half")
            raise KeyboardInterrupt
    assert snapshot(folder) == before
    assert [p.name for p in tmp_path.iterdir()] == ["demo"]


def test_a_new_output_that_fails_leaves_no_half_made_folder(tmp_path):
    with pytest.raises(RuntimeError):
        with claim_folder(tmp_path / "new", "demo") as out:
            out.mkdir()
            (out / "demo.json").write_text("half")
            raise RuntimeError("stopped")
    assert not (tmp_path / "new").exists()


def test_demo_refuses_an_unknown_held_out_before_printing_its_plan_or_creating_out(tmp_path, tiny_dataset, capsys):
    out = tmp_path / "demo"
    line = refused(["demo", "--dataset", tiny_dataset, "--held-out", "a100", "--out", out, "--quiet"], capsys,
                   "--held-out a100: not in the dataset; choose one of k80, v100")
    assert not out.exists()
    assert "training on" not in capsys.readouterr().out and line


def test_demo_refuses_a_folder_of_other_files(user_folder, capsys):
    before = snapshot(user_folder)
    refused(["demo", "--out", user_folder], capsys, "already holds other files")
    assert snapshot(user_folder) == before


# ---------------------------------------------------------------------------------------------------
# import / prune / report / info with damaged or impossible locations
# ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["import", "prune"])
def test_out_naming_a_file_or_a_place_under_a_file(command, blocker, tiny_dataset, small_roller, capsys):
    argv = (["import", small_roller / "k80", "--hardware", "k80", "--quiet"] if command == "import"
            else ["prune", tiny_dataset, "--strategy", "random", "--keep", "0.5"])
    refused(argv + ["--out", blocker], capsys, "is a file, not a folder")
    refused(argv + ["--out", blocker / "sub" / "ds"], capsys, "cannot be created, .* is a file")
    assert blocker.read_text() == "keep me\n"


def test_prune_never_overwrites_a_dataset(tmp_path, tiny_dataset, dataset_copy, capsys):
    before = snapshot(dataset_copy)
    refused(["prune", tiny_dataset, "--strategy", "random", "--keep", "0.5", "--out", dataset_copy], capsys,
            "never overwrites a dataset")
    assert snapshot(dataset_copy) == before


@pytest.mark.parametrize("option_argv", [
    ["eval", "{model}", "{ds}", "--json", "{blocker}/eval.json"],
    ["eval", "{model}", "{ds}", "--json", "{tmp}"],
    ["compare", "{ds}", "--models", "xgb", "--test-hardware", "v100", "--json", "{blocker}/c.json"],
])
def test_unwritable_json_is_refused_before_any_work(option_argv, tmp_path, blocker, tiny_dataset, capsys):
    # the model does not exist: the JSON path is checked first, so its message is the one shown
    argv = [a.format(model=tmp_path / "no-model", ds=tiny_dataset, blocker=blocker, tmp=tmp_path) for a in option_argv]
    refused(argv, capsys, "--json")
    assert blocker.read_text() == "keep me\n"


def test_train_finds_an_unwritable_out_before_reading_data(blocker, capsys):
    refused(["train", "/no/such/dataset", "--out", blocker / "model"], capsys, "--out .*is a file")


def test_report_on_a_corrupt_result_leaves_the_old_page(tmp_path, capsys):
    folder = tmp_path / "demo"
    folder.mkdir()
    (folder / "demo.json").write_text('{"rows": [')
    (folder / "index.html").write_text("<p>the page from before</p>")
    before = snapshot(folder)
    refused(["report", folder], capsys, "demo.json: unreadable JSON")
    assert snapshot(folder) == before


def _damage(dataset: Path, how: str) -> None:
    part = next(dataset.rglob("*.parquet"))
    if how == "missing":
        part.unlink()
    else:
        part.write_bytes(part.read_bytes()[:100])


@pytest.mark.parametrize("how, message", [("missing", "is missing"), ("corrupt", "unreadable Parquet file")])
def test_import_into_a_damaged_dataset(how, message, dataset_copy, small_roller, capsys):
    _damage(dataset_copy, how)
    before = snapshot(dataset_copy)
    refused(["import", small_roller / "k80", "--hardware", "k80", "--out", dataset_copy, "--quiet"], capsys, message)
    assert snapshot(dataset_copy) == before


@pytest.mark.parametrize("how, message", [("missing", "is missing"), ("corrupt", "unreadable Parquet file")])
def test_info_checks_what_it_reports_on(how, message, dataset_copy, capsys):
    _damage(dataset_copy, how)
    refused(["info", dataset_copy], capsys, message)


def test_import_of_nothing_is_an_error_and_leaves_no_dataset(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    garbage = tmp_path / "garbage"
    garbage.mkdir()
    (garbage / "records.json").write_text("not json\n{\"neither\": 1}\n")
    for source in (empty, garbage):
        out = tmp_path / f"ds-{source.name}"
        refused(["import", source, "--hardware", "k80", "--out", out, "--quiet"], capsys, "no records imported")
        assert not out.exists()


def test_import_of_nothing_new_into_an_existing_dataset_is_fine(dataset_copy, tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    code, out, _ = run(["import", empty, "--hardware", "k80", "--out", dataset_copy, "--quiet"], capsys)
    assert code == 0 and "+0 records" in out


def test_strict_import_leaves_no_half_made_folder(tmp_path, roller, capsys):
    source = tmp_path / "logs"
    source.mkdir()
    (source / "records.json").write_bytes(b"".join(real_lines(roller, 5)) + b"this line is broken\n")
    out = tmp_path / "ds"
    refused(["import", source, "--hardware", "k80", "--out", out, "--strict", "--quiet"], capsys,
            "--strict stops at the first bad line")
    assert not out.exists()


def test_counts_are_spelled_for_one(tmp_path, roller, capsys):
    source = tmp_path / "logs"
    source.mkdir()
    (source / "records.json").write_bytes(real_lines(roller, 1)[0])
    code, out, _ = run(["import", source, "--hardware", "k80", "--out", tmp_path / "ds", "--quiet"], capsys)
    assert code == 0
    assert "+1 record of k80 (1 line in 1 file;" in out


def test_prune_prints_no_empty_removal_reasons(tmp_path, tiny_dataset, capsys):
    code, out, _ = run(["prune", tiny_dataset, "--strategy", "stratified", "--keep", "0.5", "--out",
                        tmp_path / "p", "--quiet"], capsys)
    assert code == 0
    assert "removed 0:" not in out


# ---------------------------------------------------------------------------------------------------
# numbers
# ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("extra, message", [
    (["--lr", "-1"], "--lr: -1 is out of range"),
    (["--lr", "nan"], "--lr: 'nan' is not a finite number"),
    (["--lr", "inf"], "not a finite number"),
    (["--epochs", "0"], "--epochs: 0 is out of range"),
    (["--test-fraction", "1"], "--test-fraction: 1 is out of range"),
    (["--target-fraction", "-0.1"], "out of range"),
    (["--seed", "-3"], "--seed: -3 is out of range"),
    (["--model", "gpt"], "--model: invalid choice"),
    (["--split", "by-moon"], "--split: invalid choice"),
])
def test_numeric_and_closed_options_are_checked_on_reading(extra, message, tmp_path, capsys):
    out = tmp_path / "model"
    refused(["train", "/no/such/dataset", "--out", out, *extra], capsys, message)
    assert not out.exists()


@pytest.mark.parametrize("argv, message", [
    (["prune", "ds", "--strategy", "random", "--keep", "1.5", "--out", "x"], "--keep: 1.5 is out of range"),
    (["prune", "ds", "--strategy", "magic", "--keep", "0.5", "--out", "x"], "--strategy: invalid choice"),
    (["compare", "ds", "--models", "xgb,gpt"], "--models: gpt not among"),
    (["compare", "ds", "--seeds", "0"], "--seeds: 0 is out of range"),
    (["bench", "--dataset", "ds", "--target-pca", "0.4", "--out", "b"], "--target-pca: 0.4 is out of range"),
    (["bench", "--dataset", "ds", "--target-pca", "0.7", "--split", "nope", "--out", "b"], "--split: invalid choice"),
    (["tune", "--network", "resnet18", "--model", "xgb", "--trials", "0", "--hardware-config", "x", "--out", "r"],
     "--trials: 0 is out of range"),
    (["prune-study", "ds", "--test-hardware", "v100", "--strategies", "random,magic"], "magic not among"),
])
def test_other_commands_check_their_numbers_and_names(argv, message, capsys):
    refused(argv, capsys, message)


# ---------------------------------------------------------------------------------------------------
# help
# ---------------------------------------------------------------------------------------------------

def _subparsers():
    parser = build_parser()
    return parser._subparsers._group_actions[0].choices  # noqa: SLF001 (argparse keeps them here)


@pytest.mark.parametrize("name", sorted(_subparsers()))
def test_every_option_has_help_and_shows_its_default(name, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")  # one option per line, so each line can be checked on its own
    sub = _subparsers()[name]
    for action in sub._actions:  # noqa: SLF001
        assert action.help, f"{name} {action.option_strings or action.dest}: no help line"
    with pytest.raises(SystemExit):
        main([name, "--help"])
    text = capsys.readouterr().out
    # each option's entry: its line and the indented lines under it (a long option puts its help below)
    entries = re.findall(r"^  (-\S+.*(?:\n {6,}.*)*)", text, flags=re.M)
    for action in sub._actions:  # noqa: SLF001
        if not action.option_strings or action.dest == "help":
            continue
        entry = next(e for e in entries if e.startswith(action.option_strings[0]))
        assert "default" in entry or "required" in entry, f"crosstune {name}: {entry}"


def test_top_level_help_speaks_to_users(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    assert "thin layer" not in text and "tests call" not in text
    assert "transfer to hardware they were never trained on" in text and "crosstune demo" in text


def test_old_space_separated_lists_still_work():
    args = build_parser().parse_args(["collect", "--network", "resnet18", "mobilenet_v2,bert_layer",
                                      "--hardware-config", "local-sse-2c", "--programs-per-task", "4", "--out", "x"])
    assert args.network == ["resnet18", "mobilenet_v2", "bert_layer"]


def test_a_hardware_prefix_that_cannot_start_a_hardware_name_is_refused(capsys):
    collect = ["collect", "--network", "resnet18", "--hardware-config", "local-sse-2c", "--programs-per-task", "4",
               "--out", "x"]
    assert build_parser().parse_args(collect + ["--hardware-prefix", "zen4-"]).hardware_prefix == "zen4-"
    assert build_parser().parse_args(collect).hardware_prefix == ""
    for bad in ("-zen4", "my cpu/", "zen4:"):
        with pytest.raises(SystemExit):
            build_parser().parse_args(collect + [f"--hardware-prefix={bad}"])
        assert "a hardware name has letters, digits" in capsys.readouterr().err


def test_the_command_line_is_unchanged_by_a_refusal_of_a_read_only_place(blocker, capsys):
    """A read-only place is found by trying to write, which is what root cannot skip."""
    mode = os.stat(blocker).st_mode
    refused(["split-study", "/no/such/ds", "--out", blocker / "x" / "y"], capsys, "is a file")
    assert os.stat(blocker).st_mode == mode


def test_interrupted_import_says_so_on_its_own_line_and_leaves_no_folder(tmp_path, roller):
    import signal
    import subprocess
    import sys
    import time

    source = tmp_path / "logs"
    source.mkdir()
    (source / "records.json").write_bytes(b"".join(real_lines(roller, 20)) * 2500)  # 50,000 lines: seconds to read
    out = tmp_path / "ds"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "crosstune", "import", str(source), "--hardware", "k80",
                             "--out", str(out)], stderr=subprocess.PIPE, env=env)
    seen = b""
    deadline = time.monotonic() + 120
    while b"lines" not in seen and time.monotonic() < deadline:  # the bar is drawn: the import is under way
        seen += proc.stderr.read1(4096)
    proc.send_signal(signal.SIGTERM)  # handled like Ctrl-C
    rest = proc.stderr.read()
    assert proc.wait(timeout=60) == 130
    err = (seen + rest).decode()
    assert err.endswith("\ncrosstune import: interrupted\n"), err[-300:]
    assert "Traceback" not in err
    assert not out.exists()


def test_output_piped_into_a_reader_that_stops_early_ends_quietly(small_dataset):
    """`crosstune info DS | head -1`: the reader closes the pipe; no traceback, the shell's 141."""
    proc = subprocess.Popen([sys.executable, "-m", "crosstune", "info", str(small_dataset)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # before the command has written anything
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141 and "Traceback" not in stderr, stderr


def test_tune_compare_pretraining_data_names_the_bundled_dataset_bundled(tmp_path):
    from crosstune.commands import pretraining_datasets
    from crosstune.data import bundled_dataset

    assert pretraining_datasets(None) == [str(bundled_dataset())]
    mine = str(tmp_path / "mine")
    assert pretraining_datasets(["bundled", mine]) == [str(bundled_dataset()), mine]


def test_two_datasets_with_one_hardware_name_and_two_descriptors_are_refused_with_the_way_out(tmp_path,
                                                                                             tiny_dataset):
    """This machine measured under a bundled configuration's name (crosstune collect) beside the bundled data."""
    import json
    import shutil

    from crosstune.dataset import load_dataset
    from crosstune.errors import CrosstuneError

    other = tmp_path / "other"
    shutil.copytree(tiny_dataset, other)
    manifest = json.loads((other / "manifest.json").read_text())
    name = sorted(manifest["hardware"])[0]
    manifest["hardware"][name]["clock_mhz"] = manifest["hardware"][name]["clock_mhz"] * 2
    (other / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CrosstuneError, match=f"hardware '{name}' has different descriptors .* --hardware NEW-NAME"):
        load_dataset([str(tiny_dataset), str(other)])
