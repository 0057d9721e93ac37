"""Time to XGBoost's latency on the tunable tasks alone: the one-program tasks left out of every estimate.

tune-compare's report handles the one-program tasks (a fused elementwise op with a single possible schedule)
by giving every arm the lowest reading of the same program. Their readings differ between arms by up to a
third of their total (session 38), so this reads the arms' saved state another way: each arm's estimate over
the tasks that have a choice of program only, replayed round by round from its state.json, against xgb's
final on the same tasks. Fractions are of xgb's tuning time.

    python benchmarks/tunable_tasks.py RUN/xgb/state.json RUN-V/crosstune-*/state.json [...]

The one-program tasks are those a crosstune arm stopped as such (the one-program-tasks option); the first
arm after xgb names them.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from crosstune.tvm.tune_compare import first_reach


def tunable_curve(state: dict, one_program: set[str]):
    """tune-compare's curve points (seconds, trials, estimated_latency_ms) with the estimate over the tunable
    tasks only, after each round once every tunable task has a measured latency."""
    tasks = {t["name"]: t for t in state["tasks"]}
    tunable = [name for name in tasks if name not in one_program]
    rounds_done = dict.fromkeys(tasks, 0)
    best: dict[str, float] = {}
    for point in state["curve"]:
        name = point.get("task")
        if name is None:  # a restart's note of re-used trials, not a round
            continue
        latency = tasks[name]["history"][rounds_done[name]]
        rounds_done[name] += 1
        if latency is not None:
            best[name] = latency
        if all(n in best for n in tunable):
            yield {"seconds": point["seconds"], "trials": point["trials"],
                   "estimated_latency_ms": sum(tasks[n]["weight"] * best[n] * 1e3 for n in tunable)}


def read_state(path: Path) -> dict:
    try:
        state = json.loads(path.read_text())
        state["tasks"], state["curve"]  # noqa: B018 - what this script reads
        return state
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise SystemExit(f"{path}: not an arm's state.json ({err})") from None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("xgb_state", type=Path)
    parser.add_argument("arm_states", type=Path, nargs="+")
    args = parser.parse_args()
    xgb = read_state(args.xgb_state)
    arms = [(path.parent.name, read_state(path)) for path in args.arm_states]
    one_program = {t["name"] for t in arms[0][1]["tasks"] if t["stopped"] and "one program" in t["stopped"]}
    if not one_program:
        raise SystemExit(f"{args.arm_states[0]}: no task stopped as a one-program task (run without one-program-tasks?)")
    final = list(tunable_curve(xgb, one_program))[-1]["estimated_latency_ms"]
    total = xgb["tuning_seconds"]
    print(f"xgb's final over the {len(xgb['tasks']) - len(one_program)} tunable tasks: {final:.3f} ms "
          f"({len(one_program)} one-program tasks left out); xgb's time {total:.0f} s")

    def when(curve, target):
        hit = first_reach(curve, target)
        if hit["seconds"] != hit["seconds"]:  # NaN: never
            return "never"
        return f"{100 * hit['seconds'] / total:.1f}% ({hit['seconds']:.0f} s, {hit['trials']} trials)"

    for name, state in [("xgb", xgb), *arms]:
        curve = list(tunable_curve(state, one_program))
        first, last = curve[0], curve[-1]
        print(f"{name}: first {first['estimated_latency_ms']:.3f} ms at {100 * first['seconds'] / total:.1f}%, "
              f"end {last['estimated_latency_ms']:.3f} ms; "
              f"reaches xgb's final {when(curve, final)}, within 5% {when(curve, 1.05 * final)}")


if __name__ == "__main__":
    main()
