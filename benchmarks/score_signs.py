"""How many of a crosstune model's raw scores are below 0 on the programs a tuning arm measured.

MetaSchedule's search clamps a cost model's scores at 0; before the adapter mapped them into (0, 1) every
program scored below 0 reached the search as 0 (docs/BENCHMARKS.md, "The search never saw the model's
ranking"). Usage:

    python benchmarks/score_signs.py MODEL_DIR ARM_DIR [--hardware-config local-avx512-2c]

ARM_DIR is one arm of `crosstune tune-compare` (it holds MetaSchedule's JSON database).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("arm", type=Path)
    parser.add_argument("--hardware-config", default="local-avx512-2c")
    parser.add_argument("--min-programs", type=int, default=10, help="leave out tasks with fewer measured programs")
    args = parser.parse_args()
    for name in ("database_workload.json", "database_tuning_record.json"):
        if not (args.arm / name).is_file():
            parser.error(f"{args.arm} holds no MetaSchedule database ({name} missing)")

    from tvm.s_tir import meta_schedule as ms

    from crosstune import tokens
    from crosstune.hardware.local import local_configurations
    from crosstune.models import load_model
    from crosstune.tvm.convert import operator_of, plain, programs_dataset

    model = load_model(args.model)
    spec = local_configurations()[args.hardware_config].spec
    database = ms.database.JSONDatabase(path_workload=str(args.arm / "database_workload.json"),
                                        path_tuning_record=str(args.arm / "database_tuning_record.json"),
                                        allow_missing=False)
    by_task: dict[str, tuple] = {}
    for record in database.get_all_tuning_records():
        by_task.setdefault(str(plain(record.workload.as_json())[0]), (record.workload.mod, []))[1].append(record.trace)
    total = below = 0
    rows = []
    for mod, traces in by_task.values():
        if len(traces) < args.min_programs:
            continue
        programs = programs_dataset([tokens.tokenize_ms_trace(plain(t.as_json())) for t in traces], operator_of(mod), spec)
        raw = np.asarray(model.predict(programs), dtype=np.float64)
        total += len(raw)
        below += int((raw < 0).sum())
        rows.append((len(raw), float((raw < 0).mean()), float(raw.min()), float(np.median(raw)), float(raw.max())))
    for n, share, low, median, high in sorted(rows, reverse=True):
        print(f"programs {n:5d}  below 0: {100 * share:5.1f}%  min {low:8.3f}  median {median:8.3f}  max {high:8.3f}")
    if total:
        print(f"tasks with >= {args.min_programs} programs: {below} of {total} raw scores below 0 ({100 * below / total:.1f}%)")
    else:
        print(f"no task with >= {args.min_programs} measured programs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
