"""When the crosstune arm's first network estimate arrives (every task measured once) with MetaSchedule's
LocalBuilder (a fresh pool of build workers per call) and with crosstune's builder (workers kept).

Runs the crosstune arm of tune-compare (the given pre-trained model, every head-start option, its own
search) for ``--trials`` trials, once per builder in fresh folders under OUT, and prints the seconds of
its first finite estimate, its rounds' build seconds and the session's speed probe.

    python benchmarks/first_pass_builders.py OUT --model RUN/crossfeat-model --network mobilenet_v2 \\
        --hardware-config local-avx2-2c --trials 536 --population 256 --genetic-iters 2
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--model", required=True)
    parser.add_argument("--network", default="mobilenet_v2")
    parser.add_argument("--hardware-config", default="local-avx2-2c")
    parser.add_argument("--trials", type=int, default=536)
    parser.add_argument("--population", type=int, default=256)
    parser.add_argument("--genetic-iters", type=int, default=2)
    parser.add_argument("--order", default="fresh,kept")
    args = parser.parse_args()

    from tvm.s_tir import meta_schedule as ms

    from crosstune.tvm.measure import build_without_tensor_intrin, configuration, make_builder, make_runner, target_of
    from crosstune.tvm.networks import extract_network_tasks
    from crosstune.tvm.rounds import HEAD_START_OPTIONS, Arm, ArmSettings, SearchSettings

    logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.WARNING)
    config = configuration(args.hardware_config)
    os.environ["TVM_NUM_THREADS"] = str(config.num_cores)
    _, extracted = extract_network_tasks(args.network, target_of(config))
    names = [t.task_name for t in extracted]
    search = SearchSettings(population_size=args.population, genetic_num_iters=args.genetic_iters)
    builders = {"fresh": lambda: ms.builder.LocalBuilder(f_build=build_without_tensor_intrin, max_workers=2,
                                                         timeout_sec=60),
                "kept": make_builder}
    for kind in args.order.split(","):
        folder = args.out / kind
        if folder.exists():
            raise SystemExit(f"{folder} exists: give another OUT")
        settings = ArmSettings(f"crosstune-{kind}", args.model, args.network, args.hardware_config, names,
                               head_start=sorted(HEAD_START_OPTIONS), fine_tune_every=64, search=search)
        strategy = ms.search_strategy.EvolutionarySearch(population_size=search.population_size,
                                                         init_min_unmeasured=search.init_min_unmeasured,
                                                         genetic_num_iters=search.genetic_num_iters)
        contexts, weights = ms.relax_integration.extracted_tasks_to_tune_contexts(
            extracted, str(folder), strategy=strategy, num_threads=config.num_cores, seed=0)
        arm = Arm(settings, folder, contexts, [float(w) for w in weights], config, print_fn=lambda *_: None)
        arm.run_rounds(args.trials, 256, builders[kind](), make_runner(config))
        curve = arm.state["curve"]
        first = next((c for c in curve if math.isfinite(c["estimated_latency_ms"])), None)
        split = arm.time_split()
        summary = {"builder": kind, "trials": arm.state["trials"], "rounds": arm.state["rounds"],
                   "seconds": round(arm.state["tuning_seconds"], 1),
                   "first_estimate_seconds": first and round(first["seconds"], 1),
                   "first_estimate_trials": first and first["trials"],
                   "first_estimate_ms": first and round(first["estimated_latency_ms"], 3),
                   "build_seconds": round(split["build"], 1), "search_seconds": round(split["search"], 1),
                   "speed_probe_ms": arm.state["sessions"][-1]["speed_probe_ms"]}
        print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
