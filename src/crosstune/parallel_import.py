"""`crosstune import --jobs N`: record files read and tokenised in N worker processes.

Files are cut into small shards, in the order a one-process import reads them. Each worker turns a
shard into Arrow batches in the dataset schema and writes them to a scratch Parquet file; the parent
takes the shards back in order and appends them through the same de-duplication as a one-process
import, so the dataset is the same row for row, whatever N is. The scratch files live in a hidden
folder of the dataset and are removed as soon as they are appended (or when the import fails).
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

import pyarrow as pa
import pyarrow.parquet as pq

from .dataset import SCHEMA, record_batches
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


def _read_shard(task: tuple[list[Path], str, bool, Path]) -> tuple[Path | None, ImportReport]:
    files, hardware, strict, out = task
    report = ImportReport(strict=strict)
    writer = None
    try:
        with gc_paused():
            for batch in record_batches(read_records([], hardware, report, files=files)):
                if writer is None:
                    writer = pq.ParquetWriter(out, SCHEMA, compression="lz4")  # as fast as none, 1/20 of the disk
                writer.write_table(pa.Table.from_batches([batch]))
    finally:
        if writer is not None:
            writer.close()
    return (out if writer is not None else None), report


def _context():
    # forkserver: workers are forked from a clean server process, never from a parent that may hold
    # Arrow's threads; spawn where forkserver does not exist.
    methods = multiprocessing.get_all_start_methods()
    if "forkserver" in methods:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["crosstune.parallel_import"])
        return context
    return multiprocessing.get_context("spawn")


def parallel_batches(files: Sequence[Path], hardware: str, report: ImportReport, jobs: int, scratch_root: Path,
                     on_shard=None) -> Iterator[pa.RecordBatch]:
    """Batches of every record in ``files``, in file order, read by ``jobs`` processes; the
    shards' reports are merged into ``report`` in the same order."""
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
                path, shard_report = pending.popleft().result()
                for task in itertools.islice(queue, 1):
                    pending.append(pool.submit(_read_shard, task))
                report.merge(shard_report)
                if path is None:
                    continue
                rows = 0
                for batch in pq.ParquetFile(path).iter_batches(batch_size=1 << 16):
                    rows += batch.num_rows
                    yield batch
                path.unlink()
                if on_shard is not None:
                    on_shard(rows)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
