"""crossfeat's prediction with its linear layers quantized to int8 (PyTorch's dynamic quantization) against
float32: programs/s on the mixed batch of bench_predict.py and the rank agreement of the two scorings.

    python benchmarks/int8_predict.py [DATASET] [--train-hardware local-sse-2c] [--rounds 5] [--repeat 10]
"""

from __future__ import annotations

import copy
import time

import numpy as np
import torch
from scipy.stats import spearmanr
from torch.ao.quantization import quantize_dynamic

from bench_predict import prediction_batches, variant_benchmark_setup


def main() -> None:
    args, model, others = variant_benchmark_setup(__doc__.splitlines()[0])
    int8 = copy.copy(model)
    int8.net = quantize_dynamic(copy.deepcopy(model.net), {torch.nn.Linear}, dtype=torch.qint8)
    batch = prediction_batches(others, 512)["mixed"]
    variants = {"float32": model, "int8 linear layers": int8}
    times = {name: [] for name in variants}
    for scorer in variants.values():
        scorer.predict(batch)  # warm-up
    for _ in range(args.rounds):  # taking turns, so that the VM's drifting speed hits both alike
        for name, scorer in variants.items():
            for _ in range(args.repeat):
                started = time.perf_counter()
                scorer.predict(batch)
                times[name].append(time.perf_counter() - started)
    for name, t in times.items():
        print(f"{name:20s} {len(batch) / min(t):7.0f} programs/s best, {len(batch) / np.median(t):7.0f} median")
    agreement = spearmanr(model.predict(others), int8.predict(others)).correlation
    print(f"Spearman rank correlation of the two scorings over {len(others)} programs: {agreement:.4f}")


if __name__ == "__main__":
    main()
