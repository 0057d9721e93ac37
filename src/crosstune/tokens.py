"""Schedule primitives -> one shared token vocabulary.

Every program, whether an Ansor step list, a MetaSchedule trace or an AutoTVM config entity, becomes a
sequence of tokens.
A token is three things:

- ``kind``: the primitive (split, reorder, fuse, parallel, ...) from :data:`KINDS`, the same id for the
  same meaning in both formats (Ansor ``SP`` and MetaSchedule ``Split`` are both ``split``);
- ``cat``: a category for the token's string argument (a memory scope, a thread axis, an annotation
  key) from :data:`CATEGORIES`; 0 when the primitive has none;
- ``args``: :data:`NUM_ARGS` floats laid out per kind (see :data:`ARG_LAYOUT`); extents and factors are
  ``log2``-scaled so that a split by 512 is not 500x "bigger" than a split by 1.

The vocabulary is fixed and versioned (:data:`VOCAB_VERSION`) so that a model trained on one dataset can
score programs from another. Unknown primitives get kind ``unknown`` and unknown strings category
``other``; both are counted by the caller, never a crash.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

VOCAB_VERSION = 1
NUM_ARGS = 8

KINDS: tuple[str, ...] = (
    "pad",  # 0: padding in model batches, never produced by a reader
    "unknown",
    "split",
    "follow_split",
    "follow_fused_split",
    "reorder",
    "fuse",
    "parallel",
    "vectorize",
    "unroll",
    "bind",
    "vthread",
    "tensorize",
    "annotate",
    "unannotate",
    "compute_at",
    "reverse_compute_at",
    "compute_root",
    "compute_inline",
    "reverse_compute_inline",
    "cache_read",
    "cache_write",
    "rfactor",
    "storage_align",
    "decompose_reduction",
    "set_scope",
    "blockize",
    "transform_layout",
    "pad_einsum",
    "add_unit_loop",
)
KIND_ID = {name: i for i, name in enumerate(KINDS)}

# What the NUM_ARGS float slots of a token mean, per kind ("-" = unused). Documented here and shipped in
# the dataset manifest so that a user can read a token without this source.
ARG_LAYOUT: dict[str, tuple[str, ...]] = {
    "split": ("stage", "iter", "log2_extent", "n_parts", "log2_f0", "log2_f1", "log2_f2", "log2_f3_rest"),
    "follow_split": ("stage", "iter", "src_step", "n_split"),
    "follow_fused_split": ("stage", "iter", "n_src", "src0", "level", "factor_or_nparts"),
    "reorder": ("stage", "n_iters", "o0", "o1", "o2", "o3", "o4", "o5"),
    "fuse": ("stage", "n_fused", "first_iter", "last_iter"),
    "parallel": ("stage", "iter", "log2_value"),
    "vectorize": ("stage", "iter", "log2_value"),
    "unroll": ("stage", "iter", "log2_value"),
    "bind": ("stage", "iter"),
    "vthread": ("stage", "iter"),
    "tensorize": ("stage", "iter"),
    "annotate": ("stage", "iter", "log2_value"),
    "unannotate": (),
    "compute_at": ("stage", "target_stage", "target_iter"),
    "reverse_compute_at": ("stage", "target_stage", "target_iter"),
    "compute_root": ("stage",),
    "compute_inline": ("stage",),
    "reverse_compute_inline": ("stage",),
    "cache_read": ("stage", "n_readers", "reader0"),
    "cache_write": ("stage", "buffer_index"),
    "rfactor": ("stage", "iter", "factor_iter"),
    "storage_align": ("stage", "iter", "log2_factor", "offset"),
}

CATEGORIES: tuple[str, ...] = (
    "",
    "other",
    # memory scopes
    "global",
    "shared",
    "shared.dyn",
    "local",
    "warp",
    "wmma.matrix_a",
    "wmma.matrix_b",
    "wmma.accumulator",
    # thread axes (Ansor annotation codes 4..10 and MetaSchedule Bind)
    "vthread",
    "blockIdx.x",
    "threadIdx.x",
    "blockIdx.y",
    "threadIdx.y",
    "blockIdx.z",
    "threadIdx.z",
    # pragma / annotation keys
    "auto_unroll_max_step",
    "debug_skip_region",
    "pragma_auto_unroll_max_step",
    "pragma_unroll_explicit",
    "meta_schedule.parallel",
    "meta_schedule.vectorize",
    "meta_schedule.unroll_explicit",
    "meta_schedule.unroll_implicit",
    "meta_schedule.tiling_structure",
    "meta_schedule.cooperative_fetch",
    "meta_schedule.thread_extent_low_inclusive",
    "meta_schedule.thread_extent_high_inclusive",
    "meta_schedule.auto_tensorize",
    "meta_schedule.random_compute_producer",
    "meta_schedule.layout_rewrite_preproc",
    "software_pipeline_stage",
    "software_pipeline_order",
    # AutoTVM knob names (appended so that the ids above stay those saved models were trained with;
    # a knob not listed here maps to ``other`` and is counted like any unknown string)
    "tile_ic",
    "tile_oc",
    "tile_ow",
    "tile_oh",
    "tile_x",
    "tile_y",
    "tile_k",
    "tile_f",
    "tile_n",
    "tile_b",
    "tile_c",
    "tile_h",
    "tile_w",
    "tile_p",
    "tile_co",
    "tile_ci",
    "tile_rc",
    "tile_ry",
    "tile_rx",
    "tile_rh",
    "tile_rw",
    "tile_inner",
    "unroll_kw",
    "unroll_explicit",
    "ann",
    "ann_reduce",
    "ann_spatial",
    "reorder_0",
    "reorder_1",
)
# How many categories vocabulary v1 had before the AutoTVM knob names were appended: models that
# scale category ids into a number divide by this, so their inputs do not move when categories are added.
BASE_CATEGORIES = 34
CAT_ID = {name: i for i, name in enumerate(CATEGORIES)}
OTHER_CAT = CAT_ID["other"]

# Ansor's IteratorAnnotation enum (include/tvm/auto_scheduler/transform_step.h).
_ANSOR_ANNOTATIONS = {
    0: ("annotate", ""),
    1: ("unroll", ""),
    2: ("vectorize", ""),
    3: ("parallel", ""),
    4: ("vthread", "vthread"),
    5: ("bind", "blockIdx.x"),
    6: ("bind", "threadIdx.x"),
    7: ("bind", "blockIdx.y"),
    8: ("bind", "threadIdx.y"),
    9: ("bind", "blockIdx.z"),
    10: ("bind", "threadIdx.z"),
    11: ("tensorize", ""),
}

Token = tuple[int, int, tuple[float, ...]]


class TokenTable:
    """Interns tokens: a program becomes a list of small ints, and the (kind, cat, args) arrays of a
    whole batch of programs are gathered with numpy instead of per-step Python work."""

    def __init__(self) -> None:
        self._ids: dict[Token, int] = {}
        self._tokens: list[Token] = []
        self._arrays: tuple | None = None

    def intern(self, token: Token) -> int:
        token_id = self._ids.get(token)
        if token_id is None:
            token_id = self._ids[token] = len(self._tokens)
            self._tokens.append(token)
            self._arrays = None
        return token_id

    def __len__(self) -> int:
        return len(self._tokens)

    def token(self, token_id: int) -> Token:
        return self._tokens[token_id]

    def arrays(self):
        """(kinds int8, cats int16, args float32 (n, NUM_ARGS)) indexed by token id."""
        if self._arrays is None:
            import numpy as np

            self._arrays = (
                np.array([t[0] for t in self._tokens], dtype=np.int8),
                np.array([t[1] for t in self._tokens], dtype=np.int16),
                np.array([t[2] for t in self._tokens], dtype=np.float32).reshape(-1, NUM_ARGS),
            )
        return self._arrays


def log2p(value: object) -> float:
    """log2 of a positive extent/factor; 0 for 1, missing or non-positive values (Ansor writes None
    for split lengths it has not filled)."""
    if isinstance(value, (int, float)) and value > 0:
        return math.log2(value)
    return 0.0


def _num(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def _pack(values: Sequence[float]) -> tuple[float, ...]:
    padded = list(values[:NUM_ARGS])
    padded.extend([0.0] * (NUM_ARGS - len(padded)))
    return tuple(padded)


def category_id(name: str, unknown: dict[str, int] | None = None) -> int:
    """Category id of a string argument; unseen strings map to ``other`` and are counted."""
    cat = CAT_ID.get(name)
    if cat is None:
        base = name.split(".", 1)[0] if name.startswith("wmma") else None
        cat = CAT_ID.get(base or "", OTHER_CAT) if base else OTHER_CAT
        if unknown is not None:
            unknown[name] = unknown.get(name, 0) + 1
    return cat


def split_args(stage: float, iterator: float, extent: float, inner_factors: Sequence[object],
               n_parts: int) -> tuple[float, ...]:
    """The split layout shared by Ansor SP and MetaSchedule Split (inner factors, outer implied)."""
    logs = [log2p(f) for f in inner_factors]
    if len(logs) > 4:  # keep the information of deep splits in the last slot rather than drop it
        logs = logs[:3] + [sum(logs[3:])]
    return _pack([stage, iterator, log2p(extent), float(n_parts), *logs])


# ---------------------------------------------------------------------------------------------------
# Ansor steps
# ---------------------------------------------------------------------------------------------------

def _ansor_sp(step: list) -> Token:
    # ["SP", stage, iter, extent, [lengths], inner_to_outer]
    lengths = step[4] if len(step) > 4 and isinstance(step[4], list) else []
    return KIND_ID["split"], 0, split_args(_num(step[1]), _num(step[2]), step[3], lengths, len(lengths) + 1)


def _ansor_an(step: list) -> Token:
    kind, cat = _ANSOR_ANNOTATIONS.get(int(step[3]), ("annotate", "other"))
    return KIND_ID[kind], CAT_ID[cat], _pack([_num(step[1]), _num(step[2]), _num(step[3])])


def _ansor_fu(step: list) -> Token:
    iters = step[2] if isinstance(step[2], list) else []
    first = _num(iters[0]) if iters else 0.0
    last = _num(iters[-1]) if iters else 0.0
    return KIND_ID["fuse"], 0, _pack([_num(step[1]), float(len(iters)), first, last])


def _ansor_pr(step: list, unknown: dict[str, int] | None) -> Token:
    # ["PR", stage, iter, "auto_unroll_max_step$512"]
    pragma = str(step[3])
    name, _, value = pragma.partition("$")
    kind = "unroll" if name == "auto_unroll_max_step" else "annotate"
    number = float(value) if value.lstrip("-").isdigit() else 0.0
    return KIND_ID[kind], category_id(name, unknown), _pack([_num(step[1]), _num(step[2]), log2p(number + 1)])


def _ansor_re(step: list) -> Token:
    order = step[2] if isinstance(step[2], list) else []
    return KIND_ID["reorder"], 0, _pack([_num(step[1]), float(len(order)), *(_num(o) for o in order[:6])])


def _ansor_fsp(step: list) -> Token:
    # ["FSP", stage, iter, src_step_id, n_split]
    return KIND_ID["follow_split"], 0, _pack([_num(step[1]), _num(step[2]), _num(step[3]), _num(step[4])])


def _ansor_ffsp(step: list) -> Token:
    # ["FFSP", stage, iter, [src_step_ids], level, factor_or_nparts]
    src = step[3] if isinstance(step[3], list) else []
    return KIND_ID["follow_fused_split"], 0, _pack(
        [_num(step[1]), _num(step[2]), float(len(src)), _num(src[0]) if src else 0.0, _num(step[4]), _num(step[5])])


def _ansor_ca(step: list) -> Token:
    return KIND_ID["compute_at"], 0, _pack([_num(step[1]), _num(step[2]), _num(step[3])])


def _ansor_chr(step: list, unknown: dict[str, int] | None) -> Token:
    # ["CHR", stage, scope, [reader_stage_ids]]
    readers = step[3] if len(step) > 3 and isinstance(step[3], list) else []
    return KIND_ID["cache_read"], category_id(str(step[2]), unknown), _pack(
        [_num(step[1]), float(len(readers)), _num(readers[0]) if readers else 0.0])


def _ansor_chw(step: list, unknown: dict[str, int] | None) -> Token:
    return KIND_ID["cache_write"], category_id(str(step[2]), unknown), _pack([_num(step[1])])


def _ansor_rf(step: list) -> Token:
    return KIND_ID["rfactor"], 0, _pack([_num(step[1]), _num(step[2]), _num(step[3])])


def _ansor_sa(step: list) -> Token:
    return KIND_ID["storage_align"], 0, _pack([_num(step[1]), _num(step[2]), log2p(step[3]), _num(step[4])])


def _stage_only(kind: str) -> Callable[[list], Token]:
    kind_id = KIND_ID[kind]
    return lambda step: (kind_id, 0, _pack([_num(step[1])]))


_ANSOR_PLAIN: dict[str, Callable[[list], Token]] = {
    "SP": _ansor_sp, "AN": _ansor_an, "FU": _ansor_fu, "RE": _ansor_re, "FSP": _ansor_fsp,
    "FFSP": _ansor_ffsp, "CA": _ansor_ca, "RF": _ansor_rf, "SA": _ansor_sa,
    "CI": _stage_only("compute_inline"), "CR": _stage_only("compute_root"),
}
_ANSOR_WITH_STRINGS = {"PR": _ansor_pr, "CHR": _ansor_chr, "CHW": _ansor_chw}

UNKNOWN_TOKEN: Token = (KIND_ID["unknown"], 0, (0.0,) * NUM_ARGS)


def tokenize_ansor_step(step: list, unknown_cats: dict[str, int] | None = None) -> Token:
    """One Ansor step (``["SP", 2, 0, 512, [8], 1]``) -> token. Raises ValueError on a malformed step;
    an unknown step kind gives the ``unknown`` token (the caller counts it)."""
    if not isinstance(step, list) or not step or not isinstance(step[0], str):
        raise ValueError(f"malformed step {step!r}")
    try:
        handler = _ANSOR_PLAIN.get(step[0])
        if handler is not None:
            return handler(step)
        handler_s = _ANSOR_WITH_STRINGS.get(step[0])
        if handler_s is not None:
            return handler_s(step, unknown_cats)
    except (IndexError, TypeError, ValueError) as err:
        raise ValueError(f"malformed {step[0]} step {step!r}: {err}") from None
    return UNKNOWN_TOKEN


# ---------------------------------------------------------------------------------------------------
# MetaSchedule trace instructions
# ---------------------------------------------------------------------------------------------------

# Instructions that only look things up or sample decisions: their information is folded into the
# primitives that consume them (a Split token carries the sampled factors), so they emit no token.
MS_BOOKKEEPING = frozenset({
    "GetSBlock", "GetBlock", "GetLoops", "GetChildBlocks", "GetProducers", "GetConsumers",
    "GetOutputBlocks", "GetLoopIV", "EnterPostproc", "SamplePerfectTile", "SamplePartitionedTile",
    "SampleCategorical", "SampleComputeLocation",
})

_MS_SIMPLE = {
    "Fuse": "fuse", "Reorder": "reorder", "Parallel": "parallel", "Vectorize": "vectorize",
    "Unroll": "unroll", "Bind": "bind", "ComputeAt": "compute_at", "ReverseComputeAt": "reverse_compute_at",
    "ComputeInline": "compute_inline", "ReverseComputeInline": "reverse_compute_inline",
    "CacheRead": "cache_read", "CacheWrite": "cache_write", "ReindexCacheRead": "cache_read",
    "ReindexCacheWrite": "cache_write", "RFactor": "rfactor", "StorageAlign": "storage_align",
    "DecomposeReduction": "decompose_reduction", "SetScope": "set_scope", "Blockize": "blockize",
    "Tensorize": "tensorize", "TransformLayout": "transform_layout", "TransformBlockLayout": "transform_layout",
    "PadEinsum": "pad_einsum", "AddUnitLoop": "add_unit_loop", "Annotate": "annotate",
    "Unannotate": "unannotate", "Split": "split", "LoopPartition": "split",
}

_ANNOTATION_KIND = {
    "meta_schedule.parallel": "parallel",
    "meta_schedule.vectorize": "vectorize",
    "meta_schedule.unroll_explicit": "unroll",
    "meta_schedule.unroll_implicit": "unroll",
    "pragma_auto_unroll_max_step": "unroll",
}


def _resolve(value: object, env: dict[str, object]) -> object:
    if isinstance(value, str) and value in env:
        return env[value]
    return value


def tokenize_ms_trace(trace: list, unknown_kinds: dict[str, int] | None = None,
                      unknown_cats: dict[str, int] | None = None) -> list[Token]:
    """A MetaSchedule trace as written by ``Trace.as_json()``: ``[instructions, decisions]`` where an
    instruction is ``[kind, inputs, attrs, outputs]`` and a decision ``[instruction_index, value]``."""
    if not isinstance(trace, list) or len(trace) < 1 or not isinstance(trace[0], list):
        raise ValueError("trace is not [instructions, decisions]")
    instructions = trace[0]
    decisions = {}
    if len(trace) > 1 and isinstance(trace[1], list):
        for entry in trace[1]:
            if isinstance(entry, list) and len(entry) == 2:
                decisions[entry[0]] = entry[1]
    env: dict[str, object] = {}  # variable name -> sampled value
    tokens: list[Token] = []
    for index, inst in enumerate(instructions):
        if not isinstance(inst, list) or len(inst) < 4 or not isinstance(inst[0], str):
            raise ValueError(f"malformed instruction {inst!r}")
        kind, inputs, attrs, outputs = inst[0], inst[1] or [], inst[2] or [], inst[3] or []
        decision = decisions.get(index)
        if kind in ("SamplePerfectTile", "SamplePartitionedTile") and isinstance(decision, list):
            env.update(zip(outputs, decision))
        elif kind == "SampleCategorical" and attrs and isinstance(attrs[0], list) and decision is not None:
            candidates = attrs[0]
            if isinstance(decision, int) and 0 <= decision < len(candidates) and outputs:
                env[outputs[0]] = candidates[decision]
        elif kind == "SampleComputeLocation" and outputs:
            env[outputs[0]] = decision if isinstance(decision, int) else 0
        if kind in MS_BOOKKEEPING:
            continue
        name = _MS_SIMPLE.get(kind)
        if name is None:
            if unknown_kinds is not None:
                unknown_kinds[kind] = unknown_kinds.get(kind, 0) + 1
            tokens.append(UNKNOWN_TOKEN)
            continue
        tokens.append(_ms_token(name, inputs, attrs, env, unknown_cats))
    return tokens


def _ms_token(name: str, inputs: list, attrs: list, env: dict[str, object],
              unknown_cats: dict[str, int] | None) -> Token:
    if name == "split":
        factors = [_resolve(f, env) for f in inputs[1:]]
        extent = 1.0
        for f in factors:
            extent *= f if isinstance(f, (int, float)) and f > 0 else 1
        return KIND_ID["split"], 0, split_args(0.0, 0.0, extent, factors[1:], len(factors))
    if name == "annotate":
        key = str(attrs[0]) if attrs else ""
        value = _resolve(inputs[1], env) if len(inputs) > 1 else 0
        kind = _ANNOTATION_KIND.get(key, "annotate")
        number = _num(value) + 1 if isinstance(value, (int, float)) else 0.0
        return KIND_ID[kind], category_id(key, unknown_cats), _pack([0.0, 0.0, log2p(number)])
    if name == "unannotate":
        key = str(attrs[0]) if attrs else ""
        return KIND_ID[name], category_id(key, unknown_cats), _pack([])
    if name in ("fuse", "reorder"):
        return KIND_ID[name], 0, _pack([0.0, float(len(inputs))])
    if name == "bind":
        axis = str(attrs[0]) if attrs else ""
        return KIND_ID[name], category_id(axis, unknown_cats), _pack([])
    if name in ("compute_at", "reverse_compute_at"):
        loop = _resolve(inputs[1], env) if len(inputs) > 1 else 0
        return KIND_ID[name], 0, _pack([0.0, 0.0, _num(loop)])
    if name in ("cache_read", "cache_write"):
        index = _num(attrs[0]) if attrs else 0.0
        scope = str(attrs[-1]) if attrs and isinstance(attrs[-1], str) else ""
        return KIND_ID[name], category_id(scope, unknown_cats), _pack([0.0, index])
    if name == "storage_align":
        nums = [_num(a) for a in attrs[:4]] + [0.0] * 4
        return KIND_ID[name], 0, _pack([0.0, nums[1], log2p(nums[2]), nums[3]])
    if name == "set_scope":
        scope = str(attrs[-1]) if attrs else ""
        return KIND_ID[name], category_id(scope, unknown_cats), _pack([])
    return KIND_ID[name], 0, _pack([])


# ---------------------------------------------------------------------------------------------------
# AutoTVM knobs
# ---------------------------------------------------------------------------------------------------

# AutoTVM annotation choices per axis (tvm.autotvm.task.space.AnnotateSpace).
_AUTOTVM_ANNOTATIONS = {"unroll": ("unroll", 1.0), "vec": ("vectorize", 1.0), "parallel": ("parallel", 1.0),
                        "vthread": ("vthread", 1.0), "blockIdx.x": ("bind", 1.0), "blockIdx.y": ("bind", 2.0),
                        "blockIdx.z": ("bind", 3.0), "threadIdx.x": ("bind", 4.0), "threadIdx.y": ("bind", 5.0),
                        "threadIdx.z": ("bind", 6.0), "fuse": ("fuse", 1.0)}
AUTOTVM_KNOB_KINDS = frozenset({"sp", "re", "an", "ot"})


def _knob_number(value: object) -> float:
    """A knob's choice as a number: numbers and booleans as they are; a string as a small stable code
    (so that two string choices stay apart)."""
    if isinstance(value, (bool, int, float)):
        return float(value)
    text = str(value)
    return float(sum(text.encode()) % 997 + 1)


def tokenize_autotvm_knob(name: str, kind: str, value: object, unknown_cats: dict[str, int] | None = None) -> list[Token]:
    """One entry ``[knob_name, kind, value]`` of an AutoTVM config entity -> tokens, the knob name as
    category. ``sp`` (split factors ``[-1, f1, ...]``, -1 = the remaining outer extent) is a split whose
    log2_extent slot holds the product of the known factors; ``re`` a reorder (one token per six axes);
    ``an`` one token per
    annotated axis (``none`` axes give none; an all-``none`` knob one ``annotate`` token so it stays
    visible); ``ot`` (another choice) ``unroll`` for unroll knobs, else ``annotate``, with log2(1 + value).
    Raises ValueError on a malformed value or an unknown knob kind."""
    cat = category_id(name, unknown_cats)
    if kind == "sp":
        if not isinstance(value, list) or not value or not all(isinstance(f, int) and not isinstance(f, bool) for f in value):
            raise ValueError(f"split knob {name} is not a list of integers")
        known = 1
        for factor in value:
            known *= factor if factor > 0 else 1
        return [(KIND_ID["split"], cat, split_args(0.0, 0.0, known, value[1:], len(value)))]
    if kind == "re":
        if not isinstance(value, list):
            raise ValueError(f"reorder knob {name} is not a list")
        # six positions fit a token: a longer order continues in further reorder tokens whose stage slot
        # counts the chunk, so that two orders differing only after the sixth axis stay different programs
        chunks = range(0, max(len(value), 1), 6)
        return [(KIND_ID["reorder"], cat, _pack([float(i // 6), float(len(value)), *(_num(o) for o in value[i:i + 6])]))
                for i in chunks]
    if kind == "an":
        if not isinstance(value, list):
            raise ValueError(f"annotation knob {name} is not a list")
        out = []
        for axis, choice in enumerate(value):
            if choice == "none":
                continue
            prim, code = _AUTOTVM_ANNOTATIONS.get(str(choice), ("annotate", _knob_number(choice)))
            out.append((KIND_ID[prim], cat, _pack([0.0, float(axis), code])))
        return out or [(KIND_ID["annotate"], cat, _pack([0.0, float(len(value)), 0.0]))]
    if kind == "ot":
        if isinstance(value, (list, dict)) or value is None:
            raise ValueError(f"choice knob {name} is not a single value")
        number = _knob_number(value)
        prim = "unroll" if "unroll" in name else "annotate"
        return [(KIND_ID[prim], cat, _pack([0.0, 0.0, log2p(abs(number) + 1), 1.0 if number < 0 else 0.0]))]
    raise ValueError(f"unknown knob kind {kind!r}")
