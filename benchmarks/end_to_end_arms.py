"""Compile a network with each tune-compare arm's database and time it against PyTorch eager, all in one fresh
process on an idle machine.

Each arm's own end-to-end timing runs at the end of that arm, in the tuning process, at whatever load and VM
speed the machine has then (ResNet-18's XGBoost arm: 90.4 ms against eager 58.9 ms there, 50.5-57.7 ms against
57.6-68.9 ms in a fresh process). Run this twice with the arms in both orders:

    python benchmarks/end_to_end_arms.py RUN xgb crosstune --json e2e-1.json
    python benchmarks/end_to_end_arms.py RUN crosstune xgb --json e2e-2.json
"""
import argparse
import json
import os
import time

from crosstune.tvm.measure import configuration, target_of
from crosstune.tvm.networks import extract_network_tasks
from crosstune.tvm.tune import end_to_end


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", help="a tune-compare --out folder")
    parser.add_argument("arms", nargs="+", help="arm folders inside it, timed in this order")
    parser.add_argument("--network", default="resnet18")
    parser.add_argument("--hardware-config", default="local-avx512-2c")
    parser.add_argument("--json", required=True, help="where to write the timings")
    args = parser.parse_args()

    from tvm.s_tir import meta_schedule as ms

    config = configuration(args.hardware_config)
    os.environ["TVM_NUM_THREADS"] = str(config.num_cores)  # before TVM's thread pool starts
    target = target_of(config)
    mod, _ = extract_network_tasks(args.network, target)
    out = {"network": args.network, "hardware_config": args.hardware_config, "loadavg_start": os.getloadavg()}
    for arm in args.arms:
        folder = os.path.join(args.run, arm)
        database = ms.database.JSONDatabase(os.path.join(folder, "database_workload.json"),
                                            os.path.join(folder, "database_tuning_record.json"))
        started = time.time()
        out[arm] = end_to_end(database, mod, target, args.network, config)
        out[arm]["seconds"] = time.time() - started
        print(arm, out[arm], flush=True)
    out["loadavg_end"] = os.getloadavg()
    with open(args.json, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
