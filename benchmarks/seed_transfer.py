"""How far another device's tuned programs get a network on this one, before any search.

For every task of NETWORK, the K fastest programs of SEED_DB (a MetaSchedule database tuned on other hardware
or other compiler flags) are replayed for --hardware-config, built and run here (crosstune.tvm.seeds), and
their best is set beside a reference database's best of the same task (e.g. the converged xgb arm tuned
here), weighted by the task's count in the network:

    python benchmarks/seed_transfer.py --network resnet18 --hardware-config local-avx512-2c \
        --seeds-from SEED_DB --reference REF_DB --per-task 8 --out OUT

OUT gets the measured programs as a MetaSchedule database and seed-transfer.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path


def best_by_workload(folder: Path) -> dict[str, float]:
    from crosstune.tvm.seeds import read_seed_database

    return {shash: programs[0][0] for shash, programs in read_seed_database(folder).by_workload.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--network", required=True)
    parser.add_argument("--hardware-config", required=True)
    parser.add_argument("--seeds-from", required=True)
    parser.add_argument("--reference", help="a database whose per-task best the seeds are set beside")
    parser.add_argument("--per-task", type=int, default=8)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)

    from tvm.s_tir import meta_schedule as ms

    from crosstune.tvm.convert import workload_hash
    from crosstune.tvm.measure import configuration, make_builder, make_runner, target_of
    from crosstune.tvm.networks import extract_network_tasks
    from crosstune.tvm.seeds import measure_seeds, read_seed_database

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    seeds = read_seed_database(args.seeds_from)
    print(seeds.summary())
    reference = best_by_workload(Path(args.reference)) if args.reference else {}
    config = configuration(args.hardware_config)
    os.environ["TVM_NUM_THREADS"] = str(config.num_cores)
    _, extracted = extract_network_tasks(args.network, target_of(config))
    contexts = ms.relax_integration.extracted_tasks_to_tune_contexts(extracted, str(out / "work"), num_threads=config.num_cores)[0]
    database = ms.database.JSONDatabase(path_workload=str(out / "database_workload.json"),
                                        path_tuning_record=str(out / "database_tuning_record.json"))
    builder, runner = make_builder(), make_runner(config)
    rows, started = [], time.perf_counter()
    for task, context in zip(extracted, contexts):
        shash = workload_hash(database.commit_workload(context.mod))
        traces = seeds.traces(shash, args.per_task)
        result = measure_seeds(traces, context, builder, runner, database)
        ran = [s for s in result.seconds if s is not None]
        source = seeds.by_workload.get(shash, [])
        rows.append({"task": task.task_name, "weight": int(task.weight), "seeds": len(traces),
                     "not_replayed": result.not_replayed, "failed": len(result.seconds) - len(ran),
                     "best_seed_s": min(ran) if ran else None,
                     "seed_rank_of_best": result.seconds.index(min(ran)) if ran else None,
                     "source_best_s": source[0][0] if source else None, "reference_best_s": reference.get(shash)})
        row = rows[-1]
        print(f"{task.task_name:44s} x{task.weight} seeds {len(traces):2d} best "
              + (f"{1e3 * row['best_seed_s']:.3f} ms" if ran else "-")
              + (f" reference {1e3 * row['reference_best_s']:.3f} ms" if row["reference_best_s"] else ""), flush=True)
    seconds = time.perf_counter() - started
    complete = [r for r in rows if r["best_seed_s"] is not None and r["reference_best_s"] is not None]
    summary = {"network": args.network, "hardware_config": args.hardware_config, "seeds_from": str(args.seeds_from),
               "reference": args.reference, "per_task": args.per_task, "seconds": seconds,
               "command": " ".join(sys.argv),
               "weighted_seed_ms": 1e3 * sum(r["weight"] * r["best_seed_s"] for r in complete),
               "weighted_reference_ms": 1e3 * sum(r["weight"] * r["reference_best_s"] for r in complete),
               "tasks_compared": len(complete), "tasks": rows}
    (out / "seed-transfer.json").write_text(json.dumps(summary, indent=1))
    print(f"{len(complete)} of {len(rows)} tasks: seeds {summary['weighted_seed_ms']:.3f} ms against reference "
          f"{summary['weighted_reference_ms']:.3f} ms (weighted best per task), {seconds:.0f} s of measuring")
    return 0


if __name__ == "__main__":
    sys.exit(main())
