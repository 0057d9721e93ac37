"""The cost model's fast featurisation: a trace read back from TVM's printed form gives the same tokens as
``Trace.as_json`` (crosstune.tvm.trace_text)."""

from __future__ import annotations

from pathlib import Path

import pytest

from crosstune import tokens
from crosstune.tvm.trace_text import UnreadableTrace, printed_trace_json, trace_tokens

DATA = Path(__file__).parent / "data"

PRINTED = '''# from tvm import s_tir
def apply_trace(sch: s_tir.Schedule) -> None:
  b0 = sch.get_sblock(name="conv", func_name="main")
  l1, l2 = sch.get_loops(block=b0)
  v3, v4 = sch.sample_perfect_tile(loop=l1, n=2, max_innermost_factor=64, decision=[7, 8])
  l5, l6 = sch.split(loop=l1, factors=[v3, v4], preserve_unit_iters=True, disable_predication=False)
  l7, l8 = sch.split(loop=l2, factors=[None, 16], preserve_unit_iters=True, disable_predication=False)
  sch.reorder(l5, l7, l6, l8)
  v9 = sch.sample_categorical(candidates=[0, 16, 64, 512], probs=[T.float32(0.25), T.float32(0.25), T.float32(0.25), T.float32(0.25)], decision=3)
  sch.annotate(block_or_loop=b0, ann_key="meta_schedule.unroll_explicit", ann_val=v9)
  b10 = sch.cache_write(block=b0, write_buffer_index=0, storage_scope="global")
  l11 = sch.sample_compute_location(block=b10, decision=2)
  sch.reverse_compute_at(block=b10, loop=l11, preserve_unit_loops=True, index=-1)
  sch.enter_postproc()
  sch.parallel(loop=l5)
  sch.vectorize(loop=l8)
'''

# the same trace as Trace.as_json() writes it (look-ups included: they give no token)
AS_JSON = [[
    ["GetSBlock", [], ["conv", "main"], ["b0"]],
    ["GetLoops", ["b0"], [], ["l1", "l2"]],
    ["SamplePerfectTile", ["l1"], [2, 64], ["v3", "v4"]],
    ["Split", ["l1", "v3", "v4"], [True, False], ["l5", "l6"]],
    ["Split", ["l2", None, 16], [True, False], ["l7", "l8"]],
    ["Reorder", ["l5", "l7", "l6", "l8"], [], []],
    ["SampleCategorical", [], [[0, 16, 64, 512], [0.25, 0.25, 0.25, 0.25]], ["v9"]],
    ["Annotate", ["b0", "v9"], ["meta_schedule.unroll_explicit"], []],
    ["CacheWrite", ["b0"], [0, "global"], ["b10"]],
    ["SampleComputeLocation", ["b10"], [], ["l11"]],
    ["ReverseComputeAt", ["b10", "l11"], [True, -1], []],
    ["EnterPostproc", [], [], []],
    ["Parallel", ["l5"], [], []],
    ["Vectorize", ["l8"], [], []],
], [[2, [7, 8]], [6, 3], [9, 2]]]


def test_a_printed_trace_gives_the_tokens_of_its_json_form():
    got = tokens.tokenize_ms_trace(printed_trace_json(PRINTED))
    assert got == tokens.tokenize_ms_trace(AS_JSON)
    kinds = [tokens.KINDS[t[0]] for t in got]
    assert kinds == ["split", "split", "reorder", "unroll", "cache_write", "reverse_compute_at", "parallel", "vectorize"]
    assert got[3][2] != tokens.tokenize_ms_trace([AS_JSON[0], [[2, [7, 8]], [6, 0], [9, 2]]])[3][2]  # the decision counts


@pytest.mark.parametrize("changed", [
    ("sch.parallel(loop=l5)", "sch.storage_align(block=b0, buffer_index=0, axis=1, factor=32, offset=8)"),  # not read here
    ("sch.parallel(loop=l5)", "sch.parallel(loop=l5"),  # cut short
    ('storage_scope="global"', 'storage_scope="glo\\"bal"'),  # an escaped quote
    ("  sch.enter_postproc()\n", "  sch.enter_postproc()\n  # a comment\n"),  # a line that is no statement
    ("def apply_trace", "def other"),
])
def test_a_statement_it_does_not_read_is_refused_not_guessed(changed):
    with pytest.raises(UnreadableTrace):
        printed_trace_json(PRINTED.replace(*changed))


def test_an_unreadable_trace_is_tokenized_from_its_json_instead():
    class Unprintable:  # what a trace whose printed form this module cannot read looks like to it
        def __str__(self):
            return PRINTED.replace("sch.parallel(loop=l5)", "sch.storage_align(block=b0, buffer_index=0, axis=1, factor=32, offset=8)")

        def as_json(self):
            return AS_JSON

    assert trace_tokens(Unprintable()) == tokens.tokenize_ms_trace(AS_JSON)


@pytest.mark.tvm
def test_every_trace_of_a_real_tuning_database_reads_the_same_both_ways():
    pytest.importorskip("tvm")
    from tvm.s_tir import meta_schedule as ms

    from crosstune.tvm.convert import plain

    folder = DATA / "ms-resnet18-2tasks"
    database = ms.database.JSONDatabase(path_workload=str(folder / "database_workload.json"),
                                        path_tuning_record=str(folder / "database_tuning_record.json"))
    traces = [record.trace for record in database.get_all_tuning_records()]  # post-processed, as measured
    assert len(traces) >= 20
    traces += [space.trace for space in _matmul_design_spaces()]  # sketches with sampled decisions
    for trace in traces:
        assert tokens.tokenize_ms_trace(printed_trace_json(str(trace))) == tokens.tokenize_ms_trace(plain(trace.as_json()))


def _matmul_design_spaces():
    import tvm
    from tvm import te
    from tvm.s_tir import meta_schedule as ms

    a = te.placeholder((128, 64), name="A")
    b = te.placeholder((64, 96), name="B")
    k = te.reduce_axis((0, 64), name="k")
    c = te.compute((128, 96), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    mod = tvm.IRModule({"main": te.create_prim_func([a, b, c])})
    context = ms.TuneContext(mod=mod, target=tvm.target.Target({"kind": "llvm", "num-cores": 2}),
                             space_generator="post-order-apply", task_name="matmul")
    spaces = context.generate_design_space()
    assert spaces
    return spaces
