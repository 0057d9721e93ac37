"""How deep into the model's ranking a task's first round has to measure, read from arms already tuned.

A round's programs reach the builder in the order the search picked them: the cost model's ranking, best
first (MetaSchedule's evolutionary search sorts its picks by score), then its 5% random picks (3 of 64) last.
So the first k records of a task's first full round are what a first round of k programs would have measured
(up to its own few random picks). For each arm this prints, per k, what measuring only the first k would have
added to the network estimate (Σ weight × (best of the first k - best of the round), over every task whose
first round was full), as a percentage of the baseline's final estimate, beside the same for the round's
programs in a random order (the exact expectation, DESIGN's random floor), and where in the round each task's
best program came.

    python benchmarks/first_round_depth.py RUN/xgb RUN/crosstune-... [more arm folders] [--depths 16,32,48]

Reads the arms' state.json and database_tuning_record.json only (no TVM).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

from crosstune.metrics import min_rank_probabilities


def mean_seconds(line: str) -> float:
    """A tuning record's mean run time; a failed build or run (no times, or MetaSchedule's 1e10) is inf."""
    times = json.loads(line)[1][1]
    if not times or any(t >= 1e9 for t in times):
        return math.inf
    return float(np.mean(times))


def first_rounds(arm: Path) -> list[tuple[str, float, list[float]]]:
    """(task, weight, run times of its first round in measurement order) for every task of the arm."""
    state = json.loads((arm / "state.json").read_text())
    weights = {task["name"]: float(task["weight"]) for task in state["tasks"]}
    with open(arm / "database_tuning_record.json") as records:
        seconds = [mean_seconds(line) for line in records if line.strip()]
    rounds, start, seen = [], 0, set()
    for point in state["curve"]:  # one point per round: the arm's trials once it ended
        name, end = point["task"], point["trials"]
        if name not in seen:
            seen.add(name)
            rounds.append((name, weights[name], seconds[start:end]))
        start = end
    return rounds


def expected_best_of_random(times: list[float], k: int) -> float:
    """Exact expectation of the best of k programs drawn at random from the round (DESIGN's random floor);
    inf when k draws can all be failed programs."""
    ordered = np.sort(times)
    p = min_rank_probabilities(len(ordered), k)
    with np.errstate(invalid="ignore"):  # 0 x inf for a failed program that cannot be the best
        return float(np.sum(np.where(p > 0, p * ordered, 0.0)))


def final_estimate(baseline: Path) -> float:
    """The baseline's final network estimate, seconds: Σ weight × each task's best."""
    state = json.loads((baseline / "state.json").read_text())
    return sum(float(t["weight"]) * float(t["best_seconds"]) for t in state["tasks"] if t["best_seconds"])


def depth_report(final: float, arm: Path, depths: list[int], full: int) -> dict:
    added = {k: 0.0 for k in depths}
    added_random = {k: 0.0 for k in depths}
    best_at = []
    for _, weight, times in first_rounds(arm):
        if len(times) < full or not np.isfinite(min(times)):
            continue
        best = min(times)
        best_at.append(int(np.argmin(times)) + 1)
        for k in depths:
            added[k] += weight * (min(times[:k]) - best)
            added_random[k] += weight * (expected_best_of_random(times, k) - best)
    return {"arm": str(arm), "tasks_with_a_full_first_round": len(best_at),
            "added_pct_of_baseline_final": {k: 100 * v / final for k, v in added.items()},
            "random_order_added_pct_of_baseline_final": {k: 100 * v / final for k, v in added_random.items()},
            "best_program_position": best_at}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("baseline", type=Path, help="the baseline arm's folder (its final estimate is the scale)")
    parser.add_argument("arms", type=Path, nargs="+", help="arm folders whose first rounds to read")
    parser.add_argument("--depths", default="8,16,24,32,48", help="first-round sizes to ask about")
    parser.add_argument("--round-trials", type=int, default=64, help="a full round's programs")
    args = parser.parse_args()
    depths = [int(k) for k in args.depths.split(",")]
    for folder in [args.baseline, *args.arms]:
        if not (folder / "state.json").is_file() or not (folder / "database_tuning_record.json").is_file():
            parser.error(f"{folder} is not a tune-compare arm (state.json and database_tuning_record.json)")
    final = final_estimate(args.baseline)
    for arm in args.arms:
        r = depth_report(final, arm, depths, args.round_trials)
        positions = r["best_program_position"]
        random = r["random_order_added_pct_of_baseline_final"]
        added = "  ".join(f"first {k}: +{v:.1f}% (random order +{random[k]:.1f}%)"
                          for k, v in r["added_pct_of_baseline_final"].items())
        print(f"{arm.parent.name}/{arm.name}: {r['tasks_with_a_full_first_round']} full first rounds; {added}; "
              f"best program at position {np.median(positions):.0f} (median), "
              f"{sum(p > max(depths) for p in positions)} past {max(depths)}")


if __name__ == "__main__":
    main()
