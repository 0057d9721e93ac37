"""`crosstune tune`: tune a whole network with MetaSchedule guided by a crosstune model (or MetaSchedule's
own XGBoost), compile it with the best records, check its output against PyTorch, measure end-to-end
latency, and log the tuning curve (best estimated network latency against wall time and trials).
`crosstune tune-compare` (tune_compare.py) uses the compile-and-check and the plot from here."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..atomic import write_text as atomic_write_text
from ..errors import CrosstuneError
from . import require_tvm
from .measure import configuration, make_builder, make_runner, target_of
from .compiled import CompiledNetwork
from .networks import extract_network_tasks, get_network

NUM_TRIALS_PER_ITER = 64


@dataclass
class TuneResult:
    network: str
    cost_model: str
    hardware_config: str
    trials: int
    tuning_seconds: float
    curve: list[dict] = field(default_factory=list)  # {seconds, trials, estimated_latency_ms}
    latency_ms: float = float("nan")
    pytorch_latency_ms: float = float("nan")
    output_max_abs_error: float = float("nan")
    output_matches: bool = False
    tasks: int = 0
    cost_model_predict_seconds: float = float("nan")
    cost_model_predict_calls: int = 0
    cost_model_failures: int = 0
    profile_seconds: dict = field(default_factory=dict)  # MetaSchedule's own profiler timers
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return dict(self.__dict__)


def _progress_callback(weights: list[float], curve: list[dict], started: float, best: list[float], trials_before: int):
    """``best``: each task's best seconds so far (inf: none; updated in place), ``trials_before``: trials
    measured before MetaSchedule's tuning began (seeds)."""
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback

    trials = [trials_before]

    @derived_object
    class TuningCurve(PyMeasureCallback):
        """Records the estimated network latency (sum of weight x best task latency) after every round."""

        def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results) -> None:
            for result in runner_results:
                if result.run_secs:
                    secs = float(np.mean([float(s) for s in result.run_secs]))
                    best[task_id] = min(best[task_id], secs)
            trials[0] += len(measure_candidates)
            estimate = sum(w * b for w, b in zip(weights, best)) if all(np.isfinite(best)) else float("nan")
            curve.append({"seconds": time.perf_counter() - started, "trials": trials[0],
                          "estimated_latency_ms": estimate * 1e3})

    return TuningCurve()


def end_to_end(database, mod, target, network: str, config) -> dict:
    """Compile the network with the database's best programs, check its output against PyTorch and time
    both on the configuration's cores: {latency_ms, pytorch_latency_ms, output_max_abs_error, output_matches}."""
    compiled = CompiledNetwork(database, mod, target, network, config.num_cores)
    number, repeat = (1, 3) if compiled.slow else (5, 5)
    return {**compiled.check, "latency_ms": float(np.median(compiled.time_tvm(number, repeat))),
            "latency_runs": f"median of {repeat} x {number} run(s)",
            "pytorch_latency_ms": float(np.median(compiled.time_pytorch(10)))}


def _measure_seeds(seeds, per_task: int, budget: int, contexts, weights, database, builder, runner,
                   best: list[float], curve: list[dict], started: float) -> tuple[int, str]:
    """Each task's fastest programs of the seed database (a seeds.SeedDatabase), measured before the search,
    within ``budget`` trials; ``best`` and ``curve`` take them in. Returns the trials measured and a note.
    They reach MetaSchedule's search through the database (its evolutionary search starts from the best
    measured programs); the cost model learns from the search's own rounds, as it would without seeds."""
    from .convert import workload_hash
    from .seeds import measure_seeds

    measured = not_replayed = tasks = 0
    for index, context in enumerate(contexts):
        shash = workload_hash(database.commit_workload(context.mod))
        traces = seeds.traces(shash, min(per_task, budget - measured))
        if not traces:
            continue
        result = measure_seeds(traces, context, builder, runner, database)
        ran = [s for s in result.seconds if s is not None]
        best[index] = min([best[index], *ran])
        measured += len(result.seconds)
        not_replayed += result.not_replayed
        tasks += bool(result.seconds)
    if not tasks and not not_replayed:
        raise CrosstuneError(f"--seeds-from {seeds.path}: holds none of the network's {len(contexts)} tasks "
                             f"(a database of another network?)")
    estimate = sum(float(w) * b for w, b in zip(weights, best)) if all(np.isfinite(best)) else float("nan")
    curve.append({"seconds": time.perf_counter() - started, "trials": measured, "estimated_latency_ms": estimate * 1e3,
                  "seeds": measured})
    note = (f"{measured} seed programs of {tasks} tasks measured first ({seeds.summary()})"
            + (f"; {not_replayed} did not apply to their task's module" if not_replayed else ""))
    return measured, note


def tune_network(network: str, model_spec: str, trials: int, hardware_config: str, out: str | Path,
                 fallback_xgb: bool = False, fine_tune_every: int = 0, seed: int = 0, seeds_from: str | None = None,
                 seeds_per_task: int = 16) -> TuneResult:
    """Tune ``network`` for ``trials`` measured programs with the cost model ``model_spec`` (a crosstune
    model directory, or ``xgb`` for MetaSchedule's default); with ``seeds_from``, each task's
    ``seeds_per_task`` fastest programs in that database (tuned elsewhere) are measured first, within
    the same budget, and the search starts from them."""
    require_tvm()
    get_network(network)
    config = configuration(hardware_config)
    config.check_supported()  # before anything is measured
    if trials < 1:
        raise CrosstuneError("--trials must be at least 1")
    seeds = None
    if seeds_from is not None:
        from .seeds import read_seed_database

        seeds = read_seed_database(seeds_from)  # a bad folder fails before anything is measured
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    notes: list[str] = []
    cost_model, adapter = "xgb", None
    if model_spec != "xgb":
        from ..models import load_model
        from .costmodel import make_cost_model, scoring_descriptor

        try:
            model = load_model(model_spec)
            hardware, note = scoring_descriptor(model, hardware_config, config.spec)
            notes += [note] if note else []
            adapter = make_cost_model(model, hardware, fine_tune_every)
            cost_model = adapter
        except CrosstuneError as err:
            if not fallback_xgb:
                raise
            notes.append(f"model {model_spec} did not load ({err}); fell back to MetaSchedule's XGBoost")
    # The runtime of this process (end-to-end timing) uses the configuration's thread count.
    os.environ["TVM_NUM_THREADS"] = str(config.num_cores)
    from tvm.s_tir import meta_schedule as ms

    target = target_of(config)
    mod, extracted = extract_network_tasks(network, target)
    contexts, weights = ms.relax_integration.extracted_tasks_to_tune_contexts(
        extracted, str(out / "logs"), strategy="evolutionary", num_threads=config.num_cores, seed=seed)
    database = ms.database.JSONDatabase(path_workload=str(out / "database_workload.json"),
                                        path_tuning_record=str(out / "database_tuning_record.json"))
    curve: list[dict] = []
    best = [float("inf")] * len(contexts)
    builder, runner = make_builder(), make_runner(config)
    started = time.perf_counter()
    seeded = 0
    if seeds is not None:
        seeded, note = _measure_seeds(seeds, seeds_per_task, trials, contexts, weights, database, builder, runner,
                                      best, curve, started)
        notes.append(note)
    callbacks = ms.measure_callback.MeasureCallback.create("default") + [
        _progress_callback([float(w) for w in weights], curve, started, best, seeded)]
    with ms.Profiler() as profiler:
        if trials > seeded:
            ms.tune_tasks(tasks=contexts, task_weights=weights, work_dir=str(out), max_trials_global=trials - seeded,
                          num_trials_per_iter=NUM_TRIALS_PER_ITER, builder=builder, runner=runner,
                          database=database, cost_model=cost_model, measure_callbacks=callbacks)
    result = TuneResult(network, "xgb" if adapter is None else f"crosstune:{model_spec}", hardware_config,
                        curve[-1]["trials"] if curve else 0, time.perf_counter() - started, curve, tasks=len(contexts),
                        notes=notes)
    result.profile_seconds = {str(k): float(v) for k, v in profiler.get().items()}
    if adapter is not None:
        result.cost_model_predict_seconds = adapter.predict_seconds
        result.cost_model_predict_calls = adapter.predict_calls
        result.cost_model_failures = adapter.failures
        if adapter.failures:  # each failure was answered with neutral scores: a random pick, unseen
            result.notes.append(f"{adapter.failures} cost-model call(s) failed and were answered with neutral "
                                f"scores (random search there); {adapter.predict_calls} predict calls in all")
    for key, value in end_to_end(database, mod, target, network, config).items():
        setattr(result, key, value)
    atomic_write_text(out / "tune.json", json.dumps(result.to_json(), indent=1, default=float))
    plot_curves({result.cost_model: result.curve}, out / "tune-curve.png", f"{network} on {hardware_config}")
    return result


def plot_curves(curves: dict[str, list[dict]], path: Path, title: str, references: dict[str, float] | None = None) -> None:
    """Best estimated network latency against wall time and against trials, one line per run;
    ``references`` adds labelled horizontal lines (e.g. the baseline's final latency)."""
    from ..plotting import pyplot, save_figure

    plt = pyplot()

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for label, curve in curves.items():
        points = [(c["seconds"], c["trials"], c["estimated_latency_ms"]) for c in curve if np.isfinite(c["estimated_latency_ms"])]
        if not points:
            continue
        seconds, trials, latency = zip(*points)
        axes[0].plot(np.array(seconds) / 60, np.minimum.accumulate(latency), label=label, drawstyle="steps-post")
        axes[1].plot(trials, np.minimum.accumulate(latency), label=label, drawstyle="steps-post")
    axes[0].set_xlabel("tuning wall time (minutes)")
    axes[1].set_xlabel("measured programs (trials)")
    plotted = any(ax.lines for ax in axes)
    for ax in axes:
        for i, (label, value) in enumerate((references or {}).items()):
            if plotted and np.isfinite(value):
                ax.axhline(value, color="grey", linestyle=("--", ":")[i % 2], linewidth=0.8, label=label)
        ax.set_ylabel("best estimated network latency (ms)")
        ax.grid(alpha=0.3)
        if plotted:
            ax.legend(fontsize=8)
        else:  # too few trials for every task to have a measured program: no network estimate yet
            ax.text(0.5, 0.5, "no estimate yet:\nsome tasks have no measured program", ha="center",
                    va="center", transform=ax.transAxes)
    fig.suptitle(title)
    fig.tight_layout()
    save_figure(fig, path)
