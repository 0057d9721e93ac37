"""Seed programs: a task's fastest programs from a MetaSchedule database tuned on other hardware, replayed on
this target and measured as the task's first round.

A user who tuned a network on one machine (or one set of compiler flags) and now tunes it on another has, in
the old database, programs that were fast on similar hardware. Measuring the old database's fastest few
programs of each task costs a fraction of a second each, against 12-15 s of search for a model-guided round
on this project's 2-core CPU; MetaSchedule's evolutionary search then starts its later rounds from the best
measured programs (its ``init_measured_ratio``), so the seeds also steer where the search looks. The ranking
copied is the other device's measured order, not the cost model's: a transfer of programs, not of a model.

A seed database is a MetaSchedule JSON database: a folder with ``database_workload.json`` and
``database_tuning_record.json`` (what ``crosstune tune``, ``tune-compare`` arms and ``collect`` write, and
what ``ms.tune_tir`` / ``ms.relax_integration.tune_relax`` write in their work_dir). Tasks are matched by the
structural hash of their workload, which is the same for one network's task under different LLVM targets.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import CrosstuneError

WORKLOAD_FILE, RECORD_FILE = "database_workload.json", "database_tuning_record.json"


@dataclass
class SeedDatabase:
    """The programs of a database that ran, fastest first, by workload structural hash."""
    path: Path
    by_workload: dict[str, list[tuple[float, list]]]  # shash -> [(mean run seconds, trace JSON)]
    skipped_lines: int = 0  # unreadable lines (a write cut short), counted and reported
    failed_programs: int = 0  # records without run seconds: they never ran, so never seed

    def traces(self, shash: str, count: int) -> list[list]:
        """The ``count`` fastest distinct programs of the workload (none when the database lacks it)."""
        seen, chosen = set(), []
        if count < 1:
            return chosen
        for _, trace in self.by_workload.get(shash, []):
            text = json.dumps(trace, sort_keys=True)
            if text not in seen:
                seen.add(text)
                chosen.append(trace)
            if len(chosen) == count:
                break
        return chosen

    def summary(self) -> str:
        programs = sum(len(v) for v in self.by_workload.values())
        text = f"{programs} programs of {len(self.by_workload)} workloads from {self.path}"
        if self.failed_programs:
            text += f"; {self.failed_programs} records that never ran left out"
        if self.skipped_lines:
            text += f"; {self.skipped_lines} unreadable lines skipped"
        return text


def read_seed_database(path: str | Path) -> SeedDatabase:
    """Read a MetaSchedule JSON database folder without TVM (plain JSON lines): workloads are
    ``[shash, encoded module]``, records ``[workload index, [trace, run seconds, target, args]]``."""
    folder = Path(path)
    if folder.is_file() and folder.name in (WORKLOAD_FILE, RECORD_FILE):
        folder = folder.parent
    missing = [name for name in (WORKLOAD_FILE, RECORD_FILE) if not (folder / name).is_file()]
    if missing:
        raise CrosstuneError(f"--seeds-from {path}: not a MetaSchedule database folder (no {' or '.join(missing)} "
                             f"there); give the folder a tuning run wrote, e.g. a tune-compare arm's")
    try:
        workload_lines = (folder / WORKLOAD_FILE).read_text().splitlines()
        record_lines = (folder / RECORD_FILE).read_text().splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise CrosstuneError(f"--seeds-from {path}: cannot read the database ({err})") from None
    skipped = 0
    shashes = []
    for line in workload_lines:
        try:
            shashes.append(str(json.loads(line)[0]))
        except (ValueError, IndexError, TypeError):
            shashes.append(None)  # keep the indices of the lines after it
            skipped += 1
    by_workload: dict[str, list[tuple[float, list]]] = {}
    failed = 0
    for line in record_lines:
        try:
            index, (trace, run_secs, *_rest) = json.loads(line)
            shash = shashes[index]
            seconds = [float(s) for s in run_secs] if run_secs else []
        except (ValueError, IndexError, TypeError):
            skipped += 1
            continue
        if shash is None:
            skipped += 1
        elif not seconds or not all(math.isfinite(s) and s > 0 for s in seconds):
            failed += 1
        else:
            by_workload.setdefault(shash, []).append((sum(seconds) / len(seconds), trace))
    if not by_workload:
        raise CrosstuneError(f"--seeds-from {path}: the database holds no program that ran")
    for programs in by_workload.values():
        programs.sort(key=lambda p: p[0])
    return SeedDatabase(folder, by_workload, skipped, failed)


@dataclass
class SeedResult:
    """What one task's seed round did: each replayed program's mean run seconds (None: failed to build or
    run) and the seeds that could not be replayed on this task's module."""
    seconds: list[float | None] = field(default_factory=list)
    candidates: list = field(default_factory=list)  # the replayed schedules, in order
    not_replayed: int = 0


def replay(traces: list[list], mod) -> tuple[list, int]:
    """The traces applied to fresh schedules of ``mod``, and how many could not be (a trace whose
    instructions do not fit the module raises in TVM)."""
    from tvm.s_tir.schedule import Schedule, Trace

    schedules, failed = [], 0
    for trace in traces:
        sch = Schedule(mod)
        try:
            Trace.apply_json_to_schedule(trace, sch)
        except Exception:  # noqa: BLE001 - TVM raises its own error types for a trace that does not apply
            failed += 1
            continue
        schedules.append(sch)
    return schedules, failed


def measure_seeds(traces: list[list], context, builder, runner, database) -> SeedResult:
    """Replay the traces on the task's module, build and run them for its target and commit every measured
    program to ``database`` (as MetaSchedule's tuner does, failures included with no run seconds)."""
    import tvm
    from tvm.s_tir import meta_schedule as ms

    from .measure import build_and_run

    schedules, not_replayed = replay(traces, context.mod)
    result = SeedResult(not_replayed=not_replayed)
    if not schedules:
        return result
    args_info = ms.arg_info.ArgInfo.from_prim_func(context.mod["main"])
    workload = database.commit_workload(context.mod)
    for sch, measured in zip(schedules, build_and_run(schedules, context.target, args_info, builder, runner)):
        secs = measured.run_secs
        database.commit_tuning_record(ms.database.TuningRecord(
            sch.trace, workload, [tvm.tirx.FloatImm("float32", s) for s in secs] if secs else None,
            context.target, args_info))
        result.seconds.append(sum(secs) / len(secs) if secs else None)
        result.candidates.append(ms.search_strategy.MeasureCandidate(sch, args_info))
    return result
