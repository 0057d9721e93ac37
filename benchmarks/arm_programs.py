"""What the benchmarks that read a tuning arm share: MODEL ARM arguments and the arm's measured traces by task."""

from __future__ import annotations

import argparse
from pathlib import Path


def model_and_arm_arguments(description: str, min_programs: int) -> argparse.Namespace:
    """MODEL_DIR ARM_DIR [--hardware-config] [--min-programs]; ARM_DIR must hold MetaSchedule's JSON database."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("model", type=Path)
    parser.add_argument("arm", type=Path)
    parser.add_argument("--hardware-config", default="local-avx512-2c")
    parser.add_argument("--min-programs", type=int, default=min_programs,
                        help="leave out tasks with fewer measured programs")
    args = parser.parse_args()
    for name in ("database_workload.json", "database_tuning_record.json"):
        if not (args.arm / name).is_file():
            parser.error(f"{args.arm} holds no MetaSchedule database ({name} missing)")
    return args


def traces_by_task(arm: Path) -> list[tuple]:
    """(task module, [trace of every program measured for it]) per task of the arm's database."""
    from tvm.s_tir import meta_schedule as ms

    from crosstune.tvm.convert import workload_hash

    database = ms.database.JSONDatabase(path_workload=str(arm / "database_workload.json"),
                                        path_tuning_record=str(arm / "database_tuning_record.json"),
                                        allow_missing=False)
    by_task: dict[str, tuple] = {}
    for record in database.get_all_tuning_records():
        by_task.setdefault(workload_hash(record.workload), (record.workload.mod, []))[1].append(record.trace)
    return list(by_task.values())
