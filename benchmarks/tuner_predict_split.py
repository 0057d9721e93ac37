"""Where a tuner's cost-model call spends its time, per candidate: reading the trace, tokens, features, the
network (eager and compiled).

    python benchmarks/tuner_predict_split.py RUN [--hardware-config local-avx512-2c] [--programs 512] [--rounds 5]

RUN is a ``tune-compare`` folder: its ``xgb`` arm's MetaSchedule database gives real traces of the task
with the most records (the programs a search scores look like these), and ``RUN/crossfeat-model`` is the
pre-trained model the crosstune arm scored with. Each stage is timed the way the adapter
(``crosstune.tvm.costmodel``) runs it: ``Trace.as_json`` and ``plain``, ``tokenize_ms_trace``,
``programs_dataset`` with the descriptor the tuner scores with, then ``model.predict`` (featurising and the
network; an unseen machine is scored once per training machine, the ``similar`` mixture). The network is
then timed alone, eager against ``torch.compile``'d, on the same features. Best and median of
``--rounds`` passes over the programs, in ms per candidate.
"""

from __future__ import annotations

import argparse
import copy
import time
from pathlib import Path

import numpy as np
import torch


def _timed(fn, rounds: int) -> tuple[list[float], object]:
    out, times = None, []
    for _ in range(rounds):
        started = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - started)
    return times, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--hardware-config", default="local-avx512-2c")
    parser.add_argument("--programs", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    from tvm.s_tir import meta_schedule as ms

    from crosstune import tokens
    from crosstune.features import featurize
    from crosstune.models import load_model
    from crosstune.train import predict_scores
    from crosstune.tvm.convert import operator_of, plain, programs_dataset
    from crosstune.tvm.costmodel import scoring_descriptor
    from crosstune.tvm.measure import configuration

    db = ms.database.JSONDatabase(path_workload=str(args.run / "xgb" / "database_workload.json"),
                                  path_tuning_record=str(args.run / "xgb" / "database_tuning_record.json"))
    by_workload: dict = {}
    for record in db.get_all_tuning_records():
        by_workload.setdefault(record.workload, []).append(record)
    workload, records = max(by_workload.items(), key=lambda item: len(item[1]))
    traces = [r.trace for r in records[: args.programs]]
    model = load_model(args.run / "crossfeat-model")
    here = configuration(args.hardware_config).spec
    hardware, note = scoring_descriptor(model, args.hardware_config, here)
    operator = operator_of(workload.mod)
    print(f"{len(traces)} programs of the task with the most records ({len(records)}); torch threads "
          f"{torch.get_num_threads()}; {note or 'scored with its own descriptor'}")

    stages = {}
    stages["trace.as_json + plain"], as_json = _timed(lambda: [plain(t.as_json()) for t in traces], args.rounds)
    stages["tokenize_ms_trace"], token_lists = _timed(lambda: [tokens.tokenize_ms_trace(j) for j in as_json], args.rounds)
    stages["programs_dataset"], programs = _timed(lambda: programs_dataset(token_lists, operator, hardware), args.rounds)
    model.predict(programs)  # warm-up
    stages["model.predict (features + network, as the tuner)"], _ = _timed(lambda: model.predict(programs), args.rounds)
    feats = featurize(programs, model.normalizer)
    stages["network alone, one pass, eager"], eager = _timed(
        lambda: predict_scores(model.net, model.batch_tensors, feats), args.rounds)
    compiled = copy.copy(model).compile_inference()
    started = time.perf_counter()
    compiled.predict(programs)
    compile_seconds = time.perf_counter() - started
    forward = compiled._compiled_forward()
    stages["network alone, one pass, compiled"], fast = _timed(
        lambda: predict_scores(model.net, model.batch_tensors, feats, forward=forward), args.rounds)
    stages["model.predict compiled (as the tuner)"], _ = _timed(lambda: compiled.predict(programs), args.rounds)
    print(f"compiling: {compile_seconds:.1f} s (first call); largest score difference {np.abs(fast - eager).max():.1e}")
    n = len(traces)
    for name, times in stages.items():
        t = np.asarray(times) * 1e3 / n
        print(f"  {name:52s} {t.min():7.3f} ms best, {np.median(t):7.3f} median per candidate")


if __name__ == "__main__":
    main()
