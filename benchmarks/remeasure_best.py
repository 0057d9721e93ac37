"""Re-measure every arm's best program of every task, arms side by side in one session.

    python benchmarks/remeasure_best.py RUN --network mobilenet_v2 --hardware-config local-avx2-2c \
        [--sets xgb,crosstune,crosstune@856] [--passes 3] [--out remeasured.json]

RUN is a ``crosstune tune-compare --out`` folder. Arms tuned in different sessions measured on a machine
whose speed drifts between sessions (a shared VM): the same one-program tasks read 21-28% apart between
arms (benchmarks/tune_noise.py). A set ``ARM`` is an arm's best record of each task, ``ARM@N`` its best
among the arm's first N trials (where its curve stood then). Each set's programs are built once with the
tuner's builder, then all are run with the tuner's runner ``--passes`` times, the sets in turn within each
task and their order rotated every pass, so that the machine's speed of the moment hits every set alike.
It prints, per set, the network estimate (Σ task weight × latency) as the tuner read it and as re-measured
(median over passes of each record's mean repeat, the tuner's reading), split into the one-program tasks and
the others, and writes every reading to ``--out``. The first set is the reference of the per-task ratios.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np

from crosstune.atomic import write_text
from crosstune.tvm.measure import configuration, make_builder, make_runner, target_of
from crosstune.tvm.networks import extract_network_tasks


def task_modules(tasks) -> list:
    """Each task's module as the tuner committed it: a tune context's (it normalises what extraction gave)."""
    from tvm.s_tir import meta_schedule as ms

    return [ms.TuneContext(mod=task.dispatched[0], target=task.target, task_name=task.task_name).mod
            for task in tasks]


def best_candidates(arm_dir: Path, modules: list, trials: int | None) -> tuple[list, list[float]]:
    """Each task's best program (MeasureCandidate) among the arm's first ``trials`` measurements (all when
    None) and its latency as the tuner read it, in task order. The record file is appended in measurement
    order, one line per trial."""
    import tvm
    from tvm.s_tir import meta_schedule as ms

    with open(arm_dir / "database_workload.json") as stream:
        hashes = [json.loads(line)[0] for line in stream if line.strip()]
    index_of = {str(tvm.ir.structural_hash(m)): i for i, m in enumerate(modules)}
    best: dict[int, tuple[float, list]] = {}
    with open(arm_dir / "database_tuning_record.json") as stream:
        for count, line in enumerate(stream):
            if trials is not None and count >= trials:
                break
            try:
                workload, record = json.loads(line)
            except ValueError:
                continue  # a line cut by a kill: the arm itself skips it too
            if record[1]:
                latency = float(np.mean([float(x) for x in record[1]]))
                if workload not in best or latency < best[workload][0]:
                    best[workload] = (latency, record)
    candidates, latencies = [], []
    for i, module in enumerate(modules):
        workloads = [w for w, h in enumerate(hashes) if index_of.get(h) == i]
        found = [best[w] for w in workloads if w in best]
        if not found:
            raise SystemExit(f"{arm_dir}: no measured program of task {i} in its first {trials} trials")
        latency, record = min(found, key=lambda f: f[0])
        candidates.append(ms.database.TuningRecord.from_json(record, ms.database.Workload(module))
                          .as_measure_candidate())
        latencies.append(latency)
    return candidates, latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--network", required=True)
    parser.add_argument("--hardware-config", required=True)
    parser.add_argument("--sets", default="xgb,crosstune", help="ARM or ARM@TRIALS, comma-separated")
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    from tvm.s_tir import meta_schedule as ms

    config = configuration(args.hardware_config)
    os.environ["TVM_NUM_THREADS"] = str(config.num_cores)
    target = target_of(config)
    _, tasks = extract_network_tasks(args.network, target)
    modules = task_modules(tasks)
    names = [t.task_name for t in tasks]
    weights = np.array([float(t.weight) for t in tasks])
    sets = args.sets.split(",")
    # the tasks with one possible program, as a crosstune arm's one-program-tasks option found them
    one_program = set()
    for arm in {text.partition("@")[0] for text in sets}:
        state = json.loads((args.run / arm / "state.json").read_text())
        one_program |= {t["name"] for t in state["tasks"] if t["stopped"] == "its one program is measured"}
    is_one = np.array([n in one_program for n in names])
    builder, runner = make_builder(), make_runner(config)
    artifacts, tuner_read = {}, {}
    for text in sets:
        arm, _, trials = text.partition("@")
        candidates, tuner_read[text] = best_candidates(args.run / arm, modules, int(trials) if trials else None)
        built = builder.build([ms.builder.BuilderInput(c.sch.mod, target) for c in candidates])
        for name, candidate, result in zip(names, candidates, built):
            if result.error_msg is not None:
                raise SystemExit(f"{text} {name}: the best program does not build: {result.error_msg}")
            artifacts[text, name] = (result.artifact_path, candidate.args_info)
        print(f"{text}: built {len(candidates)} best programs", flush=True)
    repeats = {text: {name: [] for name in names} for text in sets}
    for p in range(args.passes):
        order = sets[p % len(sets):] + sets[:p % len(sets)]
        for name in names:
            for text in order:
                path, args_info = artifacts[text, name]
                (future,) = runner.run([ms.runner.RunnerInput(path, "cpu", args_info)])
                result = future.result()
                if result.error_msg is not None:
                    raise SystemExit(f"{text} {name}: run failed: {result.error_msg}")
                repeats[text][name].append([float(x) for x in result.run_secs])
        print(f"pass {p + 1} of {args.passes} done", flush=True)

    def split(latencies: np.ndarray) -> dict[str, float]:
        ones, rest = (1e3 * float(np.sum(weights[m] * latencies[m])) for m in (is_one, ~is_one))
        return {"total": ones + rest, "one_program": ones, "others": rest}

    summary = {"run": str(args.run), "network": args.network, "hardware_config": args.hardware_config,
               "passes": args.passes, "one_program_tasks": sorted(one_program), "sets": {}}
    print(f"{'set':32s} {'tuner read (ms)':>26s} {'re-measured (ms)':>26s}   (total = one-program + others)")
    remeasured = {}
    for text in sets:
        remeasured[text] = np.array([np.median([np.mean(r) for r in repeats[text][n]]) for n in names])
        read, again = split(np.array(tuner_read[text])), split(remeasured[text])
        print(f"{text:32s} {read['total']:8.3f} = {read['one_program']:6.3f} + {read['others']:6.3f}  "
              f"{again['total']:8.3f} = {again['one_program']:6.3f} + {again['others']:6.3f}")
        summary["sets"][text] = {"tuner_read_ms": read, "remeasured_ms": again, "tasks": {
            n: {"tuner_read_s": tuner_read[text][i], "remeasured_s": float(remeasured[text][i]),
                "repeats": repeats[text][n]} for i, n in enumerate(names)}}
    reference = sets[0]
    for text in sets[1:]:
        ratio = remeasured[text][~is_one] / remeasured[reference][~is_one]
        print(f"{text} / {reference}, tasks with more than one program, re-measured: median ratio "
              f"{np.median(ratio):.3f} (range {ratio.min():.3f}-{ratio.max():.3f})")
    if args.out:
        write_text(args.out, json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
