"""`crosstune collect`: measure real programs of real networks on this machine with MetaSchedule.

Layout of a collection directory (every file written atomically or appended line by line)::

    collection.json               settings, provenance and the task list
    tasks/<task>.json             the task's TIR module (TVM JSON) and the networks that use it
    candidates/<task>.json        the sampled programs (MetaSchedule traces), the same for every config
    <config>/database_*.json      one MetaSchedule JSON database per hardware configuration
    <config>/failures.jsonl       build and run failures, with their reasons
    network_map.json              task id -> networks (for by-network splits)

Candidates are drawn mostly by random sampling of the design space (ReplayTrace), so that the data is
not only a tuner's good programs, plus some programs from a short evolutionary search. A killed
collection resumes: candidates are stored before measurement and a program counts as measured once
its record is in the configuration's database.
"""

from __future__ import annotations

import datetime as _dt
import json
import platform
import shlex
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from ..atomic import write_bytes
from ..atomic import write_text as atomic_write_text
from ..errors import CrosstuneError
from ..hardware.local import detect_local
from ..records.operators import task_id_of
from . import require_tvm
from .convert import plain as _plain, workload_hash
from .measure import RpcSettings, build_and_run, configuration, make_builder, make_runner, target_of
from .networks import extract_network_tasks, get_network

_ANCHOR_WORDS = ("conv", "matmul", "dense", "batch", "softmax", "norm", "pool", "mean")
_BATCH = 64  # programs per build-and-run call, committed to the database together


@dataclass
class CollectSettings:
    networks: list[str]
    configs: list[str]
    programs_per_task: int
    tasks_per_network: int = 0  # 0 = all
    evolutionary_fraction: float = 0.2
    seed: int = 0
    # the dataset names each configuration's hardware prefix + configuration: a configuration the bundled data
    # has (local-avx2-2c, measured on an Intel Xeon) measured on another CPU needs a name of its own
    hardware_prefix: str = ""

    def to_json(self) -> dict:
        settings = dict(self.__dict__)
        if not settings["hardware_prefix"]:
            del settings["hardware_prefix"]  # collections from before the option resume as they were
        return settings


@dataclass
class CollectSummary:
    measured: int = 0
    skipped_already_measured: int = 0
    failures: Counter = field(default_factory=Counter)
    seconds: float = 0.0
    measure_seconds: float = 0.0  # the measuring phase only (sampling candidates excluded)
    dataset: str = ""

    @property
    def programs_per_minute(self) -> float:
        """Measured programs (built and run on one configuration) per minute of the measuring phase."""
        return 60.0 * self.measured / self.measure_seconds if self.measure_seconds else 0.0


def _task_priority(name: str) -> tuple[int, str]:
    lowered = name.lower()
    return (0 if any(w in lowered for w in _ANCHOR_WORDS) else 1, name)


def _select_tasks(settings: CollectSettings, out: Path, reference_target) -> list[dict]:
    import tvm
    from tvm_ffi import structural_hash

    tasks: dict[str, dict] = {}
    for network in settings.networks:
        _, extracted = extract_network_tasks(network, reference_target)
        extracted = sorted(extracted, key=lambda t: _task_priority(t.task_name))
        if settings.tasks_per_network:
            extracted = extracted[: settings.tasks_per_network]
        for task in extracted:
            mod = task.dispatched[0]
            key = str(structural_hash(mod))
            if key in tasks:
                tasks[key]["networks"].append(network)
                continue
            name = f"{network}.{task.task_name}"
            tasks[key] = {"name": name, "networks": [network], "weight": int(task.weight), "mod_hash": key}
            atomic_write_text(out / "tasks" / f"{name}.json",
                              json.dumps({"name": name, "mod": tvm.ir.save_json(mod)}))
    return list(tasks.values())


def _load_mod(out: Path, task: dict):
    import tvm

    return tvm.ir.load_json(json.loads((out / "tasks" / f"{task['name']}.json").read_text())["mod"])


def _random_candidates(mod, target, count: int, seed: int) -> list[list]:
    from tvm.s_tir import meta_schedule as ms

    context = ms.TuneContext(mod, target=target, space_generator="post-order-apply",
                             search_strategy=ms.search_strategy.ReplayTrace(max_fail_count=200),
                             rand_state=seed + 1, num_threads=1)
    context.pre_tuning(max_trials=count, num_trials_per_iter=count, design_spaces=context.generate_design_space())
    found = context.generate_measure_candidates() or []
    context.post_tuning()
    return [_plain(candidate.sch.trace.as_json()) for candidate in found]


def _evolutionary_candidates(mod, target, count: int, seed: int, work_dir: Path, builder, runner) -> list[list]:
    """Programs proposed by MetaSchedule's own evolutionary search with its XGBoost model, measured on
    the reference configuration while searching (two rounds, so the second is model-guided)."""
    from tvm.s_tir import meta_schedule as ms

    if count <= 0:
        return []
    strategy = ms.search_strategy.EvolutionarySearch(population_size=256, init_min_unmeasured=64, genetic_num_iters=2)
    database = ms.tir_integration.tune_tir(
        mod, target, str(work_dir), max_trials_global=count, num_trials_per_iter=max(1, count // 2),
        builder=builder, runner=runner, strategy=strategy, seed=seed + 1)
    return [_plain(record.trace.as_json()) for record in database.get_all_tuning_records()]


def _candidates(out: Path, task: dict, settings: CollectSettings, target, builder, runner) -> list[dict]:
    path = out / "candidates" / f"{task['name']}.json"
    if path.is_file():
        return json.loads(path.read_text())
    mod = _load_mod(out, task)
    n_evo = int(round(settings.programs_per_task * settings.evolutionary_fraction))
    seed = settings.seed * 7919 + int(task["mod_hash"]) % 100_003
    random_traces = _random_candidates(mod, target, settings.programs_per_task - n_evo, seed)
    evo_dir = out / "evolutionary" / task["name"]
    evo_traces = _evolutionary_candidates(mod, target, n_evo, seed, evo_dir, builder, runner)
    seen, candidates = set(), []
    for origin, traces in (("random", random_traces), ("evolutionary", evo_traces)):
        for trace in traces:
            text = json.dumps(trace, sort_keys=True)
            if text not in seen:
                seen.add(text)
                candidates.append({"origin": origin, "trace": trace})
    atomic_write_text(path, json.dumps(candidates))
    return candidates


def repair_database_file(path: Path) -> int:
    """Drop lines that are not complete JSON (a write cut short by a kill or a full disk) so that TVM
    can load the database again; returns how many were dropped. The good lines are kept atomically."""
    if not path.is_file():
        return 0
    lines = path.read_bytes().splitlines(keepends=True)
    good = []
    for line in lines:
        try:
            json.loads(line)
            good.append(line if line.endswith(b"\n") else line + b"\n")
        except ValueError:
            continue
    dropped = len(lines) - len(good)
    if dropped:
        write_bytes(path, b"".join(good))
    return dropped


def _measured_traces(database) -> dict[str, set[str]]:
    """The traces already in the database, by workload structural hash (read once per configuration)."""
    done: dict[str, set[str]] = {}
    for record in database.get_all_tuning_records():
        shash = workload_hash(record.workload)
        done.setdefault(shash, set()).add(json.dumps(_plain(record.trace.as_json()), sort_keys=True))
    return done


def _open_database(db_dir: Path, summary: CollectSummary):
    """The configuration's MetaSchedule database, repaired first if a write was cut short. Opened once
    per configuration: TVM parses the whole file on opening, which grows with every task measured."""
    from tvm.s_tir import meta_schedule as ms

    db_dir.mkdir(parents=True, exist_ok=True)
    for name in ("database_workload.json", "database_tuning_record.json"):
        dropped = repair_database_file(db_dir / name)
        if dropped:
            summary.failures[f"corrupt database line dropped on resume ({name})"] += dropped
    return ms.database.JSONDatabase(path_workload=str(db_dir / "database_workload.json"),
                                    path_tuning_record=str(db_dir / "database_tuning_record.json"))


def _measure_task(out: Path, task: dict, candidates: list[dict], config, database,
                  done: dict[str, set[str]], builder, runner, summary: CollectSummary, bar) -> None:
    import tvm
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.schedule import Schedule, Trace

    target = target_of(config)
    db_dir = out / config.name
    mod = _load_mod(out, task)
    workload = database.commit_workload(mod)
    task["shash"] = workload_hash(workload)
    measured = done.get(task["shash"], set())
    todo = [c for c in candidates if json.dumps(c["trace"], sort_keys=True) not in measured]
    summary.skipped_already_measured += len(candidates) - len(todo)
    bar.update(len(candidates) - len(todo))
    args_info = ms.arg_info.ArgInfo.from_prim_func(mod["main"])
    with open(db_dir / "failures.jsonl", "a") as failures:
        for start in range(0, len(todo), _BATCH):
            batch = []
            for candidate in todo[start:start + _BATCH]:
                sch = Schedule(mod)
                Trace.apply_json_to_schedule(candidate["trace"], sch)
                batch.append(sch)
            for sch, result in zip(batch, build_and_run(batch, target, args_info, builder, runner)):
                run_secs = result.run_secs
                if result.error is not None:
                    reason = _failure_reason(result.error)
                    summary.failures[f"{result.stage}: {reason}"] += 1
                    failures.write(json.dumps({"task": task["name"], "stage": result.stage, "reason": reason}) + "\n")
                    failures.flush()
                database.commit_tuning_record(ms.database.TuningRecord(
                    sch.trace, workload, [tvm.tirx.FloatImm("float32", s) for s in run_secs] if run_secs else None,
                    target, args_info))
                summary.measured += 1
                bar.update(1)
            bar.set_postfix(failed=sum(summary.failures.values()))


def _failure_reason(message: str) -> str:
    lines = [line.strip() for line in str(message).splitlines() if line.strip()]
    for line in reversed(lines):
        if "Error" in line or "Timeout" in line or "error" in line:
            return line[:160]
    return (lines[-1] if lines else "unknown")[:160]


def _check_settings(out: Path, settings: CollectSettings) -> dict:
    path = out / "collection.json"
    if path.is_file():
        state = json.loads(path.read_text())
        if state.get("settings") != settings.to_json():
            raise CrosstuneError(f"{out} holds a collection with other settings ({state.get('settings')}); "
                                 "resume it with the same options or choose another --out")
        return state
    return {}


def collect(settings: CollectSettings, out: str | Path, rpc: RpcSettings | None = None, quiet: bool = False,
            import_dataset: bool = True) -> CollectSummary:
    """Measure ``programs_per_task`` programs of every selected task on every configuration (resumable)."""
    require_tvm()
    import tvm

    for network in settings.networks:
        get_network(network)
    configs = [configuration(name) for name in settings.configs]
    if rpc is None:
        for config in configs:
            config.check_supported()  # before any measurement
    if settings.programs_per_task < 2:
        raise CrosstuneError("--programs-per-task must be at least 2")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    state = _check_settings(out, settings)
    reference = max(configs, key=lambda c: (c.num_cores, c.spec.vector_bytes))
    reference_target = target_of(reference)
    if not state:
        state = {
            "settings": settings.to_json(),
            "provenance": {
                "cpu": detect_local().arch, "date": _dt.date.today().isoformat(), "tvm": tvm.__version__,
                "python": platform.python_version(), "command": " ".join(shlex.quote(a) for a in sys.argv),
                "reference_configuration": reference.name,
            },
            "tasks": _select_tasks(settings, out, reference_target),
        }
        atomic_write_text(out / "collection.json", json.dumps(state, indent=1))
    tasks = state["tasks"]
    summary = CollectSummary()
    started = time.perf_counter()
    all_candidates = {}
    builder = make_builder()
    reference_runner = make_runner(reference, rpc)
    for task in tqdm(tasks, desc="sampling candidates", disable=quiet):
        all_candidates[task["name"]] = _candidates(out, task, settings, reference_target, builder, reference_runner)
    total = sum(len(c) for c in all_candidates.values()) * len(configs)
    measuring_started = time.perf_counter()
    with tqdm(total=total, desc="measuring", unit="prog", disable=quiet, smoothing=0.05) as bar:
        for config in configs:
            runner = make_runner(config, rpc)
            database = _open_database(out / config.name, summary)
            done = _measured_traces(database)
            for task in tasks:
                _measure_task(out, task, all_candidates[task["name"]], config, database, done, builder,
                              runner, summary, bar)
    summary.seconds = time.perf_counter() - started
    summary.measure_seconds = time.perf_counter() - measuring_started
    _write_network_map(out, tasks)
    state["last_run"] = {"measured": summary.measured, "seconds": round(summary.seconds, 1),
                         "failures": dict(summary.failures)}
    atomic_write_text(out / "collection.json", json.dumps(state, indent=1))
    if import_dataset:
        summary.dataset = str(import_collection(out, settings.configs, state["provenance"], settings.hardware_prefix))
    return summary


def _write_network_map(out: Path, tasks: list[dict]) -> None:
    mapping = {}
    for task in tasks:
        if task.get("shash"):
            mapping[task_id_of(json.dumps(["ms_workload", task["shash"]], separators=(",", ":")))] = task["networks"]
    atomic_write_text(out / "network_map.json", json.dumps(mapping, indent=1))


def import_collection(out: Path, configs: list[str], provenance: dict, hardware_prefix: str = "") -> Path:
    """Import every configuration's database into ``out/dataset`` (duplicates are skipped), its hardware
    named ``hardware_prefix`` + the configuration's name.

    A configuration already in the dataset keeps the descriptor it was first imported with: a resumed
    collection in a new process measures the machine again, and the import must not refuse it."""
    from dataclasses import replace

    from ..dataset import MANIFEST, read_manifest
    from ..hardware.registry import resolve, spec_from_dict
    from ..importer import import_sources

    dataset = out / "dataset"
    known = read_manifest(dataset).get("hardware", {}) if (dataset / MANIFEST).is_file() else {}
    for config in configs:
        records = out / config / "database_tuning_record.json"
        if records.is_file():  # the database itself, not the failure log beside it
            name = hardware_prefix + config
            spec = (spec_from_dict(known[name], str(dataset / MANIFEST)) if name in known
                    else replace(resolve(config), name=name))
            import_sources([records], name, dataset, hardware_spec=spec, quiet=True, provenance=provenance)
    return dataset
