"""Builders, runners and targets for measuring programs on this machine or through an RPC tracker."""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..errors import CrosstuneError
from ..hardware.local import LocalConfiguration, local_configurations


def build_without_tensor_intrin(mod, target, _params):
    """MetaSchedule's default build minus its import of ``tvm.s_tir.tensor_intrin``, which costs
    20-30 s in every fresh builder worker and is only needed for tensorized (intrinsic) programs."""
    from tvm.driver import build as tvm_build
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
    return tvm_build(mod, target=target)


def _one_thread() -> None:
    # TVM's runtime reads TVM_NUM_THREADS when its thread pool first starts, so setting it in the
    # runner worker's initializer limits every measurement of that worker.
    os.environ["TVM_NUM_THREADS"] = "1"


def _two_threads() -> None:
    os.environ["TVM_NUM_THREADS"] = "2"


_THREAD_INITIALIZERS = {1: _one_thread, 2: _two_threads}


def configuration(name: str) -> LocalConfiguration:
    configs = local_configurations()
    if name not in configs:
        raise CrosstuneError(f"unknown hardware configuration {name!r}; known: {', '.join(configs)}")
    return configs[name]


def target_of(config: LocalConfiguration):
    from tvm.target import Target

    return Target({"kind": "llvm", "num-cores": config.num_cores, "mcpu": config.mcpu})


@dataclass(frozen=True)
class RpcSettings:
    tracker: str  # HOST:PORT
    device_key: str
    session_timeout_s: float = 60.0

    @property
    def host_port(self) -> tuple[str, int]:
        host, _, port = self.tracker.rpartition(":")
        if not host or not port.isdigit():
            raise CrosstuneError(f"--rpc-tracker must be HOST:PORT, not {self.tracker!r}")
        return host, int(port)


def build_and_export(mod, target) -> str:
    """One build in a builder worker: the module built as above and exported where the runner loads it."""
    from tvm.s_tir.meta_schedule.builder.local_builder import default_export

    return default_export(build_without_tensor_intrin(mod, target, None))


BUILDS_PER_POOL = 32  # calls before the builder's workers are replaced (see make_builder)


def make_builder(workers: int = 2, timeout_sec: float = 60.0, builds_per_pool: int = BUILDS_PER_POOL):
    """A MetaSchedule builder whose worker processes live across calls. MetaSchedule's LocalBuilder starts
    a fresh pool on every call (its workers leak memory over many uses): each worker imports TVM, 6.4-6.9 s
    for two workers on the AMD EPYC's 2 cores, paid once per tuning round, so a one-program round spent
    almost all its build time starting workers. These workers are replaced every ``builds_per_pool`` calls,
    which bounds the leak and pays that start once per so many rounds."""
    from tvm.ir.utils import derived_object
    from tvm.s_tir import meta_schedule as ms
    from tvm.support.popen_pool import PopenPoolExecutor, StatusKind

    @derived_object
    class KeptPoolBuilder(ms.builder.PyBuilder):
        def __init__(self) -> None:
            super().__init__()
            self.pool, self.calls = None, 0

        def build(self, build_inputs):
            if self.pool is None or self.calls >= builds_per_pool:
                if self.pool is not None:
                    self.pool.shutdown()
                self.pool, self.calls = PopenPoolExecutor(max_workers=workers, timeout=timeout_sec), 0
            self.calls += 1
            results = []
            jobs = [(x.mod, x.target) for x in build_inputs if x.params is None]
            outcomes = iter(self.pool.map_with_error_catching(lambda job: build_and_export(*job), jobs))
            for build_input in build_inputs:
                if build_input.params is not None:  # MetaSchedule's tuning never binds parameters
                    results.append(ms.builder.BuilderResult(None, "crosstune's builder takes no bound params"))
                    continue
                outcome = next(outcomes)
                if outcome.status == StatusKind.COMPLETE:
                    results.append(ms.builder.BuilderResult(outcome.value, None))
                elif outcome.status == StatusKind.TIMEOUT:
                    results.append(ms.builder.BuilderResult(None, f"build timed out after {timeout_sec} s"))
                else:
                    results.append(ms.builder.BuilderResult(None, f"build failed:\n{outcome.value}"))
            return results

    return KeptPoolBuilder()


def evaluator_config():
    from tvm.s_tir import meta_schedule as ms

    # 3 repeats of at least 10 ms each: enough to see through timer noise on a 2-core machine
    # without making measurement the bottleneck of collection.
    return ms.runner.EvaluatorConfig(number=1, repeat=3, min_repeat_ms=10, enable_cpu_cache_flush=False)


def make_runner(config: LocalConfiguration, rpc: RpcSettings | None = None):
    """A LocalRunner limited to the configuration's thread count, or an RPCRunner through a tracker."""
    from tvm.s_tir import meta_schedule as ms

    if rpc is not None:
        host, port = rpc.host_port
        return ms.runner.RPCRunner(
            rpc_config=ms.runner.RPCConfig(tracker_host=host, tracker_port=port, tracker_key=rpc.device_key,
                                           session_timeout_sec=rpc.session_timeout_s),
            evaluator_config=evaluator_config(), max_workers=1)
    return ms.runner.LocalRunner(timeout_sec=60, evaluator_config=evaluator_config(),
                                 initializer=_THREAD_INITIALIZERS.get(config.num_cores))


@dataclass(frozen=True)
class Measurement:
    """One program built and run: its run seconds, or the stage that failed and TVM's message."""
    run_secs: list[float] | None
    error: str | None = None
    stage: str | None = None  # "build" or "run" when error is set


def build_and_run(schedules: list, target, args_info: list, builder, runner) -> list[Measurement]:
    """Build every schedule's module and run those that built, as MetaSchedule's own measuring does (its
    builder and runner), one Measurement per schedule in order. The build artifacts are removed once run
    (MetaSchedule's tuner does that in a measure callback)."""
    import shutil

    from tvm.s_tir import meta_schedule as ms

    built = builder.build([ms.builder.BuilderInput(sch.mod, target) for sch in schedules])
    run_inputs, run_of = [], {}
    for i, result in enumerate(built):
        if result.error_msg is None:
            run_of[i] = len(run_inputs)
            run_inputs.append(ms.runner.RunnerInput(result.artifact_path, "cpu", args_info))
    ran = [future.result() for future in runner.run(run_inputs)] if run_inputs else []
    for run_input in run_inputs:
        # each module is exported into a temporary folder of its own
        shutil.rmtree(os.path.dirname(run_input.artifact_path), ignore_errors=True)
    measured = []
    for i, result in enumerate(built):
        if result.error_msg is not None:
            measured.append(Measurement(None, str(result.error_msg), "build"))
        elif ran[run_of[i]].error_msg is not None:
            measured.append(Measurement(None, str(ran[run_of[i]].error_msg), "run"))
        else:
            measured.append(Measurement([float(s) for s in ran[run_of[i]].run_secs]))
    return measured
