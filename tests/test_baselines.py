"""Baselines in the model harness: nearest, nearest-mean, random, xgb vs xgb+hw; program identity across
hardware. Devices here are self-written AutoTVM logs (the format is public) with latencies chosen so the
right answer is known."""

from __future__ import annotations

import json

import numpy as np
import pytest

from crosstune.dataset import load_dataset
from crosstune.experiment import SplitOptions
from crosstune.importer import import_sources
from crosstune.metrics import evaluate
from crosstune.models import create_model, load_model
from crosstune.models.nearest import known_programs, nearest_mean_scores, nearest_scores
from crosstune.models.random_baseline import random_scores
from crosstune.programs import program_keys
from crosstune.records.operators import OP_KINDS

ARGS = [["TENSOR", [1, 64, 28, 28], "float32"], ["TENSOR", [64, 64, 3, 3], "float32"], [1, 1], [1, 1, 1, 1], [1, 1],
        "NCHW", "NCHW", "float32"]


def log_line(index: int, latency: float) -> bytes:
    entity = [["tile_ic", "sp", [-1, 2 ** (index % 4)]], ["tile_oc", "sp", [-1, 2 ** (index // 4)]],
              ["tile_ow", "sp", [-1, 7]], ["unroll_kw", "ot", True]]
    return json.dumps({"input": ["llvm -keys=cpu ", "conv2d_NCHWc.x86", ARGS, {}],
                       "config": {"index": index, "code_hash": None, "entity": entity},
                       "result": [[latency], 0, 0.5, 1.7e9], "version": 0.2, "tvm_version": "0.10.0"}).encode()


@pytest.fixture(scope="module")
def three_cpus(tmp_path_factory):
    """16 configs of one conv2d task: i7-3770 ranks them like amd-3700x (other scale), cortex-a7 in
    reverse. Config 15 is measured on the ARM board only, config 14 nowhere but on the AMD CPU."""
    root = tmp_path_factory.mktemp("cpus")
    speeds = {"amd-3700x": lambda i: 1e-3 * (1 + i), "i7-3770": lambda i: 3e-3 * (1 + i) ** 1.1,
              "cortex-a7": lambda i: 1e-2 * (20 - i)}
    out = root / "ds"
    for device, latency in speeds.items():
        indices = [i for i in range(16) if not (i == 15 and device != "cortex-a7") and not (i == 14 and device != "amd-3700x")]
        path = root / f"{device}.log"
        path.write_bytes(b"".join(log_line(i, latency(i)) + b"\n" for i in indices))
        import_sources([path], device, out)
    return out


def test_program_keys_match_the_same_program_across_hardware(three_cpus, small_dataset):
    ds = load_dataset([three_cpus])
    keys = program_keys(ds)
    by_device = {name: set(keys[ds.hardware == h]) for h, name in enumerate(ds.hardware_names)}
    assert len(by_device["amd-3700x"]) == 15 and len(by_device["amd-3700x"] & by_device["i7-3770"]) == 14
    assert len(by_device["cortex-a7"] & by_device["amd-3700x"]) == 14
    roller = load_dataset([small_dataset])
    rkeys = program_keys(roller)
    k80, v100 = (set(rkeys[roller.hardware == roller.hardware_names.index(n)]) for n in ("k80", "v100"))
    shared = k80 & v100
    assert shared  # the K80 and V100 samples measured some identical pooling programs...
    kinds = {OP_KINDS[k] for k in roller.op_kind[np.isin(rkeys, list(shared))]}
    assert kinds == {"pool"}  # ...and only those


def test_nearest_copies_the_most_similar_device_and_ranks_unmeasured_last(three_cpus):
    ds = load_dataset([three_cpus])
    split = SplitOptions(kind="by-hardware", test_hardware=["amd-3700x"]).make(ds, 0)[0]
    train, test = ds.select(split.train), ds.select(split.test)
    known = known_programs(train)
    scores = nearest_scores(known, test)
    lat = test.latency
    unmeasured = ~np.isin(program_keys(test), program_keys(ds)[ds.hardware != ds.hardware_names.index("amd-3700x")])
    measured = ~unmeasured
    # i7-3770 (the nearest descriptor) orders programs exactly like the AMD CPU: a perfect copy
    assert unmeasured.sum() == 1
    order = np.argsort(-scores[measured])
    assert np.all(np.diff(lat[measured][order]) > 0)
    assert scores[unmeasured].max() < scores[measured].min()  # config 14, measured by nobody, ranks last
    assert evaluate(test, scores)["overall"]["top1"] == pytest.approx(1.0)
    # nearest-mean averages i7 with the reversed ARM board: every shared program scores about 0.5
    mean = nearest_mean_scores(known, test)
    assert np.ptp(mean[measured]) < 0.05 < 0.9 < np.ptp(scores[measured])
    # held out the ARM board, nearest copies the x86 CPUs, whose order is its reverse
    split = SplitOptions(kind="by-hardware", test_hardware=["cortex-a7"]).make(ds, 0)[0]
    arm = ds.select(split.test)
    assert evaluate(arm, nearest_scores(known_programs(ds.select(split.train)), arm))["overall"]["pca"] < 0.2


def test_baselines_save_load_and_score_alike(three_cpus, tmp_path):
    ds = load_dataset([three_cpus])
    train, test = ds.select(ds.hardware != 0), ds.select(ds.hardware == 0)
    for kind in ("nearest", "nearest-mean", "random"):
        model = create_model(kind)
        model.fit(train)
        before = model.predict(test)
        model.save(tmp_path / kind)
        loaded = load_model(tmp_path / kind)
        assert loaded.kind == kind
        assert np.array_equal(loaded.predict(test), before)
    assert (tmp_path / "nearest" / "known_programs.parquet").is_file()
    assert not list(tmp_path.glob("**/*.pkl"))


def test_random_is_seeded_and_independent_of_order(three_cpus):
    ds = load_dataset([three_cpus])
    a = random_scores(ds, 0)
    assert np.array_equal(a, random_scores(ds, 0)) and not np.array_equal(a, random_scores(ds, 1))
    reversed_rows = np.arange(len(ds))[::-1]
    assert np.array_equal(random_scores(ds.select(reversed_rows), 0), a[::-1])
    assert np.all((a >= 0) & (a < 1))


def test_xgb_plus_hw_appends_the_hardware_vector(three_cpus):
    from crosstune.hardware.registry import FEATURE_NAMES

    ds = load_dataset([three_cpus])
    plain, with_hw = create_model("xgb"), create_model("xgb+hw")
    assert plain.kind == "xgb" and with_hw.kind == "xgb+hw"
    for model in (plain, with_hw):
        model.config.n_estimators = 5
        model.fit(ds)
    assert with_hw.features(ds).shape[1] - plain.features(ds).shape[1] == len(FEATURE_NAMES)


def test_compare_shows_random_model_beside_the_exact_floor(three_cpus):
    from crosstune.compare import run_comparison
    from crosstune.train import TrainConfig

    lines = []
    data = run_comparison([str(three_cpus)], ["nearest", "random"], SplitOptions(test_hardware=["i7-3770"]),
                          lambda kind: TrainConfig(epochs=1), progress=False, print_fn=lines.append)
    assert set(data["summary"]) == {"nearest", "random", "random floor"}
    assert data["summary"]["nearest"]["pca"]["mean"] > 0.9
