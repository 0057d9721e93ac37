"""Compiled checkpoints of a tune-compare run: each arm's network as it stood at fractions of the baseline's
tuning time, compiled and timed beside the baseline's final network, in one process, rounds interleaved.

tune-compare's fractions come from the estimated latency, Σ weight × each task's best single measurement.
Two things make that estimate noisy at the 5% the goals ask about (docs/BENCHMARKS.md, session 40): the same
program of a one-program task read from 0.5x to 2.5x of itself in arms of one session on this VM, and a task's
best is the lowest of its noisy readings, so the arm with more measurements of a task (the baseline, by the
end) gets the luckier minimum. A compiled network run hundreds of times has neither: its programs are the
ones each arm had chosen by then, timed together. The ratio checkpoint / baseline pairs each timing with one
of the baseline taken right before or after it, and ``xgb-again``, the baseline's own database compiled a second time, shows
the ratio that timing noise alone gives.

    crosstune tune-checkpoints RUN --at 0.15,0.25
    crosstune tune-checkpoints RUN --at-trials 800,1000   # every arm after the same number of measurements

An arm's seconds depend on the machine's speed while it tuned: on this VM two arms run one after the other drew
machines 6-56% apart (speed probes, session 42), so by the same wall time the slower one had measured fewer
programs. A cut at the same trial count compares what the arms chose from as many measurements.

An arm's database file lists its measurements in the order they were made (one record per trial, failed ones
included), so its first N records are the database as it stood when the arm had measured N programs.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..atomic import staged_directory
from ..atomic import write_text as atomic_write_text
from ..errors import CrosstuneError
from .compiled import DATABASE_FILES

BASELINE = "xgb"
CONTROL = "xgb-again"  # the baseline's final database compiled twice: the noise floor of every ratio
FOLDER = "checkpoints"
RESULT_FILE = "tune-checkpoints.json"
DEFAULT_FRACTIONS = (0.15, 0.25)  # issue 13's goals: within 5% by 15% of the baseline's time, its final by 25%
ROUNDS = 10
WITHIN = 0.05


def trials_at(curve: list[dict], seconds: float) -> int:
    """Trials an arm had measured ``seconds`` into its tuning: those of the last round that ended by then."""
    done = [point["trials"] for point in curve if point["seconds"] <= seconds]
    return done[-1] if done else 0


def tasks_measured_at(curve: list[dict], seconds: float) -> int:
    """How many tasks had had a round by then (the rest compile with TVM's untuned schedules)."""
    return len({point["task"] for point in curve if point["seconds"] <= seconds and point.get("task")})


def write_prefix_database(arm_dir: Path, trials: int, out_dir: Path) -> int:
    """``out_dir`` as a MetaSchedule JSON database holding the arm's first ``trials`` tuning records (and every
    workload); written as a unit. Returns how many records it holds (fewer if the database holds fewer)."""
    kept = 0
    with staged_directory(out_dir) as staging:
        (staging / DATABASE_FILES[0]).write_bytes((arm_dir / DATABASE_FILES[0]).read_bytes())
        with open(arm_dir / DATABASE_FILES[1], "rb") as source, open(staging / DATABASE_FILES[1], "wb") as sink:
            for line in source:
                if kept == trials:
                    break
                if line.strip():
                    sink.write(line if line.endswith(b"\n") else line + b"\n")
                    kept += 1
    return kept


@dataclass
class Checkpoint:
    arm: str
    fraction: float  # of the baseline's tuning time
    seconds: float
    trials: int
    tasks_measured: int
    estimated_latency_ms: float  # the arm's curve at that time (NaN before every task had a latency)
    at_trials: int | None = None  # a cut by trial count (--at-trials) instead of by time

    @property
    def folder(self) -> str:
        if self.at_trials is not None:
            return f"{FOLDER}/{self.arm}-at-{self.at_trials}-trials"
        return f"{FOLDER}/{self.arm}-at-{100 * self.fraction:g}pct"


def plan(states: dict[str, dict], fractions: list[float], base_seconds: float) -> list[Checkpoint]:
    """A checkpoint per arm (``states``: arm -> its state.json) and fraction of the baseline's seconds."""
    checkpoints = []
    for arm, state in states.items():
        curve = state["curve"]
        for fraction in fractions:
            seconds = fraction * base_seconds
            estimates = [p["estimated_latency_ms"] for p in curve if p["seconds"] <= seconds]
            checkpoints.append(Checkpoint(arm, fraction, seconds, trials_at(curve, seconds),
                                          tasks_measured_at(curve, seconds),
                                          float(estimates[-1]) if estimates else float("nan")))
    return checkpoints


def plan_by_trials(states: dict[str, dict], counts: list[int], base_seconds: float) -> list[Checkpoint]:
    """A checkpoint per arm and trial count: the arm's first N records. Its seconds are those of the round that
    measured the Nth trial (the cut lies inside that round, so they are an upper bound), its tasks those whose
    first round had begun; its estimate the curve's last at or before the cut. Past the arm's end: its end."""
    checkpoints = []
    for arm, state in states.items():
        for count in counts:
            trials = min(count, state["trials"])
            rounds, start = [], 0  # the rounds that measured any of the first `trials` records
            for point in state["curve"]:
                if start >= trials:
                    break
                rounds.append(point)
                start = point["trials"]
            seconds = rounds[-1]["seconds"] if rounds else 0.0
            estimates = [p["estimated_latency_ms"] for p in rounds if p["trials"] <= trials]
            checkpoints.append(Checkpoint(arm, seconds / base_seconds, seconds, trials,
                                          len({p.get("task") for p in rounds} - {None}),
                                          float(estimates[-1]) if estimates else float("nan"), at_trials=count))
    return checkpoints


def arms_of(run: Path) -> list[str]:
    return sorted(p.parent.name for p in run.glob("*/state.json") if p.parent.name != BASELINE)


def _machines(state: dict) -> set[str]:
    return {x["machine"] for x in state.get("sessions", []) if x.get("machine")}


def check_run(run: Path, arms: list[str] | None) -> tuple[dict, list[str]]:
    """The baseline's state and the arms to checkpoint; a clear error for a folder that is not a tuning run."""
    if not (run / BASELINE / "state.json").is_file():
        raise CrosstuneError(f"{run}: no baseline arm ({BASELINE}/state.json); give a tune-compare --out folder")
    arms = arms or arms_of(run)
    if not arms:
        raise CrosstuneError(f"{run}: no arm besides {BASELINE} to checkpoint")
    missing = [a for a in arms if not (run / a / "state.json").is_file()]
    if missing:
        raise CrosstuneError(f"{run}: no arm {', '.join(missing)} (its arms: {', '.join(arms_of(run)) or 'none'})")
    lost = [a for a in [BASELINE, *arms] if not all((run / a / f).is_file() for f in DATABASE_FILES)]
    if lost:
        raise CrosstuneError(f"{run}: no tuning database for {', '.join(lost)}")
    return json.loads((run / BASELINE / "state.json").read_text()), arms


def _ratio_summary(ratios: list[float]) -> dict:
    return {"ratio_rounds": ratios, "ratio_median": float(np.median(ratios)), "ratio_min": float(min(ratios)),
            "ratio_max": float(max(ratios))}


def verdict(ratio: float, goal: float, resolution: float) -> str:
    """``yes`` when the median ratio is at or below ``goal`` by more than the timing's ``resolution`` (how far
    the control's median ratio, the same network twice, is from 1), ``no`` when above it by more, else
    ``unclear``: a difference the timing cannot tell from noise."""
    if not np.isfinite(ratio):
        return "no"  # not compiled: tasks still untuned
    return "yes" if ratio <= goal - resolution else "no" if ratio > goal + resolution else "unclear"


def _add_verdicts(entry: dict, resolution: float) -> dict:
    return {**entry, "reaches_baseline_final": verdict(entry["ratio_median"], 1.0, resolution),
            "within_5pct": verdict(entry["ratio_median"], 1.0 + WITHIN, resolution)}


def paired_timings(compiled: dict, baseline: str, rounds: int, print_fn=print) -> tuple[list[float], dict]:
    """The baseline's timings, and per other network its timings and its ratios to a baseline timing taken
    right beside it (each pair's order alternates, the networks' order rotates by round): on this VM the
    baseline's own median moved from 23 to 44 ms within minutes, which a ratio across a whole round of
    networks carries into every figure; a pair a second apart shares the machine's speed."""
    def once(name: str) -> float:  # median of 3 repeats of at least 100 ms
        return float(np.median(compiled[name].time_tvm(1, repeat=3)))

    others = [name for name in compiled if name != baseline]
    base_ms: list[float] = []
    timed = {name: {"latency_ms_rounds": [], "ratio_rounds": []} for name in others}
    for r in range(rounds):
        for i, name in enumerate(others[r % len(others):] + others[:r % len(others)]):
            if (r + i) % 2:
                mine, base = once(name), once(baseline)
            else:
                base, mine = once(baseline), once(name)
            base_ms.append(base)
            timed[name]["latency_ms_rounds"].append(mine)
            timed[name]["ratio_rounds"].append(mine / base)
        print_fn(f"round {r + 1}/{rounds}: {baseline} median so far {np.median(base_ms):.2f} ms")
    return base_ms, timed


def time_checkpoints(run: Path, arms: list[str] | None = None, fractions=DEFAULT_FRACTIONS, rounds: int = ROUNDS,
                     print_fn=print, trial_counts=()) -> dict:
    """Compile and time every arm at each fraction of the baseline's time and after each of ``trial_counts``
    trials, each beside the baseline's final network, and the baseline's control; writes
    ``run/tune-checkpoints.json`` and returns what it holds.
    A checkpoint before every task had a round is not compiled: its untuned tasks would run TVM's default
    schedules (ResNet-18 then took 0.8-0.9 s instead of 27 ms), so it is short of the goal whatever its time."""
    from .compiled import compile_databases
    from .rounds import speed_mismatch, speed_probes, this_machine

    run = Path(run)
    baseline, arms = check_run(run, arms)
    settings = baseline["settings"]
    here = this_machine()
    states = {arm: json.loads((run / arm / "state.json").read_text()) for arm in arms}
    tuned_on = set().union(_machines(baseline), *(_machines(state) for state in states.values()))
    notes = []
    if not baseline["done"]:
        notes.append(f"the baseline stopped before its end ({baseline['trials']} trials): its final is not final")
    if tuned_on - {here}:
        notes.append(f"tuned on {', '.join(sorted(tuned_on))} and timed on {here}: a program's speed can differ "
                     "between CPUs, so these are the programs' times here")
    mismatch = speed_mismatch(speed_probes({BASELINE: baseline, **states}))
    if mismatch:
        notes.append(mismatch)
    checkpoints = (plan(states, list(fractions), baseline["tuning_seconds"])
                   + plan_by_trials(states, list(trial_counts), baseline["tuning_seconds"]))
    whole = [cp for cp in checkpoints if cp.tasks_measured == len(baseline["tasks"])]
    for cp in whole:
        kept = write_prefix_database(run / cp.arm, cp.trials, run / cp.folder)
        if kept < cp.trials:
            raise CrosstuneError(f"{run / cp.arm}: its database holds {kept} records, fewer than the {cp.trials} "
                                 "trials its state counts by then; it cannot be cut at that time")
    control = f"{FOLDER}/{CONTROL}"
    write_prefix_database(run / BASELINE, baseline["trials"], run / control)
    print_fn(f"compiling {settings['network']} {len(whole) + 2} times (the baseline's final, its control, "
             f"{len(whole)} checkpoints; {len(checkpoints) - len(whole)} more came before every task had a round) "
             f"and timing each beside the baseline in {rounds} rounds")
    load = list(os.getloadavg())
    try:
        compiled = compile_databases(run, [BASELINE, control, *(cp.folder for cp in whole)], settings["network"],
                                     settings["hardware_config"], print_fn)
        base_ms, timed = paired_timings(compiled, BASELINE, rounds, print_fn)
    except CrosstuneError:
        raise
    except Exception as err:  # noqa: BLE001 - TVM's errors have no common type; the run's files stay as they were
        raise CrosstuneError(f"compiling or timing the checkpoints failed: {str(err).splitlines()[0] if str(err) else err!r}") from None

    def entry(folder: str) -> dict:
        t = timed[folder]
        return {"latency_ms": float(np.median(t["latency_ms_rounds"])), "latency_ms_rounds": t["latency_ms_rounds"],
                **compiled[folder].check, **_ratio_summary(t["ratio_rounds"])}

    untuned = {"latency_ms": float("nan"), "output_matches": None, "ratio_median": float("nan")}
    control_entry = entry(control)
    resolution = abs(control_entry["ratio_median"] - 1.0)
    result = {
        "network": settings["network"], "hardware_config": settings["hardware_config"], "timed_on": here,
        "tuned_on": sorted(tuned_on), "rounds": rounds, "loadavg_start": load, "loadavg_end": list(os.getloadavg()),
        "baseline": {"trials": baseline["trials"], "tuning_seconds": baseline["tuning_seconds"],
                     "latency_ms": float(np.median(base_ms)), "latency_ms_timings": base_ms,
                     **compiled[BASELINE].check},
        "resolution": resolution,
        "control": _add_verdicts(control_entry, resolution),
        "checkpoints": [{"arm": cp.arm, "fraction": cp.fraction, "seconds": cp.seconds, "trials": cp.trials,
                         "at_trials": cp.at_trials,
                         "tasks_measured": cp.tasks_measured, "tasks": len(baseline["tasks"]),
                         "estimated_latency_ms": cp.estimated_latency_ms,
                         **_add_verdicts(entry(cp.folder) if cp in whole else untuned, resolution)}
                        for cp in checkpoints],
        "notes": notes + ["ratio = the checkpoint's compiled latency / the baseline's final compiled latency, timed "
                          "one right after the other, in alternating order; reaches / within 5% are read from the "
                          f"median ratio; {CONTROL} is the baseline's final database compiled again: its ratios are "
                          f"timing noise, and a median ratio within {resolution:.3f} (its median's distance from 1) "
                          "of a goal is unclear; a checkpoint before every task had a round is not compiled (short of the "
                          "goal: its untuned tasks would run TVM's default schedules)"],
    }
    atomic_write_text(run / RESULT_FILE, json.dumps(result, indent=1, default=float))
    return result


def outputs_match(result: dict) -> bool:
    """Whether the baseline's and every compiled checkpoint's output matched PyTorch's (a checkpoint too early
    to compile has none to check)."""
    return bool(result["baseline"]["output_matches"]) and all(
        c["output_matches"] is not False for c in result["checkpoints"])


def saved_checkpoints(run: Path) -> dict:
    """``run/tune-checkpoints.json`` as written, its verdicts recomputed from the ratios (files of the first
    version, 2026-12-07, held yes/no without the control's resolution)."""
    path = Path(run) / RESULT_FILE
    if not path.is_file():
        raise CrosstuneError(f"{run}: no {RESULT_FILE}; run crosstune tune-checkpoints {run} first")
    result = json.loads(path.read_text())
    resolution = abs(result["control"]["ratio_median"] - 1.0)
    result["resolution"] = resolution
    result["control"] = _add_verdicts(result["control"], resolution)
    result["checkpoints"] = [_add_verdicts(cp, resolution) for cp in result["checkpoints"]]
    return result


def format_checkpoints(result: dict) -> str:
    from ..tables import format_table

    def ratio(r: dict) -> str:
        return f"{r['ratio_median']:.3f} ({r['ratio_min']:.3f}-{r['ratio_max']:.3f})"

    yes = {True: "yes", False: "NO"}
    base, control = result["baseline"], result["control"]
    rows = [[BASELINE + " final", base["trials"], f"{base['tuning_seconds']:.0f}", "—", f"{base['latency_ms']:.3f}",
             "1", "—", "—", yes[base["output_matches"]]],
            [CONTROL + " (control)", base["trials"], f"{base['tuning_seconds']:.0f}", "—",
             f"{control['latency_ms']:.3f}", ratio(control), control["reaches_baseline_final"],
             control["within_5pct"], yes[control["output_matches"]]]]
    for cp in result["checkpoints"]:
        compiled = cp["output_matches"] is not None
        when = f"at {100 * cp['fraction']:g}%"
        if cp.get("at_trials") is not None:  # a count past the arm's end cuts at its end
            count = cp["at_trials"] if cp["trials"] == cp["at_trials"] else f"{cp['trials']} (its end, not {cp['at_trials']})"
            when = f"after {count} trials ({100 * cp['fraction']:.1f}%)"
        rows.append([f"{cp['arm']} {when}", cp["trials"], f"{cp['seconds']:.0f}",
                     f"{cp['tasks_measured']}/{cp['tasks']}", f"{cp['latency_ms']:.3f}" if compiled else "not compiled",
                     ratio(cp) if compiled else "—", cp["reaches_baseline_final"], cp["within_5pct"],
                     yes[cp["output_matches"]] if compiled else "—"])
    table = format_table(("network as tuned by", "trials", "tuning s", "tasks tuned", "compiled ms",
                          "ratio to xgb final (min-max)", "reaches", "within 5%", "output ok"), rows)
    return "\n".join([table, *(f"note: {n}" for n in result["notes"])])


__all__ = ["DEFAULT_FRACTIONS", "RESULT_FILE", "format_checkpoints", "outputs_match", "saved_checkpoints",
           "time_checkpoints", "trials_at", "verdict", "write_prefix_database"]
