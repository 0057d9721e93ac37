"""The canonical measurement record every reader yields, and the import report they fill."""

from __future__ import annotations

import contextlib
import gc
import math
from collections import Counter
from dataclasses import dataclass, field

from ..errors import CrosstuneError
from ..tokens import Token, TokenTable
from .operators import Operator


@dataclass(slots=True)
class Record:
    """One measured program of one task on one hardware.

    ``program`` is the sequence of schedule primitives as ids into ``token_table`` (each id stands for
    one (kind, category, args) token of :mod:`crosstune.tokens`); the full sequence is kept, never
    cropped.
    ``costs`` are all measured repeats in seconds; ``error_no`` is 0 for a valid measurement.
    """

    record_id: int  # content hash, for de-duplication across imports
    hardware: str
    workload_key: str
    task_id: str
    operator: Operator
    target: str
    program: list[int]
    token_table: TokenTable
    costs: list[float]
    error_no: int
    timestamp: float
    source_file: str
    source_line: int
    format: str

    def tokens(self) -> list[Token]:
        """The program as (kind, category, args) tokens."""
        return [self.token_table.token(i) for i in self.program]


@contextlib.contextmanager
def gc_paused():
    """Pause Python's cycle collector while records stream through: an import allocates millions of
    small lists that hold no cycles (reference counting frees them), yet every 700 allocations
    would start a collection over everything alive, 10-15% of an import's time."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class BadLine(ValueError):
    """A record line that cannot be imported; its message is the reason counted in the report."""


@dataclass
class ImportReport:
    """What an import read, kept and skipped, and why. Saved in the dataset manifest."""

    strict: bool = False
    files: int = 0
    lines: int = 0
    records: int = 0
    failed_measurements: int = 0
    duplicates: int = 0
    skipped: Counter = field(default_factory=Counter)
    examples: dict = field(default_factory=dict)  # reason -> "file:line"
    unknown_kinds: Counter = field(default_factory=Counter)
    unknown_categories: Counter = field(default_factory=Counter)
    skipped_files: dict = field(default_factory=dict)  # path -> reason
    # Formats that carry their writer's version (AutoTVM's "version" and "tvm_version"): "what" -> lines.
    versions: Counter = field(default_factory=Counter)
    # Repeated measurements of one program merged into one record (AutoTVM), and per task the order
    # agreement of the first two valid repeats over pairs of repeated programs: task_id -> [agree, pairs].
    merged_repeats: int = 0
    repeat_pairs: dict = field(default_factory=dict)

    def skip(self, reason: str, source: str, line: int) -> None:
        """Count a skipped line; in strict mode the first one is an error."""
        if self.strict:
            raise CrosstuneError(f"{source}:{line}: {reason} (--strict stops at the first bad line)")
        self.skipped[reason] += 1
        self.examples.setdefault(reason, f"{source}:{line}")

    def skip_file(self, path: str, reason: str) -> None:
        if self.strict:
            raise CrosstuneError(f"{path}: {reason}")
        self.skipped_files[path] = reason

    @property
    def skipped_lines(self) -> int:
        return sum(self.skipped.values())

    def merge(self, other: "ImportReport") -> None:
        self.files += other.files
        self.lines += other.lines
        self.records += other.records
        self.failed_measurements += other.failed_measurements
        self.duplicates += other.duplicates
        self.skipped.update(other.skipped)
        for key, value in other.examples.items():
            self.examples.setdefault(key, value)
        self.unknown_kinds.update(other.unknown_kinds)
        self.unknown_categories.update(other.unknown_categories)
        self.skipped_files.update(other.skipped_files)
        self.versions.update(other.versions)
        self.merged_repeats += other.merged_repeats
        for task, (agree, pairs) in other.repeat_pairs.items():
            mine = self.repeat_pairs.setdefault(task, [0, 0])
            mine[0] += agree
            mine[1] += pairs

    def to_json(self) -> dict:
        return {
            "files": self.files, "lines": self.lines, "records": self.records,
            "failed_measurements": self.failed_measurements, "duplicates": self.duplicates,
            "skipped": dict(self.skipped), "examples": self.examples,
            "unknown_kinds": dict(self.unknown_kinds), "unknown_categories": dict(self.unknown_categories),
            "skipped_files": self.skipped_files, "versions": dict(self.versions),
            "merged_repeats": self.merged_repeats, "repeat_pairs": self.repeat_pairs,
        }

    @classmethod
    def from_json(cls, data: dict) -> "ImportReport":
        report = cls()
        for key in ("files", "lines", "records", "failed_measurements", "duplicates", "merged_repeats"):
            setattr(report, key, int(data.get(key, 0)))
        report.skipped = Counter(data.get("skipped", {}))
        report.examples = dict(data.get("examples", {}))
        report.unknown_kinds = Counter(data.get("unknown_kinds", {}))
        report.unknown_categories = Counter(data.get("unknown_categories", {}))
        report.skipped_files = dict(data.get("skipped_files", {}))
        report.versions = Counter(data.get("versions", {}))
        report.repeat_pairs = {k: list(v) for k, v in data.get("repeat_pairs", {}).items()}
        return report


def check_costs(costs: object, error_no: int) -> list[float]:
    """Validate measured costs. A failed measurement (error_no != 0) keeps whatever it has; a
    successful one must have positive, finite costs."""
    if not isinstance(costs, list):
        raise BadLine("costs are not a list")
    values: list[float] = []
    for cost in costs:
        if isinstance(cost, bool) or not isinstance(cost, (int, float)):
            raise BadLine("cost is not a number")
        values.append(float(cost))
    if error_no == 0:
        if not values:
            raise BadLine("no measured costs")
        for value in values:
            if math.isnan(value) or math.isinf(value):
                raise BadLine("cost is NaN or inf")
            if value <= 0:
                raise BadLine("cost is zero or negative")
    return values
