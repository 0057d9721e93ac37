"""Find record files under the given sources and stream them through the right reader."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..errors import CrosstuneError
from . import autotvm, metaschedule
from .ansor import AnsorReader
from .canonical import ImportReport, Record

ANSOR_SUFFIXES = (".json", ".json.gz", ".jsonl", ".jsonl.gz", ".log", ".log.gz")


def _walk(source: Path) -> Iterator[Path]:
    if source.is_dir():
        for root, dirs, files in os.walk(source):
            dirs.sort()
            for name in sorted(files):
                yield Path(root) / name
    else:
        yield source


def list_record_files(sources: Iterable[str | os.PathLike], report: ImportReport) -> list[Path]:
    """Record files under ``sources`` (files or directories), in a stable order. Files that are not
    records (by name) are counted in ``report.skipped_files``; a source that does not exist is an error."""
    found: list[Path] = []
    for source in map(Path, sources):
        if not source.exists():
            raise CrosstuneError(f"{source}: no such file or directory")
        for path in _walk(source):
            name = path.name
            if name.startswith("."):
                continue
            if metaschedule.is_record_file(path):
                found.append(path)
            elif name.endswith("workload.json") and (path.parent / name.replace("workload", "tuning_record")).exists():
                continue  # read together with its tuning-record file
            elif name.endswith(ANSOR_SUFFIXES):
                found.append(path)
            else:
                report.skip_file(str(path), "not a record file (expected .json, .json.gz, .jsonl or .log)")
    return found


def _check_readable(path: Path) -> None:
    try:
        with open(path, "rb") as stream:
            stream.read(1)
    except OSError as err:
        raise CrosstuneError(f"{path}: cannot be read ({err.strerror or err})") from None


def read_records(sources: Iterable[str | os.PathLike], hardware: str, report: ImportReport,
                 files: list[Path] | None = None) -> Iterator[Record]:
    """Canonical records of every record file under ``sources``, format detected per file
    (MetaSchedule by its ``*tuning_record.json`` name, AutoTVM by the keys of its first line, Ansor
    otherwise). AutoTVM records come last: repeats of a config are merged over all files first."""
    ansor = AnsorReader(hardware, report)
    ms_reader = metaschedule.MetaScheduleReader(hardware, report)
    autotvm_reader = None
    for path in files if files is not None else list_record_files(sources, report):
        _check_readable(path)
        if metaschedule.is_record_file(path):
            yield from ms_reader.read_file(path)
        elif autotvm.sniff(path):
            autotvm_reader = autotvm_reader or autotvm.AutoTVMReader(hardware, report)
            yield from autotvm_reader.read_file(path)
        else:
            yield from ansor.read_file(path)
    if autotvm_reader is not None:
        yield from autotvm_reader.finish()
