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

import functools
import gzip
import hashlib
import json
import math
import re
import zlib
from collections import Counter
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
_blake8 = functools.partial(hashlib.blake2b, digest_size=8)
_NUMBER_TYPES = (int, float)
_FLOAT_ONLY = {float}
_GOOD_VERSIONS = frozenset(f"v0.{minor}" for minor in range(1, 7))


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


def record_lines(path: Path, report: ImportReport) -> Iterator[tuple[int, bytes]]:
    """(line number, stripped line) of every record line of a file, for every reader: blank and comment
    lines passed over, lines and files counted in ``report``. A gzip stream cut short keeps everything read
    before the cut (reported with the line it stopped at); a file with no record line is reported."""
    source = str(path)
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
            yield line_no, stripped
    except (EOFError, zlib.error, gzip.BadGzipFile, OSError) as err:
        report.skip(f"file cut short or unreadable ({type(err).__name__})", source, line_no + 1)
        return
    if not seen_content:
        report.skip_file(source, "empty file (no record lines)")


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
        for line_no, line in record_lines(path, self.report):
            try:
                yield self.parse_line(line, source, line_no)
            except BadLine as err:
                self.report.skip(str(err), source, line_no)

    def parse_line(self, line: bytes, source: str, line_no: int) -> Record:
        """One record line -> Record; raises BadLine with the reason it cannot be imported.

        Most of a line is its step list, and most steps repeat across the programs of a task. The fast
        path therefore parses only the line without its steps (a short string) and looks every step up
        by its raw text; only steps not seen before are parsed. A line that does not have the usual
        layout, or that fails any check on the fast path, is parsed again as a whole, so the result
        (record or skip reason) is always the one the full parse gives."""
        split = self._split_steps(line)
        if split is not None:
            try:
                return self._record_fast(line, orjson.loads(split[0]), split[1], source, line_no)
            except (BadLine, orjson.JSONDecodeError, _NotFast):
                pass
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            obj = _lenient_json(line)
        return self._record(line, obj, None, source, line_no)

    @staticmethod
    def _split_steps(line: bytes) -> tuple[bytes, list[bytes]] | None:
        """(the line with an empty step list, the raw text of each step) for the usual layout
        ``{"i": [[key, target, ...], [[], [["SP", ...], ...]]], "r": ...}``; None otherwise.

        Steps are separated by '], ["' and nothing inside a step is: nested lists hold numbers, and a
        '"' inside a JSON string is escaped. A piece cut wrongly would hold an unclosed '[' and fail
        to parse, which sends the line to the full parse. A second "i" key can only be outside the
        step list (inside it, "i" would be a list element, not a key), so only the rest is searched."""
        begin = line.find(b'[[], [["')
        if begin < 0:
            return None
        end = line.rfind(b']]]], "r": ')  # the result part after it is short: search from the right
        if end <= begin:
            return None
        first = line.find(b'"i"')
        if line.find(b'"i"', first + 3, begin) >= 0 or line.find(b'"i"', end) >= 0:
            return None  # a second "i" key: which one counts is the full parser's business
        return line[:begin + 5] + b"[]" + line[end + 2:], line[begin + 8:end].split(b'], ["')

    def _record_fast(self, line: bytes, obj, pieces: list[bytes], source: str, line_no: int) -> Record:
        """The common case only (a successful measurement of a known workload, float costs, the usual
        structure); anything else raises _NotFast, and :meth:`_record` decides it."""
        try:
            (inp, state), result = obj["i"], obj["r"]
            version = obj.get("v")
            workload_key, target = inp[0], inp[1]
            costs, error_no, timestamp = result[0], result[1], result[3]
            steps = state[1]
        except Exception:
            raise _NotFast from None
        if (steps != [] or error_no != 0 or type(error_no) is not int or type(costs) is not list or not costs
                or (version is not None and (type(version) is not str or version not in _GOOD_VERSIONS))
                or type(timestamp) not in _NUMBER_TYPES):
            raise _NotFast
        task = self._operators.get(workload_key) if type(workload_key) is str else None
        if task is None or task.__class__ is str:
            raise _NotFast
        try:
            if not (0.0 < min(costs) and max(costs) < _INF) or set(map(type, costs)) != _FLOAT_ONLY:
                raise _NotFast
        except TypeError:
            raise _NotFast from None
        record_id = int.from_bytes(_blake8(line).digest(), "little") ^ self._hardware_hash
        return Record(record_id, self.hardware, workload_key, task[0], task[1], str(target),
                      self._tokenize(pieces, None), self.token_table, costs, 0, float(timestamp), source, line_no,
                      FORMAT)

    def _record(self, line: bytes, obj, pieces: list[bytes] | None, source: str, line_no: int) -> Record:
        if not isinstance(obj, dict) or "i" not in obj or "r" not in obj:
            raise BadLine("not an Ansor record (no 'i' and 'r')")
        version = obj.get("v")
        if version is not None and version not in _GOOD_VERSIONS:
            if not isinstance(version, str) or not _VERSION.match(version):
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
        if pieces is not None and steps:
            raise _NotFast  # the step list that was cut out is not the one the record holds
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

        if pieces is None:
            pieces = [orjson.dumps(step)[2:-1] for step in steps]
        program = self._tokenize(pieces, steps if steps else None)
        # The content hash identifies the line; XOR with the hardware's hash keeps the same line
        # imported for two hardware names apart.
        record_id = int.from_bytes(_blake8(line).digest(), "little") ^ self._hardware_hash
        return Record(record_id, self.hardware, workload_key, task_id, operator, str(target), program,
                      self.token_table, costs, error_no, float(timestamp), source, line_no, FORMAT)

    def _tokenize(self, pieces: list[bytes], steps: list | None) -> list[int]:
        """Token ids of the steps, cached by the step's raw text (without its outer '["' and ']').
        ``steps`` are the parsed steps where the full parse made them; otherwise a step not in the
        cache is parsed from its text."""
        cache = self._steps
        program = list(map(cache.get, pieces))
        if None in program:
            if len(cache) > _CACHE_LIMIT:
                cache.clear()
            for position, (token_id, piece) in enumerate(zip(program, pieces)):
                if token_id is None:
                    if steps is not None:
                        step = steps[position]
                    else:
                        try:
                            step = orjson.loads(b'["' + piece + b"]")
                        except orjson.JSONDecodeError:
                            raise _NotFast from None
                        if not isinstance(step, list):
                            raise _NotFast
                    program[position] = self._token_id(piece, step)
        return program

    def _token_id(self, piece: bytes, step: list) -> int:
        unknown_categories: Counter = Counter()
        try:
            token = tokens.tokenize_ansor_step(step, unknown_categories)
        except ValueError:
            raise BadLine("malformed step") from None
        if token is tokens.UNKNOWN_TOKEN:
            self.report.unknown_kinds[str(step[0])] += 1  # counted per occurrence, so not cached
            return self.token_table.intern(token)
        token_id = self.token_table.intern(token)
        if unknown_categories:  # counted per occurrence too
            self.report.unknown_categories.update(unknown_categories)
        else:
            self._steps[piece] = token_id
        return token_id


class _NotFast(Exception):
    """The fast path cannot decide this line; the full parse will."""
