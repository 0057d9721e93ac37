"""This machine as a hardware descriptor, and its ISA-level x core-count configurations.

The configurations (``local-sse-1c`` ... ``local-avx512-2c``) compile the same programs for different
vector ISAs and thread counts on the same CPU. They are honest stand-ins for different hardware: the
silicon, caches and memory are identical; vector width and parallelism differ. Their descriptors
say so in ``notes``.
"""

from __future__ import annotations

import functools
import os
import re
import time
from dataclasses import dataclass, replace
from pathlib import Path

from ..errors import CrosstuneError
from .registry import HardwareSpec


def _cpuinfo() -> dict[str, str]:
    info: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, sep, value = line.partition(":")
            if sep and key.strip() not in info:
                info[key.strip()] = value.strip()
    except OSError:
        pass
    return info


def cpu_flags() -> set[str]:
    return set(_cpuinfo().get("flags", "").split())


def _cache_kb(level: int, cache_type: str) -> float:
    """Per-core (L1, L2) or shared (L3) cache size from sysfs, in KB."""
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    if not base.is_dir():
        return 0.0
    for index in sorted(base.glob("index*")):
        try:
            if int((index / "level").read_text()) == level and (index / "type").read_text().strip() in cache_type:
                text = (index / "size").read_text().strip()
                match = re.match(r"(\d+)([KMG]?)", text)
                if match:
                    scale = {"": 1 / 1024, "K": 1, "M": 1024, "G": 1024 * 1024}[match.group(2)]
                    return float(match.group(1)) * scale
        except (OSError, ValueError):
            continue
    return 0.0


def _mem_gb() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except (OSError, ValueError, IndexError):
        pass
    return 0.0


def _two_significant(value: float) -> float:
    """Measured figures are frozen to two significant digits: a descriptor must come out the same in
    every process on one machine (an import refuses a descriptor that differs from the dataset's)."""
    if value <= 0:
        return value
    return float(f"{value:.2g}")


def _max_clock_mhz() -> float:
    """The CPU's nominal maximum clock (sysfs), which, unlike /proc/cpuinfo's current MHz, does not
    move with load and power saving."""
    try:
        return int(Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq").read_text()) / 1000.0
    except (OSError, ValueError):
        return 0.0


def measure_copy_bandwidth_gbs(megabytes: int = 128, repeats: int = 5) -> float:
    """Sustained memory bandwidth of a large array copy (read + write bytes counted), best of N, to two
    significant digits."""
    import numpy as np

    src = np.ones(megabytes * 1024 * 1024 // 8)
    dst = np.empty_like(src)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - start)
    return _two_significant(2 * src.nbytes / best / 1e9)


def _vector_bytes(flags: set[str]) -> int:
    if "avx512f" in flags:
        return 64
    if "avx2" in flags or "avx" in flags:
        return 32
    if "asimd" in flags or "sse2" in flags:
        return 16
    return 8


def _fp32_flops_per_cycle(vector_bytes: int, flags: set[str]) -> int:
    # Two FMA pipes on current server cores; an FMA counts as two FLOPs. Without FMA, one add and one
    # multiply per cycle.
    lanes = vector_bytes // 4
    return lanes * 2 * 2 if ("fma" in flags or "asimd" in flags) else lanes * 2


@functools.lru_cache(maxsize=1)
def detect_local() -> HardwareSpec:
    """Descriptor of this machine (the cores this process may use)."""
    info = _cpuinfo()
    flags = cpu_flags()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    clock = _max_clock_mhz()
    if clock <= 0:
        try:
            clock = _two_significant(float(info.get("cpu MHz", "0")))
        except ValueError:
            clock = 0.0
    if clock <= 0:
        clock = 2000.0  # not reported (some ARM kernels); a placeholder that keeps the schema valid
    vector = _vector_bytes(flags)
    peak = cores * clock / 1000 * _fp32_flops_per_cycle(vector, flags)
    model = info.get("model name", info.get("Model", "unknown CPU"))
    vendor = info.get("vendor_id", "unknown")
    return HardwareSpec(
        name="local", kind="cpu", vendor=vendor, arch=model, compute_units=cores, clock_mhz=clock,
        peak_fp32_gflops=round(peak, 1), mem_bandwidth_gbs=measure_copy_bandwidth_gbs(),
        l1_kb=_cache_kb(1, "Data Unified") or 32.0, l2_kb=_cache_kb(2, "Unified") or 256.0,
        l3_kb=_cache_kb(3, "Unified"), shared_mem_per_block_kb=0, warp_size=0, max_threads_per_block=0,
        vector_bytes=vector, mem_gb=_mem_gb(),
        source="detected from /proc/cpuinfo and sysfs; memory bandwidth measured with a 128 MB copy; "
               "clock and bandwidth to two significant digits; peak assumes 2 FMA pipes per core",
    )


@dataclass(frozen=True)
class LocalConfiguration:
    """One way to compile for this CPU: an LLVM mcpu (vector ISA) and a thread count."""

    name: str
    mcpu: str
    num_cores: int
    required_flag: str  # /proc/cpuinfo flag the ISA needs
    spec: HardwareSpec

    def check_supported(self) -> None:
        if self.required_flag and self.required_flag not in cpu_flags():
            raise CrosstuneError(
                f"hardware configuration {self.name} needs the CPU flag {self.required_flag}, "
                f"which this CPU ({detect_local().arch}) does not have")
        available = detect_local().compute_units
        if self.num_cores > available:
            raise CrosstuneError(f"hardware configuration {self.name} needs {self.num_cores} cores; "
                                 f"this process may use {int(available)}")


_ISAS = (("sse", "x86-64", 16, "sse2"), ("avx2", "haswell", 32, "avx2"), ("avx512", "skylake-avx512", 64, "avx512f"))


@functools.lru_cache(maxsize=1)
def local_configurations() -> dict[str, LocalConfiguration]:
    """Every ISA level x {1, 2} cores, whether or not this CPU supports it (check_supported says)."""
    base = detect_local()
    flags = cpu_flags()
    configs = {}
    for isa, mcpu, vector, flag in _ISAS:
        for cores in (1, 2):
            name = f"local-{isa}-{cores}c"
            per_core_peak = base.clock_mhz / 1000 * _fp32_flops_per_cycle(vector, flags if isa != "sse" else set())
            spec = replace(
                base, name=name, compute_units=cores, vector_bytes=vector,
                peak_fp32_gflops=round(cores * per_core_peak, 1),
                notes=(f"This CPU compiled for mcpu={mcpu} with {cores} thread(s): a stand-in for different "
                       "hardware that shares the silicon, caches and memory of the machine and differs in "
                       "vector width and parallelism only."),
            )
            configs[name] = LocalConfiguration(name, mcpu, cores, flag, spec)
    return configs
