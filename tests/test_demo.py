"""The bundled dataset and the demo built on it."""

from __future__ import annotations

import pytest

import json

import numpy as np

from crosstune.data import bundled_dataset
from crosstune.dataset import load_dataset, read_manifest
from crosstune.demo import run_demo

pytestmark = pytest.mark.slow


def test_bundled_dataset_is_real_small_and_documented():
    path = bundled_dataset()
    size = sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    assert size < 8 * 1024 * 1024
    manifest = read_manifest(path)
    provenance = manifest["provenance"]
    assert {"cpu", "date", "tvm", "command"} <= set(provenance)
    ds = load_dataset([path])
    assert len(ds.hardware_names) >= 4
    assert len(ds.task_ids) >= 20
    for h in range(len(ds.hardware_names)):
        per_task = np.bincount(ds.task[ds.hardware == h], minlength=len(ds.task_ids))
        assert np.sum(per_task >= 140) >= 20  # ~150 programs per task and configuration
    network_map = json.loads((path / "network_map.json").read_text())  # task id -> networks
    assert {net for nets in network_map.values() for net in nets} == {"resnet18", "mobilenet_v2", "bert_layer"}
    assert set(network_map) <= set(ds.task_ids)


def test_demo_runs_end_to_end_on_real_records(tmp_path, tiny_dataset):
    summary = run_demo(tmp_path, held_out="v100", epochs=1, dataset=str(tiny_dataset), progress=False,
                       print_fn=lambda *_: None)
    models = {row["model"] for row in summary["rows"]}
    assert models == {"crossfeat", "crossfeat-nohw", "tlp", "xgb", "random"}
    page = (tmp_path / "index.html").read_text()
    assert "demo-models.png" in page and (tmp_path / "demo-models.png").stat().st_size > 5000
