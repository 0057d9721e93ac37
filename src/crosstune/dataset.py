"""The dataset store: Parquet partitioned by hardware plus a JSON manifest, and its in-memory form.

Layout of a dataset directory::

    manifest.json                      # format version, counts, hardware descriptors, vocabulary,
                                       # import reports, and the list of committed part files
    hardware=<name>/part-<id>.parquet  # one file per import and hardware

Only part files listed in the manifest belong to the dataset. An import writes its parts under
temporary names, renames them, and then replaces the manifest atomically, so a killed import leaves
either the old dataset or the new one, never a half-written one that loads as if complete.
"""

from __future__ import annotations

import datetime as _dt
import itertools
import json
import math
import operator
import os
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from . import __version__, tokens
from .atomic import fsync_file
from .atomic import write_text as atomic_write_text
from .errors import CrosstuneError
from .hardware.registry import HardwareSpec, spec_from_dict
from .records.canonical import ImportReport, Record
from .records.operators import OP_KINDS, OP_KIND_ID

FORMAT_NAME = "crosstune-dataset"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
OP_ARG_SLOTS = 12  # operator shape arguments kept as model features (the rest are in op_args)
_BATCH = 20_000

SCHEMA = pa.schema([
    ("record_id", pa.uint64()),
    ("hardware", pa.string()),
    ("task_id", pa.string()),
    ("workload_key", pa.string()),
    ("op_name", pa.string()),
    ("op_kind", pa.string()),
    ("op_args", pa.list_(pa.float64())),
    ("flops", pa.float64()),
    ("target", pa.string()),
    ("seq_len", pa.int32()),
    ("step_kind", pa.list_(pa.int8())),
    ("step_cat", pa.list_(pa.int16())),
    ("step_args", pa.list_(pa.float32())),  # seq_len * NUM_ARGS values, row-major
    ("costs", pa.list_(pa.float64())),
    ("latency", pa.float64()),  # mean of costs; NaN for a failed measurement
    ("error_no", pa.int16()),
    ("timestamp", pa.float64()),
    ("source_file", pa.string()),
    ("source_line", pa.int32()),
    ("format", pa.string()),
])


# Dictionary encoding pays for the repeated strings only; on the token and cost lists Parquet would
# build a dictionary and then give it up, which took half of the write time. Statistics of list
# columns are never used (nothing filters on them).
_DICTIONARY_COLUMNS = [f.name for f in SCHEMA if pa.types.is_string(f.type)]
_STATISTICS_COLUMNS = [f.name for f in SCHEMA if not pa.types.is_list(f.type)]


def _vocabulary() -> dict:
    return {
        "version": tokens.VOCAB_VERSION, "kinds": list(tokens.KINDS), "categories": list(tokens.CATEGORIES),
        "num_args": tokens.NUM_ARGS, "arg_layout": {k: list(v) for k, v in tokens.ARG_LAYOUT.items()},
        "op_kinds": list(OP_KINDS),
    }


def read_manifest(path: Path) -> dict:
    manifest_path = path / MANIFEST
    if not path.is_dir():
        raise CrosstuneError(f"{path}: no such dataset directory")
    if not manifest_path.is_file():
        raise CrosstuneError(f"{path}: not a complete crosstune dataset (no {MANIFEST}); "
                             "was its import interrupted? Import it again.")
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise CrosstuneError(f"{manifest_path}: unreadable manifest ({err})") from None
    if manifest.get("format") != FORMAT_NAME:
        raise CrosstuneError(f"{path}: {MANIFEST} is not a crosstune dataset manifest")
    if manifest.get("format_version", 0) > FORMAT_VERSION:
        raise CrosstuneError(f"{path}: dataset format version {manifest.get('format_version')} is newer than "
                             f"this crosstune ({FORMAT_VERSION}); upgrade crosstune")
    return manifest


def open_part_writer(path: Path) -> pq.ParquetWriter:
    """A Parquet writer with the dataset's settings: lz4 (as fast as none, 1/20 of the disk), dictionary
    encoding on string columns only (on the token lists it cost half the write time)."""
    return pq.ParquetWriter(path, SCHEMA, compression="lz4", use_dictionary=_DICTIONARY_COLUMNS,
                            write_statistics=_STATISTICS_COLUMNS)


class _PartWriter:
    """Streams Arrow batches into one Parquet file (one row group per batch) under a temporary name."""

    def __init__(self, final_path: Path):
        self.final_path = final_path
        self.tmp_path = final_path.with_name(f".{final_path.name}.tmp")
        final_path.parent.mkdir(parents=True, exist_ok=True)
        self.writer = open_part_writer(self.tmp_path)
        self.rows = 0

    def write(self, batch: pa.RecordBatch | pa.Table) -> None:
        if batch.num_rows:
            self.writer.write_table(pa.Table.from_batches([batch]) if isinstance(batch, pa.RecordBatch) else batch)
            self.rows += batch.num_rows

    def commit(self) -> None:
        self.writer.close()
        fsync_file(self.tmp_path)
        os.replace(self.tmp_path, self.final_path)

    def abort(self) -> None:
        try:
            self.writer.close()
        finally:
            self.tmp_path.unlink(missing_ok=True)


class IdSet:
    """A set of uint64 record ids held as a few sorted numpy arrays (8 bytes per id instead of ~70 for
    a Python set of ints): arrays of similar size are merged, so adding n ids costs O(n log n) in all
    and a lookup searches at most log2(n) arrays."""

    def __init__(self, ids: np.ndarray | None = None):
        self._levels: list[np.ndarray] = []
        if ids is not None and len(ids):
            self.add(np.unique(ids))

    def __len__(self) -> int:
        return sum(len(level) for level in self._levels)

    def contains(self, ids: np.ndarray) -> np.ndarray:
        found = np.zeros(len(ids), dtype=bool)
        for level in self._levels:
            at = np.searchsorted(level, ids)
            at[at == len(level)] = 0
            found |= level[at] == ids
        return found

    def add(self, ids: np.ndarray) -> None:
        """Add ids that are not in the set yet (and distinct)."""
        if not len(ids):
            return
        level = np.sort(np.asarray(ids, dtype=np.uint64))
        while self._levels and len(self._levels[-1]) <= 2 * len(level):
            level = np.sort(np.concatenate([self._levels.pop(), level]), kind="mergesort")
        self._levels.append(level)


def new_rows(ids: np.ndarray, seen: IdSet) -> np.ndarray:
    """Mask of the ids to keep: not in ``seen`` and the first of their kind in ``ids``; adds them to
    ``seen``. Applied batch by batch in import order, this keeps exactly the first occurrence of
    every record, however the batches were produced."""
    _, first = np.unique(ids, return_index=True)
    keep = np.zeros(len(ids), dtype=bool)
    keep[first] = True
    keep &= ~seen.contains(ids)
    seen.add(ids[keep])
    return keep


def _gather_tokens(records: Sequence[Record], programs: list[list[int]],
                   lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Flat (kinds, cats, args) of all programs, gathered from the readers' token tables."""
    total = int(lengths.sum())
    ids = np.fromiter(itertools.chain.from_iterable(programs), dtype=np.int64, count=total)
    tables = {id(r.token_table): r.token_table for r in records}
    if len(tables) == 1:
        kinds, cats, args = next(iter(tables.values())).arrays()
        return kinds[ids], cats[ids], args[ids]
    owner = np.repeat(np.array([id(r.token_table) for r in records], dtype=np.uint64), lengths)
    out_k = np.zeros(total, np.int8)
    out_c = np.zeros(total, np.int16)
    out_a = np.zeros((total, tokens.NUM_ARGS), np.float32)
    for key, table in tables.items():
        where = owner == np.uint64(key)
        kinds, cats, args = table.arrays()
        out_k[where], out_c[where], out_a[where] = kinds[ids[where]], cats[ids[where]], args[ids[where]]
    return out_k, out_c, out_a


_get = operator.attrgetter


def _strings(records: Sequence[Record], name: str) -> pa.Array:
    return pa.array(list(map(_get(name), records)), pa.string())


def records_to_batch(records: Sequence[Record]) -> pa.RecordBatch:
    n = len(records)
    programs = list(map(_get("program"), records))
    lengths = np.fromiter(map(len, programs), dtype=np.int32, count=n)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    kinds, cats, args = _gather_tokens(records, programs, lengths)
    costs = list(map(_get("costs"), records))
    error_no = np.fromiter(map(_get("error_no"), records), dtype=np.int16, count=n)
    latency = np.fromiter((sum(c) / len(c) if c else math.nan for c in costs), dtype=np.float64, count=n)
    latency[error_no != 0] = math.nan
    # Operator columns come from one representative per Operator object (readers share one per
    # workload), taken by index: one Python object per task instead of one per record.
    operators = list(map(_get("operator"), records))
    _, first, task_code = np.unique(np.fromiter(map(id, operators), dtype=np.int64, count=n),
                                    return_index=True, return_inverse=True)
    ops = [operators[i] for i in first]
    task_code = pa.array(task_code.astype(np.int32))
    columns = [
        pa.array(np.fromiter(map(_get("record_id"), records), dtype=np.uint64, count=n)),
        _strings(records, "hardware"),
        _strings(records, "task_id"),
        _strings(records, "workload_key"),
        pa.array([o.name for o in ops], pa.string()).take(task_code),
        pa.array([o.kind for o in ops], pa.string()).take(task_code),
        pa.array([list(o.args) for o in ops], pa.list_(pa.float64())).take(task_code),
        pa.array([o.flops for o in ops], pa.float64()).take(task_code),
        _strings(records, "target"),
        pa.array(lengths, pa.int32()),
        pa.ListArray.from_arrays(pa.array(offsets), pa.array(kinds, pa.int8())),
        pa.ListArray.from_arrays(pa.array(offsets), pa.array(cats, pa.int16())),
        pa.ListArray.from_arrays(pa.array(offsets * tokens.NUM_ARGS), pa.array(args.reshape(-1), pa.float32())),
        pa.array(costs, pa.list_(pa.float64())),
        pa.array(latency, pa.float64()),
        pa.array(error_no, pa.int16()),
        pa.array(np.fromiter(map(_get("timestamp"), records), dtype=np.float64, count=n)),
        _strings(records, "source_file"),
        pa.array(np.fromiter(map(_get("source_line"), records), dtype=np.int32, count=n)),
        _strings(records, "format"),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=SCHEMA)


def _existing_ids(root: Path, manifest: dict | None, hardware: str) -> IdSet:
    if manifest is None:
        return IdSet()
    ids = [pq.read_table(root / part["path"], columns=["record_id"]).column("record_id").to_numpy()
           for part in manifest.get("parts", []) if part["hardware"] == hardware]
    return IdSet(np.concatenate(ids) if ids else None)


@dataclass
class ImportResult:
    path: Path
    hardware: str
    added: int
    report: ImportReport


class DatasetAppend:
    """One import of one hardware into a dataset: batches in (:meth:`write`, one new part file) or whole
    Parquet files in (:meth:`adopt`, a part each), an updated manifest out. Records already in the dataset
    or earlier in the import (same content hash) are dropped and counted as duplicates. Nothing is visible
    until :meth:`commit`; :meth:`abort` (or an exception) leaves the dataset as it was. One import uses
    either ``write`` or ``adopt``, so that the parts keep the order the records came in."""

    def __init__(self, out: str | os.PathLike, hardware: HardwareSpec, report: ImportReport):
        root = Path(out)
        manifest = read_manifest(root) if (root / MANIFEST).exists() else None
        if manifest is None and root.exists() and any(p for p in root.iterdir() if not p.name.startswith(".")):
            if not any(p.name.startswith("hardware=") for p in root.iterdir()):
                raise CrosstuneError(f"{root}: exists and is not a crosstune dataset; choose another --out")
        if manifest is not None:
            known = manifest.get("hardware", {}).get(hardware.name)
            if known is not None and spec_from_dict(known, f"{root}/{MANIFEST}") != hardware:
                raise CrosstuneError(f"{root}: hardware {hardware.name!r} is already in the dataset with a different "
                                     "descriptor; import under another name")
        root.mkdir(parents=True, exist_ok=True)
        self.root, self.manifest, self.hardware, self.report = root, manifest, hardware, report
        self.seen = _existing_ids(root, manifest, hardware.name)
        self.part_rel = self._new_part()
        self.writer = _PartWriter(root / self.part_rel)
        self.adopted: list[tuple[str, int]] = []  # (part, records) taken over whole by adopt

    def _new_part(self) -> str:
        return f"hardware={self.hardware.name}/part-{uuid.uuid4().hex[:12]}.parquet"

    def _keep(self, ids: np.ndarray, error_no: np.ndarray) -> np.ndarray:
        """Which rows are new (updating the de-duplication index and the report)."""
        keep = new_rows(ids, self.seen)
        kept = int(keep.sum())
        self.report.duplicates += len(keep) - kept
        self.report.records += kept
        self.report.failed_measurements += int(np.count_nonzero(error_no[keep] != 0))
        return keep

    def write(self, batch: pa.RecordBatch | pa.Table) -> None:
        keep = self._keep(batch.column("record_id").to_numpy(), batch.column("error_no").to_numpy())
        if not keep.all():
            batch = batch.filter(pa.array(keep))
        self.writer.write(batch)

    def adopt(self, path: Path) -> None:
        """Take the Parquet file ``path`` (dataset schema, written with :func:`open_part_writer`, on the
        dataset's file system) as a part of its own: moved into place when none of its records is a
        duplicate, which costs no re-encoding; otherwise rewritten without the duplicates."""
        columns = pq.read_table(path, columns=["record_id", "error_no"])
        keep = self._keep(columns.column("record_id").to_numpy(), columns.column("error_no").to_numpy())
        kept = int(keep.sum())
        part = self._new_part()
        if kept == len(keep) and kept:
            fsync_file(path)
            (self.root / part).parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, self.root / part)
        elif kept:
            writer, start = _PartWriter(self.root / part), 0
            for batch in pq.ParquetFile(path).iter_batches(batch_size=_BATCH):
                writer.write(batch.filter(pa.array(keep[start:start + batch.num_rows])))
                start += batch.num_rows
            writer.commit()
        path.unlink(missing_ok=True)
        if kept:
            self.adopted.append((part, kept))

    def commit(self, sources: Sequence[str] = (), provenance: dict | None = None) -> ImportResult:
        parts = []
        if self.writer.rows:
            self.writer.commit()
            parts.append((self.part_rel, self.writer.rows))
        else:
            self.writer.abort()
        parts += self.adopted
        manifest = _updated_manifest(self.root, self.manifest, self.hardware, parts, self.report, sources, provenance)
        atomic_write_text(self.root / MANIFEST, json.dumps(manifest, indent=1))
        return ImportResult(self.root, self.hardware.name, sum(n for _, n in parts), self.report)

    def abort(self) -> None:
        try:
            self.writer.abort()
        finally:
            for part, _ in self.adopted:  # parts no manifest names: nobody reads them
                (self.root / part).unlink(missing_ok=True)


def import_records(records: Iterable[Record], out: str | os.PathLike, hardware: HardwareSpec,
                   report: ImportReport, sources: Sequence[str] = (), provenance: dict | None = None) -> ImportResult:
    """Stream ``records`` (all of one hardware) into the dataset at ``out``, creating it or adding to
    it, one row group of up to 20,000 records at a time (memory does not grow with the input)."""
    return import_batches(record_batches(records), out, hardware, report, sources, provenance)


def record_batches(records: Iterable[Record], size: int = _BATCH) -> Iterable[pa.RecordBatch]:
    buffer: list[Record] = []
    for record in records:
        buffer.append(record)
        if len(buffer) >= size:
            yield records_to_batch(buffer)
            buffer = []
    if buffer:
        yield records_to_batch(buffer)


def import_batches(batches: Iterable[pa.RecordBatch | pa.Table], out: str | os.PathLike, hardware: HardwareSpec,
                   report: ImportReport, sources: Sequence[str] = (), provenance: dict | None = None) -> ImportResult:
    """Like :func:`import_records`, for batches already in the dataset schema (in import order)."""
    append = DatasetAppend(out, hardware, report)
    try:
        for batch in batches:
            append.write(batch)
    except BaseException:
        append.abort()
        raise
    return append.commit(sources, provenance)


def _updated_manifest(root: Path, manifest: dict | None, hardware: HardwareSpec, parts: Sequence[tuple[str, int]],
                      report: ImportReport, sources: Sequence[str], provenance: dict | None) -> dict:
    now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    if manifest is None:
        manifest = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, "created": now,
                    "hardware": {}, "parts": [], "imports": []}
    manifest["crosstune_version"] = __version__
    manifest["vocabulary"] = _vocabulary()
    manifest["hardware"][hardware.name] = hardware.to_json()
    for part, records in parts:
        manifest["parts"].append({"path": part, "hardware": hardware.name, "records": records})
    manifest["imports"].append({"date": now, "hardware": hardware.name, "sources": list(sources),
                                "added": sum(n for _, n in parts), "report": report.to_json()})
    if provenance:
        manifest.setdefault("provenance", {}).update(provenance)
    manifest["counts"] = manifest_counts(root, manifest)
    return manifest


def manifest_counts(root: Path, manifest: dict) -> dict:
    """Summary statistics written into the manifest (what `crosstune info` prints without loading),
    gathered one row group at a time so that memory does not grow with the dataset."""
    paths = [root / p["path"] for p in manifest["parts"]]
    if not paths:
        return {"records": 0}
    records = failed = 0
    tasks: set[str] = set()
    per_hw: dict[str, dict] = {}
    per_op: dict[str, int] = {}
    seq_hist = np.zeros(0, dtype=np.int64)
    for path in paths:
        for batch in pq.ParquetFile(path).iter_batches(columns=["hardware", "task_id", "op_kind", "seq_len", "error_no"]):
            bad = batch.column("error_no").to_numpy() != 0
            records += batch.num_rows
            failed += int(bad.sum())
            counts = np.bincount(batch.column("seq_len").to_numpy())
            if len(counts) > len(seq_hist):
                seq_hist = np.pad(seq_hist, (0, len(counts) - len(seq_hist)))
            seq_hist[:len(counts)] += counts
            hw_names, hw_codes = _dictionary(pa.chunked_array([batch.column("hardware")]))
            task_names, task_codes = _dictionary(pa.chunked_array([batch.column("task_id")]))
            for code, name in enumerate(hw_names):
                rows = hw_codes == code
                entry = per_hw.setdefault(name, {"records": 0, "tasks": set(), "failed": 0})
                entry["records"] += int(rows.sum())
                entry["failed"] += int(bad[rows].sum())
                entry["tasks"].update(task_names[c] for c in np.unique(task_codes[rows]))
            tasks.update(task_names)
            op_names, op_codes = _dictionary(pa.chunked_array([batch.column("op_kind")]))
            for code, n in enumerate(np.bincount(op_codes, minlength=len(op_names))):
                per_op[op_names[code]] = per_op.get(op_names[code], 0) + int(n)
    if not records:
        return {"records": 0}
    lengths = np.arange(len(seq_hist))
    return {
        "records": records,
        "tasks": len(tasks),
        "failed": failed,
        "per_hardware": {name: {"records": e["records"], "tasks": len(e["tasks"]), "failed": e["failed"]}
                         for name, e in sorted(per_hw.items())},
        "per_operator": dict(sorted(per_op.items())),
        "sequence_length": {"min": int(lengths[seq_hist > 0][0]), "p50": _hist_percentile(seq_hist, 50),
                            "mean": round(float((lengths * seq_hist).sum() / records), 2),
                            "p95": _hist_percentile(seq_hist, 95), "max": int(lengths[seq_hist > 0][-1])},
    }


def _hist_percentile(hist: np.ndarray, q: float) -> float:
    """``np.percentile(values, q)`` (linear method) of the integers whose histogram is ``hist``."""
    cumulative = np.cumsum(hist)
    position = q / 100 * (cumulative[-1] - 1)
    below = int(np.floor(position))
    a = float(np.searchsorted(cumulative, below, side="right"))
    b = float(np.searchsorted(cumulative, min(below + 1, cumulative[-1] - 1), side="right"))
    t = position - below
    # numpy's _lerp, including its switch at t >= 0.5, so that the figure is the same to the last bit
    return float(b - (b - a) * (1 - t)) if t >= 0.5 else float(a + (b - a) * t)


# ---------------------------------------------------------------------------------------------------
# In-memory, model-ready form
# ---------------------------------------------------------------------------------------------------

@dataclass
class Dataset:
    """Records as numpy arrays, one row per program, tokens flattened with ``offsets``.

    ``group`` numbers the (task, hardware) pairs: rankings, labels and metrics are computed within
    a group, never across. ``valid`` marks successful measurements (``latency`` finite).
    """

    record_id: np.ndarray
    hardware_names: list[str]
    hardware: np.ndarray  # int32 index into hardware_names
    task_ids: list[str]
    task: np.ndarray  # int32 index into task_ids
    workload_keys: list[str]  # by task index
    op_kind: np.ndarray  # int16 index into OP_KINDS
    op_args: np.ndarray  # float32 (n, OP_ARG_SLOTS), log2(1 + |arg|)
    flops: np.ndarray
    latency: np.ndarray
    error_no: np.ndarray
    offsets: np.ndarray  # int64 (n + 1)
    kinds: np.ndarray  # int8 (tokens,)
    cats: np.ndarray  # int16 (tokens,)
    args: np.ndarray  # float32 (tokens, NUM_ARGS)
    specs: dict[str, HardwareSpec]
    sources: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.latency)

    @property
    def valid(self) -> np.ndarray:
        return np.isfinite(self.latency) & (self.error_no == 0)

    @property
    def seq_len(self) -> np.ndarray:
        return np.diff(self.offsets)

    @property
    def group(self) -> np.ndarray:
        """(task, hardware) pair id per record."""
        return self.task.astype(np.int64) * max(len(self.hardware_names), 1) + self.hardware

    def labels(self) -> np.ndarray:
        """min latency of the record's group / its latency, in (0, 1]; 0 for failed measurements."""
        group = self.group
        lat = np.where(self.valid, self.latency, np.inf)
        uniq, inverse = np.unique(group, return_inverse=True)
        best = np.full(len(uniq), np.inf)
        np.minimum.at(best, inverse, lat)
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.where(self.valid, best[inverse] / lat, 0.0)
        return out.astype(np.float32)

    def select(self, index: np.ndarray) -> "Dataset":
        """A new Dataset of the given records (a boolean mask or indices), tokens gathered."""
        index = np.flatnonzero(index) if index.dtype == bool else np.asarray(index, dtype=np.int64)
        starts, lengths = self.offsets[index], np.diff(self.offsets)[index]
        offsets = np.zeros(len(index) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        gather = np.repeat(starts - offsets[:-1], lengths) + np.arange(offsets[-1])
        return Dataset(
            record_id=self.record_id[index], hardware_names=self.hardware_names, hardware=self.hardware[index],
            task_ids=self.task_ids, task=self.task[index], workload_keys=self.workload_keys,
            op_kind=self.op_kind[index], op_args=self.op_args[index], flops=self.flops[index],
            latency=self.latency[index], error_no=self.error_no[index], offsets=offsets,
            kinds=self.kinds[gather], cats=self.cats[gather], args=self.args[gather], specs=self.specs,
            sources=self.sources,
        )

    def hardware_mask(self, names: Iterable[str]) -> np.ndarray:
        wanted = [self.hardware_names.index(n) for n in names if n in self.hardware_names]
        return np.isin(self.hardware, wanted)


def _list_values(column: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    array = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    offsets = array.offsets.to_numpy().astype(np.int64)
    values = array.values.to_numpy(zero_copy_only=False)
    return offsets - offsets[0], values[offsets[0]:offsets[-1]]


def _op_arg_matrix(column: pa.ChunkedArray) -> np.ndarray:
    offsets, values = _list_values(column)
    n = len(offsets) - 1
    out = np.zeros((n, OP_ARG_SLOTS), dtype=np.float32)
    lengths = np.minimum(np.diff(offsets), OP_ARG_SLOTS)
    for slot in range(OP_ARG_SLOTS):
        rows = np.flatnonzero(lengths > slot)
        out[rows, slot] = np.log2(1.0 + np.abs(values[offsets[rows] + slot]))
    return out


def add_descriptors(specs: dict[str, HardwareSpec], root: Path, manifest: dict) -> None:
    """Add a dataset's hardware descriptors to ``specs`` (those of several datasets read together); one
    name with two different descriptors is refused."""
    for name, desc in manifest.get("hardware", {}).items():
        spec = spec_from_dict(desc, f"{root}/{MANIFEST}")
        if name in specs and specs[name] != spec:
            raise CrosstuneError(
                f"hardware {name!r} has different descriptors in the given datasets (another machine measured "
                f"under the same name?): collect with --hardware-prefix to give a machine's configurations names "
                f"of their own, or import one of them again under a name of its own, crosstune import "
                f"RECORDS --hardware NEW-NAME --hardware-spec FILE.json, FILE.json being its descriptor from "
                f"{root}/{MANIFEST} renamed")
        specs[name] = spec


def load_dataset(paths: Sequence[str | os.PathLike], hardware: Sequence[str] | None = None) -> Dataset:
    """Load one or more dataset directories into one model-ready Dataset (optionally only some
    hardware). Records present in several datasets are kept once."""
    if isinstance(paths, (str, os.PathLike)):  # one folder; iterating a str would give its characters
        paths = [paths]
    if not paths:
        raise CrosstuneError("no dataset given")
    tables, specs, sources = [], {}, []
    for raw in paths:
        root = Path(raw)
        manifest = read_manifest(root)
        add_descriptors(specs, root, manifest)
        for part in manifest.get("parts", []):
            if hardware is not None and part["hardware"] not in hardware:
                continue
            part_path = root / part["path"]
            if not part_path.is_file():
                raise CrosstuneError(f"{root}: part file {part['path']} listed in the manifest is missing")
            try:
                tables.append(pq.read_table(part_path, columns=[c for c in SCHEMA.names if c not in _NOT_LOADED]))
            except (pa.ArrowInvalid, OSError) as err:
                raise CrosstuneError(f"{part_path}: unreadable Parquet file ({err})") from None
        sources.append(str(root))
    if hardware is not None:
        missing = [h for h in hardware if h not in specs]
        if missing:
            raise CrosstuneError(f"hardware {', '.join(missing)} not in the dataset(s); present: {', '.join(sorted(specs))}")
    if not tables:
        raise CrosstuneError(f"no records in {', '.join(map(str, paths))}")
    table = pa.concat_tables(tables)
    record_id = table.column("record_id").to_numpy()
    _, first = np.unique(record_id, return_index=True)
    if len(first) != len(record_id):
        table = table.take(np.sort(first))
    return _table_to_dataset(table, specs, sources)


_NOT_LOADED = ("costs", "source_file", "source_line", "target", "timestamp", "format", "op_name", "seq_len")


def _dictionary(column: pa.ChunkedArray) -> tuple[list[str], np.ndarray]:
    encoded = column.combine_chunks().dictionary_encode()
    return encoded.dictionary.to_pylist(), encoded.indices.to_numpy().astype(np.int32)


def _table_to_dataset(table: pa.Table, specs: dict[str, HardwareSpec], sources: list[str]) -> Dataset:
    hardware_names, hardware = _dictionary(table.column("hardware"))
    task_ids, task = _dictionary(table.column("task_id"))
    keys_by_row = table.column("workload_key")
    first_row = np.zeros(len(task_ids), dtype=np.int64)
    first_row[task[::-1]] = np.arange(len(task) - 1, -1, -1)
    workload_keys = keys_by_row.take(pa.array(first_row)).to_pylist()
    kind_names, kind_codes = _dictionary(table.column("op_kind"))
    kind_lookup = np.array([OP_KIND_ID.get(k, 0) for k in kind_names] or [0], dtype=np.int16)
    offsets, kinds = _list_values(table.column("step_kind"))
    _, cats = _list_values(table.column("step_cat"))
    _, args = _list_values(table.column("step_args"))
    return Dataset(
        record_id=table.column("record_id").to_numpy(), hardware_names=hardware_names, hardware=hardware,
        task_ids=task_ids, task=task, workload_keys=workload_keys, op_kind=kind_lookup[kind_codes],
        op_args=_op_arg_matrix(table.column("op_args")), flops=table.column("flops").to_numpy(),
        latency=table.column("latency").to_numpy(), error_no=table.column("error_no").to_numpy(),
        offsets=offsets, kinds=kinds, cats=cats, args=args.reshape(-1, tokens.NUM_ARGS), specs=specs,
        sources=sources,
    )
