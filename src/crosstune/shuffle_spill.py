"""Training rows spilled to disk in buckets of whole groups drawn at random: the shuffle of streamed
training when the shuffle buffer is smaller than the training set.

Why: an import writes records in the order of its input files, so a row group holds the programs of a
few consecutive tasks (often the layers of one network). A buffer filled from one or two row groups
then trains on a narrow, unrepresentative slice of operators for a while, and the model drifts from
buffer to buffer (measured: a 20,000-record buffer on the K80 half of the shared set lost 0.024 PCA
against a buffer holding everything). Spilling the training rows once, each (task, hardware) group to a
bucket chosen by a seeded hash, makes every bucket a uniform random sample of the groups of the whole
dataset, whatever its size; epochs then read buckets instead of row groups.

The groups of one bucket share a buffer in every epoch (the hash does not change with the epoch), but
buckets are about half a buffer, read in a new order every epoch, so which buckets meet changes.

The spill costs one extra write and disk space of about the training rows' share of the dataset. The
buckets are plain Parquet files in a scratch folder, removed when training ends; a killed run leaves
them in its checkpoint folder, where the resumed run writes them again (the same content: the bucket
of a group is a seeded hash). Without a checkpoint folder they go to the system's temporary folder
(``TMPDIR``), which a killed run leaves behind and which may be memory-backed (tmpfs).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


MAX_BUCKETS = 256  # each bucket keeps a file open while the spill is written


class GroupBuckets:
    """``n_buckets`` Parquet files of ``schema`` in ``folder`` (default: a new temporary folder); rows
    are appended per bucket in row groups of up to ``flush_rows`` so that pending rows stay bounded
    (``n_buckets * flush_rows``), and read back row group by row group. Bucket files an earlier
    (killed) run left in ``folder`` are replaced; nothing else in it is touched."""

    def __init__(self, n_buckets: int, schema: pa.Schema, folder: str | Path | None = None, flush_rows: int = 8192):
        if not 1 <= n_buckets <= MAX_BUCKETS:
            raise ValueError(f"n_buckets must be in [1, {MAX_BUCKETS}]")
        self.n_buckets = n_buckets
        self.schema = schema
        self.flush_rows = flush_rows
        self._own_folder = folder is None
        if folder is None:
            self.folder = Path(tempfile.mkdtemp(prefix="crosstune-shuffle-"))
        else:
            self.folder = Path(folder)
            self.folder.mkdir(parents=True, exist_ok=True)
            self._remove_files()  # a killed run's buckets: written again from the start
        self._writers: list[pq.ParquetWriter | None] = [None] * n_buckets
        self._pending: list[list[pa.Table]] = [[] for _ in range(n_buckets)]
        self._pending_rows = np.zeros(n_buckets, dtype=np.int64)
        self.rows = np.zeros(n_buckets, dtype=np.int64)

    def path(self, bucket: int) -> Path:
        return self.folder / f"bucket-{bucket:05d}.parquet"

    def add(self, table: pa.Table, bucket: np.ndarray) -> None:
        """Append the rows of ``table`` to their buckets (``bucket``: one index per row)."""
        if not table.num_rows:
            return
        if table.schema != self.schema:
            table = table.select(self.schema.names).cast(self.schema)
        order = np.argsort(bucket, kind="stable")  # keeps each bucket's rows in input order: deterministic
        sorted_bucket = bucket[order]
        starts = np.flatnonzero(np.r_[True, sorted_bucket[1:] != sorted_bucket[:-1]])
        ends = np.r_[starts[1:], len(order)]
        for start, end in zip(starts, ends):
            b = int(sorted_bucket[start])
            self._pending[b].append(table.take(pa.array(order[start:end])))
            self._pending_rows[b] += end - start
            self.rows[b] += end - start
            if self._pending_rows[b] >= self.flush_rows:
                self._flush(b)

    def _flush(self, bucket: int) -> None:
        if not self._pending[bucket]:
            return
        if self._writers[bucket] is None:
            self._writers[bucket] = pq.ParquetWriter(self.path(bucket), self.schema)
        self._writers[bucket].write_table(pa.concat_tables(self._pending[bucket]))
        self._pending[bucket], self._pending_rows[bucket] = [], 0

    def finish(self) -> None:
        """Write what is pending and close the files; the buckets can be read from then on."""
        for b in range(self.n_buckets):
            self._flush(b)
            if self._writers[b] is not None:
                self._writers[b].close()
                self._writers[b] = None

    def tables(self, order: np.ndarray) -> Iterator[pa.Table]:
        """The buckets' rows, bucket by bucket in ``order`` (empty buckets skipped), one row group at a
        time: a bucket larger than the buffer is never whole in memory."""
        for b in order:
            if self.rows[b]:
                bucket = pq.ParquetFile(self.path(int(b)))
                for index in range(bucket.num_row_groups):
                    yield bucket.read_row_group(index)

    def _remove_files(self) -> None:
        for path in self.folder.glob("bucket-*.parquet"):
            path.unlink()

    def remove(self) -> None:
        """Close and delete the bucket files, and the folder when it is empty (or was made here)."""
        try:
            for b, writer in enumerate(self._writers):
                if writer is not None:
                    self._writers[b] = None
                    try:
                        writer.close()
                    except OSError:  # e.g. the disk is full: the file goes anyway
                        pass
        finally:
            if self._own_folder:
                shutil.rmtree(self.folder, ignore_errors=True)
            else:
                self._remove_files()
                try:
                    self.folder.rmdir()
                except OSError:  # the user's files are in it
                    pass
