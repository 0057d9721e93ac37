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
import os
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from . import __version__, tokens
from .atomic import write_text as atomic_write_text  # noqa: F401 - the name other modules import
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


class _PartWriter:
    """Buffers canonical records into Arrow batches and streams them into one Parquet file."""

    def __init__(self, final_path: Path):
        self.final_path = final_path
        self.tmp_path = final_path.with_name(f".{final_path.name}.tmp")
        final_path.parent.mkdir(parents=True, exist_ok=True)
        self.writer = pq.ParquetWriter(self.tmp_path, SCHEMA, compression="lz4")
        self.rows = 0
        self._buffer: list[Record] = []

    def add(self, record: Record) -> None:
        self._buffer.append(record)
        if len(self._buffer) >= _BATCH:
            self.flush()

    def flush(self) -> None:
        if not self._buffer:
            return
        self.writer.write_batch(records_to_batch(self._buffer))
        self.rows += len(self._buffer)
        self._buffer = []

    def commit(self) -> None:
        self.flush()
        self.writer.close()
        with open(self.tmp_path, "rb") as stream:
            os.fsync(stream.fileno())
        os.replace(self.tmp_path, self.final_path)

    def abort(self) -> None:
        try:
            self.writer.close()
        finally:
            self.tmp_path.unlink(missing_ok=True)


def _gather_tokens(records: Sequence[Record], lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Flat (kinds, cats, args) of all programs, gathered from the readers' token tables."""
    total = int(lengths.sum())
    ids = np.fromiter(itertools.chain.from_iterable(r.program for r in records), dtype=np.int64, count=total)
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


def _by_key(records: Sequence[Record], key) -> tuple[list[Record], pa.Array]:
    """Records sharing ``key`` share column values: one representative per key and the index of
    each record's representative (building Arrow columns from representatives is much cheaper than
    from one Python object per record)."""
    position: dict = {}
    representatives: list[Record] = []
    codes = []
    for record in records:
        k = key(record)
        code = position.get(k)
        if code is None:
            code = position[k] = len(representatives)
            representatives.append(record)
        codes.append(code)
    return representatives, pa.array(codes, pa.int32())


def records_to_batch(records: Sequence[Record]) -> pa.RecordBatch:
    lengths = np.fromiter((len(r.program) for r in records), dtype=np.int32, count=len(records))
    offsets = np.zeros(len(records) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    kinds, cats, args = _gather_tokens(records, lengths)
    latency = [sum(r.costs) / len(r.costs) if r.error_no == 0 and r.costs else float("nan") for r in records]
    # Task-level columns are shared by all records of one workload (same Operator object) and the
    # per-file columns by all records of one file and target.
    tasks, task_code = _by_key(records, lambda r: (id(r.operator), r.hardware))
    files, file_code = _by_key(records, lambda r: (r.source_file, r.target, r.format))
    columns = [
        pa.array([r.record_id for r in records], pa.uint64()),
        pa.array([r.hardware for r in tasks]).take(task_code),
        pa.array([r.task_id for r in tasks]).take(task_code),
        pa.array([r.workload_key for r in tasks]).take(task_code),
        pa.array([r.operator.name for r in tasks]).take(task_code),
        pa.array([r.operator.kind for r in tasks]).take(task_code),
        pa.array([list(r.operator.args) for r in tasks], pa.list_(pa.float64())).take(task_code),
        pa.array([r.operator.flops for r in tasks], pa.float64()).take(task_code),
        pa.array([r.target for r in files]).take(file_code),
        pa.array(lengths, pa.int32()),
        pa.ListArray.from_arrays(pa.array(offsets), pa.array(kinds, pa.int8())),
        pa.ListArray.from_arrays(pa.array(offsets), pa.array(cats, pa.int16())),
        pa.ListArray.from_arrays(pa.array(offsets * tokens.NUM_ARGS), pa.array(args.reshape(-1), pa.float32())),
        pa.array([r.costs for r in records], pa.list_(pa.float64())),
        pa.array(latency, pa.float64()),
        pa.array([r.error_no for r in records], pa.int16()),
        pa.array([r.timestamp for r in records], pa.float64()),
        pa.array([r.source_file for r in files]).take(file_code),
        pa.array([r.source_line for r in records], pa.int32()),
        pa.array([r.format for r in files]).take(file_code),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=SCHEMA)


def _existing_ids(root: Path, manifest: dict | None, hardware: str) -> set[int]:
    if manifest is None:
        return set()
    ids: set[int] = set()
    for part in manifest.get("parts", []):
        if part["hardware"] == hardware:
            column = pq.read_table(root / part["path"], columns=["record_id"]).column("record_id")
            ids.update(column.to_numpy().tolist())
    return ids


@dataclass
class ImportResult:
    path: Path
    hardware: str
    added: int
    report: ImportReport
    manifest: dict = field(default_factory=dict)


def import_records(records: Iterable[Record], out: str | os.PathLike, hardware: HardwareSpec,
                   report: ImportReport, sources: Sequence[str] = (), provenance: dict | None = None) -> ImportResult:
    """Stream ``records`` (all of one hardware) into the dataset at ``out``, creating it or adding to
    it. Records already in the dataset (same content hash) are skipped and counted as duplicates."""
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
    seen = _existing_ids(root, manifest, hardware.name)
    part_rel = f"hardware={hardware.name}/part-{uuid.uuid4().hex[:12]}.parquet"
    writer = _PartWriter(root / part_rel)
    try:
        for record in records:
            if record.record_id in seen:
                report.duplicates += 1
                continue
            seen.add(record.record_id)
            if record.error_no != 0:
                report.failed_measurements += 1
            report.records += 1
            writer.add(record)
        if writer.rows + len(writer._buffer) == 0:
            writer.abort()
            added = 0
        else:
            writer.commit()
            added = writer.rows
    except BaseException:
        writer.abort()
        raise
    manifest = _updated_manifest(root, manifest, hardware, part_rel if added else None, added, report,
                                 sources, provenance)
    atomic_write_text(root / MANIFEST, json.dumps(manifest, indent=1))
    return ImportResult(root, hardware.name, added, report, manifest)


def _updated_manifest(root: Path, manifest: dict | None, hardware: HardwareSpec, part: str | None,
                      added: int, report: ImportReport, sources: Sequence[str], provenance: dict | None) -> dict:
    now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    if manifest is None:
        manifest = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, "created": now,
                    "hardware": {}, "parts": [], "imports": []}
    manifest["crosstune_version"] = __version__
    manifest["vocabulary"] = _vocabulary()
    manifest["hardware"][hardware.name] = hardware.to_json()
    if part is not None:
        manifest["parts"].append({"path": part, "hardware": hardware.name, "records": added})
    manifest["imports"].append({"date": now, "hardware": hardware.name, "sources": list(sources),
                                "added": added, "report": report.to_json()})
    if provenance:
        manifest.setdefault("provenance", {}).update(provenance)
    manifest["counts"] = _counts(root, manifest)
    return manifest


def _counts(root: Path, manifest: dict) -> dict:
    """Summary statistics written into the manifest (what `crosstune info` prints without loading)."""
    paths = [root / p["path"] for p in manifest["parts"]]
    if not paths:
        return {"records": 0}
    table = pa.concat_tables(pq.read_table(p, columns=["hardware", "task_id", "op_kind", "seq_len", "error_no"])
                             for p in paths)
    seq = table.column("seq_len").to_numpy()
    per_hw = {}
    for name in pc.unique(table.column("hardware")).to_pylist():
        mask = pc.equal(table.column("hardware"), name)
        sub = table.filter(mask)
        per_hw[name] = {"records": sub.num_rows, "tasks": len(pc.unique(sub.column("task_id"))),
                        "failed": int(pc.sum(pc.not_equal(sub.column("error_no"), 0)).as_py() or 0)}
    ops = table.group_by("op_kind").aggregate([("op_kind", "count")]).to_pylist()
    return {
        "records": table.num_rows,
        "tasks": len(pc.unique(table.column("task_id"))),
        "failed": int(pc.sum(pc.not_equal(table.column("error_no"), 0)).as_py() or 0),
        "per_hardware": per_hw,
        "per_operator": {row["op_kind"]: row["op_kind_count"] for row in ops},
        "sequence_length": {"min": int(seq.min()), "p50": float(np.percentile(seq, 50)),
                            "mean": round(float(seq.mean()), 2), "p95": float(np.percentile(seq, 95)),
                            "max": int(seq.max())},
    }


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

    def op_kind_names(self) -> np.ndarray:
        return np.asarray(OP_KINDS, dtype=object)[self.op_kind]


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


def load_dataset(paths: Sequence[str | os.PathLike], hardware: Sequence[str] | None = None) -> Dataset:
    """Load one or more dataset directories into one model-ready Dataset (optionally only some
    hardware). Records present in several datasets are kept once."""
    if not paths:
        raise CrosstuneError("no dataset given")
    tables, specs, sources = [], {}, []
    for raw in paths:
        root = Path(raw)
        manifest = read_manifest(root)
        for name, desc in manifest.get("hardware", {}).items():
            spec = spec_from_dict(desc, f"{root}/{MANIFEST}")
            if name in specs and specs[name] != spec:
                raise CrosstuneError(f"hardware {name!r} has different descriptors in the given datasets")
            specs[name] = spec
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
