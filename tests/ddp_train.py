"""Run under torchrun by test_bench.py: data-parallel training of the cross-feature model on a real
dataset; every rank saves its final weights so the test can compare them. An optional third argument is
the device (benchmarks/gpu_transfer.sh runs it with `cuda`: two ranks on one GPU)."""

import os
import sys
from pathlib import Path

import numpy as np
from safetensors.torch import save_file

from crosstune.dataset import load_dataset
from crosstune.models import FitOptions, create_model
from crosstune.train import TrainConfig, TrainHooks


class DieOnRank(TrainHooks):
    def epoch_start(self, epoch):
        if os.environ.get("CROSSTUNE_TEST_DIE_RANK") == os.environ.get("RANK"):
            os._exit(3)  # a rank that dies without saying goodbye


def main(dataset: str, out: str, device: str = "cpu") -> None:
    ds = load_dataset([dataset])
    rows = np.concatenate([np.flatnonzero(ds.group == g)[:100] for g in np.unique(ds.group)])
    ds = ds.select(rows)
    model = create_model("crossfeat", TrainConfig(epochs=2, seed=1, device=device))
    model.fit(ds, None, FitOptions(progress=False, hooks=DieOnRank()))
    save_file({k: v.contiguous() for k, v in model.net.state_dict().items()},
              str(Path(out) / f"rank{os.environ['RANK']}.safetensors"))


if __name__ == "__main__":
    main(*sys.argv[1:4])  # DATASET OUT [DEVICE]
