"""TVM objects -> plain Python values and crosstune datasets (the bridge the cost-model adapter uses)."""

from __future__ import annotations

import math

import numpy as np

from .. import tokens
from ..dataset import OP_ARG_SLOTS, Dataset
from ..hardware.registry import HardwareSpec
from ..records.operators import Operator, operator_from_shapes


_SCALARS = (int, float, bool, type(None))


def plain(value):
    """TVM's JSON-like values (lists holding ffi Strings, IntImm, FloatImm, Arrays, Maps) as plain
    Python values. ``Trace.as_json()`` already returns Python lists, so the common cases come first."""
    kind = type(value)
    if kind is list or kind is tuple:
        return [plain(v) for v in value]
    if kind in _SCALARS or kind is str:
        return value
    if isinstance(value, str):  # tvm_ffi String
        return str(value)
    number = getattr(value, "value", None)  # IntImm / FloatImm
    if isinstance(number, (int, float)):
        return number
    if hasattr(value, "items"):
        return {str(k): plain(v) for k, v in value.items()}
    if hasattr(value, "__len__"):
        return [plain(v) for v in value]
    return str(value)


def workload_hash(workload) -> str:
    """The structural hash a MetaSchedule JSON database files a workload under (the first field of its
    workload line): the same for one task's module under different LLVM targets."""
    return str(plain(workload.as_json())[0])


def operator_of(mod) -> Operator:
    """The operator a task's IRModule computes: its SBlock names and parameter shapes."""
    import tvm

    import json

    from ..records.metaschedule import sblock_names_of_graph

    func = mod["main"]
    try:  # the SBlock names, read from TVM's JSON graph of the module (no visitor API needed)
        names = sblock_names_of_graph(json.loads(tvm.ir.save_json(mod)))
    except (ValueError, TypeError, KeyError):
        names = []
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo

    shapes = [[int(d) for d in info.shape] for info in ArgInfo.from_prim_func(func) if hasattr(info, "shape")]
    return operator_from_shapes(names, shapes)


def programs_dataset(token_lists: list[list[tokens.Token]], operator: Operator, hardware: HardwareSpec) -> Dataset:
    """An in-memory Dataset of candidate programs of one task on one hardware (latency unknown)."""
    n = len(token_lists)
    lengths = np.fromiter((len(t) for t in token_lists), dtype=np.int64, count=n)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    flat = [tok for toks in token_lists for tok in toks]
    kinds = np.fromiter((t[0] for t in flat), dtype=np.int8, count=len(flat))
    cats = np.fromiter((t[1] for t in flat), dtype=np.int16, count=len(flat))
    args = np.array([t[2] for t in flat], dtype=np.float32).reshape(-1, tokens.NUM_ARGS)
    op_args = np.zeros((n, OP_ARG_SLOTS), np.float32)
    values = np.log2(1.0 + np.abs(np.asarray(operator.args[:OP_ARG_SLOTS], dtype=np.float64)))
    op_args[:, : len(values)] = values
    return Dataset(
        record_id=np.arange(n, dtype=np.uint64), hardware_names=[hardware.name], hardware=np.zeros(n, np.int32),
        task_ids=["candidate-task"], task=np.zeros(n, np.int32), workload_keys=["candidate-task"],
        op_kind=np.full(n, operator.kind_id, np.int16), op_args=op_args,
        flops=np.full(n, operator.flops if math.isfinite(operator.flops) else np.nan),
        latency=np.full(n, np.nan), error_no=np.zeros(n, np.int16), offsets=offsets, kinds=kinds, cats=cats,
        args=args, specs={hardware.name: hardware},
    )


def measured_dataset(token_lists: list[list[tokens.Token]], latencies: list[float], operator: Operator,
                     hardware: HardwareSpec) -> Dataset:
    """``programs_dataset`` of a task's measured programs, with their latencies (seconds)."""
    data = programs_dataset(token_lists, operator, hardware)
    data.latency = np.asarray(latencies, dtype=np.float64)
    return data


def run_dataset(measured: dict, hardware: HardwareSpec) -> Dataset:
    """Every task's measured programs of a tuning run as one Dataset, one task (ranking group) per task of the
    run; ``measured``: task -> (operator, token lists, latencies), the cost-model adapter's store."""
    from dataclasses import replace

    parts = []
    for index, (operator, token_lists, latencies) in enumerate(measured.values()):
        part = measured_dataset(token_lists, latencies, operator, hardware)
        part.task = np.full(len(latencies), index, np.int32)
        parts.append(part)
    offsets = [np.zeros(1, np.int64)]
    total = 0
    for part in parts:
        offsets.append(part.offsets[1:] + total)
        total += part.offsets[-1]
    cat = lambda name: np.concatenate([getattr(p, name) for p in parts])  # noqa: E731
    names = [f"task{i}" for i in range(len(parts))]
    return replace(parts[0], record_id=np.arange(sum(len(p) for p in parts), dtype=np.uint64), hardware=cat("hardware"),
                   task=cat("task"), op_kind=cat("op_kind"), op_args=cat("op_args"), flops=cat("flops"),
                   latency=cat("latency"), error_no=cat("error_no"), offsets=np.concatenate(offsets),
                   kinds=cat("kinds"), cats=cat("cats"), args=cat("args"), task_ids=names, workload_keys=names)
