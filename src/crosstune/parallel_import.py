"""`crosstune import --jobs N`: record files read and tokenised in N worker processes.

Files are cut into small shards, in the order a one-process import reads them. Each worker turns a
shard into a Parquet file in the dataset's schema and settings, in a hidden scratch folder of the
dataset; the parent takes the shards back in order through the same de-duplication as a one-process
import (reading only their record ids) and moves each into the dataset as a part of its own, or
rewrites it without its duplicates. The dataset is the same row for row, whatever N is, and the
parent re-encodes nothing in the common case, so N processes can approach N times one.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import shutil
import uuid
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from .dataset import open_part_writer, record_batches
from .records.canonical import ImportReport, gc_paused
from .records.detect import read_records

_SHARDS_PER_JOB = 8  # small shards keep the workers busy to the end even when files differ in size
_MAX_SHARD_FILES = 16


def default_jobs() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def shards(files: Sequence[Path], jobs: int) -> list[list[Path]]:
    size = max(1, min(_MAX_SHARD_FILES, -(-len(files) // (jobs * _SHARDS_PER_JOB))))
    return [list(files[i:i + size]) for i in range(0, len(files), size)]


def _read_shard(task: tuple[list[Path], str, bool, Path]) -> tuple[Path | None, int, ImportReport]:
    files, hardware, strict, out = task
    report = ImportReport(strict=strict)
    writer, rows = None, 0
    try:
        with gc_paused():
            for batch in record_batches(read_records([], hardware, report, files=files)):
                if writer is None:
                    writer = open_part_writer(out)
                writer.write_batch(batch)  # one row group per batch, as the one-process import writes
                rows += batch.num_rows
    finally:
        if writer is not None:
            writer.close()
    return (out if writer is not None else None), rows, report


def _context():
    # forkserver: workers are forked from a clean server process, never from a parent that may hold
    # Arrow's threads; spawn where forkserver does not exist.
    methods = multiprocessing.get_all_start_methods()
    if "forkserver" in methods:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["crosstune.parallel_import"])
        return context
    return multiprocessing.get_context("spawn")


def parallel_shards(files: Sequence[Path], hardware: str, report: ImportReport, jobs: int, scratch_root: Path,
                    on_shard=None) -> Iterator[Path]:
    """Parquet files of every record in ``files``, in file order, read by ``jobs`` processes (the caller
    moves or removes each before asking for the next); the shards' reports are merged into ``report``
    in the same order."""
    scratch = scratch_root / f".import-{uuid.uuid4().hex[:12]}"
    scratch.mkdir(parents=True)
    tasks = [(shard, hardware, report.strict, scratch / f"shard-{i:06d}.parquet")
             for i, shard in enumerate(shards(files, jobs))]
    try:
        # ProcessPoolExecutor, not Pool: a worker that dies breaks the pool with an error instead of
        # being replaced forever. At most 2 shards per job run ahead, which bounds the scratch space.
        with ProcessPoolExecutor(jobs, mp_context=_context()) as pool:
            pending: deque = deque()
            queue = iter(tasks)
            for task in itertools.islice(queue, 2 * jobs):
                pending.append(pool.submit(_read_shard, task))
            while pending:
                path, rows, shard_report = pending.popleft().result()
                for task in itertools.islice(queue, 1):
                    pending.append(pool.submit(_read_shard, task))
                report.merge(shard_report)
                if path is None:
                    continue
                yield path
                if on_shard is not None:
                    on_shard(rows)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
