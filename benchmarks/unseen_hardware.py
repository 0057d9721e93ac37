"""Which hardware token should score a machine crossfeat never trained on? A saved crossfeat model evaluated
on one held-out machine with each ``unseen_hardware`` setting (own descriptor; the nearest training machine's
token; the training machines' tokens mixed by inverse squared distance, or uniformly). Prediction only: the
same weights for every row, so the differences are the setting's alone.

    crosstune compare DS --test-hardware cortex-a72 --models crossfeat --out RUN ...
    python benchmarks/unseen_hardware.py RUN/seed0/crossfeat DS --hardware cortex-a72 --json OUT.json

Prints `crosstune eval`'s table per setting; the JSON holds, per setting, the keys of `eval --json`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from crosstune.dataset import load_dataset
from crosstune.errors import CrosstuneError
from crosstune.experiment import evaluate_model, trained_record_mask
from crosstune.models import load_model
from crosstune.models.crossfeat import UNSEEN_HARDWARE_MODES
from crosstune.reporting import eval_json, eval_table, write_json


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir")
    parser.add_argument("datasets", nargs="+")
    parser.add_argument("--hardware", required=True, help="the held-out machine")
    parser.add_argument("--modes", default=",".join(UNSEEN_HARDWARE_MODES))
    parser.add_argument("--json")
    args = parser.parse_args()
    model = load_model(args.model_dir)
    if model.kind != "crossfeat":
        parser.error(f"{args.model_dir} is a {model.kind} model; the setting is crossfeat's")
    if args.hardware in model.hardware_seen:
        parser.error(f"{args.hardware} is a training machine of this model")
    ds = load_dataset(args.datasets, hardware=[args.hardware])
    ds = ds.select(~trained_record_mask(ds, Path(args.model_dir)))
    results = {}
    for mode in args.modes.split(","):
        try:
            variant = model.with_unseen_hardware(mode)
        except CrosstuneError as err:
            parser.error(str(err))
        result, notes = evaluate_model(variant, ds, {"records": len(ds), "unseen_hardware": mode})
        print(f"\n== unseen_hardware={mode} ==\n{eval_table(result)}", flush=True)
        results[mode] = eval_json(result, notes)
        if args.json:  # after every setting: a stopped run keeps what it measured
            write_json(args.json, results)


if __name__ == "__main__":
    main()
