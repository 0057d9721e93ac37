"""Program identity across hardware: the same program of the same task measured on several machines.

A record's program is its token sequence, so two records hold the same program when their tasks and
token sequences are equal, whatever format they came from (an AutoTVM config entity, an Ansor step
list). :func:`program_keys` gives each record a 64-bit key for (task, program), computed with numpy over
the flat token arrays (no per-record Python), so that half a million records are keyed in a fraction of
a second. Keys are hashes: two different programs share a key with probability ~n^2 / 2^64.
"""

from __future__ import annotations

import hashlib

import numpy as np

from .dataset import Dataset

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def mix64(values: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: spreads every input bit over the output (uint64 in, uint64 out)."""
    z = np.asarray(values, dtype=np.uint64).copy()
    with np.errstate(over="ignore"):
        z ^= z >> np.uint64(30)
        z *= np.uint64(0xBF58476D1CE4E5B9)
        z ^= z >> np.uint64(27)
        z *= np.uint64(0x94D049BB133111EB)
        z ^= z >> np.uint64(31)
    return z


def _token_hashes(ds: Dataset) -> np.ndarray:
    bits = np.ascontiguousarray(ds.args, dtype=np.float32).view(np.uint32).astype(np.uint64)
    h = mix64(ds.kinds.astype(np.uint64) + (ds.cats.astype(np.uint64) << np.uint64(8)))
    with np.errstate(over="ignore"):
        for slot in range(bits.shape[1]):
            h = mix64(h ^ (bits[:, slot] + np.uint64(slot + 1) * _GOLDEN))
    return h


def _task_hashes(task_ids: list[str]) -> np.ndarray:
    return np.array([int.from_bytes(hashlib.blake2b(t.encode(), digest_size=8).digest(), "little")
                     for t in task_ids], dtype=np.uint64)


def program_keys(ds: Dataset) -> np.ndarray:
    """uint64 per record: equal for records of the same task holding the same token sequence (on any
    hardware, in any dataset), different otherwise."""
    n = len(ds)
    lengths = np.diff(ds.offsets)
    token_hash = _token_hashes(ds)
    # position-dependent: a token's hash is mixed with its position in the program
    position = np.arange(len(token_hash), dtype=np.int64) - np.repeat(ds.offsets[:-1], lengths)
    with np.errstate(over="ignore"):
        placed = mix64(token_hash + (position.astype(np.uint64) + np.uint64(1)) * _GOLDEN)
    sums = np.zeros(n, dtype=np.uint64)
    nonempty = lengths > 0
    if nonempty.any():
        # a sum wraps modulo 2^64 like the hashes; reduceat over the non-empty programs only
        sums[nonempty] = np.add.reduceat(placed, ds.offsets[:-1][nonempty])
    task = _task_hashes(ds.task_ids)[ds.task]
    with np.errstate(over="ignore"):
        return mix64(sums ^ mix64(task ^ lengths.astype(np.uint64)))
