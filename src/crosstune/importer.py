"""`crosstune import`: record files in, dataset out, with progress and a report."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence

from tqdm import tqdm

from .dataset import ImportResult, import_records
from .hardware.registry import HardwareSpec, resolve
from .records.canonical import ImportReport, Record
from .records.detect import list_record_files, read_records


def _with_progress(records: Iterator[Record], total_files: int, quiet: bool) -> Iterator[Record]:
    if quiet:
        yield from records
        return
    with tqdm(unit=" rec", unit_scale=True, desc=f"importing {total_files} file(s)", mininterval=0.5) as bar:
        pending = 0
        for record in records:
            pending += 1
            if pending == 2048:
                bar.update(pending)
                pending = 0
            yield record
        bar.update(pending)


def import_sources(sources: Sequence[str | os.PathLike], hardware: str, out: str | os.PathLike,
                   hardware_spec: str | HardwareSpec | None = None, strict: bool = False, quiet: bool = True,
                   provenance: dict | None = None) -> ImportResult:
    """Import every record file under ``sources`` (Ansor or MetaSchedule, detected per file) as
    measurements of ``hardware`` into the dataset at ``out``. ``hardware_spec``: a descriptor file,
    or the descriptor itself."""
    spec = hardware_spec if isinstance(hardware_spec, HardwareSpec) else resolve(hardware, hardware_spec)
    report = ImportReport(strict=strict)
    files = list_record_files(sources, report)
    records = read_records(sources, spec.name, report, files=files)
    return import_records(_with_progress(records, len(files), quiet), out, spec, report,
                          sources=[str(s) for s in sources], provenance=provenance)


def describe_report(report: ImportReport) -> list[str]:
    """Human-readable lines: what was skipped and why, with one example location per reason."""
    lines = []
    for reason, count in report.skipped.most_common():
        lines.append(f"  skipped {count} line(s): {reason} (e.g. {report.examples.get(reason, '?')})")
    for path, reason in sorted(report.skipped_files.items()):
        lines.append(f"  skipped file {path}: {reason}")
    for kind, count in report.unknown_kinds.most_common():
        lines.append(f"  unknown step kind {kind!r}: {count} step(s), kept as token 'unknown'")
    for cat, count in report.unknown_categories.most_common():
        lines.append(f"  unknown string argument {cat!r}: {count} step(s), kept as category 'other'")
    return lines
