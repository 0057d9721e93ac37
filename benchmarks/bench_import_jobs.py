"""`crosstune import --jobs 2` against one process on a large input: the shared K80 + V100 records replicated to
N records (bench_scale.py's generator: new task ids, programs as measured), each import in a fresh process,
alternating, best of ``--repeats``.

    python benchmarks/bench_import_jobs.py [--records 1000000] [--repeats 2] [--data ../shared/data/roller-ansor]

On small inputs the fixed cost of starting the worker processes (about a second per import call) hides the
gain; bench_import.py gives that figure for the 180,386 shared records.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_import import child_import  # noqa: E402 - one child-process import for both benchmarks
from bench_scale import generate  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    shared = os.environ.get("CROSSTUNE_SHARED_DATA", str(HERE.parents[1] / "shared" / "data"))
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--data", default=str(Path(shared) / "roller-ansor"))
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp())
    try:
        made = generate(Path(args.data), work / "src", args.records)
        print(f"generated {made['records']} records in {made['seconds']:.0f} s (not part of the import)")
        sources = [str(work / "src" / "k80"), str(work / "src" / "v100")]
        walls: dict[int, list[float]] = {1: [], 2: []}
        for _ in range(args.repeats):
            for jobs in walls:
                result = child_import(sources, str(work / "ds"), jobs)
                walls[jobs].append(result["seconds"])
                print(f"--jobs {jobs}: {result['records']} records in {result['seconds']:.1f} s "
                      f"({result['records'] / result['seconds']:,.0f} records/s), peak RSS {result['peak_rss_mb']:.0f} MB",
                      flush=True)
        one, two = min(walls[1]), min(walls[2])
        print(f"best of {args.repeats}: --jobs 1 {one:.1f} s, --jobs 2 {two:.1f} s = {one / two:.2f}x "
              f"on {len(os.sched_getaffinity(0))} core(s)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
