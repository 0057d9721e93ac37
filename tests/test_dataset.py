"""The Parquet store: import, re-import, atomicity, loading into model-ready arrays."""

from __future__ import annotations

import json

import numpy as np
import pytest

from crosstune import tokens
from crosstune.dataset import MANIFEST, import_records, load_dataset, read_manifest
from crosstune.errors import CrosstuneError
from crosstune.hardware import resolve
from crosstune.importer import import_sources
from crosstune.records import ImportReport, read_records


def test_import_twice_adds_nothing(tmp_path, small_roller):
    out = tmp_path / "ds"
    first = import_sources([small_roller / "k80"], "k80", out)
    second = import_sources([small_roller / "k80"], "k80", out)
    assert first.added == 4000 and second.added == 0
    assert second.report.duplicates == 4000
    manifest = read_manifest(out)
    assert manifest["counts"]["records"] == 4000
    assert len(manifest["parts"]) == 1
    assert len(load_dataset([out])) == 4000


def test_manifest_describes_the_dataset(small_dataset):
    manifest = read_manifest(small_dataset)
    assert manifest["format_version"] == 1
    assert set(manifest["hardware"]) == {"k80", "v100"}
    assert manifest["hardware"]["v100"]["peak_fp32_gflops"] > 10000
    assert manifest["vocabulary"]["kinds"] == list(tokens.KINDS)
    seq = manifest["counts"]["sequence_length"]
    assert 1 <= seq["min"] <= seq["p50"] <= seq["max"]
    assert manifest["counts"]["per_operator"]["matmul"] == 2000
    assert len(manifest["imports"]) == 2


def test_killed_import_leaves_previous_dataset_intact(tmp_path, small_roller):
    out = tmp_path / "ds"
    import_sources([small_roller / "k80"], "k80", out)
    before = (out / MANIFEST).read_text()

    def dying_records():
        for i, record in enumerate(read_records([small_roller / "v100"], "v100", ImportReport())):
            if i == 2500:
                raise KeyboardInterrupt  # the process is killed mid-import
            yield record

    with pytest.raises(KeyboardInterrupt):
        import_records(dying_records(), out, resolve("v100"), ImportReport())
    assert (out / MANIFEST).read_text() == before
    ds = load_dataset([out])
    assert ds.hardware_names == ["k80"] and len(ds) == 4000
    assert not list(out.rglob("*.tmp"))


def test_dataset_without_manifest_does_not_load(tmp_path):
    (tmp_path / "half" / "hardware=k80").mkdir(parents=True)
    with pytest.raises(CrosstuneError, match="interrupted"):
        load_dataset([tmp_path / "half"])


def test_model_ready_arrays(small_dataset):
    ds = load_dataset([small_dataset])
    assert len(ds) == 8000
    assert ds.offsets[-1] == len(ds.kinds) == len(ds.args)
    assert ds.args.shape[1] == tokens.NUM_ARGS
    labels = ds.labels()
    valid = ds.valid
    assert np.all((labels[valid] > 0) & (labels[valid] <= 1))
    # exactly one best program (label 1) per group, up to ties
    for group in np.unique(ds.group[valid])[:5]:
        assert np.isclose(labels[valid & (ds.group == group)].max(), 1.0)
    sub = ds.select(ds.hardware == ds.hardware_names.index("v100"))
    assert len(sub) == 4000
    first = int(np.flatnonzero(ds.hardware == ds.hardware_names.index("v100"))[0])
    assert np.array_equal(sub.kinds[: sub.offsets[1]], ds.kinds[ds.offsets[first]:ds.offsets[first + 1]])


def test_load_only_some_hardware_and_unknown_hardware(small_dataset):
    assert load_dataset([small_dataset], hardware=["k80"]).hardware_names == ["k80"]
    with pytest.raises(CrosstuneError, match="not in the dataset"):
        load_dataset([small_dataset], hardware=["t4"])


def test_same_hardware_name_with_other_descriptor_is_refused(tmp_path, small_roller):
    out = tmp_path / "ds"
    import_sources([small_roller / "k80"], "k80", out)
    spec = json.loads((out / MANIFEST).read_text())["hardware"]["k80"]
    spec["mem_gb"] = 99
    spec_file = tmp_path / "k80.json"
    spec_file.write_text(json.dumps(spec))
    with pytest.raises(CrosstuneError, match="different descriptor"):
        import_sources([small_roller / "k80"], "k80", out, hardware_spec=str(spec_file))
