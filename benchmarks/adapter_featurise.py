"""Programs per second through the cost-model adapter's path, stage by stage, on a tuning arm's real traces.

MetaSchedule's search asks the adapter to score ~2,500 candidates a round (512 x 4); each is a trace that
the adapter turns into crosstune tokens and a batch for the model. Two paths to the tokens are timed: the
adapter's since session 32, TVM's printed trace (``str(trace)``) read back by ``crosstune.tvm.trace_text``,
and the one before it, ``Trace.as_json`` then ``plain`` (TVM's C++ JSON writer, ``ffi.json.Stringify``,
cannot replace those: the trace's JSON holds ``ir.IntImm`` objects, which it refuses). The benchmark also
checks that both paths give the same tokens. Every stage is timed on the traces an arm measured (the same
kind of object the search hands over). Usage:

    python benchmarks/adapter_featurise.py MODEL_DIR ARM_DIR [--hardware-config local-avx512-2c]

ARM_DIR is one arm of `crosstune tune-compare` (it holds MetaSchedule's JSON database).
"""

from __future__ import annotations

import time

from arm_programs import model_and_arm_arguments, traces_by_task


def timed(function, *args):
    started = time.perf_counter()
    result = function(*args)
    return result, time.perf_counter() - started


def main() -> int:
    args = model_and_arm_arguments(__doc__.splitlines()[0], min_programs=64)

    from crosstune import tokens
    from crosstune.hardware.local import local_configurations
    from crosstune.models import load_model
    from crosstune.tvm.convert import operator_of, plain, programs_dataset
    from crosstune.tvm.trace_text import printed_trace_json

    model = load_model(args.model)
    spec = local_configurations()[args.hardware_config].spec
    tasks = traces_by_task(args.arm)
    stages = dict.fromkeys(("str(trace)", "read back (trace_text)", "tokenize", "batch", "model.predict",
                            "before: Trace.as_json", "before: plain", "before: tokenize"), 0.0)
    programs = differing = 0
    for mod, traces in tasks:
        if len(traces) < args.min_programs:
            continue
        texts, seconds = timed(lambda: [str(t) for t in traces])
        stages["str(trace)"] += seconds
        json_lists, seconds = timed(lambda: [printed_trace_json(text) for text in texts])
        stages["read back (trace_text)"] += seconds
        token_lists, seconds = timed(lambda: [tokens.tokenize_ms_trace(j) for j in json_lists])
        stages["tokenize"] += seconds
        batch, seconds = timed(programs_dataset, token_lists, operator_of(mod), spec)
        stages["batch"] += seconds
        _, seconds = timed(model.predict, batch)
        stages["model.predict"] += seconds
        raw_json, seconds = timed(lambda: [t.as_json() for t in traces])
        stages["before: Trace.as_json"] += seconds
        old_lists, seconds = timed(lambda: [plain(j) for j in raw_json])
        stages["before: plain"] += seconds
        old_tokens, seconds = timed(lambda: [tokens.tokenize_ms_trace(j) for j in old_lists])
        stages["before: tokenize"] += seconds
        differing += sum(a != b for a, b in zip(token_lists, old_tokens))
        programs += len(traces)
    if not programs:
        print(f"no task with >= {args.min_programs} measured programs")
        return 1
    for stage, seconds in stages.items():
        print(f"{stage:26s} {seconds:7.2f} s  {programs / seconds:9.0f} programs/s")
    now = sum(v for k, v in stages.items() if not k.startswith("before"))
    before = sum(v for k, v in stages.items() if k.startswith("before")) + stages["batch"] + stages["model.predict"]
    print(f"{programs} programs of {sum(len(t) >= args.min_programs for _, t in tasks)} tasks; whole path "
          f"{programs / now:.0f} programs/s (through as_json: {programs / before:.0f}); "
          f"{differing} programs whose tokens differ between the two paths")
    return 1 if differing else 0


if __name__ == "__main__":
    raise SystemExit(main())
