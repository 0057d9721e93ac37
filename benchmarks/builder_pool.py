"""What a tuning round costs with MetaSchedule's LocalBuilder (a fresh pool of build workers per call)
against crosstune's builder (workers kept between calls), and whether kept workers grow in memory.

One MetaSchedule round (``ms.tune_tasks`` on one task, XGBoost model, evolutionary search) per task and
builder, the two builders taking turns task by task, each round in a fresh work folder; then, with the
kept builder only, ``--leak-calls`` build calls of the same programs with the worker processes' resident
memory printed as it goes.

    python benchmarks/builder_pool.py --network mobilenet_v2 --hardware-config local-avx2-2c \\
        --tasks conv2d29,fused_batch_norm17,conv2d25,mean --round-trials 16,64 --leak-calls 40
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time


def kept_worker_rss_mb(builder) -> list[float]:
    import psutil

    pool = builder.pool
    if pool is None:
        return []
    me = psutil.Process()
    return sorted(round(child.memory_info().rss / 2**20, 1) for child in me.children(recursive=True)
                  if "popen_worker" in " ".join(child.cmdline()))


def one_round(context, weight: float, trials: int, builder, runner, work_dir: str) -> dict:
    from tvm.s_tir import meta_schedule as ms

    database = ms.database.MemoryDatabase()
    started = time.perf_counter()
    with ms.Profiler() as profiler:
        ms.tune_tasks(tasks=[context], task_weights=[weight], work_dir=work_dir, max_trials_global=trials,
                      num_trials_per_iter=trials, builder=builder, runner=runner, database=database,
                      cost_model=ms.cost_model.CostModel.create("xgb", num_tuning_cores=2),
                      task_scheduler="round-robin")
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "build": float(profiler.get().get("SendToBuilder", 0.0)),
            "measured": len(database.get_all_tuning_records())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--network", default="mobilenet_v2")
    parser.add_argument("--hardware-config", default="local-avx2-2c")
    parser.add_argument("--tasks", default="conv2d29,fused_batch_norm17,conv2d25,mean")
    parser.add_argument("--round-trials", default="16,64")
    parser.add_argument("--leak-calls", type=int, default=40)
    args = parser.parse_args()

    import logging

    from tvm.s_tir import meta_schedule as ms

    from crosstune.tvm.measure import build_without_tensor_intrin, configuration, make_builder, make_runner, target_of
    from crosstune.tvm.networks import extract_network_tasks

    logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.WARNING)
    config = configuration(args.hardware_config)
    os.environ["TVM_NUM_THREADS"] = str(config.num_cores)
    target = target_of(config)
    _, extracted = extract_network_tasks(args.network, target)
    wanted = args.tasks.split(",")
    tasks = [t for t in extracted if t.task_name in wanted]
    missing = set(wanted) - {t.task_name for t in tasks}
    if missing:
        raise SystemExit(f"no such task in {args.network}: {', '.join(sorted(missing))}")
    runner = make_runner(config)
    builders = {"LocalBuilder (fresh pool per call)":
                ms.builder.LocalBuilder(f_build=build_without_tensor_intrin, max_workers=2, timeout_sec=60),
                "kept workers (crosstune)": make_builder(builds_per_pool=10_000)}
    rows: dict[str, list[dict]] = {name: [] for name in builders}
    with tempfile.TemporaryDirectory() as scratch:
        for trials in [int(x) for x in args.round_trials.split(",")]:
            for task in tasks:
                for turn, (name, builder) in enumerate(builders.items()):
                    contexts, weights = ms.relax_integration.extracted_tasks_to_tune_contexts(
                        [task], os.path.join(scratch, f"{task.task_name}-{trials}-{turn}"), num_threads=2, seed=0)
                    row = one_round(contexts[0], float(weights[0]), trials, builder, runner,
                                    os.path.join(scratch, f"w-{task.task_name}-{trials}-{turn}"))
                    rows[name].append(row)
                    print(f"{task.task_name:<28} {trials:>3} programs  {name:<36} round {row['seconds']:6.1f} s  "
                          f"build {row['build']:6.1f} s  measured {row['measured']}", flush=True)
        for name, got in rows.items():
            print(f"{name}: median round {statistics.median(r['seconds'] for r in got):.1f} s, median build "
                  f"{statistics.median(r['build'] for r in got):.1f} s, total {sum(r['seconds'] for r in got):.0f} s "
                  f"over {len(got)} rounds")

        if args.leak_calls:
            kept = builders["kept workers (crosstune)"]
            context = ms.relax_integration.extracted_tasks_to_tune_contexts(
                [tasks[0]], os.path.join(scratch, "leak"), num_threads=2, seed=0)[0][0]
            spaces = context.generate_design_space()
            inputs = [ms.builder.BuilderInput(sch.mod, target) for sch in spaces] * 8
            print(f"kept workers, {len(inputs)} programs per call; worker RSS MB: {kept_worker_rss_mb(kept)}")
            for call in range(1, args.leak_calls + 1):
                started = time.perf_counter()
                for result in kept.build(inputs):
                    if result.artifact_path:
                        os.remove(result.artifact_path)
                        os.rmdir(os.path.dirname(result.artifact_path))
                if call % 10 == 0 or call == 1:
                    print(f"  call {call}: {time.perf_counter() - started:.2f} s, worker RSS MB "
                          f"{kept_worker_rss_mb(kept)}", flush=True)


if __name__ == "__main__":
    main()
