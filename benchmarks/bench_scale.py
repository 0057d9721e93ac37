"""Load test at scale: import, one streamed training epoch and prediction on N-record datasets.

    python benchmarks/bench_scale.py --records 1000000,10000000 [--data ../shared/data/roller-ansor]
        [--work DIR] [--train-batches K] [--jobs 1]

THIS IS A SCALE TEST, NOT ACCURACY DATA. The N records are the shared K80 + V100 Ansor records
replicated: every replica of a task gets a new task id (its workload key is re-spaced, which changes the
key's hash but not the operator it parses to), and every program is kept as measured. Quality figures of
a model trained on it mean nothing; time and memory do.

For each N it reports, each step in a fresh process so that its peak memory (VmHWM) is its own:
- generating the record files (gzip, not part of the import figure);
- import: records/s and peak RSS (``--jobs``, default 1 so that the figure is one process's);
- one training epoch of crossfeat, streamed (``--stream``, shuffle buffer 200,000 records, split
  by-hardware with V100 held out so the epoch trains the K80 half): samples/s and peak RSS; the scan and
  statistics passes are timed separately; ``--train-batches K`` stops the epoch after K batches and the
  report says so;
- prediction over every record, row group by row group: records/s and peak RSS.
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

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_import import peak_rss_mb  # noqa: E402 - the benchmarks share one RSS reader


def generate(data: Path, out: Path, records: int) -> dict:
    """Write ``records`` lines (split evenly over K80 and V100) replicating the shared files."""
    started = time.perf_counter()
    written = 0
    for gpu_index, gpu in enumerate(("k80", "v100")):
        target = records // 2 + (records % 2 if gpu_index == 0 else 0)
        files = sorted((data / gpu).iterdir())
        (out / gpu).mkdir(parents=True, exist_ok=True)
        replica, count = 0, 0
        while count < target:
            for path in files:
                if count >= target:
                    break
                spaces = b" " * (replica + 1)
                with gzip.open(path, "rb") as src, gzip.open(out / gpu / f"r{replica:04d}-{path.name}", "wb",
                                                            compresslevel=1) as dst:
                    for line in src:
                        if count >= target:
                            break
                        if replica:  # '["name", 1, ...]' -> '["name",  1, ...]': a new task id, the same operator
                            line = line.replace(b'\\", ', b'\\",' + spaces, 1)
                        dst.write(line)
                        count += 1
            replica += 1
        written += count
    return {"records": written, "seconds": time.perf_counter() - started}


def child(args: list[str], jobs: int = 1) -> dict:
    result = subprocess.run([sys.executable, str(Path(__file__)), "--child", *args, "--jobs", str(jobs)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"child {args[0]} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def run_child(kind: str, work: Path, jobs: int, train_batches: int | None) -> dict:
    if kind == "import":
        from crosstune.importer import import_sources

        started = time.perf_counter()
        added = import_sources([work / "src" / "k80"], "k80", work / "ds", jobs=jobs).added
        added += import_sources([work / "src" / "v100"], "v100", work / "ds", jobs=jobs).added
        return {"records": added, "seconds": time.perf_counter() - started, "peak_rss_mb": peak_rss_mb()}
    if kind == "train":
        from crosstune.models import create_model
        from crosstune.streaming import train_streaming
        from crosstune.train import TrainConfig

        cfg = TrainConfig(epochs=1, seed=0)
        model = create_model("crossfeat", cfg)
        result = train_streaming(model, [work / "ds"], model.train_config, "by-hardware", ["v100"], buffer_records=200_000,
                                 progress=False, max_batches=train_batches)
        model.save(work / "model")
        epoch = result["history"]["epochs"][0]
        return {"samples": epoch["samples"], "epoch_seconds": epoch["seconds"],
                "total_seconds": result["seconds"], "scan_and_statistics_seconds": result["seconds"] - epoch["seconds"],
                "trained_valid_records": result["trained_valid_records"], "peak_rss_mb": peak_rss_mb(),
                "stopped_after_batches": train_batches}
    if kind == "predict":
        from crosstune.models import load_model
        from crosstune.streaming import StreamSource

        model = load_model(work / "model")
        source = StreamSource.scan([work / "ds"])
        started = time.perf_counter()
        n = 0
        for row_group in source.row_groups:
            scores = model.predict(source.dataset(source.read(row_group)))
            n += len(scores)
        return {"records": n, "seconds": time.perf_counter() - started, "peak_rss_mb": peak_rss_mb()}
    raise SystemExit(f"unknown child {kind}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", default="1000000,10000000", help="comma-separated dataset sizes")
    shared = os.environ.get("CROSSTUNE_SHARED_DATA", str(HERE.parents[1] / "shared" / "data"))
    parser.add_argument("--data", default=str(Path(shared) / "roller-ansor"))
    parser.add_argument("--work", default=None, help="scratch folder (default: a temporary one, removed after)")
    parser.add_argument("--jobs", type=int, default=1, help="import processes")
    parser.add_argument("--train-batches", type=int, default=None,
                        help="stop the training epoch after this many batches (default: the whole epoch)")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, work = args.child[0], Path(args.child[1])
        batches = int(args.child[2]) if len(args.child) > 2 and args.child[2] != "-" else None
        print(json.dumps(run_child(kind, work, args.jobs, batches)))
        return
    print("SCALE TEST, NOT ACCURACY DATA: tasks replicated under new task ids, programs as measured.")
    scratch = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="crosstune-scale-"))
    results = []
    try:
        for n in (int(x) for x in args.records.split(",")):
            work = scratch / f"n{n}"
            shutil.rmtree(work, ignore_errors=True)
            gen = generate(Path(args.data), work / "src", n)
            print(f"[{n:,}] generated {gen['records']:,} record lines in {gen['seconds']:.0f} s", flush=True)
            imp = child(["import", str(work)], args.jobs)
            print(f"[{n:,}] import (--jobs {args.jobs}): {imp['records']:,} records in {imp['seconds']:.1f} s = "
                  f"{imp['records'] / imp['seconds']:,.0f} records/s, peak RSS {imp['peak_rss_mb']:.0f} MB", flush=True)
            shutil.rmtree(work / "src")
            train = child(["train", str(work), str(args.train_batches) if args.train_batches else "-"])
            scope = ("the whole epoch" if train["stopped_after_batches"] is None
                     else f"the first {train['stopped_after_batches']} batches of the epoch (not a whole epoch)")
            print(f"[{n:,}] streamed training, crossfeat, {scope}: {train['samples']:,} samples in "
                  f"{train['epoch_seconds']:.1f} s = {train['samples'] / train['epoch_seconds']:,.0f} samples/s; "
                  f"scan + statistics passes {train['scan_and_statistics_seconds']:.1f} s; "
                  f"peak RSS {train['peak_rss_mb']:.0f} MB", flush=True)
            pred = child(["predict", str(work)])
            print(f"[{n:,}] prediction: {pred['records']:,} records in {pred['seconds']:.1f} s = "
                  f"{pred['records'] / pred['seconds']:,.0f} records/s, peak RSS {pred['peak_rss_mb']:.0f} MB", flush=True)
            results.append({"records": n, "generate": gen, "import": imp, "train": train, "predict": pred})
            shutil.rmtree(work, ignore_errors=True)
    finally:
        if not args.work:
            shutil.rmtree(scratch, ignore_errors=True)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
