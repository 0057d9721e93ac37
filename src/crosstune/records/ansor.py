"""TenSet / Ansor auto-scheduler measurement records (JSON lines, optionally gzip'd), streamed.

Line format (``tvm.auto_scheduler.measure_record``)::

    {"i": [[workload_key, target, hardware_params, target_host, layout_rewrite, extra_buffers],
           [[], steps]],
     "r": [[costs_s...], error_no, all_cost_s, timestamp],
     "v": "v0.6"}

``i[0]`` has 2 to 6 elements depending on the record version; comment lines (``#``) and blank lines
are allowed. The hardware a record was measured on is not in the line (TenSet's GPU records carry the
same target and hardware_params for every GPU), so the caller names it.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import re
import zlib
from collections.abc import Iterator
from pathlib import Path

import orjson

from .. import tokens
from .canonical import BadLine, ImportReport, Record, check_costs
from .operators import Operator, WorkloadKeyError, parse_workload_key, task_id_of

FORMAT = "ansor"
_VERSION = re.compile(r"^v0\.[1-6]$")
_CACHE_LIMIT = 500_000
_INF = float("inf")


def open_lines(path: Path) -> Iterator[bytes]:
    """Lines of a plain or gzip'd file, as bytes (gzip detected by magic number, not name)."""
    with open(path, "rb") as raw:
        magic = raw.read(2)
    if magic == b"\x1f\x8b":
        with gzip.open(path, "rb") as stream:
            yield from stream
    else:
        with open(path, "rb") as stream:
            yield from stream


def _lenient_json(line: bytes):
    """Python's json writes NaN and Infinity literals that strict JSON (orjson) rejects; such a line
    is parsed here so that its bad cost is reported as what it is."""
    try:
        return json.loads(line)
    except (ValueError, UnicodeDecodeError):
        raise BadLine("not JSON (truncated or corrupt line)") from None


class AnsorReader:
    """Streams canonical records out of Ansor record files, counting what it skips and why."""

    def __init__(self, hardware: str, report: ImportReport):
        self.hardware = hardware
        self.report = report
        self._operators: dict[str, tuple[str, Operator] | str] = {}
        self._steps: dict[bytes, int] = {}  # raw step text -> token id
        self.token_table = tokens.TokenTable()
        self._hardware_hash = int.from_bytes(hashlib.blake2b(hardware.encode(), digest_size=8).digest(), "little")

    def read_file(self, path: Path) -> Iterator[Record]:
        source = str(path)
        report = self.report
        report.files += 1
        line_no = 0
        seen_content = False
        try:
            for line_no, line in enumerate(open_lines(path), start=1):
                stripped = line.strip()
                if not stripped or stripped.startswith(b"#"):
                    continue
                seen_content = True
                report.lines += 1
                try:
                    record = self.parse_line(stripped, source, line_no)
                except BadLine as err:
                    report.skip(str(err), source, line_no)
                    continue
                yield record
        except (EOFError, zlib.error, gzip.BadGzipFile, OSError) as err:
            # A gzip stream cut short: everything read so far stays imported.
            report.skip(f"file cut short or unreadable ({type(err).__name__})", source, line_no + 1)
            return
        if not seen_content:
            report.skip_file(source, "empty file (no record lines)")

    def parse_line(self, line: bytes, source: str, line_no: int) -> Record:
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            obj = _lenient_json(line)
        if not isinstance(obj, dict) or "i" not in obj or "r" not in obj:
            raise BadLine("not an Ansor record (no 'i' and 'r')")
        version = obj.get("v")
        if version is not None and (not isinstance(version, str) or not _VERSION.match(version)):
            raise BadLine("unsupported record version 'v'")
        try:
            inp, state = obj["i"]
            workload_key, target = inp[0], inp[1]
            steps = state[1]
            result = obj["r"]
            costs_raw, error_no = result[0], result[1]
        except (ValueError, TypeError, IndexError, KeyError):
            raise BadLine("malformed record structure") from None
        if not isinstance(workload_key, str) or not isinstance(steps, list):
            raise BadLine("malformed record structure")
        if isinstance(error_no, bool) or not isinstance(error_no, int):
            raise BadLine("error_no is not an integer")
        try:  # fast path for the common case: positive finite float costs (NaN fails the comparison)
            fast = error_no == 0 and type(costs_raw) is list and 0.0 < min(costs_raw) and max(costs_raw) < _INF
        except (TypeError, ValueError):
            fast = False
        costs = costs_raw if fast and all(type(c) is float for c in costs_raw) else check_costs(costs_raw, error_no)
        timestamp = result[3] if len(result) > 3 and isinstance(result[3], (int, float)) else math.nan

        task = self._operators.get(workload_key)
        if task is None:
            try:
                task = (task_id_of(workload_key), parse_workload_key(workload_key))
            except WorkloadKeyError as err:
                task = f"workload key does not parse ({err})"
            self._operators[workload_key] = task
        if isinstance(task, str):
            raise BadLine(task)
        task_id, operator = task

        program = self._tokenize(line, steps)
        # The content hash identifies the line; XOR with the hardware's hash keeps the same line
        # imported for two hardware names apart.
        record_id = int.from_bytes(hashlib.blake2b(line, digest_size=8).digest(), "little") ^ self._hardware_hash
        return Record(record_id, self.hardware, workload_key, task_id, operator, str(target), program,
                      self.token_table, costs, error_no, float(timestamp), source, line_no, FORMAT)

    def _tokenize(self, line: bytes, steps: list) -> list[int]:
        # Steps repeat across the programs of a task, so token ids are cached by the step's raw text.
        # Inside the step list, steps are separated by '], ["' and nothing else is (nested lists
        # hold numbers, never strings), so a C-speed split gives one key per step. If the raw view
        # disagrees with the parsed one (an unusual layout), the parsed steps are serialised instead.
        begin = line.find(b"[[], [[")
        end = line.find(b'"r"', begin)
        pieces = line[begin + 5:end].split(b'], ["') if begin >= 0 and end > begin else []
        if len(pieces) != len(steps):
            pieces = [orjson.dumps(step) for step in steps]
        cache = self._steps
        program = list(map(cache.get, pieces))
        if None in program:
            if len(cache) > _CACHE_LIMIT:
                cache.clear()
            for position, (token_id, piece, step) in enumerate(zip(program, pieces, steps)):
                if token_id is None:
                    program[position] = self._token_id(piece, step)
        return program

    def _token_id(self, piece: bytes, step: list) -> int:
        try:
            token = tokens.tokenize_ansor_step(step, self.report.unknown_categories)
        except ValueError:
            raise BadLine("malformed step") from None
        if token is tokens.UNKNOWN_TOKEN:
            self.report.unknown_kinds[str(step[0])] += 1  # counted per occurrence, so not cached
            return self.token_table.intern(token)
        token_id = self._steps[piece] = self.token_table.intern(token)
        return token_id
