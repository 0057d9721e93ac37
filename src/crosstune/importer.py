"""`crosstune import`: record files in, dataset out, with progress and a report."""

from __future__ import annotations

import gzip
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from tqdm import tqdm

from .dataset import ImportResult, import_records
from .hardware.registry import HardwareSpec, resolve, with_codegen
from .records.canonical import ImportReport, Record, gc_paused
from .records import autotvm
from .records.detect import list_record_files, read_records
from .tables import plural


_SAMPLE = 4 << 20  # files up to this size (decompressed) are counted exactly; larger ones estimated from a sample


def count_lines(files: Sequence[Path]) -> int:
    """Lines in the record files (decompressed), for the progress bar's total. Small files are counted;
    a large one is estimated from its first 4 MiB and its decompressed size (plain: the file size;
    gzip: the size its trailer records), so that the total costs no second pass over gigabytes."""
    total = 0
    for path in files:
        try:
            total += _lines_in(path)
        except (OSError, EOFError, ValueError):
            continue  # an unreadable file is reported by the reader, with its reason
    return total


def _lines_in(path: Path) -> int:
    gz = path.name.endswith(".gz")
    with (gzip.open(path, "rb") if gz else open(path, "rb")) as stream:
        sample = stream.read(_SAMPLE + 1)
    lines = sample.count(b"\n") + (bool(sample) and not sample.endswith(b"\n"))
    if len(sample) <= _SAMPLE:
        return lines  # the whole file
    size = _gzip_size(path) if gz else path.stat().st_size
    return max(lines, round(lines * size / len(sample)))


def _gzip_size(path: Path) -> int:
    """The decompressed size a gzip member's trailer records (modulo 4 GiB, as the format stores it)."""
    with open(path, "rb") as stream:
        stream.seek(-4, os.SEEK_END)
        return int.from_bytes(stream.read(4), "little")


def _with_progress(records: Iterator[Record], files: Sequence[Path], report: ImportReport,
                   quiet: bool) -> Iterator[Record]:
    if quiet:
        yield from records
        return
    total = count_lines(files)
    with tqdm(total=total, unit=" lines", unit_scale=True, desc=f"importing {len(files)} file{'s' * (len(files) != 1)}",
              mininterval=0.5) as bar:
        read = 0
        for record in records:
            read += 1
            if read % 2048 == 0:  # lines consumed so far: records read + lines skipped
                bar.update(min(total, read + report.skipped_lines) - bar.n)
            yield record
        bar.update(total - bar.n)


def import_sources(sources: Sequence[str | os.PathLike], hardware: str, out: str | os.PathLike,
                   hardware_spec: str | HardwareSpec | None = None, strict: bool = False, quiet: bool = True,
                   provenance: dict | None = None, codegen_isa: str | None = None,
                   jobs: int | None = 1) -> ImportResult:
    """Import every record file under ``sources`` (Ansor, MetaSchedule or AutoTVM, detected per file) as
    measurements of ``hardware`` into the dataset at ``out``. ``hardware_spec``: a descriptor file, or the
    descriptor itself; ``codegen_isa`` says what the measured code was compiled for where that differs
    from the chip (see :func:`hardware.registry.with_codegen`). ``jobs`` > 1 reads the files in that many
    processes (same dataset as one); None chooses (:func:`auto_jobs`)."""
    spec = hardware_spec if isinstance(hardware_spec, HardwareSpec) else resolve(hardware, hardware_spec)
    if codegen_isa:
        spec = with_codegen(spec, codegen_isa)
    report = ImportReport(strict=strict)
    files = list_record_files(sources, report)
    if jobs is None:
        jobs = auto_jobs(files)
    # AutoTVM repeats are merged across all files of an import: one process sees them all.
    if jobs > 1 and len(files) > 1 and not any(autotvm.sniff(path) for path in files):
        return _import_parallel(files, spec, out, report, jobs, quiet, [str(s) for s in sources], provenance)
    records = read_records(sources, spec.name, report, files=files)
    with gc_paused():
        return import_records(_with_progress(records, files, report, quiet), out, spec, report,
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
    from .parallel_import import parallel_shards

    append = DatasetAppend(out, spec, report)  # checks the dataset before any worker starts
    bar = tqdm(unit=" rec", unit_scale=True, desc=f"importing {len(files)} file(s) in {jobs} processes",
               mininterval=0.5, disable=quiet)
    try:
        with bar:
            for shard in parallel_shards(files, spec.name, report, jobs, Path(out), on_shard=bar.update):
                append.adopt(shard)
    except BaseException:
        append.abort()
        raise
    return append.commit(sources, provenance)


def describe_report(report: ImportReport) -> list[str]:
    """Human-readable lines: what was skipped and why, with one example location per reason."""
    lines = []
    for reason, count in report.skipped.most_common():
        lines.append(f"  skipped {plural(count, 'line')}: {reason} (e.g. {report.examples.get(reason, '?')})")
    if report.merged_repeats:
        lines.append(f"  merged {report.merged_repeats} repeated measurement(s) of a config into its record")
    for version, count in sorted(report.versions.items()):
        lines.append(f"  {count} line(s) written by {version}")
    for path, reason in sorted(report.skipped_files.items()):
        lines.append(f"  skipped file {path}: {reason}")
    for kind, count in report.unknown_kinds.most_common():
        lines.append(f"  unknown step kind {kind!r}: {plural(count, 'step')}, kept as token 'unknown'")
    for cat, count in report.unknown_categories.most_common():
        lines.append(f"  unknown string argument {cat!r}: {plural(count, 'step')}, kept as category 'other'")
    return lines
