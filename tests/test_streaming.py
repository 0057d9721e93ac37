"""Streaming training: batches from the Parquet parts through a bounded shuffle buffer."""

from __future__ import annotations

import pytest

import gzip
import json
import signal
import subprocess
import sys
import time

import numpy as np

from crosstune.models import create_model
from crosstune.streaming import (TRAIN, StreamSource, epoch_buffers, make_stream_split, spill_bucket_count,
                                 train_streaming)
from crosstune.train import TrainConfig

pytestmark = pytest.mark.slow

SMALL = {"d_model": 16, "layers": 1, "heads": 2}


def _expected_training_ids(source, split):
    ids = []
    for row_group in source.row_groups:
        table = source.read(row_group)
        group = source.groups(table)
        latency = table.column("latency").to_numpy()
        wanted = (split.roles(table, group) == TRAIN) & np.isfinite(latency) & (table.column("error_no").to_numpy() == 0)
        ids.append(table.column("record_id").to_numpy()[wanted])
    return np.concatenate(ids)


def _buffers_of_two_epochs(dataset, buffer_records, spill_dir=None):
    """(record ids in training order, the task ids of each buffer, history) of a 2-epoch streamed run,
    within-task split."""
    model = create_model("crossfeat", TrainConfig(epochs=2, seed=3, group_size=8, groups_per_batch=4,
                                                  architecture=SMALL))
    seen, buffer_tasks = [], []

    def on_buffer(buffer):
        groups = np.asarray(buffer.dataset.group)
        buffer_tasks.append(np.asarray(buffer.dataset.task_ids)[buffer.dataset.task])
        for batch in buffer.batches:
            for chunk in batch:  # a chunk holds programs of one task on one hardware
                chunk = chunk[chunk >= 0]
                assert len(set(groups[chunk].tolist())) == 1
            seen.append(buffer.dataset.record_id[batch[batch >= 0]])

    result = train_streaming(model, [dataset], model.train_config, "within-task", test_fraction=0.2,
                             buffer_records=buffer_records, progress=False, on_buffer=on_buffer,
                             spill_dir=spill_dir)
    return np.concatenate(seen), buffer_tasks, result["history"]


def test_every_training_record_is_seen_once_per_epoch_with_a_tiny_buffer(tiny_dataset):
    source = StreamSource.scan([tiny_dataset])
    split = make_stream_split(source, "within-task", seed=3, test_fraction=0.2)
    expected = _expected_training_ids(source, split)
    assert 300 < len(expected) < source.records  # some held out, most trained on
    cfg = TrainConfig(seed=3, group_size=8, groups_per_batch=4)
    orders = []
    for epoch in range(2):
        seen = []
        for buffer in epoch_buffers(source, split, cfg, epoch, buffer_records=50):
            assert len(buffer.dataset) <= 50 + source.n_groups  # the buffer + lone records waiting
            groups = np.asarray(buffer.dataset.group)
            for batch in buffer.batches:
                assert batch.shape[1] == 8
                for chunk in batch:  # a chunk holds programs of one task on one hardware
                    chunk = chunk[chunk >= 0]
                    assert len(set(groups[chunk].tolist())) == 1
                seen.append(buffer.dataset.record_id[batch[batch >= 0]])
        seen = np.concatenate(seen)
        assert len(seen) == len(np.unique(seen)) == len(expected)
        assert set(seen.tolist()) == set(expected.tolist())
        orders.append(seen)
    assert not np.array_equal(orders[0], orders[1])  # reshuffled every epoch


def test_streamed_training_learns_and_reports_its_buffer(tiny_dataset):
    model = create_model("crossfeat", TrainConfig(epochs=2, seed=0, architecture=SMALL))
    result = train_streaming(model, [tiny_dataset], model.train_config, "by-hardware", ["v100"],
                             buffer_records=200, progress=False)
    history = result["history"]
    assert history["shuffle_buffer_records"] == 200 and history["streamed"]
    assert len(history["epochs"]) == 2 and all(e["samples"] > 0 for e in history["epochs"])
    assert "k80" in model.hardware_seen and "v100" not in model.hardware_seen
    from crosstune.dataset import load_dataset

    ds = load_dataset([tiny_dataset])
    scores = model.predict(ds.select(ds.hardware_mask(["v100"])))
    assert np.isfinite(scores).all() and scores.std() > 0


def test_a_killed_streaming_run_resumes_from_its_checkpoint(tmp_path, tiny_dataset):
    out = tmp_path / "model"
    command = [sys.executable, "-m", "crosstune", "train", str(tiny_dataset), "--stream", "--shuffle-buffer", "100",
               "--split", "by-hardware", "--test-hardware", "v100", "--epochs", "6", "--arch",
               "d_model=16,layers=1", "--out", str(out), "--quiet"]
    progress = out / "checkpoint" / "progress.json"
    run = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 240
    while time.time() < deadline and run.poll() is None:
        if progress.exists() and json.loads(progress.read_text())["epoch"] >= 0:
            break
        time.sleep(0.05)
    assert run.poll() is None, "the run ended before it could be killed: " + run.stderr.read()[-2000:]
    run.send_signal(signal.SIGKILL)
    run.wait()
    saved = json.loads(progress.read_text())
    assert saved["epoch"] < 5
    # the K80 half does not fit the 100-record buffer: its rows were spilled into the checkpoint folder
    buckets = out / "checkpoint" / "shuffle-buckets"
    assert list(buckets.glob("bucket-*.parquet"))
    resumed = subprocess.run(command + ["--resume"], capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    config = json.loads((out / "config.json").read_text())
    epochs = config["history"]["epochs"]
    assert [e["epoch"] for e in epochs] == list(range(6))
    # The epochs done before the kill were not trained again: their records are the checkpoint's.
    assert epochs[:saved["epoch"] + 1] == saved["history"]
    assert "shuffle buffer 100 records" in resumed.stdout and "group buckets" in resumed.stdout
    assert not buckets.exists()  # written again by the resumed run, removed at its end
    ids = json.loads((out / "train_records.json").read_text())["record_ids"]
    assert len(ids) > 0 and len(ids) == len(set(ids))


@pytest.fixture(scope="module")
def many_task_dataset(tmp_path_factory, roller):
    """50 tasks stored task by task: 30 real K80 records of each of the 5 sample files, replicated 10
    times, each replica of a task under a new task id (its workload key re-spaced, as bench_scale does)."""
    from crosstune.importer import import_sources

    root = tmp_path_factory.mktemp("many-tasks")
    (root / "src").mkdir()
    for replica in range(10):
        for path in sorted((roller / "k80").glob("*.json.gz")):
            with gzip.open(path, "rb") as src:
                lines = [line.replace(b'\\", ', b'\\",' + b" " * (replica + 1), 1) for _, line in zip(range(30), src)]
            with gzip.open(root / "src" / f"r{replica:02d}-{path.name}", "wb") as dst:
                dst.writelines(lines)
    import_sources([root / "src"], "k80", root / "ds")
    return root / "ds"


def _task_spread(source, buffer_tasks):
    """Median over buffers of how far apart (as a share of all tasks) the first- and last-stored tasks
    of a buffer are."""
    position = {task: i for i, task in enumerate(source.task_ids)}
    return float(np.median([np.ptp([position[t] for t in set(tasks.tolist())]) / len(source.task_ids)
                            for tasks in buffer_tasks]))


def test_a_buffer_smaller_than_the_training_set_draws_its_tasks_from_the_whole_dataset(many_task_dataset, tmp_path):
    source = StreamSource.scan([many_task_dataset])
    assert len(source.task_ids) == 50
    split = make_stream_split(source, "within-task", seed=3, test_fraction=0.2)
    expected = _expected_training_ids(source, split)
    spill = tmp_path / "buckets"
    seen, buffer_tasks, history = _buffers_of_two_epochs(many_task_dataset, buffer_records=200, spill_dir=spill)
    assert history["shuffle_buckets"] == spill_bucket_count(source, split, 200)
    assert abs(history["shuffle_buckets"] - 2 * len(expected) / 200) <= 1  # about half a buffer per bucket
    first, second = seen[:len(expected)], seen[len(expected):]
    for epoch in (first, second):  # every training record exactly once per epoch
        assert len(epoch) == len(np.unique(epoch)) == len(expected)
        assert set(epoch.tolist()) == set(expected.tolist())
    assert not np.array_equal(first, second)  # in a new order
    # the same seed spills and batches the same way again (what a resumed run relies on)
    again, _, _ = _buffers_of_two_epochs(many_task_dataset, buffer_records=200)
    assert np.array_equal(seen, again)
    # Filled from the row groups, a 200-record buffer would hold a run of neighbouring tasks (about 7 of
    # the 50, often the layers of one network in real data); through the buckets it holds tasks from
    # all over the dataset.
    cfg = TrainConfig(seed=3, group_size=8, groups_per_batch=4)
    from_row_groups = [np.asarray(b.dataset.task_ids)[b.dataset.task]
                       for b in epoch_buffers(source, split, cfg, 0, buffer_records=200)]
    assert _task_spread(source, from_row_groups) < 0.25
    assert _task_spread(source, buffer_tasks) > 0.6
    assert not spill.exists()  # the buckets were written there and removed


def test_a_buffer_holding_the_whole_training_set_reads_the_row_groups(tiny_dataset):
    seen, _, history = _buffers_of_two_epochs(tiny_dataset, buffer_records=100_000)
    assert history["shuffle_buckets"] == 0
    assert len(seen) == 2 * len(np.unique(seen))


def test_group_buckets_keep_rows_whole_and_leave_other_files_alone(tmp_path):
    import pyarrow as pa

    from crosstune.shuffle_spill import GroupBuckets

    (tmp_path / "notes.txt").write_text("the user's")
    (tmp_path / "bucket-00001.parquet").write_text("a killed run's bucket")
    table = pa.table({"record_id": pa.array(range(10), pa.uint64()), "g": pa.array([0, 1, 2, 0, 1, 2, 0, 0, 2, 2])})
    buckets = GroupBuckets(3, table.schema, tmp_path, flush_rows=2)
    assert not (tmp_path / "bucket-00001.parquet").exists()  # replaced, not read
    bucket = np.asarray(table.column("g"))  # one group per bucket here
    buckets.add(table.slice(0, 5), bucket[:5])
    buckets.add(table.slice(5), bucket[5:])
    buckets.finish()
    assert buckets.rows.tolist() == [4, 2, 4]
    read = [pa.concat_tables(list(buckets.tables(np.array([b])))) for b in (2, 0, 1)]
    assert [t.column("g").unique().to_pylist() for t in read] == [[2], [0], [1]]
    assert read[1].column("record_id").to_pylist() == [0, 3, 6, 7]  # in input order
    buckets.remove()
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]
