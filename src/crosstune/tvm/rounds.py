"""One arm of `crosstune tune-compare`: resumable, round-by-round MetaSchedule tuning of a network's tasks.

A round is one ``ms.tune_tasks`` call on one task (one search-and-measure iteration of
``round_trials`` programs); the arm chooses the next task itself, so that its choice can carry over
a restart and so that a pre-trained model can change it (the "head start" options). Everything a
restart needs is on disk under the arm's directory::

    state.json                     tuning state (rounds per task, best-latency history, curve, timers),
                                   rewritten atomically after every round
    database_workload.json         MetaSchedule's JSON database: every measured program, appended as
    database_tuning_record.json    measured (a line cut short by a kill is dropped on restart)
    xgb-model.tar / tuned-model/   the cost model's learned state, saved after every chunk

The database is the source of truth for what was measured: a kill in the middle of a round loses the
round's search, never its measurements, and a restart counts them as re-used trials.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from .. import stopping
from ..atomic import write_text as atomic_write_text
from ..errors import CrosstuneError
from .collect import repair_database_file
from .convert import workload_hash

HEAD_START_OPTIONS = ("small-first-round", "one-program-tasks", "weighted-rounds", "early-stop", "light-first-round",
                      "online-trees", "light-search", "explore-on-stall", "lean-first-pass", "trimmed-first-round")
# The default leaves small-first-round out: on ResNet-18 (local-avx512-2c) its 16-program first rounds gave a
# first estimate 105% above XGBoost's final and reached within 5% of it after 1,068 trials; with full
# 64-program first rounds the pre-trained model's first estimate was 12% above, and the arm beat XGBoost's
# final on the tunable tasks by 5.8%. light-first-round keeps 16-program first rounds only for tasks under 2%
# of the FLOPs: the first estimate came 121-166 s sooner and within 5% of XGBoost's final at 14.4% (ResNet-18)
# and 14.9% (MobileNet-V2) of its time, against 19.0-20.7% and 18.9% (docs/BENCHMARKS.md, sessions 26-27).
# Re-measured once the search used the model's ranking (session 38, MobileNet-V2, Zen 4): small-first-round's
# first pass ended at 10.8% of XGBoost's time instead of 15.6%, 33% above XGBoost's final on the tunable tasks
# instead of 18%, and both came within 5% of it on those tasks at 37% of its time: no gain, so it stays off.
DEFAULT_HEAD_START = ("one-program-tasks", "weighted-rounds", "early-stop", "light-first-round")
GRADIENT_ALPHA, GRADIENT_WINDOW = 0.2, 3  # MetaSchedule's gradient task scheduler defaults
STALL_FLOOR = 0.02  # weighted-rounds: the gain a task that stalled once is still credited with
EARLY_STOP_GAIN = 0.01  # a task whose last round gained < 1% ...
EARLY_STOP_MIN_ROUNDS = 2  # ... after at least this many rounds, and whose model sees nothing better, stops
LIGHT_SHARE = 0.02  # light-first-round: a task under 2% of the tuned tasks' weighted FLOPs is light


def exhaustion_stop(measured: int, size: int, any_latency: bool, one_program: bool) -> str | None:
    """Why a task stops after a round that asked for ``size`` programs and got ``measured`` (``any_latency``:
    at least one of them ran), or None to go on. A search that found at most half the new programs asked
    for has (nearly) exhausted the space: another round would spend a minute of search to re-measure the
    same few programs (a task with one possible schedule, e.g. a fused elementwise op, got a round again
    and again). MetaSchedule hands failed builds and runs to the callback too, so ``measured`` counts
    what the search proposed, not what ran."""
    if measured and one_program:
        return "its one program is measured" if any_latency else "its one program failed to build or run"
    if measured <= size // 2:
        if measured and not any_latency:
            return "search space exhausted (every program of its last round failed to build or run)"
        return "search space exhausted"
    return None


@dataclass
class SearchSettings:
    """MetaSchedule's EvolutionarySearch settings (its defaults; tests shrink them)."""
    population_size: int = 512
    genetic_num_iters: int = 4
    init_min_unmeasured: int = 50
    eps_greedy: float = 0.05  # the share of a round's programs drawn at random instead of by the model's ranking


# light-search: a round's search costs about the same whatever it measures (session 31, MobileNet-V2: 16.5 s
# for a 16-program first round, 18.1 s for a 64-program one; 6.1 s for a task with one possible program,
# most of it sampling a 512-program population of a space that holds one). With a pre-trained model ranking
# the candidates, a light task's first round searches a smaller population, and a one-program task's round
# samples a handful and stops at the first unmeasured one.
ONE_PROGRAM_SEARCH = SearchSettings(population_size=4, genetic_num_iters=0, init_min_unmeasured=1)


def _search_key(search: SearchSettings) -> str:
    return f"{search.population_size}x{search.genetic_num_iters}/{search.init_min_unmeasured}/{search.eps_greedy}"


# lean-first-pass: every task's first round, not only a light task's, searches half the arm's population and
# iterations. The first pass decides when a network can first be compiled with every task tuned, and a round's
# search costs about the same whatever it measures (12-15 s of a 64-program round on the Zen 4), so on
# MobileNet-V2 the first pass ended at 15.4-15.6% of XGBoost's time, just past the 15% goal. Off by default: in
# its two runs (session 40) the first pass ended at 13.4% and 14.0%, but the network compiled at 15% was 6.1% and
# 10.0% slower than XGBoost's final (tune-checkpoints), against the default's 2.4-5.7% once its first pass was over.


# trimmed-first-round: a heavy task's first round measures the model's top three quarters of a round (48 of 64)
# instead of a full round. On MobileNet-V2 (Zen 4) a measured program cost 0.19-0.26 s to build and run, and
# its 17 heavy first rounds were 302 of the 434-452 s first pass (session 38). The arms' saved first rounds
# said what a shorter one gives up: the best of a round's first 48 programs (the model's ranking, as
# measured) was on the weighted network 0.3-1.1% above the best of all 64 on MobileNet-V2 but 0.0-9.6% on
# ResNet-18 (benchmarks/first_round_depth.py, docs/BENCHMARKS.md), about what 48 drawn at random would give.
# Off by default: one MobileNet-V2 run beside the default (session 41) ended its first pass 15 s sooner and
# compiled 5.9% / 7.3% slower than XGBoost's final at 20% / 25% of its time (the default: 8.8% / 10.6%),
# inside the noise of timing a checkpoint twice.
TRIMMED_SHARE = 0.75


def light_first_search(search: SearchSettings) -> SearchSettings:
    """Half the arm's search for a light task's first round (MetaSchedule's 512 x 4: 256 x 2)."""
    population = max(search.population_size // 2, 1)
    return replace(search, population_size=population, genetic_num_iters=search.genetic_num_iters // 2,
                   init_min_unmeasured=min(search.init_min_unmeasured, population))


# explore-on-stall: when a task's round found nothing better than it had, the model's ranking is not helping
# that task (on an unseen machine, MobileNet-V2's conv2d4 stayed 81% above XGBoost's best after 80 of the
# model's picks, session 38), so its next round draws half its programs at random from the unmeasured space
# instead of MetaSchedule's 5%: a random sample is what XGBoost's own first rounds learn from. Off by default:
# in two ResNet-18 runs (session 39) it came within 5% of XGBoost's final on the tunable tasks at 29.4% and
# 58.9% of XGBoost's time, two default runs at 32.3% and 32.9%: no effect shows through the spread.
EXPLORE_EPS_GREEDY = 0.5


def explore_search(search: SearchSettings) -> SearchSettings:
    """The arm's search with half of each round's programs drawn at random (``eps_greedy`` 0.5)."""
    return replace(search, eps_greedy=EXPLORE_EPS_GREEDY)


@dataclass
class ArmSettings:
    name: str
    cost_model: str  # "xgb", "random" or a crosstune model directory
    network: str
    hardware_config: str
    tasks: list[str]  # the task names tuned (all of the network's unless --tasks chose some)
    round_trials: int = 64
    first_round_trials: int = 16  # used only with the small-first-round and light-first-round options
    head_start: list[str] = field(default_factory=list)
    fine_tune_every: int = 0
    seed: int = 0
    search: SearchSettings = field(default_factory=SearchSettings)
    # added in session 35: written only when not at their defaults, so that the arms saved before resume
    fine_tune_epochs: int = 1
    fine_tune_lr_scale: float = 0.25
    # added in session 44: a MetaSchedule database tuned on other hardware whose fastest programs of each task
    # are measured as the task's first round (seeds.py); "" for none
    seeds_from: str = ""
    seeds_per_task: int = 0

    def to_json(self) -> dict:
        data = asdict(self)
        for name in ("fine_tune_epochs", "fine_tune_lr_scale", "seeds_from", "seeds_per_task"):
            if data[name] == getattr(ArmSettings, name):
                del data[name]
        if data["search"]["eps_greedy"] == SearchSettings.eps_greedy:
            del data["search"]["eps_greedy"]  # added in session 38, after many arms were saved
        return data


def this_machine() -> str:
    """The CPU a session tuned on, as vendor and model name."""
    from ..hardware.local import detect_local

    spec = detect_local()
    return f"{spec.vendor} {spec.arch}"


def resume_refusal(state: dict, here: str) -> str | None:
    """Why an unfinished arm must not go on here: its earlier sessions tuned on another CPU, and one arm's
    curve cannot mix two machines' times and latencies. None when it may: a finished arm is only re-read,
    and sessions from before machines were recorded say nothing."""
    if state["done"]:
        return None
    before = {x["machine"] for x in state["sessions"] if x.get("machine")}
    if before and here not in before:
        return f"this arm was tuned on {', '.join(sorted(before))}, and this machine is {here}"
    return None


def _loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


SEED_PROFILE_KEY = "crosstune/SeedRounds"  # seconds of seed rounds (replay, build, run), beside MetaSchedule's keys
SPEED_TOLERANCE = 0.15  # sessions whose probes differ by more did not tune on the same machine speed


def machine_speed_ms(repeats: int = 5) -> float:
    """Milliseconds of a fixed piece of CPU work, the median of ``repeats``: interpreted Python (what the
    tuner's own loop does) and float32 matrix products (what compiled code does). On a shared VM the same
    tuning round took 1.9x longer in one session than in another (docs/BENCHMARKS.md); a session records
    this probe so that the report can say when arms' clocks are not comparable."""
    a = np.random.default_rng(0).random((256, 256), dtype=np.float32)
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        total = 0
        for i in range(200_000):
            total += i * i
        for _ in range(20):
            a @ a
        times.append(time.perf_counter() - started)
    return round(1e3 * float(np.median(times)), 2)


def speed_mismatch(probes: dict[str, list[float]]) -> str | None:
    """A sentence when the sessions' speed probes (per arm, ms) differ by more than SPEED_TOLERANCE, else None."""
    every = [p for values in probes.values() for p in values]
    if len(every) < 2 or max(every) <= min(every) * (1 + SPEED_TOLERANCE):
        return None
    listed = "; ".join(f"{arm}: {', '.join(f'{p:.0f}' for p in values)} ms" for arm, values in probes.items() if values)
    return (f"the machine's speed differed between tuning sessions (speed probe {listed}; slowest "
            f"{max(every) / min(every):.2f}x the fastest): time fractions across those sessions mix a faster and a "
            f"slower machine; run the arms in one session to compare their times, or compare the arms after as many "
            f"measurements (crosstune tune-checkpoints RUN --at-trials N,...)")


def speed_probes(states: dict[str, dict]) -> dict[str, list[float]]:
    """Each arm's sessions' speed probes, ms (``states``: arm -> its state.json; recorded since 2026-12-02,
    session 21; none before)."""
    return {name: [x["speed_probe_ms"] for x in state.get("sessions", []) if x.get("speed_probe_ms")]
            for name, state in states.items()}


def estimated_latency_ms(tasks: list[dict]) -> float:
    """Σ weight × best measured latency over the tuned tasks; NaN until every task has one."""
    best = [t["best_seconds"] for t in tasks]
    if not all(b is not None and np.isfinite(b) for b in best):
        return float("nan")
    return 1e3 * sum(t["weight"] * b for t, b in zip(tasks, best))


def converged(curve: list[dict], tolerance: float = 0.02, window: float = 0.25) -> bool:
    """The issue's stop rule: the best estimated latency improved by less than ``tolerance`` over the
    last ``window`` of the trials (undefined, so False, until an estimate existed at its start)."""
    if not curve:
        return False
    trials = curve[-1]["trials"]
    before = [c["estimated_latency_ms"] for c in curve if c["trials"] <= (1 - window) * trials]
    now = curve[-1]["estimated_latency_ms"]
    if not before or not np.isfinite(before[-1]) or not np.isfinite(now):
        return False
    return (before[-1] - now) / before[-1] < tolerance


def stalled(history: list) -> bool:
    """Whether a task's last round found nothing faster than its earlier rounds had (``history``: its best
    latency after each round, None while nothing ran)."""
    return len(history) >= 2 and history[-2] is not None and history[-1] is not None and history[-1] >= history[-2]


class Arm:
    """The tuning state of one arm, its database and cost model; ``run_rounds`` advances it."""

    def __init__(self, settings: ArmSettings, directory: Path, contexts: list, weights: list[float], config,
                 print_fn=print, search_contexts=None):
        self.settings = settings
        self.dir = Path(directory)
        self.contexts, self.weights = contexts, weights
        # light-search: the tasks' contexts with the lighter searches (the same tasks and database, another
        # search strategy), made here, before tuning: making contexts sets MetaSchedule's loggers afresh,
        # which run_rounds quiets
        self._contexts_by_search: dict[str, list] = {}
        other_searches = []
        if "light-search" in settings.head_start:
            other_searches += [ONE_PROGRAM_SEARCH, light_first_search(settings.search)]
        if "lean-first-pass" in settings.head_start:
            other_searches.append(light_first_search(settings.search))
        if "explore-on-stall" in settings.head_start:
            other_searches.append(explore_search(settings.search))
        for search in other_searches if search_contexts is not None else []:
            self._contexts_by_search.setdefault(_search_key(search), search_contexts(search))
        self.config = config
        self.print = print_fn
        self.state_path = self.dir / "state.json"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.state = self._load_state()
        self.machine = this_machine()
        refusal = resume_refusal(self.state, self.machine)
        if refusal:
            raise CrosstuneError(f"{self.dir}: {refusal}; give it another --out")
        self.database = self._open_database()
        self._workload_keys: dict[int, str] = {}  # task index -> workload hash (workload_key)
        self.reused_trials = self._reconcile_with_database()
        self.cost_model, self.adapter, self.model = self._make_cost_model()
        self._round_candidates: list = []
        self._one_program: dict[int, bool] = {}
        self._flop_shares: list[float] | None = None
        self._cost_model_base = dict(self.state["cost_model_seconds"])
        self.seeds = self._read_seeds()
        # the clock runs only inside run_rounds: loading, compiling and reporting are not tuning time
        self.session_started: float | None = None
        self.elapsed_before = self.state["tuning_seconds"]
        self.save()

    # ---------------------------------------------------------------- state, database, cost model

    def _fresh_state(self) -> dict:
        return {
            "settings": self.settings.to_json(), "done": False, "stop_reason": None, "trials": 0,
            "tuning_seconds": 0.0, "rounds": 0, "curve": [], "sessions": [], "profile_seconds": {},
            "cost_model_seconds": {"predict": 0.0, "fine_tune": 0.0, "fine_tunes": 0, "stop_checks": 0.0,
                                   "failures": 0},
            "tasks": [{"name": name, "weight": float(w), "rounds": 0, "trials": 0, "best_seconds": None,
                       "history": [], "stopped": None}
                      for name, w in zip(self.settings.tasks, self.weights)],
        }

    def _load_state(self) -> dict:
        if not self.state_path.is_file():
            return self._fresh_state()
        state = json.loads(self.state_path.read_text())
        if state["settings"] != self.settings.to_json():
            raise CrosstuneError(f"{self.dir} holds a {self.settings.name} run with other settings "
                                 f"({state['settings']}); rerun with the same options or choose another --out")
        return state

    def save(self) -> None:
        self.state["tuning_seconds"] = self.elapsed()
        atomic_write_text(self.state_path, json.dumps(self.state, indent=1))

    def elapsed(self) -> float:
        if self.session_started is None:
            return self.elapsed_before
        return self.elapsed_before + time.perf_counter() - self.session_started

    def _open_database(self):
        from tvm.s_tir import meta_schedule as ms

        for name in ("database_workload.json", "database_tuning_record.json"):
            repair_database_file(self.dir / name)  # a record cut short by a kill
        return ms.database.JSONDatabase(path_workload=str(self.dir / "database_workload.json"),
                                        path_tuning_record=str(self.dir / "database_tuning_record.json"))

    def _reconcile_with_database(self) -> int:
        """Count what the database already holds (a restart re-uses it) and take in the measurements of a
        round that was killed before the state recorded it."""
        records = self.database.get_all_tuning_records()
        if not records:
            return 0
        by_workload: dict[str, list[float]] = {}
        for record in records:
            latency = float(np.mean([float(s) for s in record.run_secs])) if record.run_secs else float("inf")
            by_workload.setdefault(workload_hash(record.workload), []).append(latency)
        added = 0
        for index, task in enumerate(self.state["tasks"]):
            latencies = by_workload.get(self.workload_key(index), [])
            if len(latencies) > task["trials"]:
                added += len(latencies) - task["trials"]
                task["trials"] = len(latencies)
                best = min(latencies)
                if np.isfinite(best):
                    task["best_seconds"] = best if task["best_seconds"] is None else min(task["best_seconds"], best)
        if added:
            self.state["trials"] += added
            self.state["curve"].append({"seconds": self.state["tuning_seconds"], "trials": self.state["trials"],
                                        "estimated_latency_ms": estimated_latency_ms(self.state["tasks"]),
                                        "task": None, "note": f"{added} trials of an interrupted round"})
        return len(records)

    def _read_seeds(self):
        """The seed database, or None without one or once the arm is done (a finished run is reported without
        it). A database that holds none of the tuned tasks is refused: it was tuned for another network."""
        if not self.settings.seeds_from or self.state["done"]:
            return None
        from .seeds import read_seed_database

        seeds = read_seed_database(self.settings.seeds_from)
        held = sum(1 for index in range(len(self.contexts)) if self.workload_key(index) in seeds.by_workload)
        if not held:
            raise CrosstuneError(f"--seeds-from {self.settings.seeds_from}: holds none of the {len(self.contexts)} "
                                 f"tuned tasks (a database of another network?)")
        self.print(f"  {self.settings.name}: seeds: {seeds.summary()}; {held} of the {len(self.contexts)} tasks "
                   f"are there, up to {self.settings.seeds_per_task} programs each measured as their first round")
        return seeds

    def seed_traces(self, index: int) -> list:
        """The seed programs of the task's first round (none: no seeds, not its first round, the seed
        database lacks the task, or a round killed before it was recorded already measured some: a restart
        re-uses those trials, so measuring the seeds again would only repeat them)."""
        task = self.state["tasks"][index]
        if self.seeds is None or task["rounds"] > 0 or task["trials"] > 0:
            return []
        return self.seeds.traces(self.workload_key(index), self.settings.seeds_per_task)

    def workload_key(self, index: int) -> str:
        """The task's workload hash in the arm's database (committed there on first use)."""
        if index not in self._workload_keys:
            self._workload_keys[index] = workload_hash(self.database.commit_workload(self.contexts[index].mod))
        return self._workload_keys[index]

    def _make_cost_model(self):
        from tvm.s_tir import meta_schedule as ms

        spec = self.settings.cost_model
        if spec in ("xgb", "random"):
            cost_model = ms.cost_model.CostModel.create(spec, num_tuning_cores=self.config.num_cores) \
                if spec == "xgb" else ms.cost_model.CostModel.create("random")
            saved = self.dir / "xgb-model.tar"
            if spec == "xgb" and saved.is_file():
                cost_model.load(str(saved))  # its training data so far, so a restart does not start cold
            return cost_model, None, None
        from ..models import load_model
        from .costmodel import FineTune, make_cost_model, scoring_descriptor

        tuned = self.dir / "tuned-model"
        model = load_model(tuned if tuned.is_dir() else spec)
        hardware, note = scoring_descriptor(model, self.settings.hardware_config, self.config.spec)
        if note:
            self.print(note)
        adapter = make_cost_model(model, hardware, self.settings.fine_tune_every,
                                  online_trees="online-trees" in self.settings.head_start,
                                  fine_tune=FineTune(self.settings.fine_tune_epochs, self.settings.fine_tune_lr_scale))
        return adapter, adapter, model

    def _save_cost_model(self) -> None:
        if self.settings.cost_model == "xgb":
            tmp = self.dir / ".xgb-model.tar.tmp"
            self.cost_model.save(str(tmp))
            os.replace(tmp, self.dir / "xgb-model.tar")
        elif self.adapter is not None and getattr(self.adapter, "fine_tunes", 0):
            self.model.save(self.dir / "tuned-model")  # written as a unit: a kill leaves the old one

    # ---------------------------------------------------------------- choosing the next round

    def _live(self) -> list[int]:
        return [i for i, t in enumerate(self.state["tasks"]) if not t["stopped"]]

    def next_task(self) -> int | None:
        """The first round of every task in order; then MetaSchedule's gradient rule, or with
        ``weighted-rounds`` the task whose weighted latency promises the most."""
        tasks = self.state["tasks"]
        live = self._live()
        if not live:
            return None
        fresh = [i for i in live if tasks[i]["rounds"] == 0]
        if fresh:
            return fresh[0]
        if "weighted-rounds" in self.settings.head_start:
            return max(live, key=lambda i: self._weighted_score(tasks[i]))
        return max(live, key=lambda i: self._gradient_score(tasks[i]))

    @staticmethod
    def _gradient_score(task: dict) -> float:
        """MetaSchedule's gradient task scheduler (Ansor's): weight × (α × recent slope of the task's
        best latency over a window of rounds + (1 − α) × best / rounds)."""
        history = [h if h is not None else 1e9 for h in task["history"]]
        n, best = len(history), history[-1]
        if best >= 1e9:
            return -1.0
        g1 = (history[n - 1 - GRADIENT_WINDOW] - best) / GRADIENT_WINDOW if n >= 1 + GRADIENT_WINDOW else 0.0
        g2 = best / n
        return task["weight"] * (GRADIENT_ALPHA * g1 + (1 - GRADIENT_ALPHA) * g2)

    @staticmethod
    def _weighted_score(task: dict) -> float:
        """The task's share of the network (weight × best latency) times the gain its last round made:
        rounds go where the network's time is and where it still moves. A round without gain is not the
        end (a floor of 2%, so a task that stalled once is not starved), but the floor halves with every
        further round without gain: with a fixed floor the heaviest task won every round once all had
        stalled (ResNet-18's conv2d9 got its last 36 rounds in a row, 2,273 trials and 3,493 s, 60% of the
        arm's time, without a gain, while conv2d3, almost as heavy, had 2)."""
        history = [h for h in task["history"] if h is not None]
        if not history:
            return float("inf")  # no program ran yet: the estimate needs one
        gain = (history[-2] - history[-1]) / history[-2] if len(history) >= 2 else 0.5
        stalled = 0
        while stalled + 1 < len(history) and history[-2 - stalled] <= history[-1 - stalled]:
            stalled += 1
        return task["weight"] * history[-1] * max(gain, STALL_FLOOR * 0.5 ** max(stalled - 1, 0))

    def round_size(self, index: int, budget: int) -> int:
        task = self.state["tasks"][index]
        size = self.settings.round_trials
        head_start = self.settings.head_start
        if task["rounds"] == 0 and ("small-first-round" in head_start
                                    or ("light-first-round" in head_start and self.light(index))):
            size = self.settings.first_round_trials
        elif task["rounds"] == 0 and "trimmed-first-round" in head_start:
            size = max(1, int(size * TRIMMED_SHARE))
        if "one-program-tasks" in self.settings.head_start and self.one_program(index):
            size = 1
        seeds = self.seed_traces(index)
        if seeds:
            size = len(seeds)  # a seed round measures the seeds, however many the database had
        return max(1, min(size, budget - self.state["trials"]))

    def round_search(self, index: int) -> SearchSettings | None:
        """The search of the task's next round when light-search lightens it (see ONE_PROGRAM_SEARCH) or
        explore-on-stall widens it (see explore_search), else None: the arm's own."""
        if not self._contexts_by_search:
            return None
        head_start = self.settings.head_start
        if "one-program-tasks" in head_start and self.one_program(index):
            return ONE_PROGRAM_SEARCH if "light-search" in head_start else None
        task = self.state["tasks"][index]
        if task["rounds"] == 0 and ("lean-first-pass" in head_start or (
                "light-search" in head_start and "light-first-round" in head_start and self.light(index))):
            return light_first_search(self.settings.search)
        if "explore-on-stall" in head_start and stalled(task["history"]):
            return explore_search(self.settings.search)
        return None

    def context(self, index: int):
        """The task's tuning context for its next round: with the search ``round_search`` chose."""
        search = self.round_search(index)
        return self.contexts[index] if search is None else self._contexts_by_search[_search_key(search)][index]

    def light(self, index: int) -> bool:
        """Whether the task is under LIGHT_SHARE of the tuned tasks' weighted FLOPs, so that a first round of
        MetaSchedule's 64 programs buys the network estimate little: ResNet-18's pooling, mean, dense layer and
        1x1 downsampling convolutions (1% of its FLOPs, 2% of its latency) took 150 of the 408 s before the
        first estimate. FLOPs underrate memory-bound tasks (a depthwise convolution's latency share is up to
        twice its FLOP share), which is why the line is drawn low. A task of unknown FLOPs is not light."""
        if self._flop_shares is None:
            from .convert import operator_of

            weighted = np.array([w * operator_of(c.mod).flops for c, w in zip(self.contexts, self.weights)])
            total = np.nansum(weighted)
            self._flop_shares = [float(x / total) if total > 0 else float("nan") for x in weighted]
        return bool(self._flop_shares[index] < LIGHT_SHARE)  # NaN compares False: unknown is not light

    def one_program(self, index: int) -> bool:
        """Whether the task's design space holds a single program: one space whose trace samples nothing
        (a fused elementwise op). Asked for 64 programs, MetaSchedule's search then evolves its population
        six times over (five empty iterations before it gives up) to measure that one program: 60-190 s
        per such task on this CPU, 17% of the ResNet-18 baseline's time went to them."""
        if index not in self._one_program:
            context = self.contexts[index]
            spaces = context.space_generator.generate_design_space(context.mod)
            self._one_program[index] = len(spaces) == 1 and len(spaces[0].trace.decisions) == 0
        return self._one_program[index]

    # ---------------------------------------------------------------- running

    def measure_callback(self):
        from tvm.ir.utils import derived_object
        from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback

        arm = self

        @derived_object
        class RoundResults(PyMeasureCallback):
            """Hands the round's candidates and latencies to the arm (the database keeps them too)."""

            def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results) -> None:
                for candidate, result in zip(measure_candidates, runner_results):
                    secs = float(np.mean([float(s) for s in result.run_secs])) if result.run_secs else None
                    arm._round_candidates.append((candidate, secs))

        return RoundResults()

    def _seed_round(self, index: int, traces: list, builder, runner) -> bool:
        """The task's first round as the seed programs, replayed, built and run, without a search; the cost
        model is told their latencies as after any round (XGBoost trains on them; crosstune's fine-tunes).
        False when no seed applied to the task's module: nothing was measured."""
        import tvm
        from tvm.s_tir import meta_schedule as ms

        from .seeds import measure_seeds

        started = time.perf_counter()
        context = self.contexts[index]
        result = measure_seeds(traces, context, builder, runner, self.database)
        self._round_candidates = list(zip(result.candidates, result.seconds))
        if result.not_replayed:
            self.print(f"  {self.settings.name}: {result.not_replayed} of {len(traces)} seeds of "
                       f"{self.state['tasks'][index]['name']} did not apply to its module (skipped)")
        if result.candidates:
            self.cost_model.update(context, result.candidates, [
                ms.runner.RunnerResult([tvm.tirx.FloatImm("float32", s)] if s is not None else None,
                                       None if s is not None else "seed failed to build or run")
                for s in result.seconds])
        profile = self.state["profile_seconds"]
        profile[SEED_PROFILE_KEY] = profile.get(SEED_PROFILE_KEY, 0.0) + time.perf_counter() - started
        return bool(result.candidates)

    def run_round(self, index: int, size: int, builder, runner) -> int:
        from tvm.s_tir import meta_schedule as ms

        task = self.state["tasks"][index]
        self._round_candidates = []
        seeds = self.seed_traces(index)[:size]
        if seeds and not self._seed_round(index, seeds, builder, runner):
            seeds = []  # none applied: an ordinary first round instead
        if not seeds:
            callbacks = ms.measure_callback.MeasureCallback.create("default") + [self.measure_callback()]
            with ms.Profiler() as profiler:
                ms.tune_tasks(tasks=[self.context(index)], task_weights=[task["weight"]], work_dir=str(self.dir),
                              max_trials_global=size, num_trials_per_iter=size, builder=builder, runner=runner,
                              database=self.database, cost_model=self.cost_model, measure_callbacks=callbacks,
                              task_scheduler="round-robin")
            for key, value in profiler.get().items():
                self.state["profile_seconds"][str(key)] = self.state["profile_seconds"].get(str(key), 0.0) + float(value)
        measured = len(self._round_candidates)
        latencies = [s for _, s in self._round_candidates if s is not None]
        best_before = task["best_seconds"]
        if latencies:
            task["best_seconds"] = min(latencies) if best_before is None else min(best_before, min(latencies))
        task["rounds"] += 1
        task["trials"] += measured
        task["history"].append(task["best_seconds"])
        self.state["trials"] += measured
        self.state["rounds"] += 1
        one_program = "one-program-tasks" in self.settings.head_start and self.one_program(index)
        # a seed round measures what the other database had, not what a search found: it says nothing of
        # the space's size, unless the task has one program
        task["stopped"] = exhaustion_stop(measured, len(seeds) if seeds else size, bool(latencies), one_program) \
            if not seeds or one_program else None
        if task["stopped"] is None and "early-stop" in self.settings.head_start and self._little_left(task, index):
            task["stopped"] = "model predicts little left to gain"
        self._account_cost_model()
        self.state["curve"].append({"seconds": self.elapsed(), "trials": self.state["trials"],
                                    "estimated_latency_ms": estimated_latency_ms(self.state["tasks"]),
                                    "task": task["name"], **({"seeds": measured} if seeds else {})})
        return measured

    def _little_left(self, task: dict, index: int) -> bool:
        """Stop a task when its last round gained < 1% and the model ranks the task's best measured
        program above every program the search just proposed (its best guesses of the unmeasured space)."""
        history = [h for h in task["history"] if h is not None]
        if self.model is None or task["rounds"] < EARLY_STOP_MIN_ROUNDS or len(history) < 2:
            return False
        if (history[-2] - history[-1]) / history[-2] >= EARLY_STOP_GAIN:
            return False
        started = time.perf_counter()
        try:
            from .convert import operator_of, programs_dataset
            from .trace_text import trace_tokens

            context = self.contexts[index]
            best = self.database.get_top_k(self.database.commit_workload(context.mod), 1)
            proposed = [c.sch.trace for c, _ in self._round_candidates]
            if not best or not proposed:
                return False
            traces = [best[0].trace, *proposed]
            programs = programs_dataset([trace_tokens(t) for t in traces],
                                        operator_of(context.mod), self.adapter.hardware)
            scores = np.asarray(self.model.predict(programs), dtype="float64")
            return bool(scores[0] >= scores[1:].max())
        except Exception as err:  # noqa: BLE001 - a failed check keeps the task going, never stops the run
            logging.getLogger("crosstune.tvm.rounds").warning("early-stop check failed (%s); task continues", err)
            return False
        finally:
            self.state["cost_model_seconds"]["stop_checks"] += time.perf_counter() - started

    def _account_cost_model(self) -> None:
        if self.adapter is None:
            return
        # the adapter counts from this session's start; earlier sessions' seconds are in the base
        seconds, base = self.state["cost_model_seconds"], self._cost_model_base
        seconds["predict"] = base["predict"] + self.adapter.predict_seconds
        seconds["fine_tune"] = base["fine_tune"] + getattr(self.adapter, "fine_tune_seconds", 0.0)
        seconds["fine_tunes"] = base["fine_tunes"] + getattr(self.adapter, "fine_tunes", 0)
        seconds["online_trees"] = base.get("online_trees", 0.0) + self.adapter.tree_seconds  # absent in older arms
        seconds["failures"] = base["failures"] + self.adapter.failures  # answered with neutral scores

    def run_rounds(self, budget: int, chunk_trials: int, builder, runner, until_converged: bool = False) -> None:
        """Tune until ``budget`` trials (or, with ``until_converged``, until the stop rule holds at a chunk's
        end), every task stopped, or the search has nothing left; state saved after every round."""
        if self.state["done"]:
            return  # re-read for the report: not a tuning session
        self.state["sessions"].append({"loadavg_start": _loadavg(), "reused_trials": self.reused_trials,
                                       "machine": self.machine, "speed_probe_ms": machine_speed_ms()})
        self.session_started = time.perf_counter()
        chunk_end = self.state["trials"] + chunk_trials
        quiet = logging.getLogger("tvm.s_tir.meta_schedule")
        level = quiet.level
        quiet.setLevel(logging.WARNING)  # MetaSchedule prints a task table after every round
        try:
            with stopping.between_rounds():
                while self.state["trials"] < budget:
                    stopping.check()  # a kill during the last round: it is saved, stop here (see stopping.py)
                    index = self.next_task()
                    if index is None:
                        self.state["stop_reason"] = "every task stopped"
                        break
                    size = self.round_size(index, budget)
                    self.run_round(index, size, builder, runner)
                    task = self.state["tasks"][index]
                    self.print(f"  {self.settings.name}: round {self.state['rounds']} {task['name']} +{size} -> "
                               f"{self.state['trials']} trials, {self.elapsed():.0f} s, estimate "
                               f"{self.state['curve'][-1]['estimated_latency_ms']:.3f} ms"
                               + (f" ({task['name']} stopped: {task['stopped']})" if task["stopped"] else ""))
                    self.save()
                    if self.state["trials"] >= chunk_end:
                        chunk_end = self.state["trials"] + chunk_trials
                        self._save_cost_model()
                        if until_converged and converged(self.state["curve"]):
                            self.state["stop_reason"] = "converged (< 2% gain over the last 25% of trials)"
                            break
                else:
                    self.state["stop_reason"] = self.state["stop_reason"] or f"budget of {budget} trials"
                self._save_cost_model()
                self.state["done"] = True
        finally:
            quiet.setLevel(level)
            self.state["sessions"][-1]["loadavg_end"] = _loadavg()
            self.save()
            self.elapsed_before, self.session_started = self.state["tuning_seconds"], None  # clock stopped

    # ---------------------------------------------------------------- reporting

    def time_split(self) -> dict:
        """Build, run, search and cost-model seconds from MetaSchedule's profiler; ``other`` is the rest of
        the arm's wall time (task choice, state saving, early-stop checks, process start-up)."""
        p = self.state["profile_seconds"]
        predict = sum(v for k, v in p.items() if k.endswith("PredictNormalizedScore"))
        update = p.get("MeasureCallback/UpdateCostModel", 0.0)
        split = {
            "build": p.get("SendToBuilder", 0.0),
            "run": p.get("SendToRunner", 0.0) + p.get("JoinRunnerFutures", 0.0),
            # EvoSearch/Evolve/Misc/... are parts of EvoSearch/Evolve/Misc, already counted
            "search": sum(v for k, v in p.items() if k.startswith("EvoSearch") and "/Misc/" not in k) - predict,
            "cost_model_predict": predict,
            "cost_model_update": update,
            "early_stop_checks": self.state["cost_model_seconds"]["stop_checks"],
            "seeds": p.get(SEED_PROFILE_KEY, 0.0),
        }
        split["other"] = self.state["tuning_seconds"] - sum(split.values())
        return split
