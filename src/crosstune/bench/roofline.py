"""Roofline of cost-model training: FLOPs and bytes per training sample against this machine's
measured peak (a large fp32 matrix product) and memory bandwidth (a large copy).

FLOPs come from PyTorch's FlopCounterMode over one forward + backward pass. Bytes moved are a
lower-bound model: every activation a module produces is written once and read once in the forward
pass and again in the backward pass, parameters and gradients are read and written once per step,
and AdamW reads and writes the parameter and its two moments; per sample = per step / batch size.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import numpy as np
import torch


def measure_peak_gflops(device: str = "cpu", n: int = 2048, repeats: int = 5) -> float:
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    best = float("inf")
    for _ in range(repeats):
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        start = time.perf_counter()
        torch.mm(a, b)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return 2 * n ** 3 / best / 1e9


def measure_bandwidth_gbs(device: str = "cpu", megabytes: int = 256, repeats: int = 5) -> float:
    src = torch.ones(megabytes * 1024 * 1024 // 4, device=device)
    dst = torch.empty_like(src)
    best = float("inf")
    for _ in range(repeats):
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        start = time.perf_counter()
        dst.copy_(src)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return 2 * src.numel() * 4 / best / 1e9


@dataclass
class Roofline:
    flops_per_sample: float
    bytes_per_sample: float
    samples_per_s: float
    peak_gflops: float
    bandwidth_gbs: float

    @property
    def intensity(self) -> float:
        return self.flops_per_sample / self.bytes_per_sample

    @property
    def achieved_gflops(self) -> float:
        return self.flops_per_sample * self.samples_per_s / 1e9

    @property
    def roof_gflops(self) -> float:
        return min(self.peak_gflops, self.intensity * self.bandwidth_gbs)

    @property
    def bound(self) -> str:
        return "memory" if self.intensity * self.bandwidth_gbs < self.peak_gflops else "compute"

    def to_json(self) -> dict:
        return {**asdict(self), "intensity_flop_per_byte": self.intensity, "achieved_gflops": self.achieved_gflops,
                "roof_gflops": self.roof_gflops, "bound": self.bound,
                "fraction_of_roof": self.achieved_gflops / self.roof_gflops,
                "ridge_point_flop_per_byte": self.peak_gflops / self.bandwidth_gbs}


def training_cost_per_sample(model, feats, rows: np.ndarray, device: str = "cpu") -> tuple[float, float]:
    """(FLOPs, bytes) of one training step over ``rows``, per sample."""
    from torch.utils.flop_counter import FlopCounterMode

    net = model.net if model.net is not None else model.build_net()
    net = net.to(device).train()
    tensors = model.batch_tensors(feats, rows, torch.device(device))
    activation_bytes = [0]

    def count(_module, _inputs, output):
        if torch.is_tensor(output):
            activation_bytes[0] += output.numel() * output.element_size()

    handles = [m.register_forward_hook(count) for m in net.modules() if not list(m.children())]
    try:
        with FlopCounterMode(display=False) as counter:
            net(**tensors).sum().backward()
    finally:
        for handle in handles:
            handle.remove()
    params = sum(p.numel() * p.element_size() for p in net.parameters())
    input_bytes = sum(t.numel() * t.element_size() for t in tensors.values())
    step_bytes = input_bytes + 4 * activation_bytes[0] + 4 * params + 6 * params  # see module docstring
    return counter.get_total_flops() / len(rows), step_bytes / len(rows)


def plot_roofline(roof: Roofline, path, title: str) -> None:
    from ..plotting import pyplot, save_figure

    plt = pyplot()

    intensity = np.logspace(-2, 3, 200)
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    ax.loglog(intensity, np.minimum(roof.peak_gflops, intensity * roof.bandwidth_gbs), color="black",
              label=f"roof: {roof.peak_gflops:.0f} GFLOP/s, {roof.bandwidth_gbs:.0f} GB/s")
    ax.loglog([roof.intensity], [roof.achieved_gflops], "o", color="tab:red",
              label=f"training: {roof.achieved_gflops:.1f} GFLOP/s at {roof.intensity:.2f} FLOP/byte")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("performance (GFLOP/s)")
    ax.set_title(title)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path)
