"""Streaming training: batches from the Parquet parts through a bounded shuffle buffer."""

from __future__ import annotations

import pytest

import json
import signal
import subprocess
import sys
import time

import numpy as np

from crosstune.models import create_model
from crosstune.streaming import TRAIN, StreamSource, epoch_buffers, make_stream_split, train_streaming
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
    resumed = subprocess.run(command + ["--resume"], capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    config = json.loads((out / "config.json").read_text())
    epochs = config["history"]["epochs"]
    assert [e["epoch"] for e in epochs] == list(range(6))
    # The epochs done before the kill were not trained again: their records are the checkpoint's.
    assert epochs[:saved["epoch"] + 1] == saved["history"]
    assert "shuffle buffer 100 records" in resumed.stdout
    ids = json.loads((out / "train_records.json").read_text())["record_ids"]
    assert len(ids) > 0 and len(ids) == len(set(ids))
