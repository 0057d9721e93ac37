"""Time tune-compare's arms fairly: every arm's compiled network in one fresh process, interleaved.

Timing each arm at its own end, in the tuning process, measured the VM as much as the programs: ResNet-18's
XGBoost arm timed 90.4 ms there and 50.5-57.7 ms in a fresh process; one database timed twice in a fresh
process, arms in swapped order, differed by up to 43% (docs/BENCHMARKS.md). Here every arm is compiled and
checked first, then timed in rounds that rotate which arm goes first, each round beside PyTorch eager, so a
drift of the machine's speed falls on every arm alike. tune-compare runs this as a subprocess once every
arm has finished:

    python -m crosstune.tvm.arm_timing RUN xgb crosstune random --network resnet18 \
        --hardware-config local-avx512-2c --json RUN/end-to-end.json
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROUNDS = 5
TIMING_FILE = "end-to-end.json"


def time_arms(run: Path, arms: list[str], network: str, hardware_config: str, rounds: int = ROUNDS,
              print_fn=print) -> dict:
    """{arm: {latency_ms (median over rounds), latency_ms_rounds, pytorch_latency_ms, output checks}, ...}"""
    from .compiled import compile_databases

    compiled = compile_databases(run, arms, network, hardware_config, print_fn)
    slow = any(c.slow for c in compiled.values())
    number = 1 if slow else 5
    tvm_ms = {arm: [] for arm in arms}
    eager_ms = {arm: [] for arm in arms}
    for r in range(rounds):
        order = arms[r % len(arms):] + arms[:r % len(arms)]
        for arm in order:
            tvm_ms[arm].append(float(np.median(compiled[arm].time_tvm(number, repeat=3))))
            eager_ms[arm].append(float(np.median(compiled[arm].time_pytorch(5 if not slow else 1))))
        print_fn(f"round {r + 1}/{rounds}: " + ", ".join(f"{a} {tvm_ms[a][-1]:.2f} ms" for a in arms))
    out = {"network": network, "hardware_config": hardware_config, "rounds": rounds,
           "runs_per_timing": f"median of 3 x {number} run(s) per arm per round; PyTorch eager beside it",
           "arms": {}}
    for arm in arms:
        out["arms"][arm] = {**compiled[arm].check, "latency_ms": float(np.median(tvm_ms[arm])),
                            "latency_ms_rounds": tvm_ms[arm], "pytorch_latency_ms": float(np.median(eager_ms[arm])),
                            "pytorch_latency_ms_rounds": eager_ms[arm]}
    return out


def reusable(timing: dict, trials: dict[str, int], machine: str) -> bool:
    """Whether a timing file timed exactly these arms, at these trial counts, on this CPU."""
    timed = {arm: t.get("trials") for arm, t in timing.get("arms", {}).items()}
    return timing.get("machine") == machine and timed == trials


def time_in_fresh_process(run: Path, trials: dict[str, int], records: dict[str, int], network: str,
                          hardware_config: str, machine: str, print_fn=print) -> dict:
    """{arm: timing} for every arm whose database holds its trials (an arm whose database was lost is left
    out and said so), timed by this module in a fresh process, or re-used from ``run/end-to-end.json``.
    A failure is reported, not raised: hours of tuning still get their report, without compiled latencies."""
    lost = [a for a in trials if records[a] == 0 or records[a] < trials[a]]
    for arm in lost:
        print_fn(f"{arm}: not compiled or timed: its database holds {records[arm]} of its {trials[arm]} trials")
    wanted = {a: n for a, n in trials.items() if a not in lost}
    path = run / TIMING_FILE
    if not wanted:
        return {}
    if path.is_file() and reusable(json.loads(path.read_text()), wanted, machine):
        return json.loads(path.read_text())["arms"]
    print_fn(f"compiling {network} with each arm's programs, checking it against PyTorch and timing the arms in "
             "one fresh process, interleaved")
    command = [sys.executable, "-m", "crosstune.tvm.arm_timing", str(run), *wanted, "--network", network,
               "--hardware-config", hardware_config, "--json", str(path)]
    tail: collections.deque = collections.deque(maxlen=12)
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        for line in proc.stdout:
            tail.append(line.rstrip())
            print_fn(f"  {line.rstrip()}")
    if proc.returncode != 0:
        print_fn(f"timing the compiled arms failed (exit code {proc.returncode}; its last lines are above): the "
                 "report has no compiled latencies; rerun with --resume to try again, or --skip-end-to-end")
        return {}
    from ..atomic import write_text as atomic_write_text

    timing = json.loads(path.read_text())
    timing["machine"] = machine
    for arm, n in wanted.items():
        timing["arms"][arm]["trials"] = n
    atomic_write_text(path, json.dumps(timing, indent=1))
    return timing["arms"]


def main(argv: list[str] | None = None) -> int:
    from ..atomic import write_text as atomic_write_text
    from ..errors import CrosstuneError
    from ..options import POSITIVE_INT

    parser = argparse.ArgumentParser(prog="python -m crosstune.tvm.arm_timing", description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a tune-compare --out folder")
    parser.add_argument("arms", nargs="+", help="arm folders inside it")
    parser.add_argument("--network", required=True)
    parser.add_argument("--hardware-config", required=True)
    parser.add_argument("--rounds", type=POSITIVE_INT, default=ROUNDS)
    parser.add_argument("--json", type=Path, required=True, help="where to write the timings")
    args = parser.parse_args(argv)
    missing = [a for a in args.arms if not all((args.run / a / f"database_{kind}.json").is_file()
                                               and (args.run / a / f"database_{kind}.json").stat().st_size
                                               for kind in ("workload", "tuning_record"))]
    if missing:
        print(f"arm_timing: no tuning database for {', '.join(missing)} in {args.run}", file=sys.stderr)
        return 2
    load = list(os.getloadavg())
    try:
        out = time_arms(args.run, args.arms, args.network, args.hardware_config, args.rounds,
                        print_fn=lambda *a: print(*a, flush=True))
    except CrosstuneError as err:
        print(f"arm_timing: {err}", file=sys.stderr)
        return 2
    out["loadavg_start"], out["loadavg_end"] = load, list(os.getloadavg())
    atomic_write_text(args.json, json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
