"""AutoTVM tuning logs (``tvm.autotvm.record``, JSON lines, plain or gzip'd), read without TVM.

Line format (log version 0.2)::

    {"input": [target, template_name, [template args...], {kwargs}],
     "config": {"index": I, "code_hash": null, "entity": [[knob, kind, value], ...]},
     "result": [[costs_s...], error_no, all_cost_s, timestamp],
     "version": 0.2, "tvm_version": "0.10.0"}

A task is (template name, template args [, kwargs]) -- the target is left out of the task key, so the
same layer tuned with the same template on two machines is one task measured twice -- and a program
is its config entity, whose knobs become tokens (:func:`crosstune.tokens.tokenize_autotvm_knob`).

Failed measurements (``error_no != 0``) are kept as failed records with no costs: AutoTVM writes the
cost ``1e9`` for them, an error code that must never be read as a latency.

Repeats: a config measured more than once on the hardware of one import (a layer shared by two
networks, or a grid-search and a tuner run visiting the same config) becomes ONE record. Its costs are
the costs of all its valid repeats, in reading order, so nothing measured is lost and its latency (the
mean of the costs) is the mean over all measured repeats -- the statistic AutoTVM's own tuners rank
by. Failed repeats of a config that also has a valid one are dropped (counted in
``merged_repeats``). The order agreement of the first two valid repeats within each task is kept in
the import report (``repeat_pairs``): it is the device's own noise ceiling, which no cost model can
beat. Because merging needs every file of the import, records are yielded by :meth:`finish`.
Merging is per import: a record's id is a hash of (hardware, task, config), so a config imported again
later (another import into the same dataset) is counted as already present rather than merged -- give
all files of a device to one ``crosstune import``.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import orjson

from .. import tokens
from .ansor import open_lines, record_lines
from .canonical import BadLine, ImportReport, Record, check_costs
from .operators import Operator, operator_from_autotvm, task_id_of

FORMAT = "autotvm"
FAILED_COST = 1e9  # AutoTVM's cost for a failed measurement
_MAX_REPEATED_PER_TASK = 3000  # bounds the O(n^2) noise-ceiling count of one task


def is_autotvm_line(line: bytes) -> bool:
    """Whether a record line is AutoTVM's (v0.2 keys, in any order), by its keys, without parsing it.
    Ansor lines have the keys "i", "r" and "v" instead."""
    return line.lstrip().startswith(b"{") and b'"input"' in line and b'"config"' in line and b'"result"' in line


def sniff(path: Path) -> bool:
    """Whether a record file holds AutoTVM lines (judged by its first record line)."""
    try:
        for line in open_lines(path):
            stripped = line.strip()
            if stripped and not stripped.startswith(b"#"):
                return is_autotvm_line(stripped)
    except (EOFError, zlib.error, gzip.BadGzipFile, OSError):
        return False  # the Ansor reader reports the unreadable file
    return False


def _loads(line: bytes):
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        try:  # Python's json writes NaN/Infinity, which orjson rejects: parse it so the bad cost is named
            return json.loads(line)
        except (ValueError, UnicodeDecodeError):
            raise BadLine("not JSON (truncated or corrupt line)") from None


class _Entry:
    """One config of one task while the import reads: the record so far and its repeats' latencies."""

    __slots__ = ("record", "repeats")

    def __init__(self, record: Record, repeats: list[float]):
        self.record = record
        self.repeats = repeats


class AutoTVMReader:
    """Reads AutoTVM logs into canonical records, merging repeats of a config (see the module notes)."""

    def __init__(self, hardware: str, report: ImportReport):
        self.hardware = hardware
        self.report = report
        self.token_table = tokens.TokenTable()
        self._salt = hardware.encode() + b"\0"
        self._tasks: dict[bytes, tuple[str, str, Operator] | str] = {}
        self._knobs: dict[tuple, list[int]] = {}
        self._entries: dict[tuple[str, bytes], _Entry] = {}

    def read_file(self, path: Path) -> Iterator[Record]:
        """Reads ``path`` into the reader; yields nothing (records come from :meth:`finish`)."""
        source = str(path)
        for line_no, line in record_lines(path, self.report):
            try:
                self._add_line(line, source, line_no)
            except BadLine as err:
                self.report.skip(str(err), source, line_no)
        return iter(())

    def finish(self) -> Iterator[Record]:
        """The merged records of every file read, in the order their configs were first seen."""
        self._count_repeat_agreement()
        entries, self._entries = self._entries, {}
        for entry in entries.values():
            yield entry.record

    # -----------------------------------------------------------------------------------------------

    def _task(self, template: object, args: object, kwargs: object) -> tuple[str, str, Operator]:
        if not isinstance(template, str) or not isinstance(args, list):
            raise BadLine("malformed input (template name or args)")
        key_value = [template, args] + ([kwargs] if kwargs else [])
        raw = orjson.dumps(key_value)
        task = self._tasks.get(raw)
        if task is None:
            workload_key = raw.decode()
            task = self._tasks[raw] = (workload_key, task_id_of(workload_key), operator_from_autotvm(template, args))
        return task  # type: ignore[return-value]

    def _program(self, entity: list) -> list[int]:
        program: list[int] = []
        knobs = self._knobs
        for knob in entity:
            if not isinstance(knob, list) or len(knob) != 3 or not isinstance(knob[0], str):
                raise BadLine("malformed config entity (knob is not [name, kind, value])")
            name, kind, value = knob
            key = (name, kind, tuple(value) if isinstance(value, list) else value)
            try:
                ids = knobs.get(key)
            except TypeError:  # an unhashable value (a nested list): not a knob AutoTVM writes
                raise BadLine(f"malformed {kind} knob {name}") from None
            if ids is None:
                if kind not in tokens.AUTOTVM_KNOB_KINDS:
                    self.report.unknown_kinds[f"autotvm:{kind}"] += 1
                    ids = [self.token_table.intern(tokens.UNKNOWN_TOKEN)]
                else:
                    try:
                        toks = tokens.tokenize_autotvm_knob(name, kind, value, self.report.unknown_categories)
                    except ValueError as err:
                        raise BadLine(f"malformed config entity ({err})") from None
                    ids = [self.token_table.intern(t) for t in toks]
                knobs[key] = ids
            program.extend(ids)
        return program

    def _add_line(self, line: bytes, source: str, line_no: int) -> None:
        obj = _loads(line)
        if not isinstance(obj, dict) or "input" not in obj or "result" not in obj or "config" not in obj:
            raise BadLine("not an AutoTVM record (no 'input', 'config' and 'result')")
        try:
            inp, config, result = obj["input"], obj["config"], obj["result"]
            target, template, args = inp[0], inp[1], inp[2]
            kwargs = inp[3] if len(inp) > 3 else None
            entity = config["entity"]
            costs_raw, error_no = result[0], result[1]
        except (TypeError, KeyError, IndexError):
            raise BadLine("malformed record structure") from None
        if not isinstance(entity, list):
            raise BadLine("malformed config entity (not a list)")
        if isinstance(error_no, bool) or not isinstance(error_no, int):
            raise BadLine("error_no is not an integer")
        if error_no == 0:
            costs = check_costs(costs_raw, 0)
            if max(costs) >= FAILED_COST:
                raise BadLine("cost 1e9 (AutoTVM's failure code) with error_no 0")
        else:
            check_costs(costs_raw, error_no)
            costs = []  # the 1e9 sentinel is an error code, not a measurement
        timestamp = result[3] if len(result) > 3 and isinstance(result[3], (int, float)) \
            and not isinstance(result[3], bool) else math.nan
        workload_key, task_id, operator = self._task(template, args, kwargs)
        entity_raw = orjson.dumps(entity)
        program = self._program(entity)
        self.report.versions[f"autotvm log {obj.get('version', '?')}, tvm {obj.get('tvm_version', '?')}"] += 1

        key = (workload_key, entity_raw)
        entry = self._entries.get(key)
        repeat = sum(costs) / len(costs) if costs else None
        if entry is None:
            record_id = int.from_bytes(hashlib.blake2b(self._salt + workload_key.encode() + b"\0" + entity_raw,
                                                       digest_size=8).digest(), "little")
            record = Record(record_id, self.hardware, workload_key, task_id, operator, str(target), program,
                            self.token_table, costs, error_no, float(timestamp), source, line_no, FORMAT)
            self._entries[key] = _Entry(record, [repeat] if repeat is not None else [])
            return
        self.report.merged_repeats += 1
        record = entry.record
        if repeat is None:
            return  # a failed repeat adds nothing to a config already seen
        if record.error_no != 0:  # the first valid repeat of a config that failed before
            record.error_no, record.costs, record.timestamp = 0, list(costs), float(timestamp)
            record.source_file, record.source_line, record.target = source, line_no, str(target)
        else:
            record.costs = record.costs + costs
        entry.repeats.append(repeat)

    def _count_repeat_agreement(self) -> None:
        """Per task, how often the first two valid repeats of two repeated configs order them alike
        (pairs where both repeats differ; exact ties say nothing about order)."""
        by_task: dict[str, list[tuple[float, float]]] = {}
        for entry in self._entries.values():
            if len(entry.repeats) >= 2:
                by_task.setdefault(entry.record.task_id, []).append((entry.repeats[0], entry.repeats[1]))
        for task_id, pairs in by_task.items():
            if len(pairs) < 2:
                continue
            first, second = np.asarray(pairs[:_MAX_REPEATED_PER_TASK], dtype=np.float64).T
            d1 = np.sign(first[:, None] - first[None, :])
            d2 = np.sign(second[:, None] - second[None, :])
            upper = np.triu(np.ones(d1.shape, dtype=bool), 1) & (d1 != 0) & (d2 != 0)
            agree = int(np.sum((d1 == d2) & upper))
            total = int(np.sum(upper))
            mine = self.report.repeat_pairs.setdefault(task_id, [0, 0])
            mine[0] += agree
            mine[1] += total
