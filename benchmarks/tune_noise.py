"""How much of a tune-compare result is measurement noise: the same one-program tasks, re-measured by
each arm, and the network estimate under three readings of a record's repeats.

    python benchmarks/tune_noise.py RUN [--arms xgb,crosstune,random]

RUN is a ``crosstune tune-compare --out`` folder. A task whose design space holds one program measures
that same program in every arm, so any difference between arms on those tasks is the machine's, not a
model's. Each record keeps its repeats (MetaSchedule's ``run_secs``: 3 here); the tuner and the report
read their mean. This prints, per arm, the weighted sum over the one-program tasks and the whole network
estimate (Σ task weight × best record) read as the mean, the median and the minimum of each record's
repeats, and how far apart the arms' one-program tasks are (relative difference per task).

A database names workloads, not tasks; an arm runs one task per round, so its workloads are committed in
the order its tasks first appear in the state's curve. The script checks that mapping against the
state's best latencies (mean reading) and refuses an arm where it does not hold.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

READINGS = {"mean": np.mean, "median": np.median, "min": np.min}


def arm_tasks(arm_dir: Path) -> tuple[dict, dict[str, dict[str, float]]]:
    """The arm's tasks (state.json) and, per reading, each task's best record latency in seconds."""
    state = json.loads((arm_dir / "state.json").read_text())
    order: list[str] = []
    for point in state["curve"]:
        if point.get("task") and point["task"] not in order:
            order.append(point["task"])
    repeats: dict[int, list[list[float]]] = {}
    with open(arm_dir / "database_tuning_record.json") as stream:
        for line in stream:
            try:
                workload, (_, run_secs, *_) = json.loads(line)
            except (ValueError, TypeError):
                continue  # a line cut by a kill: the arm itself skips it too
            if run_secs:
                repeats.setdefault(workload, []).append([float(s) for s in run_secs])
    tasks = {t["name"]: t for t in state["tasks"]}
    best = {reading: {} for reading in READINGS}
    for index, name in enumerate(order):
        for reading, f in READINGS.items():
            best[reading][name] = min(float(f(r)) for r in repeats.get(index, [[np.inf]]))
        if not np.isclose(best["mean"][name], tasks[name]["best_seconds"], rtol=1e-9):
            raise SystemExit(f"{arm_dir}: workload {index} does not match task {name}'s best latency; "
                             "the order of first rounds does not name this database's workloads")
    return tasks, best


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--arms", default="xgb,crosstune,random")
    args = parser.parse_args(argv)
    arms = [a for a in args.arms.split(",") if (args.run / a / "state.json").is_file()]
    if "xgb" not in arms:
        sys.exit(f"{args.run}: no finished xgb arm (xgb/state.json) to compare with")
    data = {arm: arm_tasks(args.run / arm) for arm in arms}
    base_tasks, base_best = data["xgb"]
    one_program = sorted(n for n, t in base_tasks.items() if t["trials"] == 1)
    print(f"{len(one_program)} one-program tasks of {len(base_tasks)}; ms = Σ weight × best record latency")
    for reading in READINGS:
        for arm in arms:
            tasks, best = data[arm]
            if set(best[reading]) != set(base_tasks):
                print(f"{reading:6s} {arm:10s} not every task measured yet")
                continue
            weighted = {n: tasks[n]["weight"] * best[reading][n] * 1e3 for n in tasks}
            one = sum(weighted[n] for n in one_program)
            line = (f"{reading:6s} {arm:10s} one-program tasks {one:7.3f} ms, whole estimate "
                    f"{sum(weighted.values()):7.3f} ms")
            if arm != "xgb":
                relative = [abs(best[reading][n] - base_best[reading][n]) / min(best[reading][n], base_best[reading][n])
                            for n in one_program]
                line += (f"; against xgb's measurements of the same programs: per task median "
                         f"{np.median(relative):.0%}, max {max(relative):.0%}")
            print(line)


if __name__ == "__main__":
    main()
