"""TVM MetaSchedule JSON databases (``tvm.s_tir.meta_schedule.database.JSONDatabase``), read without TVM.

A database is two JSON-lines files:

- ``database_workload.json``: ``[structural_hash, base64(TVM JSON graph of the IRModule)]`` per workload;
- ``database_tuning_record.json``: ``[workload_index, [trace, run_secs, target, args_info]]`` per
  measured program, where ``trace`` is ``Trace.as_json()`` (instructions and sampling decisions),
  ``run_secs`` the measured repeats (null or 1e10 for a failed build/run) and ``args_info`` the
  parameter tensors ``["TENSOR", dtype, shape]``.

The operator comes from the workload's SBlock names (decoded from the graph) and the parameter shapes.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import math
from collections.abc import Iterator
from pathlib import Path

import orjson

from .. import tokens
from .canonical import BadLine, ImportReport, Record, check_costs
from .operators import Operator, operator_from_shapes, task_id_of

FORMAT = "metaschedule"
WORKLOAD_FILE = "database_workload.json"
RECORD_FILE = "database_tuning_record.json"
# MetaSchedule records a failed build or run with this sentinel latency.
_FAILED_RUN_SECS = 1e9
ERROR_RUN_FAILED = 1


def workload_file_for(record_file: Path) -> Path:
    """``x_tuning_record.json`` pairs with ``x_workload.json`` (TVM's own naming)."""
    name = record_file.name
    if name == RECORD_FILE:
        return record_file.with_name(WORKLOAD_FILE)
    return record_file.with_name(name.replace("tuning_record", "workload"))


def is_record_file(path: Path) -> bool:
    return path.name.endswith("tuning_record.json")


def _sblock_names(encoded: str) -> list[str]:
    """SBlock names of a workload from its base64 TVM JSON graph (empty if it cannot be decoded)."""
    try:
        raw = base64.b64decode(encoded)
    except (binascii.Error, ValueError):
        return []
    start = raw.find(b"{")  # TVM prefixes the JSON with its 8-byte length
    if start < 0:
        return []
    try:
        return sblock_names_of_graph(orjson.loads(raw[start:]))
    except (orjson.JSONDecodeError, KeyError, TypeError, IndexError):
        return []


def sblock_names_of_graph(graph: dict) -> list[str]:
    """SBlock names in a TVM JSON graph (``tvm.ir.save_json``), in node order."""
    nodes = graph["nodes"]
    names = []
    for node in nodes:
        if node.get("type") in ("s_tir.SBlock", "tirx.Block", "tir.Block"):
            names.append(str(nodes[node["data"]["name_hint"]]["data"]))
    return names


class MetaScheduleReader:
    """Streams canonical records out of a MetaSchedule JSON database."""

    def __init__(self, hardware: str, report: ImportReport):
        self.hardware = hardware
        self.report = report
        self._salt = hardware.encode() + b"\0"
        self.token_table = tokens.TokenTable()

    def _load_workloads(self, path: Path) -> list[tuple[str, list[str]] | None]:
        workloads: list[tuple[str, list[str]] | None] = []
        for line_no, line in enumerate(path.read_bytes().splitlines(), start=1):
            if not line.strip():
                continue
            try:
                shash, encoded = orjson.loads(line)
                workloads.append((str(shash), _sblock_names(str(encoded))))
            except (orjson.JSONDecodeError, ValueError, TypeError):
                self.report.skip("malformed workload line", str(path), line_no)
                workloads.append(None)
        return workloads

    def read_file(self, record_path: Path) -> Iterator[Record]:
        workload_path = workload_file_for(record_path)
        source = str(record_path)
        if not workload_path.is_file():
            self.report.skip_file(source, f"no workload file {workload_path.name} beside it")
            return
        self.report.files += 1
        workloads = self._load_workloads(workload_path)
        operators: dict[int, tuple[str, str, Operator]] = {}
        seen_content = False
        with open(record_path, "rb") as stream:
            line_no = 0
            for line_no, line in enumerate(stream, start=1):
                stripped = line.strip()
                if not stripped:
                    continue
                seen_content = True
                self.report.lines += 1
                try:
                    yield self._parse_line(stripped, workloads, operators, source, line_no)
                except BadLine as err:
                    self.report.skip(str(err), source, line_no)
        if not seen_content:
            self.report.skip_file(source, "empty file (no record lines)")

    def _parse_line(self, line: bytes, workloads: list, operators: dict, source: str, line_no: int) -> Record:
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            raise BadLine("not JSON (truncated or corrupt line)") from None
        try:
            index, (trace, run_secs, target, args_info) = obj[0], obj[1][:4]
        except (TypeError, ValueError, IndexError, KeyError):
            raise BadLine("malformed tuning record") from None
        if not isinstance(index, int) or not 0 <= index < len(workloads) or workloads[index] is None:
            raise BadLine("tuning record points to a missing workload")
        if index not in operators:
            shash, block_names = workloads[index]
            shapes = [arg[2] for arg in args_info or [] if isinstance(arg, list) and len(arg) == 3]
            workload_key = orjson.dumps(["ms_workload", shash]).decode()
            operators[index] = (workload_key, task_id_of(workload_key), operator_from_shapes(block_names, shapes))
        workload_key, task_id, operator = operators[index]

        if run_secs is None or (isinstance(run_secs, list) and any(
                isinstance(s, (int, float)) and s >= _FAILED_RUN_SECS for s in run_secs)):
            error_no, costs = ERROR_RUN_FAILED, []
        else:
            error_no = 0
            costs = check_costs(run_secs, 0)
        try:
            toks = tokens.tokenize_ms_trace(trace, self.report.unknown_kinds, self.report.unknown_categories)
        except ValueError:
            raise BadLine("malformed trace") from None
        target_text = orjson.dumps(target, option=orjson.OPT_SORT_KEYS).decode() if target is not None else ""
        return Record(
            record_id=int.from_bytes(hashlib.blake2b(self._salt + line, digest_size=8).digest(), "little"),
            hardware=self.hardware, workload_key=workload_key, task_id=task_id, operator=operator,
            target=target_text, program=[self.token_table.intern(t) for t in toks], token_table=self.token_table,
            costs=costs, error_no=error_no, timestamp=math.nan, source_file=source,
            source_line=line_no, format=FORMAT,
        )
