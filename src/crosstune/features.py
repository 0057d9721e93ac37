"""Model inputs from a Dataset: normalised token, operator and hardware features.

Normalisation statistics come from the training data and are saved with the model, so a model scores
new programs exactly as it saw its training programs. Token arguments are normalised per primitive
kind (a split's slot 2 is a log-extent, a fuse's slot 2 an iterator index). Hardware features are
normalised with statistics of the built-in registry plus the training hardware, so that an unseen
machine lands on a scale the model knows even when training saw one hardware only.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from . import tokens
from .dataset import Dataset
from .errors import CrosstuneError
from .groups import rank_in_run
from .hardware.registry import HardwareSpec, builtin_specs

OP_FEATURES = 14  # 12 log shape arguments, log2(1 + FLOPs), has-FLOPs flag


def operator_matrix(ds: Dataset) -> np.ndarray:
    flops = np.nan_to_num(ds.flops, nan=0.0, posinf=0.0)
    return np.concatenate([ds.op_args, np.log2(1.0 + np.maximum(flops, 0))[:, None],
                           np.isfinite(ds.flops)[:, None].astype(np.float32)], axis=1).astype(np.float32)


def hardware_matrix(ds: Dataset) -> np.ndarray:
    """(hardware index -> feature vector) for the dataset's hardware."""
    rows = []
    for name in ds.hardware_names:
        if name not in ds.specs:
            raise CrosstuneError(f"hardware {name!r} has no descriptor in the dataset manifest")
        rows.append(ds.specs[name].feature_vector())
    return np.asarray(rows, dtype=np.float32)


def normalised_hardware(vectors, norm: "Normalizer") -> np.ndarray:
    """Raw hardware feature vectors (rows) as the model reads them (float32 in, as ``hardware_matrix``
    gives them, so that the same machine always gets the same bits)."""
    return ((np.asarray(vectors, dtype=np.float32) - norm.hw_mean) / norm.hw_std).astype(np.float32)


def _mean_std(values: np.ndarray, axis=0) -> tuple[np.ndarray, np.ndarray]:
    mean = values.mean(axis=axis) if len(values) else np.zeros(values.shape[1:], np.float32)
    std = values.std(axis=axis) if len(values) else np.ones(values.shape[1:], np.float32)
    return mean.astype(np.float32), np.where(std > 1e-6, std, 1.0).astype(np.float32)


@dataclass
class Normalizer:
    token_mean: np.ndarray  # (kinds, NUM_ARGS)
    token_std: np.ndarray
    op_mean: np.ndarray
    op_std: np.ndarray
    hw_mean: np.ndarray
    hw_std: np.ndarray
    kinds_seen: np.ndarray  # bool (kinds,): kinds present in the training data

    @classmethod
    def fit(cls, ds: Dataset) -> "Normalizer":
        n_kinds = len(tokens.KINDS)
        token_mean = np.zeros((n_kinds, tokens.NUM_ARGS), np.float32)
        token_std = np.ones((n_kinds, tokens.NUM_ARGS), np.float32)
        seen = np.zeros(n_kinds, dtype=bool)
        kinds = ds.kinds.astype(np.int64)
        order = np.argsort(kinds, kind="stable")
        boundaries = np.searchsorted(kinds[order], np.arange(n_kinds + 1))
        for kind in range(n_kinds):
            rows = order[boundaries[kind]:boundaries[kind + 1]]
            if len(rows):
                seen[kind] = True
                token_mean[kind], token_std[kind] = _mean_std(ds.args[rows])
        op_mean, op_std = _mean_std(operator_matrix(ds))
        # The registry plus the hardware of the training records only: a held-out machine shares the
        # dataset's name list but must not shape the scale the model learns on.
        hw_rows = [s.feature_vector() for s in builtin_specs().values()]
        hw_rows += [spec.feature_vector() for spec in training_hardware(ds).values()]
        hw_mean, hw_std = _mean_std(np.asarray(hw_rows, np.float32))
        return cls(token_mean, token_std, op_mean, op_std, hw_mean, hw_std, seen)

    def to_json(self) -> dict:
        return {k: getattr(self, k).tolist() for k in self.__dataclass_fields__}

    @classmethod
    def from_json(cls, data: dict) -> "Normalizer":
        try:
            return cls(**{k: np.asarray(data[k], dtype=bool if k == "kinds_seen" else np.float32)
                          for k in cls.__dataclass_fields__})
        except (KeyError, TypeError, ValueError) as err:
            raise CrosstuneError(f"model normalisation statistics are incomplete or corrupt ({err})") from None


@dataclass
class Features:
    """A dataset as normalised arrays. Kinds the model never saw become ``unknown`` (counted)."""

    offsets: np.ndarray
    kinds: np.ndarray  # int64 (tokens,)
    cats: np.ndarray  # int64 (tokens,)
    args: np.ndarray  # float32 (tokens, NUM_ARGS)
    op_kind: np.ndarray  # int64 (n,)
    op: np.ndarray  # float32 (n, OP_FEATURES)
    hw: np.ndarray  # float32 (n, hw features)
    ordinal: np.ndarray  # int64 (tokens,): how many earlier tokens of the program have the same kind
    summary: np.ndarray  # float32 (n, SUMMARY_FEATURES): count and mean arguments per primitive kind
    unseen_kind_tokens: int
    nonfinite_values: int
    normalizer: "Normalizer | None" = None  # what ``args`` were normalised with (to recover raw values)
    # float32 (n,): log2 of the fp32 vector lanes of each row's own machine (see lane_channels); kept as it
    # is by on_hardware, which swaps the hardware token only
    log2_lanes: np.ndarray | None = None
    _twos: np.ndarray | None = field(default=None, repr=False)  # cache of padded_twos

    def __len__(self) -> int:
        return len(self.op)

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def padded(self, rows: np.ndarray, max_len: int | None = None, with_ordinal: bool = False):
        """(kinds, cats, args, mask[, ordinal]) for ``rows`` padded to the longest program (or
        cropped/padded to ``max_len`` when a model asks for a fixed length). ``mask`` is True at real
        tokens."""
        lengths = self.lengths[rows]
        width = int(lengths.max()) if max_len is None and len(rows) else int(max_len or 1)
        width = max(width, 1)
        mask = np.arange(width)[None, :] < np.minimum(lengths, width)[:, None]
        gather = self._token_index(rows, mask)
        kinds = np.where(mask, self.kinds[gather], 0)
        cats = np.where(mask, self.cats[gather], 0)
        args = np.where(mask[..., None], self.args[gather], 0.0).astype(np.float32)
        if with_ordinal:
            return kinds, cats, args, mask, np.where(mask, self.ordinal[gather], 0)
        return kinds, cats, args, mask

    def padded_twos(self, rows: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """uint8 (rows, width, NUM_ARGS): :func:`factor_twos` of the tokens that ``padded`` gave with
        this ``mask``, zeros at padding. Computed for all tokens on first use and kept."""
        return np.where(mask[..., None], self.twos()[self._token_index(rows, mask)], np.uint8(0))

    def twos(self) -> np.ndarray:
        """uint8 (tokens, NUM_ARGS): :func:`factor_twos` of every token, computed on first use and kept."""
        if self._twos is None:
            if self.normalizer is None:
                raise ValueError("factor powers of two need the normaliser the features were made with")
            self._twos = factor_twos(self.kinds, self.args, self.normalizer)
        return self._twos

    def padded_lanes(self, rows: np.ndarray, kinds: np.ndarray, args: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """float32 (rows, width, LANE_CHANNELS): :func:`lane_channels` of the tokens ``padded`` gave."""
        if self.log2_lanes is None or self.normalizer is None:
            raise ValueError("lane features need the rows' vector lanes and the normaliser (featurize gives both)")
        return lane_channels(kinds, args, self.padded_twos(rows, mask), self.log2_lanes[rows], self.normalizer)

    def on_hardware(self, hw_vector: np.ndarray) -> "Features":
        """The same programs as if measured on the machine with normalised vector ``hw_vector`` (token
        arrays and the powers-of-two cache shared, not copied)."""
        return replace(self, hw=np.broadcast_to(np.asarray(hw_vector, dtype=np.float32), self.hw.shape))

    def _token_index(self, rows: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """(rows, width) index into the per-token arrays; 0 (any valid index) at padding."""
        positions = np.arange(mask.shape[1])
        return np.where(mask, self.offsets[rows][:, None] + positions[None, :], 0)


def featurize(ds: Dataset, norm: Normalizer) -> Features:
    kinds = ds.kinds.astype(np.int64)
    unseen = ~norm.kinds_seen[kinds]
    kinds = np.where(unseen, tokens.KIND_ID["unknown"], kinds)
    args = (ds.args - norm.token_mean[kinds]) / norm.token_std[kinds]
    op = (operator_matrix(ds) - norm.op_mean) / norm.op_std
    hw = normalised_hardware(hardware_matrix(ds), norm)[ds.hardware]
    nonfinite = int((~np.isfinite(args)).sum() + (~np.isfinite(op)).sum() + (~np.isfinite(hw)).sum())
    if nonfinite:  # defined result: a non-finite input contributes nothing rather than poisoning the batch
        args, op, hw = (np.nan_to_num(a, nan=0.0, posinf=0.0, neginf=0.0) for a in (args, op, hw))
    cats = ds.cats.astype(np.int64)
    cats = np.where((cats >= 0) & (cats < len(tokens.CATEGORIES)), cats, tokens.OTHER_CAT)
    args = args.astype(np.float32)
    lanes = np.asarray([hardware_log2_lanes(ds.specs[name]) for name in ds.hardware_names], np.float32)
    return Features(ds.offsets, kinds, cats, args, ds.op_kind.astype(np.int64),
                    op.astype(np.float32), hw.astype(np.float32), kind_ordinals(ds.offsets, kinds),
                    program_summary(ds.offsets, kinds, args), int(unseen.sum()), nonfinite, norm,
                    lanes[ds.hardware] if len(lanes) else np.zeros(len(ds.hardware), np.float32))


SUMMARY_FEATURES = len(tokens.KINDS) * (1 + tokens.NUM_ARGS)

# Which argument slots of each kind hold log2 of an extent or factor (tokens.ARG_LAYOUT).
LOG2_SLOTS = np.zeros((len(tokens.KINDS), tokens.NUM_ARGS), dtype=bool)
for _kind, _names in tokens.ARG_LAYOUT.items():
    for _slot, _name in enumerate(_names):
        LOG2_SLOTS[tokens.KIND_ID[_kind], _slot] = _name.startswith("log2_")
MAX_TWOS = 6


def raw_args(kinds: np.ndarray, normalised_args: np.ndarray, norm: Normalizer) -> np.ndarray:
    """Token arguments as the reader wrote them (log2 factors and extents), from their normalised form."""
    return normalised_args * norm.token_std[kinds] + norm.token_mean[kinds]


def factor_twos(kinds: np.ndarray, normalised_args: np.ndarray, norm: Normalizer) -> np.ndarray:
    """For every log2 slot of every token (tokens, NUM_ARGS), how many times 2 divides the factor,
    capped at MAX_TWOS; 0 where the slot is not a factor or not a whole number. Whether a tile is a
    multiple of the vector width decides much of a program's speed, and in log2 space 7 and 8 are
    neighbours. uint8: a quarter of the arguments' memory."""
    raw = raw_args(kinds, normalised_args, norm)
    value = np.exp2(np.clip(raw, 0.0, 40.0))
    whole = np.rint(value)
    integral = LOG2_SLOTS[kinds] & (np.abs(value - whole) < 1e-3 * np.maximum(whole, 1.0))
    number = np.where(integral, whole, 1.0).astype(np.int64)
    twos = np.log2(number & -number)  # the lowest set bit
    return np.minimum(twos, MAX_TWOS).astype(np.uint8)


# Lane features: where a factor stands against the vector width of the machine that runs the program.
# The hardware token carries the width too, but only as one more descriptor number: a model trained on
# 4- and 8-lane machines cannot tell from it what a 16-lane one does with a tile of 8, while "this tile
# is half a vector" reads the same on every machine (the one tuning arm of issue 13 whose first pass came
# within 5% of XGBoost's final had seen an AVX-512 configuration's programs; the zero-shot ones had not).
# crossfeat's lane_features setting, off by default: better offline; its two tuning arms (session 39) were
# the session's worst but one and best, so no effect shows through the tuner's run-to-run spread.
LANE_KINDS = ("split", "vectorize")
LANE_SLOTS = np.zeros((len(tokens.KINDS), tokens.NUM_ARGS), dtype=bool)
for _kind in LANE_KINDS:
    LANE_SLOTS[tokens.KIND_ID[_kind]] = LOG2_SLOTS[tokens.KIND_ID[_kind]]
LANE_SLOTS[tokens.KIND_ID["split"], tokens.ARG_LAYOUT["split"].index("log2_extent")] = False
LANE_CHANNELS = 2 * tokens.NUM_ARGS
LANE_RANGE = 4.0  # log2 distances beyond 16x the lanes either way read as 16x


def hardware_log2_lanes(spec: HardwareSpec) -> float:
    """log2 of the float32 lanes of the vector unit the measured code could use (4 for SSE, 16 for AVX-512)."""
    return float(np.log2(max(spec.code_vector_bytes / 4.0, 1.0)))


def lane_channels(kinds: np.ndarray, normalised_args: np.ndarray, twos: np.ndarray, log2_lanes: np.ndarray,
                  norm: Normalizer) -> np.ndarray:
    """float32 (..., LANE_CHANNELS) for tokens (..., NUM_ARGS) of rows whose machines have 2**``log2_lanes``
    float32 lanes (shape (rows,) against tokens (rows, width, NUM_ARGS)): for every split factor and
    vectorize extent above 1, its log2 distance to the lane count (scaled to [-1, 1]) and whether it is a
    whole multiple of the lanes; zeros in every other slot. A factor of 1 reads like a slot a short split
    leaves empty (both log2 0), so neither gets lane features: those would only tell the machines apart."""
    raw = raw_args(kinds, normalised_args, norm)
    lanes = np.asarray(log2_lanes, np.float32).reshape(-1, *([1] * (raw.ndim - 1)))
    slots = LANE_SLOTS[kinds] & (raw > 1e-3)
    distance = np.where(slots, np.clip(raw - lanes, -LANE_RANGE, LANE_RANGE) / LANE_RANGE, 0.0)
    multiple = slots & (twos >= lanes) & (raw >= lanes - 1e-3)
    return np.concatenate([distance, multiple], axis=-1).astype(np.float32)


def kind_counts_and_means(offsets: np.ndarray, kinds: np.ndarray, args: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per program: how often each primitive kind occurs, (n, kinds), and the mean arguments of each
    kind, flattened to (n, kinds * NUM_ARGS)."""
    n, n_kinds = len(offsets) - 1, len(tokens.KINDS)
    record = np.repeat(np.arange(n), np.diff(offsets))
    flat = record * n_kinds + kinds.astype(np.int64)
    counts = np.bincount(flat, minlength=n * n_kinds).reshape(n, n_kinds).astype(np.float32)
    sums = np.zeros((n * n_kinds, tokens.NUM_ARGS), np.float32)
    np.add.at(sums, flat, args)
    means = sums.reshape(n, n_kinds, tokens.NUM_ARGS) / np.maximum(counts, 1.0)[..., None]
    return counts, means.reshape(n, n_kinds * tokens.NUM_ARGS)


def program_summary(offsets: np.ndarray, kinds: np.ndarray, args: np.ndarray) -> np.ndarray:
    """Position-free view of a program: log(1 + count) and mean (normalised) arguments of each kind."""
    counts, means = kind_counts_and_means(offsets, kinds, args)
    return np.concatenate([np.log1p(counts), means], axis=1)


def kind_ordinals(offsets: np.ndarray, kinds: np.ndarray) -> np.ndarray:
    """For each token, the number of earlier tokens of the same kind in its program ("the third
    split"). Unlike the absolute position it survives an inserted step (a leading cache-write shifts
    every position but not the split ordinals)."""
    record = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
    key = record * len(tokens.KINDS) + kinds
    order = np.argsort(key, kind="stable")
    ordinal = np.empty(len(kinds), dtype=np.int64)
    ordinal[order] = rank_in_run(key[order])
    return ordinal


def training_hardware(ds: Dataset) -> dict[str, HardwareSpec]:
    """Descriptors of the hardware that has records in ``ds``. ``ds.hardware_names`` is not that: a
    split's training side keeps the whole dataset's name list, held-out hardware included."""
    present = np.unique(ds.hardware)
    names = [ds.hardware_names[i] for i in present]
    missing = [n for n in names if n not in ds.specs]
    if missing:
        raise CrosstuneError(f"hardware {', '.join(missing)} has no descriptor in the dataset manifest")
    return {name: ds.specs[name] for name in names}


def spec_vectors(specs: dict[str, HardwareSpec]) -> dict[str, list[float]]:
    return {name: spec.feature_vector() for name, spec in specs.items()}
