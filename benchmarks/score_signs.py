"""How many of a crosstune model's raw scores are below 0 on the programs a tuning arm measured.

MetaSchedule's search clamps a cost model's scores at 0; before the adapter mapped them into (0, 1) every
program scored below 0 reached the search as 0 (docs/BENCHMARKS.md, "The search never saw the model's
ranking"). Usage:

    python benchmarks/score_signs.py MODEL_DIR ARM_DIR [--hardware-config local-avx512-2c]

ARM_DIR is one arm of `crosstune tune-compare` (it holds MetaSchedule's JSON database).
"""

from __future__ import annotations


import numpy as np

from arm_programs import model_and_arm_arguments, traces_by_task


def main() -> int:
    args = model_and_arm_arguments(__doc__.splitlines()[0], min_programs=10)

    from crosstune import tokens
    from crosstune.hardware.local import local_configurations
    from crosstune.models import load_model
    from crosstune.tvm.convert import operator_of, plain, programs_dataset

    model = load_model(args.model)
    spec = local_configurations()[args.hardware_config].spec
    tasks = traces_by_task(args.arm)
    total = below = 0
    rows = []
    for mod, traces in tasks:
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
