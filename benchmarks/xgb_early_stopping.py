"""Does early stopping on the validation tasks help xgb on an unseen device? Zero-shot PCA and Σ top-k of xgb
trained on one GPU's records and tested on the other's, with patience 30 and 100 (best round kept), and with all
300 rounds (validation tasks left out of training, as in the other runs, or added to it).

    python benchmarks/xgb_early_stopping.py DS [--test-hardware v100,k80] [--seeds 0,1] [--json OUT.json]

DS: the shared K80 + V100 records (benchmarks/cpu_compare.sh imports them).
"""

from __future__ import annotations

import argparse
import json
import time

from crosstune.dataset import load_dataset
from crosstune.experiment import VALID_FRACTION, SplitOptions
from crosstune.metrics import evaluate
from crosstune.models.gbdt import XGBConfig, XGBModel
from crosstune.splits import holdout_groups

# (name, early_stopping_rounds, validate on the held-out training tasks, train on them too)
VARIANTS = (("patience 30", 30, True, False), ("patience 100", 100, True, False),
            ("all rounds", 0, True, False), ("all rounds, validation tasks trained on", 0, False, True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset")
    parser.add_argument("--test-hardware", default="v100,k80")
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--json")
    args = parser.parse_args()
    ds = load_dataset([args.dataset])
    results = []
    for test in args.test_hardware.split(","):
        for seed in map(int, args.seeds.split(",")):
            split, _ = SplitOptions(test_hardware=[test]).make(ds, seed)
            fit_rows, valid_rows = holdout_groups(ds, split.train, VALID_FRACTION, seed)
            test_ds = ds.select(split.test)
            for name, patience, validate, train_on_valid in VARIANTS:
                model = XGBModel(XGBConfig(early_stopping_rounds=patience, seed=seed))
                started = time.perf_counter()
                history = model.fit(ds.select(split.train if train_on_valid else fit_rows),
                                    ds.select(valid_rows) if validate else None)
                overall = evaluate(test_ds, model.predict(test_ds))["overall"]
                row = {"test": test, "seed": seed, "variant": name, "rounds": history.get("best_round", history["rounds"]),
                       "seconds": time.perf_counter() - started,
                       **{k: overall[k] for k in ("pca", "top1", "top5", "top1_mean")}}
                results.append(row)
                print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as stream:
            json.dump(results, stream, indent=1)


if __name__ == "__main__":
    main()
