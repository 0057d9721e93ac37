"""A content digest of an imported dataset, used to prove that a faster import writes exactly what the
reference import wrote (tests/data/import-golden.json was generated with the per-step import of commit
11a7f30, before any import speed-up, by ``python tests/import_digest.py --write``)."""

from __future__ import annotations

import gzip
import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "data" / "import-golden.json"
TEST_DATA = HERE / "data"


def mixed_lines(roller: Path) -> list[bytes]:
    """Real lines plus what an import must survive: a corrupt line, a duplicate, an unknown step kind,
    a failed measurement, a NaN cost and a comment. Built from the committed Roller sample."""
    path = sorted((roller / "k80").iterdir())[0]
    with gzip.open(path, "rb") as stream:
        real = [next(stream).rstrip(b"\n") for _ in range(30)]
    obj = json.loads(real[0])
    unknown = json.loads(real[1])
    unknown["i"][1][1].append(["XX", 0, 1])
    failed = json.loads(real[2])
    failed["r"][1] = 4
    failed["r"][0] = [1e10]
    nan = real[3].replace(b'"r": [[', b'"r": [[NaN, ', 1)
    return [b"# a comment", *real, real[5], real[7][:40], json.dumps(unknown).encode(), json.dumps(failed).encode(),
            nan, json.dumps(obj).encode()]


def build_sources(root: Path) -> list[tuple[list[Path], str]]:
    """(sources, hardware) imports covering Ansor (gzip and plain, every format variant), MetaSchedule
    and bad input."""
    roller = TEST_DATA / "roller-ansor"
    mixed = root / "mixed"
    mixed.mkdir(parents=True, exist_ok=True)
    (mixed / "mixed.json").write_bytes(b"\n".join(mixed_lines(roller)) + b"\n")
    return [([roller / "k80"], "k80"), ([roller / "v100", mixed], "v100"),
            ([TEST_DATA / "ansor-format-variants"], "e5-2673-v4"), ([TEST_DATA / "ms-resnet18-2tasks"], "t4")]


def _relative(name: str) -> str:
    for marker in ("/tests/data/", "/mixed/"):
        if marker in name:
            return marker + name.split(marker, 1)[1]
    return name


def dataset_digest(path: Path) -> dict:
    """sha256 per column of the dataset's rows in manifest order (source paths made relative), plus the
    import reports without dates and paths."""
    manifest = json.loads((path / "manifest.json").read_text())
    table = pa.concat_tables(pq.read_table(path / part["path"]) for part in manifest["parts"])
    digest = {"rows": table.num_rows}
    for name in table.column_names:
        column = table.column(name).combine_chunks()
        h = hashlib.sha256()
        if name == "source_file":
            h.update("\n".join(_relative(s) for s in column.to_pylist()).encode())
        elif pa.types.is_list(column.type):
            offsets = column.offsets.to_numpy().astype(np.int64)
            h.update((offsets - offsets[0]).tobytes())
            h.update(np.ascontiguousarray(column.values.to_numpy(zero_copy_only=False)[offsets[0]:offsets[-1]]).tobytes())
        elif pa.types.is_string(column.type):
            h.update("\n".join(column.to_pylist()).encode())
        else:
            h.update(np.ascontiguousarray(column.to_numpy(zero_copy_only=False)).tobytes())
        digest[name] = h.hexdigest()
    reports = []
    for entry in manifest["imports"]:
        report = dict(entry["report"])
        report["examples"] = {k: _relative(v) for k, v in report["examples"].items()}
        report["skipped_files"] = {_relative(k): v for k, v in report["skipped_files"].items()}
        reports.append({"hardware": entry["hardware"], "added": entry["added"], "report": report})
    digest["imports"] = reports
    digest["counts"] = manifest["counts"]
    # Records per hardware in part order; how many part files hold them is layout, not content (a
    # parallel import keeps each worker's shard as a part of its own).
    per_hardware: dict[str, int] = {}
    for part in manifest["parts"]:
        per_hardware[part["hardware"]] = per_hardware.get(part["hardware"], 0) + part["records"]
    digest["parts"] = [{"hardware": h, "records": n} for h, n in per_hardware.items()]
    return digest


def import_all(root: Path, out: Path, **options) -> Path:
    from crosstune.importer import import_sources

    for sources, hardware in build_sources(root):
        import_sources(sources, hardware, out, **options)
    return out


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        digest = dataset_digest(import_all(Path(tmp), Path(tmp) / "ds"))
    GOLDEN.write_text(json.dumps(digest, indent=1, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN}: {digest['rows']} rows")
