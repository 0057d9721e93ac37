"""Is a dataset folder whole? Every part file its manifest lists must exist and read as Parquet with
the number of rows the manifest says. Only the Parquet footers are read, so this is cheap enough to run
before `info` reports on a dataset and before `import` adds to one (which would otherwise fail half-way,
or report numbers a later `train` refuses)."""

from __future__ import annotations

from pathlib import Path

from .dataset import read_manifest
from .errors import CrosstuneError


def verify_dataset(path: Path) -> dict:
    """The dataset's manifest, once every part file checks out; CrosstuneError otherwise."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    manifest = read_manifest(path)
    for part in manifest.get("parts", []):
        part_path = path / part["path"]
        if not part_path.is_file():
            raise CrosstuneError(f"{path}: part file {part['path']} listed in the manifest is missing; "
                                 "the dataset is damaged (import it again into a new folder)")
        try:
            rows = pq.ParquetFile(part_path).metadata.num_rows
        except (pa.ArrowException, OSError) as err:
            raise CrosstuneError(f"{part_path}: unreadable Parquet file ({err}); the dataset is damaged") from None
        expected = part.get("records")
        if expected is not None and rows != expected:
            raise CrosstuneError(f"{part_path}: holds {rows} records, the manifest says {expected}; the dataset is damaged")
    return manifest
