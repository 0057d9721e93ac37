"""Baselines a transfer claim must beat: copy what known devices measured for the same program.

- ``nearest``: a program of a task on the unseen device is scored by what the most similar training
  device (by hardware descriptor) measured for the same program of the same task; the device is chosen
  per program among those that measured it. Programs no training device measured rank last.
- ``nearest-mean``: the mean over all training devices that measured the program.

What is copied is the program's rank percentile within its (task, device) -- 1 for the device's fastest
program of the task, 0 for its slowest -- rather than its latency: a monotone map of the latency within
one device, so a task whose programs all come from one device is ranked exactly by that device's
latencies, while programs whose nearest measurement comes from different devices stay comparable.

The logic is pure functions (:func:`known_programs`, :func:`nearest_scores`, :func:`nearest_mean_scores`;
datasets in, scores out); the :class:`NearestModel` wrapper only stores the training devices' table
(Parquet) and descriptors (config.json) so the model saves and loads like the others.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..dataset import Dataset
from ..errors import CrosstuneError
from ..hardware.registry import HardwareSpec, builtin_specs, spec_from_dict
from ..programs import mix64, program_keys
from ..atomic import staged_file
from .base import CostModel, FitOptions, copied, saved_config_read

KNOWN_FILE = "known_programs.parquet"
NEVER_MEASURED = -1.0  # below every percentile score (those are in [0, 1])
_OTHER_KIND_PENALTY = 1e3  # a CPU is never "nearer" to a GPU than any CPU, and vice versa


@dataclass
class KnownPrograms:
    """What the training devices measured: one row per (device, task, program), repeats merged by
    their mean latency."""

    device: np.ndarray  # object (str) per row
    key: np.ndarray  # uint64 program_keys
    latency: np.ndarray  # float64
    percentile: np.ndarray  # float64 in [0, 1], 1 = the device's fastest program of the task
    specs: dict[str, HardwareSpec]

    def to_table(self) -> pa.Table:
        return pa.table({"device": pa.array(self.device.tolist(), pa.string()), "key": pa.array(self.key, pa.uint64()),
                         "latency": self.latency, "percentile": self.percentile})

    @classmethod
    def from_table(cls, table: pa.Table, specs: dict[str, HardwareSpec]) -> "KnownPrograms":
        return cls(np.asarray(table.column("device").to_pylist(), dtype=object), table.column("key").to_numpy(),
                   table.column("latency").to_numpy(), table.column("percentile").to_numpy(), specs)


def known_programs(*datasets: Dataset) -> KnownPrograms:
    """The table of valid measurements of ``datasets`` (the training side, e.g. its fit and
    validation parts)."""
    devices, keys, latencies, groups, specs = [], [], [], [], {}
    for ds in datasets:
        if ds is None or not len(ds):
            continue
        valid = np.flatnonzero(ds.valid)
        names = np.asarray(ds.hardware_names, dtype=object)
        devices.append(names[ds.hardware[valid]])
        keys.append(program_keys(ds)[valid])
        latencies.append(ds.latency[valid])
        groups.append(np.char.add(np.asarray(ds.task_ids, dtype=str)[ds.task[valid]], "|"))
        specs.update({n: ds.specs[n] for n in ds.hardware_names if n in ds.specs})
    if not devices:
        raise CrosstuneError("no valid training measurements to copy from")
    device = np.concatenate(devices)
    key = np.concatenate(keys)
    latency = np.concatenate(latencies)
    task = np.concatenate(groups)
    # merge repeats of one program on one device by their mean latency
    device_code = np.unique(device, return_inverse=True)[1]
    rows = np.lexsort((key, device_code))
    device, key, latency, task, device_code = device[rows], key[rows], latency[rows], task[rows], device_code[rows]
    first = np.r_[True, (key[1:] != key[:-1]) | (device_code[1:] != device_code[:-1])]
    starts = np.flatnonzero(first)
    counts = np.diff(np.r_[starts, len(key)])
    latency = np.add.reduceat(latency, starts) / counts
    device, key, task, device_code = device[starts], key[starts], task[starts], device_code[starts]
    percentile = _rank_percentile(np.char.add(task, device_code.astype(str)), latency)
    return KnownPrograms(device, key, latency, percentile, specs)


def _rank_percentile(group: np.ndarray, latency: np.ndarray) -> np.ndarray:
    """Within each group: 1 for the fastest, 0 for the slowest, evenly spaced by rank (ties share the
    mean rank); a group of one program gets 1."""
    codes = np.unique(group, return_inverse=True)[1]
    order = np.lexsort((latency, codes))
    sorted_codes = codes[order]
    starts = np.flatnonzero(np.r_[True, sorted_codes[1:] != sorted_codes[:-1]])
    sizes = np.diff(np.r_[starts, len(order)])
    rank = np.arange(len(order)) - np.repeat(starts, sizes)
    # ties share their mean rank, so equal latencies copy equal scores
    lat_sorted = latency[order]
    tie_start = np.r_[True, (lat_sorted[1:] != lat_sorted[:-1]) | (sorted_codes[1:] != sorted_codes[:-1])]
    tie_id = np.cumsum(tie_start) - 1
    mean_rank = (np.bincount(tie_id, weights=rank) / np.bincount(tie_id))[tie_id]
    size = np.repeat(sizes, sizes).astype(np.float64)
    out = np.empty(len(order), dtype=np.float64)
    out[order] = np.where(size > 1, 1.0 - mean_rank / np.maximum(size - 1, 1), 1.0)
    return out


def descriptor_distances(target: HardwareSpec, candidates: dict[str, HardwareSpec]) -> dict[str, float]:
    """Euclidean distance of hardware feature vectors, each feature standardised over the built-in
    registry and the devices involved (so no single field's scale dominates); a device of the other
    kind (CPU vs GPU) is always farther than any of the same kind."""
    pool = list(builtin_specs().values()) + list(candidates.values()) + [target]
    matrix = np.asarray([s.feature_vector() for s in pool], dtype=np.float64)
    mean, std = matrix.mean(axis=0), matrix.std(axis=0)
    std[std < 1e-9] = 1.0
    t = (np.asarray(target.feature_vector()) - mean) / std
    out = {}
    for name, spec in candidates.items():
        d = float(np.linalg.norm((np.asarray(spec.feature_vector()) - mean) / std - t))
        out[name] = d + (_OTHER_KIND_PENALTY if spec.kind != target.kind else 0.0)
    return out


def _lookup(known: KnownPrograms, device: str, keys: np.ndarray) -> np.ndarray:
    """The device's percentile for each key, NaN where it did not measure that program."""
    rows = np.flatnonzero(known.device == device)
    table_keys = known.key[rows]
    order = np.argsort(table_keys)
    sorted_keys = table_keys[order]
    at = np.clip(np.searchsorted(sorted_keys, keys), 0, max(len(sorted_keys) - 1, 0))
    found = (sorted_keys[at] == keys) if len(sorted_keys) else np.zeros(len(keys), dtype=bool)
    out = np.full(len(keys), np.nan)
    out[found] = known.percentile[rows[order[at[found]]]]
    return out


def _never_measured(programs: Dataset) -> np.ndarray:
    # below every measured score; a tiny deterministic spread so that ties among them are not broken
    # by record order
    spread = (mix64(programs.record_id.astype(np.uint64)) >> np.uint64(11)).astype(np.float64) / 2.0 ** 53
    return NEVER_MEASURED - 1e-3 * spread


def _spec_of(programs: Dataset, name: str) -> HardwareSpec:
    if name not in programs.specs:
        raise CrosstuneError(f"hardware {name!r} has no descriptor: nearest needs one to find similar devices")
    return programs.specs[name]


def nearest_scores(known: KnownPrograms, programs: Dataset) -> np.ndarray:
    """Score of each record of ``programs``: its percentile on the most similar known device that
    measured it (by :func:`descriptor_distances` to the record's hardware); never measured: last."""
    keys = program_keys(programs)
    scores = _never_measured(programs)
    for h, name in enumerate(programs.hardware_names):
        rows = np.flatnonzero(programs.hardware == h)
        if not len(rows):
            continue
        distances = descriptor_distances(_spec_of(programs, name), known.specs)
        pending = rows
        for device in sorted(distances, key=lambda d: (distances[d], d)):
            found = _lookup(known, device, keys[pending])
            hit = np.isfinite(found)
            scores[pending[hit]] = found[hit]
            pending = pending[~hit]
            if not len(pending):
                break
    return scores


def nearest_mean_scores(known: KnownPrograms, programs: Dataset) -> np.ndarray:
    """Score of each record: its mean percentile over the known devices that measured it; never
    measured: last."""
    keys = program_keys(programs)
    total = np.zeros(len(programs))
    count = np.zeros(len(programs))
    for device in sorted(set(known.device.tolist())):
        found = _lookup(known, device, keys)
        hit = np.isfinite(found)
        total[hit] += found[hit]
        count[hit] += 1
    return np.where(count > 0, total / np.maximum(count, 1), _never_measured(programs))


@dataclass(frozen=True)
class NearestConfig:
    """``nearest`` has no hyper-parameters; the kind (nearest / nearest-mean) says how it copies."""


class NearestModel(CostModel):
    """``nearest`` behind the cost-model interface: ``fit`` stores the training devices' measurements."""

    kind = "nearest"
    config_cls = NearestConfig
    average_devices = False  # nearest-mean: the mean over every training device that measured a program

    def __init__(self, config: NearestConfig | None = None, train_config=None):
        self.config = copied(config, NearestConfig)
        self.known: KnownPrograms | None = None
        self.history: dict = {}
        self.hardware_seen: dict[str, list[float]] = {}
        self.hardware_descriptors: dict[str, dict] = {}

    def fit(self, train: Dataset, valid: Dataset | None = None, options: FitOptions | None = None) -> dict:
        # the validation part is held-out groups of the training side: measurements it may copy too
        self.known = known_programs(train, valid)
        self._learn_hardware(train)
        self.history = {"known_programs": int(len(self.known.key)), "devices": sorted(self.known.specs)}
        return self.history

    def predict(self, programs: Dataset) -> np.ndarray:
        if self.known is None:
            raise CrosstuneError("model is not trained or loaded")
        return (nearest_mean_scores if self.average_devices else nearest_scores)(self.known, programs)

    def _write(self, directory: Path) -> dict:
        if self.known is None:
            raise CrosstuneError("cannot save a model that was not trained")
        with staged_file(directory / KNOWN_FILE) as tmp:
            pq.write_table(self.known.to_table(), tmp)
        return {"kind": self.kind, "model": asdict(self.config), **self._hardware_json(), "history": self.history,
                "known_devices": {n: s.to_json() for n, s in self.known.specs.items()}}

    @classmethod
    def _read(cls, directory: Path, config: dict) -> "NearestModel":
        with saved_config_read(directory):
            model = cls(NearestConfig(**config["model"]))
            specs = {n: spec_from_dict(d, f"{directory}/config.json") for n, d in config["known_devices"].items()}
        try:
            table = pq.read_table(directory / KNOWN_FILE)
        except (OSError, pa.ArrowInvalid) as err:
            raise CrosstuneError(f"{directory}: {KNOWN_FILE} is missing or corrupt ({err})") from None
        model._restore_hardware(config)
        model.history = config.get("history", {})
        model.known = KnownPrograms.from_table(table, specs)
        return model


class NearestMeanModel(NearestModel):
    kind = "nearest-mean"
    average_devices = True
