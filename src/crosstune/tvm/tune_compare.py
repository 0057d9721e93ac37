"""`crosstune tune-compare`: does a pre-trained model make the network fast sooner?

Arms, one after the other on the same tasks: MetaSchedule's XGBoost (the baseline, run for a fixed budget
or until it converges), then a crosstune model pre-trained only on other hardware configurations and
MetaSchedule's random model, each with the baseline's final trial count. The report gives every arm's
best estimated network latency against wall time and trials, its compiled end-to-end latency (checked
against PyTorch), the time it took to reach the baseline's final latency and to come within 5% of it as a
fraction of the baseline's time, the split of its time (build, run, search, cost model) and the machine's
load. Every arm resumes after a kill (see ``rounds``).
"""

from __future__ import annotations

import json
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..atomic import write_text as atomic_write_text
from ..errors import CrosstuneError
from . import require_tvm
from .measure import configuration, make_builder, make_runner, target_of
from .networks import extract_network_tasks, get_network
from .arm_timing import ROUNDS, time_in_fresh_process
from .rounds import DEFAULT_HEAD_START, HEAD_START_OPTIONS, Arm, ArmSettings, SearchSettings, converged, speed_mismatch, speed_probes, this_machine
from .tune import plot_curves

ARMS = ("xgb", "crosstune", "random")
PRETRAIN_ON = ("others", "all")
WITHIN = 0.05  # "within 5% of the baseline's final latency"
# --model xgb: the crosstune arm's head-start options (and seeds) with MetaSchedule's XGBoost instead of a
# pre-trained model, learning from this run's measurements only: what the options give without the model.
# early-stop and online-trees ask the pre-trained model, so they do nothing in this arm
XGB_CONTROL = "xgb"


@dataclass
class CompareSettings:
    network: str
    hardware_config: str
    out: Path
    trials: int | None = None  # the baseline's fixed budget; None with until_converged
    until_converged: bool = False
    max_trials: int = 4000
    chunk_trials: int = 256
    arms: list[str] = field(default_factory=lambda: list(ARMS))
    model: str | None = None  # a pre-trained crosstune model; None: pre-train crossfeat here
    datasets: list[str] = field(default_factory=list)
    # what tune-compare pre-trains crossfeat on: "others", every configuration but the tuned one (zero-shot),
    # or "all", the tuned configuration's records too (measured on whatever CPU made the dataset)
    pretrain_on: str = "others"
    epochs: int = 8
    fine_tune_every: int = 64
    fine_tune_epochs: int = 1
    fine_tune_lr_scale: float = 0.25
    head_start: list[str] = field(default_factory=lambda: list(DEFAULT_HEAD_START))
    first_round_trials: int = 16
    round_trials: int = 64
    tasks: list[str] | None = None  # task names to tune; None: all of the network's
    search: SearchSettings = field(default_factory=SearchSettings)
    # the crosstune arm's own search (None: the baseline's). A pre-trained model may need fewer candidates
    # to rank than a model that learns as it goes; the baseline keeps MetaSchedule's defaults.
    crosstune_search: SearchSettings | None = None
    seed: int = 0
    end_to_end: bool = True
    # write the report from the arms as saved in ``out``, tuning nothing: a run stopped before its end
    # (a session's time ran out) still says where each arm stood
    report_only: bool = False
    # fractions of the baseline's time at which every other arm's network in ``out`` is compiled and timed
    # beside the baseline's final (tune-checkpoints), once the arms are done; empty: none
    checkpoints: list[float] = field(default_factory=list)
    # the crosstune arm's seed programs (seeds.py): a database tuned elsewhere, and how many per task
    seeds_from: str | None = None
    seeds_per_task: int = 16

    def check(self) -> None:
        if (self.trials is None) == (not self.until_converged):
            raise CrosstuneError("give either --trials N or --until-converged")
        if self.trials is not None and self.trials < 1:
            raise CrosstuneError("--trials must be at least 1")
        if self.max_trials < 1 or self.chunk_trials < 1 or self.round_trials < 1 or self.first_round_trials < 1:
            raise CrosstuneError("--max-trials, --chunk-trials, --round-trials and --first-round-trials must be at least 1")
        unknown = [a for a in self.arms if a not in ARMS]
        if unknown or "xgb" not in self.arms:
            raise CrosstuneError(f"--arms: choose from {', '.join(ARMS)}, xgb (the baseline) included")
        bad = [o for o in self.head_start if o not in HEAD_START_OPTIONS]
        if bad:
            raise CrosstuneError(f"--head-start: unknown {', '.join(bad)}; choose from {', '.join(HEAD_START_OPTIONS)} or none")
        if self.pretrain_on not in PRETRAIN_ON:
            raise CrosstuneError(f"--pretrain-on: choose from {', '.join(PRETRAIN_ON)}")
        if self.model and self.pretrain_on != "others":
            raise CrosstuneError("--pretrain-on chooses what tune-compare pre-trains; --model is already trained")
        if self.fine_tune_epochs < 1 or not self.fine_tune_lr_scale > 0:
            raise CrosstuneError("--fine-tune-epochs must be at least 1 and --fine-tune-lr-scale above 0")
        if self.seeds_from is not None:
            from .seeds import read_seed_database

            if "crosstune" not in self.arms:
                raise CrosstuneError("--seeds-from seeds the crosstune arm; add it to --arms")
            if self.seeds_per_task < 1:
                raise CrosstuneError("--seeds-per-task must be at least 1")
            # an absolute path: the arm's saved settings must name the same database when resumed from elsewhere
            seeds_from = Path(self.seeds_from).resolve()
            if seeds_from.is_relative_to(Path(self.out).resolve()):
                # an arm of this run measured those programs on this machine for this configuration: seeding
                # from them would report the target's own tuning as a head start
                raise CrosstuneError(f"--seeds-from {self.seeds_from} is inside this run's --out {self.out}; seed "
                                     "from a database tuned elsewhere")
            if not self.report_only:  # a finished run is reported without its seed database
                read_seed_database(self.seeds_from)  # a bad folder fails here, before any tuning
            self.seeds_from = str(seeds_from)


def crosstune_arm_name(head_start: list[str], search: SearchSettings | None = None) -> str:
    """``crosstune`` with the first four head-start options and the baseline's search; a variant's name says
    what differs (``search``: its own search, else None), so that variants measured into the same --out keep
    their own directories. Named against those four, not against the default (which leaves one out), and
    the later ``light-first-round`` only adds a suffix, so that the arms archived before the default changed
    keep their folders' names."""
    name = "crosstune"
    original = HEAD_START_OPTIONS[:4]
    off = [o for o in original if o not in head_start]
    if len(off) == 1:
        name += f"-without-{off[0]}"  # shorter than listing the three it keeps
    elif off:
        name += "-" + ("+".join(o for o in original if o in head_start) or "none")
    later = [o for o in HEAD_START_OPTIONS[4:] if o in head_start]
    if later:
        name += "-with-" + "+".join(later)
    if search is not None:
        name += f"-search{search.population_size}x{search.genetic_num_iters}"
    return name


def _select_tasks(extracted, names: list[str] | None):
    if not names:
        return list(extracted)
    known = [t.task_name for t in extracted]
    missing = [n for n in names if n not in known]
    if missing:
        raise CrosstuneError(f"--tasks: {', '.join(missing)} not among the network's tasks ({', '.join(known)})")
    return [t for t in extracted if t.task_name in names]


def _pretrained_model(s: CompareSettings, print_fn) -> tuple[str, dict]:
    """The crosstune model's directory and how it was made: --model, or crossfeat pre-trained on the
    dataset's other configurations (or all of them, with --pretrain-on all), kept in --out so that a rerun
    does not train again. Either way the info says whether the tuned configuration was in the training."""
    if s.model == XGB_CONTROL:
        print_fn("crosstune arm with MetaSchedule's XGBoost, no pre-trained model (--model xgb): a control for "
                 "what the head-start options" + (" and seeds" if s.seeds_from else "") + " give by themselves")
        return XGB_CONTROL, {"model": XGB_CONTROL, "pretrained_here": False, "pretrained_on": [], "zero_shot": None}
    if s.model:
        info = {"model": s.model, "pretrained_here": False, "pretrained_on": _hardware_seen(s.model)}
    else:
        info = _pretrain_here(s, print_fn)
    seen = info["pretrained_on"]
    info["zero_shot"] = None if not seen else s.hardware_config not in seen
    print_fn(_zero_shot_line(s.hardware_config, info))
    return info["model"], info


def _hardware_seen(model_dir: str) -> list[str]:
    """The hardware a saved model was trained on, as its config.json records it (none for a model that has
    no hardware, e.g. random); read without loading the weights, which the crosstune arm does itself."""
    from ..models.base import read_config

    return sorted(read_config(model_dir).get("hardware_seen") or {})


def _zero_shot_line(config_name: str, info: dict) -> str:
    seen = info["pretrained_on"]
    if info["model"] == XGB_CONTROL:
        return "crosstune arm with MetaSchedule's XGBoost (--model xgb): no pre-trained model, a control"
    if info["zero_shot"] is None:
        return f"crosstune model {info['model']}: it records no training hardware, so whether it saw {config_name} is not known"
    what = (f"zero-shot for {config_name}" if info["zero_shot"] else
            f"NOT zero-shot: {config_name}'s own records were in its training (a CPU other than the one "
            f"that measured them is still unseen hardware)")
    return f"crosstune model {info['model']}: trained on {', '.join(seen)}; {what}"


def _pretrain_here(s: CompareSettings, print_fn) -> dict:
    model_dir = s.out / "crossfeat-model"
    info_path = s.out / "pretrain.json"
    if model_dir.is_dir() and info_path.is_file():
        info = json.loads(info_path.read_text())
        # an older pretrain.json has no seed: it was trained with the run's seed, which resume checks elsewhere
        # pretrain.json records --pretrain-on since session 37; before, it was always "others"
        used = {"epochs": info.get("epochs"), "seed": info.get("seed"), "pretrain-on": info.get("pretrain_on", "others")}
        asked = {"epochs": s.epochs, "seed": s.seed, "pretrain-on": s.pretrain_on}
        differ = [f"--{name} {value} (it used {used[name]})" for name, value in asked.items()
                  if used[name] is not None and used[name] != value]
        if differ:
            raise CrosstuneError(f"{model_dir} was pre-trained with other settings than {', '.join(differ)}; "
                                 f"give the same options, or another --out")
        print_fn(f"re-using the pre-trained crossfeat in {model_dir} ({info['seconds']:.0f} s to train)")
        return info
    # In a child process, so that the tuning arms start with none of the training's threads and memory:
    # in session 30 the arms that started right after pre-training in this process read the speed probe
    # 1.5x slower than the xgb arm before them (docs/BENCHMARKS.md); the cause was not proven.
    spawn = multiprocessing.get_context("spawn")
    held_out = s.hardware_config if s.pretrain_on == "others" else None
    with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as pool:
        info = pool.submit(pretrain_crossfeat, s.datasets, held_out, s.epochs, s.seed, str(model_dir)).result()
    info["pretrain_on"] = s.pretrain_on
    atomic_write_text(info_path, json.dumps(info, indent=1))
    print_fn(f"pre-trained crossfeat on {', '.join(info['pretrained_on'])} ({info['records']} records) "
             f"in {info['seconds']:.0f} s")
    return info


def pretrain_crossfeat(datasets: list[str], hardware_config: str | None, epochs: int, seed: int, model_dir: str,
                       architecture: dict | None = None) -> dict:
    """Crossfeat trained on every configuration of the dataset but ``hardware_config`` (zero-shot for it; None:
    every configuration), saved to ``model_dir``; what was done, for pretrain.json. ``architecture``: settings
    other than crossfeat's defaults (benchmarks/pretrain_for_tuner.py --arch)."""
    from ..dataset import load_dataset
    from ..experiment import fit_model
    from ..train import TrainConfig

    ds = load_dataset(datasets)
    others = [h for h in ds.hardware_names if h != hardware_config]
    if not others:
        raise CrosstuneError(f"the dataset has no hardware other than {hardware_config} to pre-train on")
    source = ds.select(ds.hardware_mask(others))
    model, seconds = fit_model("crossfeat", source, TrainConfig(epochs=epochs, seed=seed,
                                                                 architecture=dict(architecture or {})))
    model.save(Path(model_dir))  # written as a unit
    return {"model": model_dir, "pretrained_here": True, "pretrained_on": others, "records": len(source),
            "epochs": epochs, "seed": seed, "seconds": seconds, "process": "child",
            **({"architecture": {name: getattr(model.config, name) for name in architecture}} if architecture else {})}


COMPILED_NOTE = (f"every arm compiled in one fresh process after tuning and timed in "
                 f"{ROUNDS} interleaved rounds (median), PyTorch eager beside each (arm_timing.py)")


def first_reach(curve: list[dict], latency_ms: float) -> dict:
    """Wall seconds and trials at which a curve first reaches ``latency_ms`` (NaN if never)."""
    for point in curve:
        if np.isfinite(point["estimated_latency_ms"]) and point["estimated_latency_ms"] <= latency_ms * (1 + 1e-9):
            return {"seconds": point["seconds"], "trials": point["trials"]}
    return {"seconds": float("nan"), "trials": float("nan")}


def seconds_on_tasks(curve: list[dict], names: set[str], until: float = float("inf")) -> float:
    """Tuning seconds an arm spent in rounds of the named tasks up to its ``until``-th second (a round's
    time: from the curve's previous point to its own; the curve's seconds count tuning time only, across
    sessions)."""
    spent, before = 0.0, 0.0
    for point in curve:
        if point["seconds"] > until:
            break
        if point.get("task") in names:
            spent += point["seconds"] - before
        before = point["seconds"]
    return spent


def _fraction(seconds: float, base_seconds: float) -> float:
    return seconds / base_seconds if base_seconds else float("nan")


def _fraction_without(seconds: float, curve: list[dict], names: set[str], base_seconds: float,
                      base_names_seconds: float) -> float:
    """``seconds`` of an arm as a fraction of the baseline's time, the rounds of ``names`` left out of both."""
    if not np.isfinite(seconds) or base_seconds <= base_names_seconds:
        return float("nan")
    return (seconds - seconds_on_tasks(curve, names, seconds)) / (base_seconds - base_names_seconds)


def lowest_measurements(tasks_by_arm: dict[str, list[dict]], names: set[str]) -> dict[str, float]:
    """Each named task's lowest best latency over the arms that measured it. For a task with one possible
    program every arm measured the same program, so the readings differ by timing noise alone, and that
    noise only slows a reading (another process, a preempted thread of the parallel runtime: one such
    reading here came out 190x the others), so the lowest is the least disturbed."""
    lowest: dict[str, float] = {}
    for tasks in tasks_by_arm.values():
        for task in tasks:
            if task["name"] in names and task["best_seconds"] is not None:
                lowest[task["name"]] = min(lowest.get(task["name"], float("inf")), task["best_seconds"])
    return lowest


def shared_latency_curve(curve: list[dict], tasks: list[dict], shared_seconds: dict[str, float]) -> list[dict]:
    """The arm's curve with the named tasks' best latencies replaced by ``shared_seconds``: for tasks whose
    one program every arm measures, the same reading of it in every arm (``lowest_measurements``), so that
    run-to-run noise on the same program (up to 6x on one kernel of this VM, 190x once under load) does not
    move one arm's estimate against the other's.
    A task's own best at each point is replayed from its history, one entry per round named in the curve; a
    task measured only in a round a kill interrupted takes its final best."""
    tasks_by_name = {t["name"]: t for t in tasks}
    rounds_seen: dict[str, int] = {}
    adjusted = []
    for point in curve:
        name = point.get("task")
        if name in shared_seconds:
            rounds_seen[name] = rounds_seen.get(name, 0) + 1
        difference = 0.0
        for shared_name, shared in shared_seconds.items():
            task = tasks_by_name[shared_name]
            seen = rounds_seen.get(shared_name, 0)
            own = task["history"][seen - 1] if seen else task["best_seconds"]
            if own is not None and shared is not None:
                difference += task["weight"] * (own - shared)
        adjusted.append({**point, "estimated_latency_ms": point["estimated_latency_ms"] - 1e3 * difference})
    return adjusted


def _reaching(reached: list[dict], final: float, curve: list[dict], one_program: set[str], base_seconds: float,
              base_one_program: float) -> dict[str, dict]:
    """When ``reached`` (an arm's curve, or it with shared latencies) first comes to the baseline's final
    and within 5% of it: seconds, trials, the fraction of the baseline's time, and that fraction with the
    one-program tasks' rounds left out of both clocks (``curve``: the arm's own, which times its rounds)."""
    out = {}
    for goal, target in (("reach", final), ("within", final * (1 + WITHIN))):
        first = first_reach(reached, target)
        out[goal] = {**first, "fraction": _fraction(first["seconds"], base_seconds),
                     "left_out": _fraction_without(first["seconds"], curve, one_program, base_seconds, base_one_program)}
    return out


def final_estimate(curve: list[dict]) -> float:
    finite = [c["estimated_latency_ms"] for c in curve if np.isfinite(c["estimated_latency_ms"])]
    return min(finite) if finite else float("nan")


def tune_compare(s: CompareSettings, print_fn=print) -> dict:
    require_tvm()
    s.check()
    s.out = Path(s.out)
    if s.report_only:
        saved = [kind for kind, folder in _arm_folders(s).items() if (s.out / folder / "state.json").is_file()]
        if "xgb" not in saved:
            raise CrosstuneError(f"--report-only: {s.out} holds no baseline arm (xgb/state.json) to report on")
        s.arms = saved  # an arm the run never started is left out of the report
    get_network(s.network)
    config = configuration(s.hardware_config)
    config.check_supported()
    s.out.mkdir(parents=True, exist_ok=True)
    model_dir, pretrain = (_pretrained_model(s, print_fn) if "crosstune" in s.arms else (None, {}))
    os.environ["TVM_NUM_THREADS"] = str(config.num_cores)
    from tvm.s_tir import meta_schedule as ms

    target = target_of(config)
    _, extracted = extract_network_tasks(s.network, target)
    selected = _select_tasks(extracted, s.tasks)
    names = [t.task_name for t in selected]
    builder, runner = make_builder(), make_runner(config)

    def arm(name: str, cost_model: str, head_start: list[str], fine_tune_every: int,
            search: SearchSettings) -> Arm:
        seeded = s.seeds_from and name == folders.get("crosstune")
        settings = ArmSettings(name, cost_model, s.network, s.hardware_config, names, s.round_trials,
                               s.first_round_trials, sorted(head_start), fine_tune_every, s.seed, search,
                               **({"fine_tune_epochs": s.fine_tune_epochs, "fine_tune_lr_scale": s.fine_tune_lr_scale}
                                  if fine_tune_every else {}),
                               **({"seeds_from": s.seeds_from, "seeds_per_task": s.seeds_per_task} if seeded else {}))
        def contexts_with(search: SearchSettings):
            strategy = ms.search_strategy.EvolutionarySearch(population_size=search.population_size,
                                                             init_min_unmeasured=search.init_min_unmeasured,
                                                             genetic_num_iters=search.genetic_num_iters,
                                                             eps_greedy=search.eps_greedy)
            # fresh contexts per arm: each clones the search strategy and forks its own random state
            return ms.relax_integration.extracted_tasks_to_tune_contexts(
                selected, str(s.out / name), strategy=strategy, num_threads=config.num_cores, seed=s.seed)

        contexts, weights = contexts_with(search)
        made = Arm(settings, s.out / name, contexts, [float(w) for w in weights], config, print_fn,
                   search_contexts=lambda other: contexts_with(other)[0])
        if made.reused_trials:
            print_fn(f"{name}: re-using {made.reused_trials} trials already measured in {s.out / name}"
                     + (" (finished)" if made.state["done"] else ""))
        return made

    folders = _arm_folders(s)
    plan = [("xgb", "xgb", [], 0, s.search)]
    if "crosstune" in s.arms:
        plan.append((folders["crosstune"], model_dir, s.head_start,
                     s.fine_tune_every, s.crosstune_search or s.search))
    if "random" in s.arms:
        plan.append(("random", "random", [], 0, s.search))
    arms: dict[str, Arm] = {}
    budget = None
    for name, cost_model, head_start, fine_tune_every, search in plan:
        current = arm(name, cost_model, head_start, fine_tune_every, search)
        arms[name] = current
        if s.report_only:
            if not current.state["done"]:
                print_fn(f"{name}: not tuned (--report-only); as saved, {current.state['trials']} trials, "
                         "stopped before its end (--resume continues it)")
        elif name == "xgb":
            limit = s.max_trials if s.until_converged else s.trials
            print_fn(f"xgb: tuning {len(names)} tasks of {s.network} "
                     + (f"until converged (at most {limit} trials)" if s.until_converged else f"for {limit} trials"))
            current.run_rounds(limit, s.chunk_trials, builder, runner, until_converged=s.until_converged)
            budget = current.state["trials"]
        else:
            print_fn(f"{name}: tuning with the baseline's budget of {budget} trials")
            current.run_rounds(budget, s.chunk_trials, builder, runner)
    timing = time_in_fresh_process(
        s.out, {n: a.state["trials"] for n, a in arms.items()},
        {n: len(a.database.get_all_tuning_records()) for n, a in arms.items()}, s.network, s.hardware_config,
        this_machine(), print_fn) if s.end_to_end else {}
    summary = _summary(s, arms, names, pretrain, timing)
    _write_report(s, summary, arms, print_fn)
    if s.checkpoints:
        _time_checkpoints(s, summary, print_fn)
    return summary


def _time_checkpoints(s: CompareSettings, summary: dict, print_fn) -> None:
    """tune-checkpoints on every arm in the folder, as ``tune-checkpoints RUN`` does: an arm added by an earlier
    run with other head-start options (or with --arms xgb) is timed in the same process as this one's, so their
    ratios compare."""
    from .checkpoints import RESULT_FILE, arms_of, format_checkpoints, outputs_match, time_checkpoints

    if not arms_of(s.out):
        print_fn(f"--checkpoints: {s.out} holds no arm besides xgb yet; nothing timed")
        return
    result = time_checkpoints(s.out, None, s.checkpoints, print_fn=print_fn)
    print_fn(format_checkpoints(result))
    summary["checkpoints"] = {"file": str(s.out / RESULT_FILE), "output_matches": outputs_match(result)}


def _arm_folders(s: CompareSettings) -> dict[str, str]:
    """The folder of every arm the settings ask for, by kind, the baseline first."""
    crosstune = (crosstune_arm_name(s.head_start, s.crosstune_search) + ("-xgb-model" if s.model == XGB_CONTROL else "")
                 + ("-seeded" if s.seeds_from else ""))
    folders = {"xgb": "xgb", "crosstune": crosstune, "random": "random"}
    return {kind: folder for kind, folder in folders.items() if kind in s.arms}


def _summary(s: CompareSettings, arms: dict[str, Arm], names: list[str], pretrain: dict, timing: dict) -> dict:
    baseline = arms["xgb"].state
    final = final_estimate(baseline["curve"])
    base_seconds = baseline["tuning_seconds"]
    # every arm tunes the same tasks: their design spaces are generated once, for the baseline's
    one_program = {t["name"] for i, t in enumerate(baseline["tasks"]) if arms["xgb"].one_program(i)}
    base_one_program = seconds_on_tasks(baseline["curve"], one_program)
    shared_seconds = lowest_measurements({name: arm.state["tasks"] for name, arm in arms.items()}, one_program)
    shared_curves = {name: shared_latency_curve(arm.state["curve"], arm.state["tasks"], shared_seconds)
                     for name, arm in arms.items()}
    shared_final = final_estimate(shared_curves["xgb"])
    runs = {}
    for name, current in arms.items():
        st = current.state
        shared = shared_curves[name]
        clocks = (st["curve"], one_program, base_seconds, base_one_program)
        as_measured, as_shared = _reaching(st["curve"], final, *clocks), _reaching(shared, shared_final, *clocks)
        # runs before 2026-12-02 timed each arm at its end, inside the tuning process
        e2e = timing.get(name) or st.get("end_to_end") or {}
        compiled_timing = ("fresh process, arms interleaved" if name in timing
                           else "in the tuning run, at the arm's end" if e2e else None)
        runs[name] = {
            "settings": st["settings"], "trials": st["trials"], "rounds": st["rounds"],
            "trials_reused": current.reused_trials, "tuning_seconds": st["tuning_seconds"],
            "stop_reason": st["stop_reason"], "converged": converged(st["curve"]),
            "best_estimated_latency_ms": final_estimate(st["curve"]),
            "latency_ms": e2e.get("latency_ms", float("nan")),
            "pytorch_latency_ms": e2e.get("pytorch_latency_ms", float("nan")),
            "output_matches": e2e.get("output_matches"), "output_max_abs_error": e2e.get("output_max_abs_error"),
            "compiled_timing": compiled_timing,
            # the whole of those rounds (search, build, run, model calls): what one-program-tasks cuts (rounds.py)
            "one_program_task_seconds": seconds_on_tasks(st["curve"], one_program),
            # the same one program measured again reads differently: the estimate's difference, in ms, is that noise
            "one_program_latency_difference_ms": final_estimate(st["curve"]) - final_estimate(shared),
            "time_split_seconds": current.time_split(), "cost_model_seconds": st["cost_model_seconds"],
            "profile_seconds": st["profile_seconds"], "sessions": st["sessions"],
            "machines": sorted({x["machine"] for x in st["sessions"] if x.get("machine")}),
            "tasks": [{k: t[k] for k in ("name", "weight", "rounds", "trials", "best_seconds", "stopped")}
                      for t in st["tasks"]],
            "curve": st["curve"],
        }
        for goal, key in (("reach", "reach_baseline_final"), ("within", "within_5pct")):
            measured, with_shared = as_measured[goal], as_shared[goal]
            runs[name].update({
                f"seconds_to_{key}": measured["seconds"], f"trials_to_{key}": measured["trials"],
                f"fraction_to_{key}": measured["fraction"],
                # with those rounds left out of both arms: what the model, not the scheduler, gained
                f"fraction_to_{key}_without_one_program_tasks": measured["left_out"],
                # with each one-program task at the lowest of the arms' measurements in every arm (against the
                # baseline's final computed the same way), then with its rounds left out as well
                f"fraction_to_{key}_one_program_shared": with_shared["fraction"],
                f"fraction_to_{key}_one_program_shared_and_left_out": with_shared["left_out"],
            })
    return {
        "network": s.network, "hardware_config": s.hardware_config, "tasks": names,
        "until_converged": s.until_converged, "max_trials": s.max_trials if s.until_converged else s.trials,
        "budget_trials": baseline["trials"], "chunk_trials": s.chunk_trials, "round_trials": s.round_trials,
        "seed": s.seed, "pretrain": pretrain, "baseline_final_estimated_latency_ms": final,
        "baseline_final_one_program_shared_ms": shared_final, "one_program_shared_seconds": shared_seconds,
        "baseline_tuning_seconds": base_seconds,
        "notes": ["fractions are of the baseline's tuning wall time and exclude the crosstune model's "
                  "pre-training (done once, offline, on other hardware); see pretrain.seconds",
                  "estimated latency = Σ task weight × best measured task latency over the tuned tasks",
                  COMPILED_NOTE]
        + ([f"the crosstune arm's first round of each task measured up to {s.seeds_per_task} fastest programs of "
            f"that task in {s.seeds_from}, a database tuned elsewhere: the time that database took is not counted"]
           if s.seeds_from else []),
        "runs": runs,
        "speed_mismatch": speed_mismatch(speed_probes(runs)),
    }


def _fmt(value, spec: str) -> str:
    return "—" if value is None or (isinstance(value, float) and not np.isfinite(value)) else format(value, spec)


def _write_report(s: CompareSettings, summary: dict, arms: dict[str, Arm], print_fn) -> None:
    from ..tables import format_table

    rows = []
    for name, r in summary["runs"].items():
        split = r["time_split_seconds"]
        load = [f"{_fmt(x.get('loadavg_start', [None])[0], '.1f')}→{_fmt(x.get('loadavg_end', [None])[0], '.1f')}"
                for x in r["sessions"]]
        rows.append([name, r["trials"], r["trials_reused"], _fmt(r["tuning_seconds"], ".0f"),
                     _fmt(r["best_estimated_latency_ms"], ".3f"), _fmt(r["latency_ms"], ".3f"),
                     _fmt(r["pytorch_latency_ms"], ".3f"), {True: "yes", False: "NO", None: "—"}[r["output_matches"]],
                     _fmt(r["fraction_to_reach_baseline_final"], ".0%"), _fmt(r["fraction_to_within_5pct"], ".0%"),
                     " / ".join(_fmt(split[k], ".0f") for k in ("build", "run", "search"))
                     + f" / {split['cost_model_predict'] + split['cost_model_update']:.0f}",
                     ", ".join(load)])
    table = format_table(("arm", "trials", "re-used", "tuning s", "best est. ms", "compiled ms", "pytorch ms",
                          "output ok", "reach xgb final", "within 5%", "build/run/search/model s", "load (1-min, per session)"), rows)
    summary["table"] = table
    print_fn(table)
    print_fn(f"xgb's final estimated latency {summary['baseline_final_estimated_latency_ms']:.3f} ms after "
             f"{summary['budget_trials']} trials, {summary['baseline_tuning_seconds']:.0f} s "
             f"({summary['runs']['xgb']['stop_reason'] or 'stopped before its end'}); fractions are of that time")
    if summary["pretrain"]:
        print_fn(_zero_shot_line(s.hardware_config, summary["pretrain"]))
    machines = {name: r["machines"] for name, r in summary["runs"].items() if r["machines"]}  # recorded since 2026-12-02
    if len({tuple(m) for m in machines.values()}) > 1:
        print_fn("the arms were tuned on different machines, so their times do not compare: "
                 + "; ".join(f"{name}: {', '.join(m)}" for name, m in machines.items()))
    elif machines:
        print_fn(f"tuned on {', '.join(next(iter(machines.values())))}")
    if summary["speed_mismatch"]:
        print_fn(summary["speed_mismatch"])
    probes = speed_probes(summary["runs"])
    unprobed = [name for name, values in probes.items() if not values]
    if unprobed and len(unprobed) < len(probes):
        print_fn(f"no speed probe for {', '.join(unprobed)} (tuned before the probe was recorded): whether the "
                 "machine's speed changed between the arms' sessions is not known")
    timings = {r["compiled_timing"] for r in summary["runs"].values() if r["compiled_timing"]}
    if "fresh process, arms interleaved" in timings:
        print_fn(f"compiled ms: {COMPILED_NOTE}, on {this_machine()}")
    if "in the tuning run, at the arm's end" in timings:
        print_fn("compiled ms of an arm whose database is gone: timed in its tuning run at the arm's end (before "
                 "2026-12-02), at that time's load and VM speed; it does not compare with the others")
    for name, r in summary["runs"].items():
        if r["one_program_task_seconds"] > 0:
            how = ("one 1-trial round each: the one-program-tasks option" if "one-program-tasks" in r["settings"]["head_start"]
                   else "a full round's search for one program; the one-program-tasks option asks for 1 trial")
            print_fn(f"{name} spent {r['one_program_task_seconds']:.0f} s "
                     f"({r['one_program_task_seconds'] / max(r['tuning_seconds'], 1e-9):.0%}) on rounds of tasks with "
                     f"one possible program ({how})")
        if name != "xgb":
            print_fn(f"{name}, those rounds left out of both arms: reaches xgb's final in "
                     f"{_fmt(r['fraction_to_reach_baseline_final_without_one_program_tasks'], '.0%')} of xgb's time, "
                     f"within 5% in {_fmt(r['fraction_to_within_5pct_without_one_program_tasks'], '.0%')}")
            print_fn(f"{name}, the one-program tasks' latencies set in every arm to the lowest of the arms' "
                     f"measurements of the same programs (its own differ by "
                     f"{_fmt(r['one_program_latency_difference_ms'], '+.3f')} ms in the estimate, xgb's by "
                     f"{_fmt(summary['runs']['xgb']['one_program_latency_difference_ms'], '+.3f')} ms: measurement "
                     f"noise; xgb's final then {_fmt(summary['baseline_final_one_program_shared_ms'], '.3f')} ms): "
                     f"reaches it in "
                     f"{_fmt(r['fraction_to_reach_baseline_final_one_program_shared'], '.0%')}, within 5% in "
                     f"{_fmt(r['fraction_to_within_5pct_one_program_shared'], '.0%')}; with their rounds left out too, "
                     f"{_fmt(r['fraction_to_reach_baseline_final_one_program_shared_and_left_out'], '.0%')} and "
                     f"{_fmt(r['fraction_to_within_5pct_one_program_shared_and_left_out'], '.0%')}")
    atomic_write_text(s.out / "tune-compare.json", json.dumps(summary, indent=1, default=float))
    final = summary["baseline_final_estimated_latency_ms"]
    unfinished = [f"{name} at {r['trials']}" for name, r in summary["runs"].items() if r["stop_reason"] is None]
    plot_curves({name: r["curve"] for name, r in summary["runs"].items()}, s.out / "tune-compare-curve.png",
                f"{s.network} on {s.hardware_config}, a budget of {summary['budget_trials']} trials per arm"
                + (f" (stopped before it: {', '.join(unfinished)})" if unfinished else ""),
                {"xgb final": final, "xgb final + 5%": final * (1 + WITHIN)})


__all__ = ["ARMS", "CompareSettings", "crosstune_arm_name", "first_reach", "seconds_on_tasks", "shared_latency_curve",
           "lowest_measurements", "tune_compare"]
