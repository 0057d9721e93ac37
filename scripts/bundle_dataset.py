"""Copy a collection's dataset into the package as the bundled dataset (zstd-compressed Parquet).

    python scripts/bundle_dataset.py scratch/collect-main [src/crosstune/data/local-cpu]

Run after `crosstune collect ... --out COLLECTION`; the collection's provenance is already in the
dataset manifest, and its network map (task id -> networks) is copied beside it.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pyarrow.parquet as pq

from crosstune.atomic import write_text as atomic_write_text
from crosstune.dataset import MANIFEST, read_manifest


def main(collection: Path, out: Path) -> None:
    source = collection / "dataset"
    manifest = read_manifest(source)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for part in manifest["parts"]:
        target = out / part["path"]
        target.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pq.read_table(source / part["path"]), target, compression="zstd", compression_level=19)
    shutil.copy(collection / "network_map.json", out / "network_map.json")
    settings = json.loads((collection / "collection.json").read_text())
    manifest.setdefault("provenance", {})["collection_settings"] = json.dumps(settings["settings"])
    atomic_write_text(out / MANIFEST, json.dumps(manifest, indent=1))
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"{out}: {manifest['counts']['records']} records, {size / 1e6:.2f} MB")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2] if len(sys.argv) > 2 else "src/crosstune/data/local-cpu"))
