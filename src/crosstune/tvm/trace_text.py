"""A MetaSchedule trace read back from TVM's printed form: the cost model's featurisation, 3x faster.

MetaSchedule's search asks the cost model to score ~2,500 candidate schedules a round. ``Trace.as_json()``
builds its answer in C++ but converts it to Python element by element through the FFI: about 2 ms a
trace here, 70% of the adapter's time (docs/BENCHMARKS.md). ``str(trace)`` is printed in C++ as Python
statements (``l9, l10 = sch.split(loop=l6, factors=[v7, v8], ...)``) in about 0.15 ms; reading it back here takes
about 0.4 ms (whole path 1,174 programs/s against 385 through ``as_json``, docs/BENCHMARKS.md). This module reads
those statements back into the ``[instructions, decisions]`` shape of ``as_json`` that
``tokens.tokenize_ms_trace`` reads, so both paths give the same tokens (tests/test_trace_text.py compares
them on real tuning records).

Only what the tokenizer reads is rebuilt: the instruction's kind, its outputs, and the inputs, attributes
and decision its token uses. A statement this module does not know (another instruction kind, an argument
printed in an unexpected way) raises ``UnreadableTrace``; ``trace_tokens`` then takes the ``as_json`` path
for that trace, so an unknown trace costs time, never a wrong token.
"""

from __future__ import annotations

import re

from .. import tokens
from .convert import plain


class UnreadableTrace(ValueError):
    """The printed trace holds a statement this reader does not rebuild."""


_NUMBER = re.compile(r"-?\d+(?:\.\d*)?(?:e[-+]?\d+)?$")
_NAME = re.compile(r"[A-Za-z_]\w*$")

# method -> instruction kind, for the kinds whose token reads nothing but the kind: no arguments to read
_KIND_ONLY = {
    "parallel": "Parallel", "vectorize": "Vectorize", "unroll": "Unroll",
    "compute_inline": "ComputeInline", "reverse_compute_inline": "ReverseComputeInline", "rfactor": "RFactor",
    "decompose_reduction": "DecomposeReduction", "blockize": "Blockize", "tensorize": "Tensorize",
    "add_unit_loop": "AddUnitLoop", "pad_einsum": "PadEinsum",
}


# a keyword argument as the printer writes the ones the tokenizer reads: a quoted string, a flat list, or
# a plain value (name, number, None/True/False)
_KEYWORD = re.compile(r'(\w+)=("[^"\\]*"|\[[^\[\]]*\]|[^\s,()\[\]"=]+)(?=,|$)')


_CONSTANTS = {"None": None, "True": True, "False": False}


def _value(text: str):
    """One printed argument value: a variable's name (a str, as in ``as_json``), a number, a quoted
    string, None/True/False, or a flat list of those."""
    first = text[:1]
    if first.isdigit() or first == "-":
        if not _NUMBER.match(text):
            raise UnreadableTrace(f"argument {text!r}")
        return float(text) if ("." in text or "e" in text) else int(text)
    if first == '"':
        return text[1:-1]
    if first == "[":
        inner = text[1:-1]
        return [_value(part.strip()) for part in inner.split(",")] if inner.strip() else []
    if text in _CONSTANTS:
        return _CONSTANTS[text]
    if _NAME.match(text):
        return text
    raise UnreadableTrace(f"argument {text!r}")


def _positional(text: str) -> list[str]:
    """The positional arguments, as printed: the names before the first keyword argument."""
    first = _KEYWORD.search(text)
    head = text[: first.start()] if first else text
    return [part.strip() for part in head.split(",") if part.strip()]


def _keyword(keywords: dict[str, str], name: str):
    if name not in keywords:
        raise UnreadableTrace(f"no {name}=")
    return _value(keywords[name])


def _optional(keywords: dict[str, str], name: str):
    """A keyword argument the printer leaves out when it has no value (a sampling decision): None then."""
    return _value(keywords[name]) if name in keywords else None


def _statement(method: str, args: str) -> tuple[str, list, list, object]:
    """(kind, inputs, attrs, decision) of one statement, in ``as_json``'s layout as far as the tokenizer
    reads it."""
    kw = dict(_KEYWORD.findall(args))
    if method in ("sample_perfect_tile", "sample_partitioned_tile"):
        kind = "SamplePerfectTile" if method == "sample_perfect_tile" else "SamplePartitionedTile"
        return kind, [], [], _optional(kw, "decision")
    if method == "sample_categorical":
        return "SampleCategorical", [], [_keyword(kw, "candidates")], _optional(kw, "decision")
    if method == "sample_compute_location":
        return "SampleComputeLocation", [], [], _optional(kw, "decision")
    if method in ("split", "loop_partition"):
        factors = _keyword(kw, "factors")
        if not isinstance(factors, list):
            raise UnreadableTrace("factors is not a list")
        return ("Split" if method == "split" else "LoopPartition"), [_keyword(kw, "loop"), *factors], [], None
    if method == "annotate":
        return "Annotate", [_keyword(kw, "block_or_loop"), _keyword(kw, "ann_val")], [_keyword(kw, "ann_key")], None
    if method == "unannotate":
        return "Unannotate", [_keyword(kw, "block_or_loop")], [_keyword(kw, "ann_key")], None
    if method in ("fuse", "reorder"):
        return ("Fuse" if method == "fuse" else "Reorder"), _positional(args), [], None
    if method in ("compute_at", "reverse_compute_at"):
        kind = "ComputeAt" if method == "compute_at" else "ReverseComputeAt"
        return kind, [_keyword(kw, "block"), _keyword(kw, "loop")], [], None
    if method in ("cache_read", "cache_write"):
        index = _keyword(kw, "read_buffer_index" if method == "cache_read" else "write_buffer_index")
        kind = "CacheRead" if method == "cache_read" else "CacheWrite"
        return kind, [], [index, _keyword(kw, "storage_scope")], None
    if method == "bind":
        return "Bind", [_keyword(kw, "loop")], [_keyword(kw, "thread_axis")], None
    raise UnreadableTrace(f"instruction sch.{method}")


# one printed statement: "[outputs = ]sch.method(arguments)"
_STATEMENT = re.compile(r"^[ \t]*(?:([\w, ]+) = )?sch\.(\w+)\((.*)\)[ \t]*$", re.MULTILINE)
# look-ups and the post-processing marker: no token, nothing a later token reads
_LOOKUPS = frozenset({"get_sblock", "get_block", "get_loops", "get_child_blocks", "get_producers", "get_consumers",
                      "get_output_blocks", "enter_postproc"})


def printed_trace_json(text: str) -> list:
    """The ``[instructions, decisions]`` of a trace printed by ``str(trace)``, as far as the tokenizer
    reads them (look-ups, which give no token, are left out). Raises ``UnreadableTrace`` on a statement it
    does not know."""
    if "\ndef apply_trace(" not in text[:80]:
        raise UnreadableTrace("not a printed trace")
    instructions, decisions = [], []
    statements = 0
    for outputs, method, args in _STATEMENT.findall(text):
        statements += 1
        if method in _LOOKUPS:
            continue
        kind = _KIND_ONLY.get(method)
        if kind is not None:
            instructions.append([kind, [], [], []])
            continue
        kind, inputs, attrs, decision = _statement(method, args)
        if decision is not None:
            decisions.append([len(instructions), decision])
        instructions.append([kind, inputs, attrs, [o.strip() for o in outputs.split(",") if o.strip()]])
    # every line after the header must have been a statement: a line the pattern skipped is unknown
    if statements != text.count("\n") - 1 - text.endswith("\n"):
        raise UnreadableTrace("a line that is not a schedule statement")
    return [instructions, decisions]


def trace_tokens(trace) -> list[tokens.Token]:
    """A TVM trace as crosstune tokens: read from its printed form, or from ``as_json`` where that
    form holds something this module does not read."""
    try:
        return tokens.tokenize_ms_trace(printed_trace_json(str(trace)))
    except UnreadableTrace:
        return tokens.tokenize_ms_trace(plain(trace.as_json()))


__all__ = ["UnreadableTrace", "printed_trace_json", "trace_tokens"]
