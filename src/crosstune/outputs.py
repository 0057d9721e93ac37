"""Where commands write, checked before any work starts.

Every command that writes calls :func:`claim_folder` (for its output folder) and :func:`check_file`
(for ``--json``-style files) first, so that an unwritable or wrong location is reported in a second,
not after an hour of training. An existing folder is written to only when it holds the same kind of
output and the user said so:

- ``--resume`` continues the work in place (where the command supports it);
- ``--overwrite`` replaces it: the old folder is moved aside, the new one written, and the old one
  deleted only once the command succeeded (put back if it fails or is interrupted), so two outputs are
  never mixed in one folder and a failed run loses nothing;
- commands that add to what is there (``import`` into a dataset) need no flag.

An empty folder counts as new. Nothing is ever written into (or under) a dataset folder unless the
output is that dataset.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .errors import CrosstuneError

# ---------------------------------------------------------------------------------------------------
# what an existing folder holds
# ---------------------------------------------------------------------------------------------------


def _json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _is_dataset(path: Path) -> bool:
    from .dataset import FORMAT_NAME, MANIFEST

    manifest = _json(path / MANIFEST) if (path / MANIFEST).is_file() else None
    if manifest is not None and manifest.get("format") == FORMAT_NAME:
        return True
    return any(p.is_dir() and p.name.startswith("hardware=") for p in path.iterdir())  # an interrupted import


def _is_model(path: Path) -> bool:
    config = _json(path / "config.json") if (path / "config.json").is_file() else None
    if config is not None and "kind" in config and ("vocabulary" in config or "model" in config):
        return True
    # weights without a config, or an unfinished training (its checkpoint)
    return any((path / name).exists() for name in ("weights.safetensors", "checkpoint", "train_records.json"))


def _has(*names: str) -> Callable[[Path], bool]:
    return lambda path: any(any(path.glob(name)) for name in names)


# Kind -> (how to recognise it, what it is called in messages). Order matters: the first match wins.
KINDS: dict[str, tuple[Callable[[Path], bool], str]] = {
    "dataset": (_is_dataset, "a crosstune dataset"),
    "model": (_is_model, "a trained model"),
    "demo": (_has("demo.json"), "a demo result"),
    "compare": (_has("compare.json", "seed*/*/config.json"), "a model comparison"),
    "prune-study": (_has("prune-study.json", "prune-study.csv"), "a pruning study"),
    "split-study": (_has("split-study.json", "split-study.csv"), "a split study"),
    "few-shot-study": (_has("few-shot-study.json", "few-shot-study.csv"), "a few-shot study"),
    "bench": (_has("bench-summary.json", "bench-p*.json", "run-*.log"), "a benchmark"),
    "collection": (_has("collection.json"), "a measurement collection"),
    "tune-compare": (_has("tune-compare.json", "pretrain.json", "*/state.json", "crossfeat-model"), "a tuning comparison"),
    "tune": (_has("tune.json", "database_tuning_record.json"), "a tuning run"),
}


def folder_kind(path: Path) -> str | None:
    """The kind of output in ``path``; None for a missing or empty folder, "other" for anything else."""
    if not path.is_dir():
        return None
    try:
        if not any(path.iterdir()):
            return None
    except OSError as err:
        raise CrosstuneError(f"{path}: cannot be read ({err.strerror or err})") from None
    for kind, (recognise, _) in KINDS.items():
        if recognise(path):
            return kind
    return "other"


def _describe(kind: str) -> str:
    return KINDS[kind][1] if kind in KINDS else "other files"


# ---------------------------------------------------------------------------------------------------
# can it be written?
# ---------------------------------------------------------------------------------------------------

def _nearest_existing(path: Path) -> Path:
    path = path.absolute()
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path("/")


def _probe(directory: Path, option: str, target: Path) -> None:
    """Create and remove a file: the only test that also holds for root and read-only mounts."""
    try:
        fd, name = tempfile.mkstemp(prefix=".crosstune-probe-", dir=directory)
        os.close(fd)
        os.unlink(name)
    except OSError as err:
        raise CrosstuneError(f"{option} {target}: cannot write in {directory} ({err.strerror or err})") from None


def _check_creatable(path: Path, option: str) -> None:
    """``path`` (a folder) exists and is writable, or can be made."""
    if path.exists() and not path.is_dir():
        raise CrosstuneError(f"{option} {path}: is a file, not a folder")
    base = _nearest_existing(path)
    if not base.is_dir():
        raise CrosstuneError(f"{option} {path}: cannot be created, {base} is a file")
    _probe(base, option, path)


def check_file(path: str | os.PathLike | None, option: str = "--json") -> None:
    """An output file: not a folder, in a folder that exists or can be made, writable."""
    if path is None:
        return
    path = Path(path)
    if path.is_dir():
        raise CrosstuneError(f"{option} {path}: is a folder, a file name is needed")
    if str(path).endswith(os.sep) or not path.name:
        raise CrosstuneError(f"{option} {path}: a file name is needed")
    _check_creatable(path.parent if str(path.parent) else Path("."), option)


def _dataset_above(path: Path) -> Path | None:
    for parent in path.absolute().parents:
        if parent.is_dir() and (parent / "manifest.json").is_file() and _is_dataset(parent):
            return parent
    return None


# ---------------------------------------------------------------------------------------------------
# claiming an output folder
# ---------------------------------------------------------------------------------------------------

@dataclass
class OutputFolder:
    """A checked output folder; use it as a context manager around the work that writes it."""

    path: Path
    kind: str
    mode: str  # "new", "add", "resume" or "overwrite"
    keep_partial: bool = False  # a new folder cut short keeps what it has (for --resume, or to be read)
    _aside: Path | None = None
    _existed: bool = False

    def __enter__(self) -> Path:
        self._existed = self.path.is_dir()
        if self.mode == "overwrite" and self._existed:
            self._aside = self.path.with_name(f".{self.path.name}.replaced-{uuid.uuid4().hex[:8]}")
            os.replace(self.path, self._aside)
        return self.path

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            if self._aside is not None:
                shutil.rmtree(self._aside, ignore_errors=True)
            return
        if self._aside is not None:  # failed or interrupted: the old output comes back as it was
            shutil.rmtree(self.path, ignore_errors=True)
            os.replace(self._aside, self.path)
        elif self.mode == "new" and not self.keep_partial:
            _remove_new(self.path, self._existed)


def _remove_new(path: Path, existed: bool) -> None:
    """Undo a new output that failed: the folder goes (its contents only, if it was there empty)."""
    if not path.is_dir():
        return
    if existed:
        for child in path.iterdir():
            shutil.rmtree(child, ignore_errors=True) if child.is_dir() else child.unlink(missing_ok=True)
    else:
        shutil.rmtree(path, ignore_errors=True)


def claim_folder(path: str | os.PathLike, kind: str, *, option: str = "--out", overwrite: bool = False,
                 resume: bool = False, adds: bool = False, resumable: bool = False, keep_partial: bool = False,
                 inputs: tuple = ()) -> OutputFolder:
    """Check that the command may write its ``kind`` of output at ``path``; raise CrosstuneError if not.

    ``adds``: the command adds to an existing output of its kind (import). ``resume``/``overwrite``:
    the user's flags. ``inputs``: folders the command reads, which it must not write into.
    ``resumable``: a new output that is interrupted stays, so that ``--resume`` can continue it;
    ``keep_partial``: it stays for the user to read (a benchmark's logs)."""
    path = Path(path)
    if overwrite and resume:
        raise CrosstuneError("--overwrite and --resume exclude each other")
    for source in inputs:
        if Path(source).exists() and Path(source).resolve() == path.resolve():
            raise CrosstuneError(f"{option} {path}: is an input of this command; choose another folder")
    _check_creatable(path, option)
    above = _dataset_above(path)
    if above is not None:
        raise CrosstuneError(f"{option} {path}: is inside the dataset {above}; choose a folder outside it")
    found = folder_kind(path)
    if found is None:  # (--resume of nothing simply starts, so a script can always pass it)
        return OutputFolder(path, kind, "new", resumable or keep_partial)
    if found != kind:
        raise CrosstuneError(f"{option} {path}: already holds {_describe(found)}; this command writes "
                             f"{_describe(kind)}: choose another folder")
    if adds:
        return OutputFolder(path, kind, "add")
    if resume:
        return OutputFolder(path, kind, "resume")
    if overwrite:
        _check_creatable(path.absolute().parent, option)  # the old folder is moved aside in its parent
        return OutputFolder(path, kind, "overwrite")
    flags = "--overwrite to replace it" + (" or --resume to continue it" if resumable else "")
    raise CrosstuneError(f"{option} {path}: already holds {_describe(found)}; give {flags}, or choose another folder")
