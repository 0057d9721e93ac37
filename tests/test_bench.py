"""Data-parallel training under torchrun and the MLPerf-style benchmark with its compliance check."""

from __future__ import annotations

import pytest

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import torch
from safetensors.torch import load_file

from crosstune.bench.mlperf import RULESET, BenchSettings, parse_log, run_bench, summarize

pytestmark = pytest.mark.slow  # MLPerf-style runs and torchrun: seconds each

HERE = Path(__file__).parent


def _torchrun(args, env=None, timeout=600):
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", *args],
                          capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})})


@pytest.mark.ddp
def test_two_ranks_end_with_identical_weights(tmp_path, tiny_dataset):
    result = _torchrun([str(HERE / "ddp_train.py"), str(tiny_dataset), str(tmp_path)])
    assert result.returncode == 0, result.stderr[-3000:]
    rank0, rank1 = (load_file(str(tmp_path / f"rank{r}.safetensors")) for r in (0, 1))
    assert rank0.keys() == rank1.keys()
    assert all(torch.equal(rank0[k], rank1[k]) for k in rank0)


@pytest.mark.ddp
def test_a_dying_rank_stops_the_others_without_hanging(tmp_path, tiny_dataset):
    # A hang shows as subprocess.TimeoutExpired (the test fails); no wall-clock assertion beyond that.
    result = _torchrun([str(HERE / "ddp_train.py"), str(tiny_dataset), str(tmp_path)],
                       env={"CROSSTUNE_TEST_DIE_RANK": "1"}, timeout=300)
    assert result.returncode != 0
    assert not (tmp_path / "rank0.safetensors").exists()


def _check(log: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mlperf_logging.compliance_checker", "--usage", "hpc", "--ruleset",
                           "3.0.0", "--config", str(RULESET), "--log_output", str(log.with_suffix(".check")), str(log)],
                          capture_output=True, text=True)


def test_benchmark_run_passes_the_compliance_checker(tmp_path, tiny_dataset):
    settings = BenchSettings([str(tiny_dataset)], target_pca=0.55, seeds=[0], out=str(tmp_path), max_epochs=4)
    summary = run_bench(settings, print_fn=lambda *_: None)
    run = summary["runs"][0]
    assert run["status"] == "success" and run["epochs"] >= 1 and run["curve"][-1] >= 0.55
    assert run["time_to_train_s"] > 0 and run["staging_s"] > 0 and run["staging_records"] > 0
    log = Path(run["log"])
    checked = _check(log)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_unreachable_target_aborts_and_fails_the_checker(tmp_path, tiny_dataset):
    settings = BenchSettings([str(tiny_dataset)], target_pca=0.999, seeds=[0], out=str(tmp_path), max_epochs=1)
    summary = run_bench(settings, print_fn=lambda *_: None)
    assert summary["aborted_runs"] == 1 and summary["successful_runs"] == 0
    log = Path(summary["runs"][0]["log"])
    assert "run_stop" in log.read_text()  # the log is complete, the run is not a success
    assert _check(log).returncode != 0


def test_killed_run_is_incomplete_and_not_counted(tmp_path, tiny_dataset):
    # Four epochs as in the compliance test: the one-layer default needs more than two to reach 0.55 here.
    settings = BenchSettings([str(tiny_dataset)], target_pca=0.55, seeds=[0], out=str(tmp_path), max_epochs=4)
    run = run_bench(settings, print_fn=lambda *_: None)["runs"][0]
    assert run["status"] == "success"  # the uncut log must count, or the check below proves nothing
    log = Path(run["log"])
    lines = log.read_text().splitlines()
    cut = tmp_path / "killed.log"
    cut.write_text("\n".join(line for line in lines if "run_stop" not in line)[:-40])
    killed = parse_log(cut)
    assert killed.status == "incomplete"
    summary = summarize([parse_log(log), killed])
    assert summary["successful_runs"] == 1 and summary["incomplete_runs"] == 1


def test_stopping_the_benchmark_stops_its_workers(tmp_path, tiny_dataset):
    """`kill` on `crosstune bench` must not leave a worker training on (and skewing the next run's timing)."""
    out = tmp_path / "bench"
    bench = subprocess.Popen([sys.executable, "-m", "crosstune", "bench", "--dataset", str(tiny_dataset),
                              "--target-pca", "0.999", "--seeds", "1", "--max-epochs", "50", "--no-roofline",
                              "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    log = out / "run-p1-seed0.log"
    deadline = time.monotonic() + 120
    while not (log.exists() and "epoch_start" in log.read_text()) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert log.exists(), "the benchmark's first run never started"
    workers = psutil.Process(bench.pid).children(recursive=True)
    assert workers, "the benchmark trains in worker processes"
    bench.terminate()
    _, stderr = bench.communicate(timeout=60)
    assert bench.returncode == 130 and "interrupted" in stderr
    _, alive = psutil.wait_procs(workers, timeout=30)
    assert not alive, f"worker processes left running: {[w.pid for w in alive]}"
