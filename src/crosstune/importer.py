"""`crosstune import`: record files in, dataset out, with progress and a report."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence

from tqdm import tqdm

from .dataset import ImportResult, import_records
from .hardware.registry import resolve
from .records.canonical import ImportReport, Record, gc_paused
from .records.detect import list_record_files, read_records


def _with_progress(records: Iterator[Record], total_files: int, quiet: bool) -> Iterator[Record]:
    return records if quiet else _progress(records, total_files)


def _progress(records: Iterator[Record], total_files: int) -> Iterator[Record]:
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
                   hardware_spec: str | None = None, strict: bool = False, quiet: bool = True,
                   provenance: dict | None = None, jobs: int | None = 1) -> ImportResult:
    """Import every record file under ``sources`` (Ansor or MetaSchedule, detected per file) as
    measurements of ``hardware`` into the dataset at ``out``; ``jobs`` > 1 reads the files in that
    many processes (same dataset as one); None chooses (:func:`auto_jobs`)."""
    spec = resolve(hardware, hardware_spec)
    report = ImportReport(strict=strict)
    files = list_record_files(sources, report)
    if jobs is None:
        jobs = auto_jobs(files)
    if jobs > 1 and len(files) > 1:
        return _import_parallel(files, spec, out, report, jobs, quiet, [str(s) for s in sources], provenance)
    records = read_records(sources, spec.name, report, files=files)
    with gc_paused():
        return import_records(_with_progress(records, len(files), quiet), out, spec, report,
                          sources=[str(s) for s in sources], provenance=provenance)


_PARALLEL_BYTES = 16 << 20


def auto_jobs(files) -> int:
    """Every core this process may use, once the files are large enough (16 MiB) to repay starting
    the worker processes; one process below that."""
    from .parallel_import import default_jobs

    size = 0
    for path in files:
        try:
            size += path.stat().st_size
        except OSError:
            pass  # reported when it is read
        if size >= _PARALLEL_BYTES:
            return default_jobs()
    return 1


def _import_parallel(files, spec, out, report: ImportReport, jobs: int, quiet: bool, sources: list[str],
                     provenance: dict | None) -> ImportResult:
    from pathlib import Path

    from .dataset import DatasetAppend
    from .parallel_import import parallel_batches

    append = DatasetAppend(out, spec, report)  # checks the dataset before any worker starts
    bar = tqdm(unit=" rec", unit_scale=True, desc=f"importing {len(files)} file(s) in {jobs} processes",
               mininterval=0.5, disable=quiet)
    try:
        with bar:
            for batch in parallel_batches(files, spec.name, report, jobs, Path(out), on_shard=bar.update):
                append.write(batch)
    except BaseException:
        append.abort()
        raise
    return append.commit(sources, provenance)


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
