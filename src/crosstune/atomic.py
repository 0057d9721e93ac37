"""Writes that a reader (or a killed process) sees whole or not at all.

Every file crosstune writes goes through here: a temporary name in the same directory, then one
``os.replace``. A directory written as a unit (a model) is staged beside its final name and renamed
into place. Temporary files get the same permission bits as a plain ``open(..., "w")`` would give
(0666 minus the umask): ``tempfile`` would make them 0600 and the finished file would then differ
in mode from its neighbours.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path


def _umask() -> int:
    # Linux reports it; elsewhere it is read by setting and restoring it (not thread-safe, hence last).
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def staged_file(path: str | os.PathLike) -> Iterator[Path]:
    """A temporary path to write ``path``'s new content to (with any writer: safetensors, XGBoost,
    Parquet, matplotlib); on success it replaces ``path``, on error it is removed.

    The temporary name ends in the final name's suffix, since some writers choose the format by it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.{uuid.uuid4().hex[:8]}.tmp{path.suffix}")
    try:
        yield tmp
        if tmp.is_file():
            fsync_file(tmp)
            os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def fsync_file(path: str | os.PathLike) -> None:
    """Flush a file that some other writer closed to the disk (before it is renamed into place)."""
    with open(path, "rb") as stream:
        os.fsync(stream.fileno())


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    with staged_file(path) as tmp:
        tmp.write_bytes(data)


def write_text(path: str | os.PathLike, text: str) -> None:
    """Write a text file so that readers see the old or the new content, never a partial one."""
    write_bytes(path, text.encode())


@contextlib.contextmanager
def staged_directory(path: str | os.PathLike, replaceable=lambda existing: True) -> Iterator[Path]:
    """An empty directory to fill with ``path``'s new content; on success it takes ``path``'s place
    (whatever was there is removed), on error it is removed and ``path`` is left as it was.

    ``replaceable(existing)`` is asked before an existing ``path`` is replaced; a False answer keeps
    it and raises FileExistsError (so a mistyped --out never deletes a user's folder)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() and not (path.is_dir() and replaceable(path)):
        raise FileExistsError(path)
    staging = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.staging")
    staging.mkdir(mode=0o777 & ~_umask())
    try:
        yield staging
        if path.exists():
            # Two renames: the old folder moves aside, then the new one takes its name. A kill between
            # them leaves the complete new folder under its staging name and the old one aside; never a
            # half-written folder under the final name.
            old = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.old")
            os.replace(path, old)
            os.replace(staging, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(staging, path)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
