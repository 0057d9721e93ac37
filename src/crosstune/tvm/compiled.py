"""A network compiled with a tuning database's best programs: its output checked against PyTorch, and both
timed on the configuration's cores. `tune` times one; `arm_timing` several, interleaved in a fresh process."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

from .networks import network_instance

# A network whose kernels are mostly untuned can take seconds per run (BERT's layer: 4.4 s on one core),
# where 5 x 5 runs would take minutes and say no more: then single runs.
SLOW_RUN_SECONDS = 0.5
DATABASE_FILES = ("database_workload.json", "database_tuning_record.json")  # a MetaSchedule JSON database


class CompiledNetwork:
    """``check`` holds {output_max_abs_error, output_matches}; ``time_tvm`` and ``time_pytorch`` give
    per-run milliseconds."""

    def __init__(self, database, mod, target, network: str, num_cores: int):
        import torch
        import tvm
        from tvm import relax
        from tvm.s_tir import meta_schedule as ms

        os.environ["TVM_NUM_THREADS"] = str(num_cores)  # read when this process's TVM thread pool starts
        self.num_cores = num_cores
        executable = ms.relax_integration.compile_relax(database, mod, target, params=None)
        self.device = tvm.cpu()
        self.vm = relax.VirtualMachine(executable, self.device)
        self.model, self.example = network_instance(network)
        self.x = tvm.runtime.tensor(self.example.numpy(), self.device)
        started = time.perf_counter()
        out = self.vm["main"](self.x)
        self.first_run_seconds = time.perf_counter() - started
        if isinstance(out, (list, tuple)) or hasattr(out, "__getitem__") and not hasattr(out, "numpy"):
            out = out[0]
        with torch.no_grad():
            reference = self.model(self.example)
        reference = (reference[0] if isinstance(reference, (list, tuple)) else reference).numpy()
        got = out.numpy()
        self.check = {"output_max_abs_error": float(np.max(np.abs(got - reference))),
                      "output_matches": bool(np.allclose(got, reference, rtol=1e-3, atol=1e-3))}

    @property
    def slow(self) -> bool:
        return self.first_run_seconds >= SLOW_RUN_SECONDS

    def time_tvm(self, number: int, repeat: int) -> list[float]:
        """``repeat`` timings, each the mean of ``number`` runs (at least 100 ms of them), in ms."""
        timer = self.vm.time_evaluator("main", self.device, number=number, repeat=repeat, min_repeat_ms=100)
        return [float(r) * 1e3 for r in timer(self.x).results]

    def time_pytorch(self, runs: int, warmup: int = 3) -> list[float]:
        """PyTorch eager on the same number of threads, ``runs`` single runs in ms."""
        import torch

        threads = torch.get_num_threads()
        torch.set_num_threads(self.num_cores)
        times = []
        try:
            with torch.no_grad():
                for _ in range(warmup):
                    self.model(self.example)
                for _ in range(runs):
                    start = time.perf_counter()
                    self.model(self.example)
                    times.append((time.perf_counter() - start) * 1e3)
        finally:
            torch.set_num_threads(threads)
        return times


def compile_databases(run, folders: list[str], network: str, hardware_config: str, print_fn=print) -> dict:
    """{folder: CompiledNetwork} for each MetaSchedule JSON database ``run/folder`` (the network compiled with
    its best programs, output checked), on the configuration's cores."""
    from tvm.s_tir import meta_schedule as ms

    from .measure import configuration, target_of
    from .networks import extract_network_tasks

    config = configuration(hardware_config)
    os.environ["TVM_NUM_THREADS"] = str(config.num_cores)  # before TVM's thread pool starts
    target = target_of(config)
    mod, _ = extract_network_tasks(network, target)
    compiled = {}
    for folder in folders:
        database = ms.database.JSONDatabase(*(str(Path(run) / folder / name) for name in DATABASE_FILES),
                                            allow_missing=False)
        compiled[folder] = CompiledNetwork(database, mod, target, network, config.num_cores)
        print_fn(f"{folder}: compiled, output {'matches' if compiled[folder].check['output_matches'] else 'DIFFERS'}")
    return compiled


__all__ = ["DATABASE_FILES", "SLOW_RUN_SECONDS", "CompiledNetwork", "compile_databases"]
