"""Import throughput of the shared K80 + V100 Ansor records against the parse-only limit, load time of
the imported dataset into model-ready arrays, and peak memory of the import.

    python benchmarks/bench_import.py [--data ../shared/data/roller-ansor] [--cores 0]

``--cores 0`` pins the process to CPU 0 (one core) with sched_setaffinity. Peak memory is measured in a
fresh child process per import (ru_maxrss), once for one GPU's files and once for both, to show that it
does not grow with the number of files.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson


def parse_only(paths: list[Path]) -> tuple[int, float]:
    started = time.perf_counter()
    n = 0
    for path in paths:
        with gzip.open(path, "rb") as stream:
            for line in stream:
                orjson.loads(line)
                n += 1
    return n, time.perf_counter() - started


def child_import(sources: list[str], out: str) -> dict:
    code = ("import json,resource,sys,time;from crosstune.importer import import_sources;"
            "t=time.perf_counter();n=0\n"
            "for i,s in enumerate(sys.argv[2:]):\n"
            "    n+=import_sources([s], ('k80', 'v100')[i], sys.argv[1]).added\n"
            "print(json.dumps({'records':n,'seconds':time.perf_counter()-t,"
            "'peak_rss_mb':resource.getrusage(resource.RUSAGE_SELF).ru_maxrss/1024}))")
    result = subprocess.run([sys.executable, "-c", code, out, *sources], capture_output=True, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared" / "data" / "roller-ansor"))
    parser.add_argument("--cores", default="0", help="CPU ids to pin to, comma-separated ('' = no pinning)")
    args = parser.parse_args()
    if args.cores:
        os.sched_setaffinity(0, {int(c) for c in args.cores.split(",")})
    data = Path(args.data)
    files = sorted((data / "k80").iterdir()) + sorted((data / "v100").iterdir())
    n, seconds = parse_only(files)
    print(f"parse-only (gzip + orjson.loads): {n} lines in {seconds:.2f} s = {n / seconds:,.0f} lines/s")

    from crosstune.dataset import load_dataset
    from crosstune.importer import import_sources

    tmp = Path(tempfile.mkdtemp())
    try:
        started = time.perf_counter()
        added = import_sources([data / "k80"], "k80", tmp / "ds").added
        added += import_sources([data / "v100"], "v100", tmp / "ds").added
        seconds_import = time.perf_counter() - started
        rate = added / seconds_import
        print(f"import (read, tokenize, write Parquet): {added} records in {seconds_import:.2f} s = {rate:,.0f} records/s "
              f"= {rate / (n / seconds):.1%} of parse-only")
        loads = []
        for _ in range(3):
            started = time.perf_counter()
            ds = load_dataset([tmp / "ds"])
            labels = ds.labels()
            loads.append(time.perf_counter() - started)
        print(f"load into model-ready arrays: {len(ds)} records, best of 3 {min(loads):.2f} s (all: "
              + ", ".join(f"{t:.2f}" for t in loads) + f"); {ds.offsets[-1]} tokens, labels {labels.shape}")
        one = child_import([str(data / "k80")], str(tmp / "mem1"))
        both = child_import([str(data / "k80"), str(data / "v100")], str(tmp / "mem2"))
        print(f"peak RSS: {one['peak_rss_mb']:.0f} MB importing {one['records']} records (115 files); "
              f"{both['peak_rss_mb']:.0f} MB importing {both['records']} records (237 files)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
