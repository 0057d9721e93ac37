"""Pre-train crossfeat the way ``crosstune tune-compare`` does, on chosen data, for its ``--model``.

tune-compare pre-trains into its own --out, on every configuration but the one it tunes (zero-shot) or, with
``--pretrain-on all``, on every one. This trains the same recipe once, outside any run, so that several runs
can share one model, on any data: more datasets (the AutoTVM logs of other CPUs), or every configuration,
the tuned one included (``--hold-out`` left out; the report then says the run is not zero-shot).

    python benchmarks/pretrain_for_tuner.py src/crosstune/data/local-cpu X86 --hold-out local-avx512-2c --out M
    python benchmarks/pretrain_for_tuner.py src/crosstune/data/local-cpu --out M
    python benchmarks/pretrain_for_tuner.py src/crosstune/data/local-cpu --hold-out local-avx512-2c \
        --arch lane_features=true --out M-lanes

Prints what was trained (tune-compare's pretrain.json) and writes it beside the model as M.pretrain.json.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from crosstune.atomic import write_text as atomic_write_text
from crosstune.commands import parse_settings
from crosstune.errors import CrosstuneError
from crosstune.tvm.tune_compare import pretrain_crossfeat


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("datasets", nargs="+", metavar="DATASET")
    parser.add_argument("--hold-out", metavar="CONFIG", help="hardware left out of the training (default: none)")
    parser.add_argument("--epochs", type=int, default=8, help="tune-compare's default (8)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--arch", type=parse_settings, default={}, metavar="NAME=VALUE,...",
                        help="crossfeat settings other than its defaults, e.g. lane_features=true")
    parser.add_argument("--out", type=Path, required=True, metavar="MODEL_DIR")
    args = parser.parse_args()
    # no configuration is named None, so without --hold-out every one is trained on
    try:
        info = pretrain_crossfeat(args.datasets, args.hold_out, args.epochs, args.seed, str(args.out), args.arch)
    except CrosstuneError as error:
        raise SystemExit(f"error: {error}") from None
    text = json.dumps(info, indent=1)
    atomic_write_text(args.out.with_name(args.out.name + ".pretrain.json"), text)
    print(text)


if __name__ == "__main__":
    main()
