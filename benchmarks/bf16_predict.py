"""crossfeat's prediction under bfloat16 autocast against float32: programs/s on the batches of
bench_predict.py and the rank agreement of the two scorings.

    python benchmarks/bf16_predict.py [DATASET] [--train-hardware local-sse-2c] [--rounds 5] [--repeat 10]

Why: the default's matrix products are tall and thin (about 14,000 token rows of 64 columns per batch of
512), so they move more memory than they compute; a CPU with AVX512_BF16 or AMX runs bfloat16 products
natively and moves half the bytes. Autocast leaves layer norms, softmax and the score in float32.
"""

from __future__ import annotations

import time

import numpy as np
import torch
from scipy.stats import spearmanr

from bench_predict import prediction_batches, variant_benchmark_setup


class Bfloat16Scorer:
    """``model.predict`` with its matrix products in bfloat16."""

    def __init__(self, model):
        self.model = model

    def predict(self, programs) -> np.ndarray:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return self.model.predict(programs)


def main() -> None:
    args, model, others = variant_benchmark_setup(__doc__.splitlines()[0])
    variants = {"float32": model, "bfloat16 autocast": Bfloat16Scorer(model)}
    batches = prediction_batches(others, 512)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; "
          f"{torch.backends.cpu.get_cpu_capability()} kernels")
    times = {(name, b): [] for name in variants for b in batches}
    for scorer in variants.values():
        scorer.predict(batches["mixed"])  # warm-up
    for _ in range(args.rounds):  # taking turns, so that the VM's drifting speed hits both alike
        for name, scorer in variants.items():
            for b, batch in batches.items():
                for _ in range(args.repeat):
                    started = time.perf_counter()
                    scorer.predict(batch)
                    times[name, b].append(time.perf_counter() - started)
    for (name, b), t in times.items():
        n = len(batches[b])
        print(f"{name:20s} {b:9s} {n / min(t):7.0f} programs/s best, {n / np.median(t):7.0f} median ({n} programs)")
    float32, bfloat16 = model.predict(others), variants["bfloat16 autocast"].predict(others)
    agreement = spearmanr(float32, bfloat16).correlation
    print(f"Spearman rank correlation of the two scorings over {len(others)} programs: {agreement:.4f}; "
          f"largest score difference {np.abs(float32 - bfloat16).max():.3g}")


if __name__ == "__main__":
    main()
