"""Import throughput of the shared K80 + V100 Ansor records against the parse-only limit, the speed-up
of ``--jobs 2``, load time of the imported dataset into model-ready arrays, and peak memory of the import.

    python benchmarks/bench_import.py [--data ../shared/data/roller-ansor] [--cores 0] [--repeats 2]

``--cores 0`` pins the process to CPU 0 (one core) with sched_setaffinity; the ``--jobs`` comparison
runs unpinned (on every core this process may use), each import in a fresh interpreter. Parse-only and import each run ``--repeats``
times, interleaved, and the best of each counts: on a shared machine the best run is the one least
disturbed by others. The ratio is given in both CPU time (``time.process_time``, what the code costs)
and wall time. Peak memory is the child process's own high-water mark (VmHWM of /proc/self/status;
``ru_maxrss`` would include the RSS of the parent that forked it), once for one GPU's files and once
for both, to show that it does not grow with the number of files.
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


def parse_only(paths: list[Path]) -> tuple[int, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    n = 0
    for path in paths:
        with gzip.open(path, "rb") as stream:
            for line in stream:
                orjson.loads(line)
                n += 1
    return n, time.perf_counter() - wall, time.process_time() - cpu


def import_both(data: Path, out: Path, jobs: int = 1) -> tuple[int, float, float]:
    from crosstune.importer import import_sources

    shutil.rmtree(out, ignore_errors=True)
    wall, cpu = time.perf_counter(), time.process_time()
    added = import_sources([data / "k80"], "k80", out, jobs=jobs).added
    added += import_sources([data / "v100"], "v100", out, jobs=jobs).added
    return added, time.perf_counter() - wall, time.process_time() - cpu


def peak_rss_mb() -> float:
    with open("/proc/self/status") as stream:
        for line in stream:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def child_import(sources: list[str], out: str, jobs: int = 1) -> dict:
    """An import in a fresh interpreter (nothing cached from earlier imports, as a user runs it): records,
    wall seconds of the import calls and the child's peak RSS."""
    code = ("import json,sys,time;sys.path.insert(0, sys.argv[1]);from bench_import import peak_rss_mb;"
            "from crosstune.importer import import_sources;n=0;t=time.perf_counter()\n"
            "for i,s in enumerate(sys.argv[4:]):\n"
            "    n+=import_sources([s], ('k80', 'v100')[i], sys.argv[2], jobs=int(sys.argv[3])).added\n"
            "print(json.dumps({'records':n,'seconds':time.perf_counter()-t,'peak_rss_mb':peak_rss_mb()}))")
    shutil.rmtree(out, ignore_errors=True)
    result = subprocess.run([sys.executable, "-c", code, str(Path(__file__).parent), out, str(jobs), *sources],
                            capture_output=True, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    shared = os.environ.get("CROSSTUNE_SHARED_DATA", str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    parser.add_argument("--data", default=str(Path(shared) / "roller-ansor"))
    parser.add_argument("--cores", default="0", help="CPU ids to pin to, comma-separated ('' = no pinning)")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    all_cores = os.sched_getaffinity(0)
    if args.cores:
        os.sched_setaffinity(0, {int(c) for c in args.cores.split(",")})
    data = Path(args.data)
    files = sorted((data / "k80").iterdir()) + sorted((data / "v100").iterdir())
    tmp = Path(tempfile.mkdtemp())
    try:
        parses, imports = [], []
        for _ in range(args.repeats):
            parses.append(parse_only(files))
            imports.append(import_both(data, tmp / "ds"))
        n = parses[0][0]
        p_wall, p_cpu = min(p[1] for p in parses), min(p[2] for p in parses)
        added = imports[0][0]
        i_wall, i_cpu = min(i[1] for i in imports), min(i[2] for i in imports)
        print(f"parse-only (gzip + orjson.loads): {n} lines, best of {args.repeats}: {p_wall:.2f} s wall "
              f"({n / p_wall:,.0f} lines/s), {p_cpu:.2f} s CPU ({n / p_cpu:,.0f} lines/s)")
        print(f"import (read, tokenize, write Parquet), one process: {added} records, best of {args.repeats}: "
              f"{i_wall:.2f} s wall ({added / i_wall:,.0f} records/s), {i_cpu:.2f} s CPU ({added / i_cpu:,.0f} records/s)")
        print(f"import / parse-only rate: {p_cpu / i_cpu:.1%} in CPU time, {p_wall / i_wall:.1%} in wall time")

        from crosstune.dataset import load_dataset

        loads = []
        for _ in range(3):
            started = time.perf_counter()
            ds = load_dataset([tmp / "ds"])
            labels = ds.labels()
            loads.append(time.perf_counter() - started)
        print(f"load into model-ready arrays: {len(ds)} records, best of 3 {min(loads):.2f} s (all: "
              + ", ".join(f"{t:.2f}" for t in loads) + f"); {ds.offsets[-1]} tokens, labels {labels.shape}")
        del ds, labels

        os.sched_setaffinity(0, all_cores)
        walls = {1: [], 2: []}
        for _ in range(args.repeats):
            for jobs in (1, 2):  # fresh processes: warm caches of earlier imports would favour one process
                walls[jobs].append(child_import([str(data / "k80"), str(data / "v100")], str(tmp / "jobs"), jobs)["seconds"])
        one, two = min(walls[1]), min(walls[2])
        print(f"--jobs on {len(all_cores)} core(s), wall, best of {args.repeats}: --jobs 1 {one:.2f} s, "
              f"--jobs 2 {two:.2f} s = {one / two:.2f}x (all: jobs 1 " + ", ".join(f"{t:.2f}" for t in walls[1])
              + "; jobs 2 " + ", ".join(f"{t:.2f}" for t in walls[2]) + ")")

        one = child_import([str(data / "k80")], str(tmp / "mem1"))
        both = child_import([str(data / "k80"), str(data / "v100")], str(tmp / "mem2"))
        print(f"peak RSS (VmHWM of the importing process): {one['peak_rss_mb']:.0f} MB importing {one['records']} "
              f"records ({len(list((data / 'k80').iterdir()))} files); {both['peak_rss_mb']:.0f} MB importing "
              f"{both['records']} records ({len(files)} files)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
