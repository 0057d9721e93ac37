"""Seconds to import TVM's tensor intrinsics (what every MetaSchedule TuneContext imports first) the standard
way and the way crosstune does, each in fresh interpreters, with a digest of the registered intrinsics to
show they are the same.

    python benchmarks/bench_tvm_import.py [--repeats 2] [--golden tests/data/tensor-intrin-golden.json]

``--golden`` writes the standard import's count and digest there (the test compares crosstune's with it).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "tests" / "tensor_intrin_digest.py"


def measure(how: str) -> dict:
    done = subprocess.run([sys.executable, str(SCRIPT), how], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--golden")
    args = parser.parse_args()
    runs = {"standard": [], "crosstune": []}
    for _ in range(args.repeats):  # interleaved, so that a change of machine load hits both
        for how in runs:
            runs[how].append(measure(how))
    for how, results in runs.items():
        seconds = ", ".join(f"{r['seconds']:.1f}" for r in results)
        print(f"{how}: {seconds} s; {results[0]['intrinsics']} intrinsics, sha256 {results[0]['sha256'][:16]}")
    same = {r["sha256"] for rs in runs.values() for r in rs}
    print("registered intrinsics identical:", len(same) == 1)
    if args.golden:
        import tvm

        golden = {key: runs["standard"][0][key] for key in ("intrinsics", "sha256")}
        Path(args.golden).write_text(json.dumps({**golden, "tvm": tvm.__version__}, indent=1) + "\n")


if __name__ == "__main__":
    main()
