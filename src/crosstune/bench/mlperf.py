"""`crosstune bench`: time to train a cost model to a quality target, the way MLPerf HPC measures
scientific ML training.

Each run (one seed) writes its own MLPerf log with the ``mlperf-logging`` package: init, cache clear,
data staging (reading and featurising the records, with bytes and records), the hyper-parameters, then
run_start, per epoch epoch_start/stop, eval_start/stop and eval_accuracy (validation PCA) and the
tracked throughput, and run_stop with status ``success`` (target reached) or ``aborted`` (epoch limit).
The logs are the source of truth: scores are computed by parsing them, so a run that was killed (no
run_stop) is reported as incomplete and not counted.

Score, as MLPerf HPC computes it: time to train per run = run_start -> run_stop; the benchmark score is
the mean over successful runs after dropping the fastest and the slowest; staging time is reported
beside it (HPC v3 excludes staging from the run time).
"""

from __future__ import annotations

import json
import os
import platform
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from ..errors import CrosstuneError

BENCHMARK_NAME = "crosstune-costmodel"
RULESET = Path(__file__).with_name("crosstune_hpc.yaml")
QUALITY_KEY = "quality_target_pca"


@dataclass
class BenchSettings:
    datasets: list[str]
    target_pca: float
    seeds: list[int]
    out: str
    split: str = "by-task"
    test_hardware: list[str] = field(default_factory=list)
    test_fraction: float = 0.2
    model: str = "crossfeat"
    max_epochs: int = 10
    device: str = "cpu"
    processes: int = 1

    def check(self) -> None:
        if not 0.5 < self.target_pca < 1.0:
            raise CrosstuneError(f"--target-pca must be in (0.5, 1): a random ranker already scores 0.5 ({self.target_pca})")
        if self.max_epochs < 1 or not self.seeds or self.processes < 1:
            raise CrosstuneError("--max-epochs, --seeds and --processes must be at least 1")
        from ..dataset import read_manifest
        from ..models import MODEL_KINDS, model_class
        from ..models.neural import NeuralCostModel

        # one network trained epoch by epoch (an ensemble of them is not one)
        neural = [kind for kind in MODEL_KINDS if issubclass(model_class(kind), NeuralCostModel)]
        if self.model not in neural:
            raise CrosstuneError(f"the benchmark trains a model epoch by epoch: {', '.join(neural)}")
        # The split is checked here, in the parent, so that a typo is one error line and not a run of
        # worker processes that each fail and leave an "incomplete" log.
        if self.split not in BENCH_SPLITS:
            raise CrosstuneError(f"--split {self.split!r}: the benchmark takes {', '.join(BENCH_SPLITS)}")
        if not 0.0 < self.test_fraction < 1.0:
            raise CrosstuneError(f"--test-fraction must be in (0, 1), not {self.test_fraction}")
        present = {name for path in self.datasets for name in read_manifest(Path(path)).get("hardware", {})}
        if self.split == "by-hardware":
            unknown = [h for h in self.test_hardware if h not in present]
            if not self.test_hardware or unknown:
                raise CrosstuneError(f"--split by-hardware needs --test-hardware from {', '.join(sorted(present))}"
                                     + (f" (not {', '.join(unknown)})" if unknown else ""))
        elif self.test_hardware:
            raise CrosstuneError("--test-hardware applies to --split by-hardware only")


BENCH_SPLITS = ("by-task", "within-task", "by-hardware")  # the splits the benchmark has options for


def _logger(path: Path | None):
    """An mllog logger writing to ``path`` (None: a logger that drops everything, for ranks > 0)."""
    from mlperf_logging import mllog

    if path is None:
        class _Silent:
            def __getattr__(self, _name):
                return lambda *a, **k: None
        return _Silent()
    logger = mllog.get_mllogger()
    mllog.config(filename=str(path), default_stack_offset=2)
    # mllog keeps one process-wide logger; route it to this run's file only.
    for handler in list(logger.logger.handlers):
        logger.logger.removeHandler(handler)
    import logging

    handler = logging.FileHandler(str(path), mode="w")
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.logger.addHandler(handler)
    logger.logger.setLevel(logging.INFO)
    logger.logger.propagate = False
    return logger


def run_once(settings: BenchSettings, seed: int, log_path: Path, progress: bool = False) -> None:
    """One benchmark run; writes its MLPerf log (rank 0 only under torchrun)."""
    from mlperf_logging.mllog import constants as C

    from .. import distributed
    from ..dataset import load_dataset
    from ..experiment import SplitOptions
    from ..models import FitOptions, create_model
    from ..train import TrainConfig, TrainHooks

    ctx = distributed.context(settings.device)
    log = _logger(log_path if ctx.is_main else None)
    log.start(key=C.INIT_START)
    log.event(key=C.SUBMISSION_BENCHMARK, value=BENCHMARK_NAME)
    log.event(key=C.SUBMISSION_ORG, value="crosstune")
    log.event(key=C.SUBMISSION_DIVISION, value="open")
    log.event(key=C.SUBMISSION_STATUS, value="research")
    log.event(key=C.SUBMISSION_PLATFORM, value=f"{platform.node()} ({platform.processor() or platform.machine()})")
    log.event(key="number_of_processes", value=ctx.world_size)
    log.event(key=C.SEED, value=seed)
    log.event(key=QUALITY_KEY, value=settings.target_pca)
    log.event(key=C.CACHE_CLEAR, value=True)  # nothing is cached in-process between runs: each run re-reads
    model = create_model(settings.model, TrainConfig(epochs=settings.max_epochs, seed=seed, device=settings.device))
    cfg = model.train_config  # with the model's own learning rate and optimizer filled in

    log.start(key=C.STAGING_START)
    staged_at = time.perf_counter()
    ds = load_dataset(settings.datasets)
    # One validation set for every run (split seed 0), as MLPerf fixes its evaluation data; the run's
    # seed varies initialisation and batch order only.
    split, _ = SplitOptions(settings.split, settings.test_hardware, settings.test_fraction).make(ds, 0)
    train, valid = ds.select(split.train), ds.select(split.test)
    staged_bytes = sum(p.stat().st_size for d in settings.datasets for p in Path(d).rglob("*.parquet"))
    log.end(key=C.STAGING_STOP, metadata={"staging_duration_s": time.perf_counter() - staged_at,
                                          "staging_bytes": staged_bytes, "staging_records": len(ds)})
    log.event(key=C.TRAIN_SAMPLES, value=int(train.valid.sum()))
    log.event(key=C.EVAL_SAMPLES, value=int(valid.valid.sum()))
    log.event(key=C.GLOBAL_BATCH_SIZE, value=cfg.group_size * cfg.groups_per_batch * ctx.world_size)
    log.event(key=C.OPT_NAME, value=cfg.optimizer)
    log.event(key=C.OPT_BASE_LR, value=cfg.lr)
    log.event(key="opt_weight_decay", value=cfg.weight_decay)
    log.event(key="opt_learning_rate_schedule", value="cosine")
    log.event(key="opt_gradient_clip_norm", value=cfg.grad_clip)
    log.event(key="loss", value=cfg.loss)
    log.end(key=C.INIT_STOP)

    class Hooks(TrainHooks):
        def epoch_start(self, epoch: int) -> None:
            log.start(key=C.EPOCH_START, metadata={C.EPOCH_NUM: epoch + 1})

        def eval_start(self, epoch: int) -> None:
            log.end(key=C.EPOCH_STOP, metadata={C.EPOCH_NUM: epoch + 1})
            log.start(key=C.EVAL_START, metadata={C.EPOCH_NUM: epoch + 1})

        def epoch_end(self, record: dict) -> bool:
            epoch = record["epoch"] + 1
            log.end(key=C.EVAL_STOP, metadata={C.EPOCH_NUM: epoch})
            log.event(key=C.EVAL_ACCURACY, value=record["valid_pca"], metadata={C.EPOCH_NUM: epoch})
            log.event(key="tracked_stats", value={"throughput": record["samples"] / record["seconds"]},
                      metadata={"step": epoch})
            self.last_pca = record["valid_pca"]
            return record["valid_pca"] >= settings.target_pca

    hooks = Hooks()
    hooks.last_pca = float("nan")
    log.start(key=C.RUN_START)
    model.fit(train, valid, FitOptions(progress=progress, hooks=hooks))
    success = hooks.last_pca >= settings.target_pca
    log.end(key=C.RUN_STOP, metadata={"status": C.SUCCESS if success else C.ABORTED})
    distributed.barrier(ctx)


# ---------------------------------------------------------------------------------------------------
# Parsing logs into scores
# ---------------------------------------------------------------------------------------------------

@dataclass
class RunResult:
    log: str
    seed: int | None
    status: str  # success | aborted | incomplete
    processes: int = 1
    time_to_train_s: float = float("nan")
    staging_s: float = float("nan")
    init_s: float = float("nan")
    epochs: int = 0
    samples_per_s: float = float("nan")
    curve: list = field(default_factory=list)  # validation PCA per epoch
    staging_bytes: int = 0
    staging_records: int = 0


def parse_log(path: Path) -> RunResult:
    events = []
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith(":::MLLOG "):
            try:
                events.append(json.loads(line[len(":::MLLOG "):]))
            except json.JSONDecodeError:
                continue  # a line cut short by a kill
    first = {}
    for e in events:
        first.setdefault(e["key"], e)
    result = RunResult(log=str(path), seed=first.get("seed", {}).get("value"), status="incomplete",
                       processes=first.get("number_of_processes", {}).get("value", 1))
    curve = [e["value"] for e in events if e["key"] == "eval_accuracy"]
    result.curve, result.epochs = curve, len(curve)
    throughputs = [e["value"]["throughput"] for e in events if e["key"] == "tracked_stats"]
    if throughputs:
        result.samples_per_s = float(np.mean(throughputs))
    if "staging_start" in first and "staging_stop" in first:
        result.staging_s = (first["staging_stop"]["time_ms"] - first["staging_start"]["time_ms"]) / 1000
        result.staging_bytes = first["staging_stop"]["metadata"].get("staging_bytes", 0)
        result.staging_records = first["staging_stop"]["metadata"].get("staging_records", 0)
    if "init_start" in first and "init_stop" in first:
        result.init_s = (first["init_stop"]["time_ms"] - first["init_start"]["time_ms"]) / 1000
    if "run_start" in first and "run_stop" in first:
        result.time_to_train_s = (first["run_stop"]["time_ms"] - first["run_start"]["time_ms"]) / 1000
        result.status = first["run_stop"]["metadata"].get("status", "incomplete")
    return result


def mlperf_score(times: list[float]) -> float:
    """MLPerf HPC: mean time to train after dropping the fastest and the slowest run (with >= 3 runs)."""
    times = sorted(times)
    if len(times) >= 3:
        times = times[1:-1]
    return float(np.mean(times)) if times else float("nan")


def summarize(results: list[RunResult]) -> dict:
    ok = [r for r in results if r.status == "success"]
    score = mlperf_score([r.time_to_train_s for r in ok])
    staging = float(np.mean([r.staging_s for r in results if np.isfinite(r.staging_s)])) if results else float("nan")
    return {
        "runs": [asdict(r) for r in results],
        "successful_runs": len(ok),
        "aborted_runs": sum(r.status == "aborted" for r in results),
        "incomplete_runs": sum(r.status == "incomplete" for r in results),
        "time_to_train_s": score,
        "staging_s": staging,
        "staging_share": staging / (staging + score) if np.isfinite(score) and score + staging > 0 else float("nan"),
        "epochs_to_target": float(np.mean([r.epochs for r in ok])) if ok else float("nan"),
        "samples_per_s": float(np.mean([r.samples_per_s for r in ok])) if ok else float("nan"),
    }


# ---------------------------------------------------------------------------------------------------
# Running the benchmark (one process per run, torchrun when several)
# ---------------------------------------------------------------------------------------------------

def _worker_command(settings: BenchSettings, seed: int, log_path: Path, processes: int) -> list[str]:
    args = [sys.executable, "-m", "crosstune.bench.worker", json.dumps({**asdict(settings), "processes": processes}),
            str(seed), str(log_path)]
    if processes == 1:
        return args
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={processes}",
            "-m", "crosstune.bench.worker", *args[3:]]


def start_group(command: list[str], env: dict, **options) -> subprocess.Popen:
    """A child in its own process group, so that stopping the benchmark stops torchrun's workers too."""
    return subprocess.Popen(command, env=env, start_new_session=True, **options)


def stop_group(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    """SIGTERM to the child's whole group, then SIGKILL to whatever of the group is left after ``grace_s``
    (torchrun's workers can outlive torchrun)."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def run_logged(settings: BenchSettings, seed: int, log_path: Path, processes: int, timeout_s: float | None = None) -> RunResult:
    """One run in a fresh process (so that every run pays its own staging, as on a cluster)."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if processes > 1:
        env["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // processes))
    proc = start_group(_worker_command(settings, seed, log_path, processes), env, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except BaseException:  # timeout, Ctrl-C, SIGTERM: no orphaned worker keeps training
        stop_group(proc)
        raise
    completed = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    if completed.returncode != 0 and not log_path.exists():
        raise CrosstuneError(f"benchmark run (seed {seed}) failed:\n{completed.stderr[-2000:]}")
    result = parse_log(log_path)
    if completed.returncode != 0 and result.status == "incomplete":
        result.status = "incomplete"
        (log_path.with_suffix(".stderr")).write_text(completed.stderr)
    return result


def run_bench(settings: BenchSettings, print_fn=print) -> dict:
    settings.check()
    out = Path(settings.out)
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for seed in settings.seeds:
        log_path = out / f"run-p{settings.processes}-seed{seed}.log"
        result = run_logged(settings, seed, log_path, settings.processes)
        results.append(result)
        print_fn(f"seed {seed}: {result.status}, time to train {result.time_to_train_s:.1f} s in {result.epochs} epochs "
                 f"(staging {result.staging_s:.1f} s, {result.samples_per_s:.0f} samples/s); "
                 f"validation PCA {', '.join(f'{p:.4f}' for p in result.curve)}")
    summary = summarize(results)
    summary["settings"] = asdict(settings)
    from ..reporting import write_json

    write_json(out / f"bench-p{settings.processes}.json", summary)
    return summary
