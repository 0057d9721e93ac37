"""The shared vocabulary: the same primitive from Ansor and MetaSchedule gets the same kind."""

from __future__ import annotations

import math

from crosstune import tokens


def kind(token) -> str:
    return tokens.KINDS[token[0]]


def test_ansor_steps_map_to_primitives_with_log_scaled_factors():
    split = tokens.tokenize_ansor_step(["SP", 2, 0, 512, [8, 4], 1])
    assert kind(split) == "split"
    assert split[2][2] == 9.0 and split[2][3] == 3 and split[2][4] == 3.0 and split[2][5] == 2.0
    assert kind(tokens.tokenize_ansor_step(["AN", 1, 0, 6])) == "bind"
    assert tokens.CATEGORIES[tokens.tokenize_ansor_step(["AN", 1, 0, 6])[1]] == "threadIdx.x"
    assert kind(tokens.tokenize_ansor_step(["AN", 1, 0, 2])) == "vectorize"
    unroll = tokens.tokenize_ansor_step(["PR", 1, 0, "auto_unroll_max_step$512"])
    assert kind(unroll) == "unroll" and math.isclose(unroll[2][2], math.log2(513))
    assert tokens.CATEGORIES[tokens.tokenize_ansor_step(["CHR", 2, "shared", [3]])[1]] == "shared"
    for step, name in ((["CI", 1], "compute_inline"), (["CR", 6], "compute_root"), (["RF", 3, 2, 1], "rfactor"),
                       (["FU", 2, [0, 1]], "fuse"), (["RE", 2, [1, 0]], "reorder"), (["CA", 1, 2, 3], "compute_at"),
                       (["FSP", 4, 0, 1, 2], "follow_split"), (["FFSP", 4, 0, [1, 2], 1, 1], "follow_fused_split"),
                       (["SA", 1, 0, 32, 1], "storage_align"), (["CHW", 1, "local"], "cache_write")):
        assert kind(tokens.tokenize_ansor_step(step)) == name


def test_metaschedule_trace_uses_the_same_vocabulary_and_folds_decisions():
    trace = [[
        ["GetSBlock", [], ["C", "main"], ["b0"]],
        ["GetLoops", ["b0"], [], ["l1", "l2"]],
        ["SamplePerfectTile", ["l1"], [2, 64], ["v3", "v4"]],
        ["Split", ["l1", "v3", "v4"], [1, 0], ["l5", "l6"]],
        ["SampleCategorical", [], [[0, 16, 64], [0.3, 0.3, 0.4]], ["v7"]],
        ["Annotate", ["b0", "v7"], ["meta_schedule.unroll_explicit"], []],
        ["Parallel", ["l5"], [], []],
        ["Bind", ["l6"], ["threadIdx.x"], []],
        ["CacheRead", ["b0", [], ], [0, "shared"], ["b8"]],
        ["MysteryInstruction", [], [], []],
    ], [[2, [8, 64]], [4, 2]]]
    unknown: dict[str, int] = {}
    toks = tokens.tokenize_ms_trace(trace, unknown)
    assert [kind(t) for t in toks] == ["split", "unroll", "parallel", "bind", "cache_read", "unknown"]
    split = toks[0]
    assert split[2][2] == 9.0 and split[2][3] == 2 and split[2][4] == 6.0  # extent 512, 2 parts, inner 64
    assert math.isclose(toks[1][2][2], math.log2(65))  # the sampled unroll factor, not the variable name
    assert tokens.CATEGORIES[toks[3][1]] == "threadIdx.x" and tokens.CATEGORIES[toks[4][1]] == "shared"
    assert unknown == {"MysteryInstruction": 1}
    assert kind(tokens.tokenize_ansor_step(["SP", 2, 0, 512, [64], 1])) == kind(split)


def test_token_table_interns():
    table = tokens.TokenTable()
    a = table.intern((2, 0, (1.0,) * tokens.NUM_ARGS))
    assert table.intern((2, 0, (1.0,) * tokens.NUM_ARGS)) == a and len(table) == 1
    kinds, cats, args = table.arrays()
    assert kinds[a] == 2 and args.shape == (1, tokens.NUM_ARGS)
