"""Real TVM: collection with MetaSchedule (local and through an RPC tracker), the cost-model plug-in
inside MetaSchedule's search, and a whole-network tune that is checked against PyTorch."""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from crosstune.dataset import load_dataset
from crosstune.errors import CrosstuneError
from crosstune.tvm.collect import CollectSettings, collect
from crosstune.tvm.measure import RpcSettings

pytestmark = [pytest.mark.tvm, pytest.mark.slow]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_tensor_intrinsics_import_fast_and_the_same_as_tvms_own():
    """crosstune imports them with a light inspect.stack (seconds, not a minute); what TVM registers must be
    exactly what its standard import registers (tests/data/tensor-intrin-golden.json, made by
    benchmarks/bench_tvm_import.py with the pinned TVM)."""
    import inspect
    from pathlib import Path

    import tvm

    here = Path(__file__).parent
    golden = json.loads((here / "data" / "tensor-intrin-golden.json").read_text())
    done = subprocess.run([sys.executable, str(here / "tensor_intrin_digest.py"), "crosstune"], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    ours = json.loads(done.stdout.strip().splitlines()[-1])
    assert golden["tvm"] == tvm.__version__, "TVM changed: regenerate the golden file with the benchmark"
    assert (ours["intrinsics"], ours["sha256"]) == (golden["intrinsics"], golden["sha256"])
    from crosstune.tvm import require_tvm

    standard = inspect.stack
    require_tvm()
    assert inspect.stack is standard  # put back


def test_unknown_network_and_unsupported_configuration_fail_before_measuring(tmp_path, monkeypatch):
    with pytest.raises(CrosstuneError, match="known networks: resnet18, mobilenet_v2, bert_layer"):
        collect(CollectSettings(["alexnet"], ["local-sse-1c"], 4), tmp_path / "a")
    import crosstune.hardware.local as local

    monkeypatch.setattr(local, "cpu_flags", lambda: {"sse2"})
    with pytest.raises(CrosstuneError, match="avx512f"):
        collect(CollectSettings(["resnet18"], ["local-avx512-1c"], 4), tmp_path / "b")
    assert not (tmp_path / "b" / "collection.json").exists()


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    out = tmp_path_factory.mktemp("collect")
    settings = CollectSettings(["resnet18"], ["local-sse-1c", "local-avx2-1c"], programs_per_task=6,
                               tasks_per_network=1, evolutionary_fraction=0.0)
    summary = collect(settings, out, quiet=True)
    return out, settings, summary


def test_collect_measures_the_same_programs_on_every_configuration(collected):
    out, settings, summary = collected
    assert summary.measured == 12 and not summary.failures
    ds = load_dataset([out / "dataset"])
    assert sorted(ds.hardware_names) == ["local-avx2-1c", "local-sse-1c"]
    assert len(ds) == 12 and ds.valid.all()
    per_config = [np.sort(np.asarray(ds.kinds[ds.offsets[np.flatnonzero(ds.hardware == h)[0]]:])[:5]) for h in (0, 1)]
    assert np.array_equal(*per_config)
    manifest = json.loads((out / "dataset" / "manifest.json").read_text())
    assert manifest["provenance"]["tvm"].startswith("0.27")
    assert json.loads((out / "network_map.json").read_text())


def test_killed_collection_resumes_without_remeasuring(collected):
    out, settings, _ = collected
    records = out / "local-sse-1c" / "database_tuning_record.json"
    with open(records, "ab") as stream:  # a write cut short (kill, full disk)
        stream.write(b'[0, [[[["GetSBlock", [], ["conv')
    again = collect(settings, out, quiet=True)
    assert again.measured == 0 and again.skipped_already_measured == 12
    assert sum(v for k, v in again.failures.items() if k.startswith("corrupt database line")) == 1
    with pytest.raises(CrosstuneError, match="other settings"):
        collect(CollectSettings(["resnet18"], ["local-sse-1c"], programs_per_task=7, tasks_per_network=1), out)


def test_a_collection_names_its_hardware_with_the_prefix_given(collected, tmp_path):
    """collect --hardware-prefix: this CPU's local-sse-1c beside the bundled local-sse-1c (another CPU)."""
    from crosstune.hardware.registry import resolve
    from crosstune.tvm.collect import import_collection

    out, settings, _ = collected
    assert "hardware_prefix" not in settings.to_json()  # collections from before the option still resume
    shutil.copytree(out / "local-sse-1c", tmp_path / "local-sse-1c")
    dataset = import_collection(tmp_path, ["local-sse-1c"], {"cpu": "test"}, hardware_prefix="rig-")
    ds = load_dataset([dataset])
    assert ds.hardware_names == ["rig-local-sse-1c"] and len(ds) == 6
    descriptor = json.loads((dataset / "manifest.json").read_text())["hardware"]["rig-local-sse-1c"]
    assert {**descriptor, "name": "local-sse-1c"} == resolve("local-sse-1c").to_json()


def _wait_for_tracker(port: int, key: str | None, timeout: float = 90.0) -> None:
    """Until the tracker answers (and, with a key, a server of that key has registered): a loaded CI
    machine starts the two processes far slower than a fixed sleep assumes."""
    from tvm import rpc

    deadline = time.monotonic() + timeout
    while True:
        try:
            summary = rpc.connect_tracker("127.0.0.1", port).summary()
            if key is None or summary.get("queue_info", {}).get(key, {}).get("free", 0) > 0:
                return
        except (OSError, RuntimeError, ValueError):
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"RPC tracker on port {port} not ready (key {key}) after {timeout:.0f} s")
        time.sleep(0.5)


def test_collect_through_an_rpc_tracker_on_loopback(tmp_path):
    port = _free_port()
    tracker = subprocess.Popen([sys.executable, "-m", "tvm.exec.rpc_tracker", "--host", "127.0.0.1", "--port", str(port),
                                "--port-end", str(port + 1)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    server = None
    try:
        _wait_for_tracker(port, key=None)
        server = subprocess.Popen([sys.executable, "-m", "tvm.exec.rpc_server", "--tracker", f"127.0.0.1:{port}",
                                   "--key", "crosstune-test", "--host", "127.0.0.1"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        _wait_for_tracker(port, key="crosstune-test")
        settings = CollectSettings(["resnet18"], ["local-sse-1c"], programs_per_task=3, tasks_per_network=1,
                                   evolutionary_fraction=0.0)
        summary = collect(settings, tmp_path, rpc=RpcSettings(f"127.0.0.1:{port}", "crosstune-test"), quiet=True)
        assert summary.measured == 3 and not summary.failures, summary.failures
        ds = load_dataset([tmp_path / "dataset"])
        assert len(ds) == 3 and ds.valid.all()
    finally:
        for proc in (server, tracker):
            if proc is not None:  # the whole group: TVM's worker processes outlive their parent
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=10)


def test_cost_model_plugin_inside_metaschedule_search(collected, tmp_path):
    import tvm
    from tvm.s_tir import meta_schedule as ms

    from crosstune import tokens
    from crosstune.experiment import fit_model
    from crosstune.hardware.local import local_configurations
    from crosstune.train import TrainConfig
    from crosstune.tvm.convert import operator_of, plain, programs_dataset
    from crosstune.tvm.costmodel import NEUTRAL_SCORE, make_cost_model
    from crosstune.tvm.measure import make_builder, make_runner, target_of

    out, _, _ = collected
    model, _ = fit_model("crossfeat", load_dataset([out / "dataset"]), TrainConfig(epochs=1))
    config = local_configurations()["local-sse-1c"]
    adapter = make_cost_model(model, config.spec)
    task = json.loads(next((out / "tasks").iterdir()).read_text())
    mod = tvm.ir.load_json(task["mod"])
    database = ms.tir_integration.tune_tir(mod, target_of(config), str(tmp_path), max_trials_global=8,
                                           num_trials_per_iter=8, builder=make_builder(), runner=make_runner(config),
                                           cost_model=adapter,
                                           strategy=ms.search_strategy.EvolutionarySearch(population_size=32,
                                                                                          init_min_unmeasured=16,
                                                                                          genetic_num_iters=1))
    assert len(database.get_all_tuning_records()) >= 4
    assert adapter.predict_calls > 0 and adapter.predicted > 0 and adapter.failures == 0
    # what the search gets: in (0, 1), in the model's order, the same for the same programs in later calls
    context = ms.TuneContext(mod, target=target_of(config), space_generator="post-order-apply",
                             search_strategy="replay-trace")
    assert list(adapter.score_scales) == [adapter._task(context)]  # one task, scaled once
    spaces = context.generate_design_space()
    candidates = [ms.MeasureCandidate(s, ms.arg_info.ArgInfo.from_prim_func(mod["main"])) for s in spaces]
    scores = adapter.predict(context, candidates)
    raw = model.predict(programs_dataset([tokens.tokenize_ms_trace(plain(s.trace.as_json())) for s in spaces],
                                         operator_of(mod), config.spec))
    assert np.all((scores > 0) & (scores < 1))
    assert np.array_equal(np.argsort(scores, kind="stable"), np.argsort(raw, kind="stable"))
    assert np.allclose(adapter.predict(context, candidates[:1]), scores[:1], rtol=1e-5)  # float32 batches differ a little

    class Broken:
        def predict(self, programs):
            raise RuntimeError("boom")

    broken = make_cost_model(Broken(), config.spec)
    context = ms.TuneContext(mod, target=target_of(config), space_generator="post-order-apply",
                             search_strategy="replay-trace")
    candidates = [ms.MeasureCandidate(s, ms.arg_info.ArgInfo.from_prim_func(mod["main"]))
                  for s in context.generate_design_space()[:2]]
    assert np.array_equal(broken.predict(context, candidates), np.full(len(candidates), NEUTRAL_SCORE))
    assert NEUTRAL_SCORE > 0 and broken.failures == 1


def test_search_scores_are_positive_and_keep_the_models_order_whatever_its_offset():
    """MetaSchedule clamps scores at 0 and draws parents in proportion to them: a ranking model whose raw
    scores are all negative must still hand the search distinct, positive scores in its own order."""
    from crosstune.tvm.costmodel import score_scale, search_scores

    raw = np.array([-7.0, -3.5, -5.0, -3.4, -9.0])
    scores = search_scores(raw, *score_scale(raw))
    assert np.all((scores > 0) & (scores < 1))
    assert np.array_equal(np.argsort(scores), np.argsort(raw))
    assert len(set(scores.tolist())) == len(raw)
    shifted = search_scores(raw + 100.0, *score_scale(raw + 100.0))
    assert np.allclose(shifted, scores)  # the offset of the raw scores does not matter
    assert score_scale(np.array([2.0])) == (2.0, 1.0)  # one candidate: no spread to divide by
    assert search_scores(np.array([2.0]), *score_scale(np.array([2.0])))[0] == 0.5


def test_tune_with_a_model_that_does_not_load(tmp_path):
    from crosstune.tvm.tune import tune_network

    (tmp_path / "broken").mkdir()
    with pytest.raises(CrosstuneError, match="not a crosstune model"):
        tune_network("bert_layer", str(tmp_path / "broken"), 4, "local-sse-1c", tmp_path / "run")


def _two_task_mods():
    """The two tasks (resnet18's conv2d and its add) of the committed MetaSchedule database."""
    from tvm.s_tir import meta_schedule as ms

    from conftest import MS_DB

    database = ms.database.JSONDatabase(path_workload=str(MS_DB / "database_workload.json"),
                                        path_tuning_record=str(MS_DB / "database_tuning_record.json"),
                                        allow_missing=False)
    from tvm_ffi import structural_hash

    mods = {}
    for record in database.get_all_tuning_records():
        mods.setdefault(int(structural_hash(record.workload.mod)), record.workload.mod)
    assert len(mods) >= 2
    return list(mods.values())[:2]


@pytest.fixture(scope="module")
def ms_model(tmp_path_factory):
    """crossfeat trained (one epoch) on the committed MetaSchedule records, as local-sse-1c."""
    from conftest import MS_DB

    from crosstune.experiment import fit_model
    from crosstune.importer import import_sources
    from crosstune.train import TrainConfig

    out = tmp_path_factory.mktemp("ms") / "ds"
    import_sources([MS_DB], "local-sse-1c", out)
    model, _ = fit_model("crossfeat", load_dataset([out]), TrainConfig(epochs=1))
    return model


def test_every_task_of_a_tuning_run_gets_its_own_operator_descriptor(ms_model, tmp_path):
    from tvm.s_tir import meta_schedule as ms
    from tvm_ffi import structural_hash

    from crosstune.hardware.local import local_configurations
    from crosstune.tvm.convert import operator_of
    from crosstune.tvm.costmodel import make_cost_model
    from crosstune.tvm.measure import make_builder, make_runner, target_of

    config = local_configurations()["local-sse-1c"]
    adapter = make_cost_model(ms_model, config.spec)
    mods = _two_task_mods()
    contexts = [ms.TuneContext(mod, target=target_of(config), space_generator="post-order-apply",
                               search_strategy=ms.search_strategy.EvolutionarySearch(
                                   population_size=16, init_min_unmeasured=8, genetic_num_iters=1),
                               task_name=f"task{i}", rand_state=i + 1, num_threads=1) for i, mod in enumerate(mods)]
    ms.tune_tasks(tasks=contexts, task_weights=[1.0, 1.0], work_dir=str(tmp_path), max_trials_global=8,
                  num_trials_per_iter=4, builder=make_builder(), runner=make_runner(config),
                  database=ms.database.MemoryDatabase(), cost_model=adapter)
    assert adapter.failures == 0 and adapter.predict_calls >= 2
    assert set(adapter.operators) == {int(structural_hash(mod)) for mod in mods}
    for mod in mods:
        assert adapter.operators[int(structural_hash(mod))] == operator_of(mod)


def test_online_trees_are_fitted_on_a_tasks_measurements_and_blended_into_its_scores(ms_model, tmp_path):
    import tvm
    from tvm.s_tir import meta_schedule as ms

    from crosstune.hardware.local import local_configurations
    from crosstune.tvm.costmodel import make_cost_model
    from crosstune.tvm.measure import make_builder, make_runner, target_of
    from crosstune.tvm.online_trees import BLEND_TRIALS

    config = local_configurations()["local-sse-1c"]
    adapter = make_cost_model(ms_model, config.spec, online_trees=True)
    mod = _two_task_mods()[0]
    context = ms.TuneContext(mod, target=target_of(config), space_generator="post-order-apply",
                             search_strategy=ms.search_strategy.EvolutionarySearch(
                                 population_size=32, init_min_unmeasured=16, genetic_num_iters=1),
                             task_name="conv", rand_state=1, num_threads=1)
    database = ms.database.MemoryDatabase()
    ms.tune_tasks(tasks=[context], task_weights=[1.0], work_dir=str(tmp_path), max_trials_global=24,
                  num_trials_per_iter=12, builder=make_builder(), runner=make_runner(config),
                  database=database, cost_model=adapter)
    task = adapter._task(context)
    measured = len(adapter.trees.measured[task][2])
    assert adapter.failures == 0 and measured >= 12
    assert adapter.trees.fits >= 1 and adapter.tree_seconds > 0  # refitted after its rounds, on the clock
    assert adapter.trees.weight(task) == measured / (measured + BLEND_TRIALS)

    # the blend over the measured programs: still in (0, 1), and no longer the model's order alone
    candidates = []
    for record in database.get_all_tuning_records():
        sch = tvm.s_tir.Schedule(mod)
        record.trace.apply_to_schedule(sch, remove_postproc=False)
        candidates.append(ms.MeasureCandidate(sch, ms.arg_info.ArgInfo.from_prim_func(mod["main"])))
    blended = adapter.predict(context, candidates)
    alone = make_cost_model(ms_model, config.spec).predict(context, candidates)
    assert adapter.failures == 0 and np.all((blended > 0) & (blended < 1))
    assert not np.array_equal(np.argsort(blended), np.argsort(alone))


def test_collect_resumed_in_a_new_process_imports_again(collected):
    """A new process measures this machine afresh; the import must still accept the configurations."""
    out, settings, _ = collected
    code = ("import sys; from crosstune.tvm.collect import CollectSettings, collect; "
            f"s = collect(CollectSettings(**{settings.to_json()!r}), sys.argv[1], quiet=True); "
            "print('measured', s.measured, 'skipped', s.skipped_already_measured)")
    result = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "measured 0 skipped 12" in result.stdout
    assert len(load_dataset([out / "dataset"])) == 12


def test_the_builder_keeps_its_workers_between_calls_and_replaces_them_after_a_while(tmp_path):
    """One pool of build workers serves several calls (starting one costs seconds per tuning round);
    after builds_per_pool calls it is replaced; artifacts run and are then removed by build_and_run."""
    import tvm
    from tvm import te
    from tvm.s_tir import meta_schedule as ms

    from crosstune.hardware.local import local_configurations
    from crosstune.tvm.measure import build_and_run, make_builder, make_runner, target_of

    a = te.placeholder((256,), name="a", dtype="float32")
    doubled = te.compute((256,), lambda i: a[i] * 2.0, name="doubled")
    mod = tvm.IRModule({"main": te.create_prim_func([a, doubled])})
    config = local_configurations()["local-sse-1c"]
    target = target_of(config)
    builder = make_builder(builds_per_pool=2)
    pools, artifacts = [], []
    for _ in range(3):
        results = builder.build([ms.builder.BuilderInput(mod, target)] * 2)
        assert [r.error_msg for r in results] == [None, None]
        artifacts += [r.artifact_path for r in results]
        pools.append(builder.pool)
    assert all(os.path.isfile(path) for path in artifacts)
    assert len(set(artifacts)) == len(artifacts)  # each build exported to a folder of its own
    assert pools[0] is pools[1] and pools[2] is not pools[0]  # kept for two calls, then a fresh one
    with_params = builder.build([ms.builder.BuilderInput(mod, target, params={"a": tvm.runtime.tensor(np.ones(256, "float32"))})])
    assert "no bound params" in with_params[0].error_msg
    for path in artifacts:
        shutil.rmtree(os.path.dirname(path))

    exported = os.path.join(os.path.dirname(os.path.dirname(artifacts[0])), "*", os.path.basename(artifacts[0]))
    before = set(glob.glob(exported))
    args_info = ms.arg_info.ArgInfo.from_prim_func(mod["main"])
    measured = build_and_run([tvm.s_tir.Schedule(mod)], target, args_info, builder, make_runner(config))
    assert measured[0].error is None and len(measured[0].run_secs) == 3 and all(s > 0 for s in measured[0].run_secs)
    assert set(glob.glob(exported)) == before  # its artifact was run, then removed


def test_tune_a_network_end_to_end_reports_failed_model_calls_and_checks_against_pytorch(ms_model, tmp_path, capsys):
    """One whole-network tune (the slowest thing a test does, so one run checks three things): failed
    cost-model calls are counted and printed, the model gets the descriptor it was trained with, and the
    compiled network's output matches PyTorch's."""
    from safetensors.torch import load_file, save_file

    from crosstune.cli import main

    model_dir = tmp_path / "model"
    ms_model.save(model_dir)
    weights = load_file(str(model_dir / "weights.safetensors"))  # NaN weights: every prediction fails
    save_file({k: v.fill_(float("nan")) if k.startswith("head") else v for k, v in weights.items()},
              str(model_dir / "weights.safetensors"))
    config = json.loads((model_dir / "config.json").read_text())
    config["hardware_descriptors"]["local-sse-1c"]["mem_bandwidth_gbs"] *= 2  # measured on another day
    (model_dir / "config.json").write_text(json.dumps(config))
    main(["tune", "--network", "bert_layer", "--model", str(model_dir), "--trials", "8",
          "--hardware-config", "local-sse-1c", "--out", str(tmp_path / "run")])
    printed = capsys.readouterr().out
    saved = json.loads((tmp_path / "run" / "tune.json").read_text())
    assert saved["cost_model_failures"] >= 1 and saved["cost_model_failures"] == saved["cost_model_predict_calls"]
    assert f"cost-model calls failed: {saved['cost_model_failures']}" in printed
    assert "local-sse-1c: using the descriptor the model was trained with" in printed
    assert saved["output_matches"], saved["output_max_abs_error"]
    assert saved["latency_ms"] > 0 and saved["pytorch_latency_ms"] > 0 and saved["trials"] >= 1
    assert (tmp_path / "run" / "tune-curve.png").is_file()
    # the run's database seeds another: its fastest programs are measured first, inside the budget
    from crosstune.tvm.convert import plain
    from crosstune.tvm.seeds import read_seed_database

    seeds = read_seed_database(tmp_path / "run")
    expected = {shash: [plain(t) for t in seeds.traces(shash, 2)] for shash in seeds.by_workload}
    seeded = sum(len(traces) for traces in expected.values())
    main(["tune", "--network", "bert_layer", "--model", "xgb", "--trials", str(seeded + 1), "--hardware-config",
          "local-sse-1c", "--seeds-from", str(tmp_path / "run"), "--seeds-per-task", "2", "--out", str(tmp_path / "seeded")])
    assert f"note: {seeded} seed programs of {len(expected)} tasks measured first" in capsys.readouterr().out
    again = json.loads((tmp_path / "seeded" / "tune.json").read_text())
    assert again["curve"][0]["seeds"] == again["curve"][0]["trials"] == seeded and again["trials"] == seeded + 1
    shashes = [json.loads(line)[0] for line in (tmp_path / "seeded" / "database_workload.json").read_text().splitlines()]
    measured: dict[str, list] = {}
    for line in (tmp_path / "seeded" / "database_tuning_record.json").read_text().splitlines()[:seeded]:
        record = json.loads(line)
        measured.setdefault(shashes[record[0]], []).append(plain(record[1][0]))
    assert measured == expected  # each task's two fastest programs of the run, measured first
    assert again["output_matches"]
    # tune-compare's fair timing of arms (a fresh process, interleaved rounds) on the same database
    from crosstune.tvm.arm_timing import main as time_arms_main

    assert time_arms_main([str(tmp_path), "run", "--network", "bert_layer", "--hardware-config", "local-sse-1c",
                           "--rounds", "2", "--json", str(tmp_path / "timing.json")]) == 0
    timing = json.loads((tmp_path / "timing.json").read_text())
    arm = timing["arms"]["run"]
    assert arm["output_matches"] and len(arm["latency_ms_rounds"]) == 2 and arm["latency_ms"] > 0
    assert arm["pytorch_latency_ms"] > 0 and len(timing["loadavg_end"]) == 3
    assert time_arms_main([str(tmp_path), "run", "missing", "--network", "bert_layer", "--hardware-config",
                           "local-sse-1c", "--json", str(tmp_path / "t2.json")]) == 2
    assert "no tuning database for missing" in capsys.readouterr().err
    # tune-checkpoints on the same database, as if two arms had tuned it: the baseline's final network, its
    # control and the other arm cut at half the baseline's time, each timed beside the baseline's; at a fifth
    # of it no task had had a round, so that checkpoint is reported but not compiled
    from crosstune.tvm.checkpoints import format_checkpoints, time_checkpoints

    compare = tmp_path / "compare"
    records = (tmp_path / "run" / "database_tuning_record.json").read_text().splitlines()
    assert len(records) > 3
    for arm in ("xgb", "crosstune"):
        shutil.copytree(tmp_path / "run", compare / arm)
        curve = [{"seconds": 10.0, "trials": 2, "task": "t0", "estimated_latency_ms": float("nan")},
                 {"seconds": 15.0, "trials": 3, "task": "t1", "estimated_latency_ms": 4.0},
                 {"seconds": 40.0, "trials": len(records), "task": "t1", "estimated_latency_ms": 3.0}]
        state = _arm_state(curve)
        state["sessions"][0]["speed_probe_ms"] = {"xgb": 10.0, "crosstune": 13.0}[arm]  # 30% slower: said
        (compare / arm / "state.json").write_text(json.dumps(state))
    result = time_checkpoints(compare, fractions=[0.2, 0.5], rounds=2, trial_counts=[3])
    early, half, by_trials = result["checkpoints"]
    assert (early["trials"], early["tasks_measured"], early["output_matches"]) == (0, 0, None)
    assert early["within_5pct"] == "no" and not (compare / "checkpoints" / "crosstune-at-20pct").exists()
    assert (half["arm"], half["trials"], half["tasks_measured"], half["estimated_latency_ms"]) == ("crosstune", 3, 2, 4.0)
    cut = compare / "checkpoints" / "crosstune-at-50pct" / "database_tuning_record.json"
    assert cut.read_text().splitlines() == records[:3]
    assert half["output_matches"] and len(half["ratio_rounds"]) == 2 and half["latency_ms"] > 0
    control, base = result["control"], result["baseline"]
    assert len(base["latency_ms_timings"]) == 6 and base["output_matches"]  # one beside each of 3 networks, 2 rounds
    assert control["ratio_median"] == pytest.approx(np.median(control["ratio_rounds"])) and control["output_matches"]
    assert all(any(mine / b == pytest.approx(r) for b in base["latency_ms_timings"])
               for mine, r in zip(control["latency_ms_rounds"], control["ratio_rounds"]))
    assert json.loads((compare / "tune-checkpoints.json").read_text())["checkpoints"][1]["trials"] == 3
    # the cut after 3 trials is the same database, named by its count
    assert (by_trials["at_trials"], by_trials["trials"], by_trials["seconds"]) == (3, 3, 15.0)
    assert by_trials["output_matches"] and (compare / "checkpoints" / "crosstune-at-3-trials").is_dir()
    table = format_checkpoints(result)
    assert "crosstune after 3 trials (37.5%)" in table and "speed probe xgb: 10 ms; crosstune: 13 ms" in table
    assert "crosstune at 20%" in table and "not compiled" in table
    assert "crosstune at 50%" in table and "xgb-again (control)" in table and "2/2" in table


def _arm_state(curve: list[dict]) -> dict:
    """A finished arm's state.json as tune-compare writes it, reduced to what tune-checkpoints reads."""
    from crosstune.tvm.rounds import this_machine

    return {"settings": {"network": "bert_layer", "hardware_config": "local-sse-1c"}, "done": True,
            "trials": curve[-1]["trials"], "tuning_seconds": curve[-1]["seconds"], "curve": curve,
            "tasks": [{"name": "t0"}, {"name": "t1"}], "sessions": [{"machine": this_machine()}]}


def test_a_checkpoint_database_holds_the_arms_first_records_and_nothing_else(tmp_path):
    """An arm's database file lists its trials in the order they were measured, so its first N records are
    the database as it stood after N trials; the cut is written as a unit and replaces an earlier cut."""
    from tvm.s_tir import meta_schedule as ms

    from crosstune.tvm.checkpoints import tasks_measured_at, trials_at, write_prefix_database

    arm = tmp_path / "arm"
    shutil.copytree(os.path.join(os.path.dirname(__file__), "data", "ms-resnet18-2tasks"), arm)
    lines = (arm / "database_tuning_record.json").read_text().splitlines()
    curve = [{"seconds": 10.0, "trials": 8, "task": "a"}, {"seconds": 30.0, "trials": 20, "task": "b"},
             {"seconds": 31.0, "trials": 24, "task": "a"}]
    assert [trials_at(curve, s) for s in (5, 10, 29.9, 30, 100)] == [0, 8, 8, 20, 24]
    assert [tasks_measured_at(curve, s) for s in (5, 10, 30)] == [0, 1, 2]
    out = tmp_path / "cut"
    assert write_prefix_database(arm, 24, out) == 24
    assert write_prefix_database(arm, 8, out) == 8  # replaces the longer cut
    assert (out / "database_tuning_record.json").read_text().splitlines() == lines[:8]
    assert (out / "database_workload.json").read_bytes() == (arm / "database_workload.json").read_bytes()
    database = ms.database.JSONDatabase(str(out / "database_workload.json"), str(out / "database_tuning_record.json"),
                                        allow_missing=False)
    assert len(database.get_all_tuning_records()) == 8
    assert write_prefix_database(arm, 100, tmp_path / "all") == len(lines)  # the caller says when that is short
    assert not list(tmp_path.glob(".*staging"))


def test_a_cut_by_trials_holds_the_tasks_begun_and_the_time_of_the_round_that_measured_the_last_one():
    from crosstune.tvm.checkpoints import format_checkpoints, plan_by_trials

    curve = [{"seconds": 10.0, "trials": 8, "task": "a", "estimated_latency_ms": float("nan")},
             {"seconds": 30.0, "trials": 20, "task": "b", "estimated_latency_ms": 5.0},
             {"seconds": 31.0, "trials": 24, "task": "a", "estimated_latency_ms": 4.0}]
    state = {"curve": curve, "trials": 24}
    cuts = plan_by_trials({"arm": state}, [8, 9, 20, 22, 100], base_seconds=100.0)
    assert [(c.trials, c.seconds, c.tasks_measured) for c in cuts] == [
        (8, 10.0, 1), (9, 30.0, 2), (20, 30.0, 2), (22, 31.0, 2), (24, 31.0, 2)]
    assert [c.fraction for c in cuts] == [0.1, 0.3, 0.3, 0.31, 0.31]
    estimates = [c.estimated_latency_ms for c in cuts]  # the curve's at or before the cut: none inside a round
    assert np.isnan(estimates[:2]).all() and estimates[2:] == [5.0, 5.0, 4.0]
    assert cuts[1].folder.endswith("arm-at-9-trials") and cuts[-1].at_trials == 100
    row = {"arm": "arm", "fraction": 0.31, "trials": 24, "at_trials": 100, "seconds": 31.0, "tasks_measured": 2,
           "tasks": 2, "output_matches": None, "reaches_baseline_final": "no", "within_5pct": "no"}
    result = {"baseline": {"trials": 30, "tuning_seconds": 100.0, "latency_ms": 1.0, "output_matches": True},
              "control": {"latency_ms": 1.0, "ratio_median": 1.0, "ratio_min": 1.0, "ratio_max": 1.0,
                          "reaches_baseline_final": "yes", "within_5pct": "yes", "output_matches": True},
              "checkpoints": [row], "notes": []}
    assert "arm after 24 (its end, not 100) trials (31.0%)" in format_checkpoints(result)


def test_a_checkpoint_verdict_within_the_controls_noise_is_unclear():
    from crosstune.tvm.checkpoints import verdict

    # the control (the baseline timed against itself) read 1.02: differences up to 0.02 are noise
    assert [verdict(r, 1.0, 0.02) for r in (0.97, 0.99, 1.0, 1.02, 1.03)] == ["yes", "unclear", "unclear", "unclear", "no"]
    assert verdict(1.07, 1.05, 0.0) == "no" and verdict(1.05, 1.05, 0.0) == "yes"
    assert verdict(float("nan"), 1.05, 0.0) == "no"  # not compiled: some task never had a round


def test_a_checkpoint_too_early_to_compile_does_not_fail_the_output_check():
    from crosstune.tvm.checkpoints import outputs_match

    def result(baseline, *checkpoints):
        return {"baseline": {"output_matches": baseline}, "checkpoints": [{"output_matches": c} for c in checkpoints]}

    assert outputs_match(result(True, None, True))  # None: before every task had a round, not compiled
    assert not outputs_match(result(True, None, False))
    assert not outputs_match(result(False, True))


def test_tune_checkpoints_refuses_a_folder_that_is_not_a_tuning_run_with_one_line(tmp_path, capsys):
    from crosstune.cli import main

    assert main(["tune-checkpoints", str(tmp_path)]) == 2
    assert "no baseline arm (xgb/state.json)" in capsys.readouterr().err
    curve = [{"seconds": 10.0, "trials": 2, "task": "t0", "estimated_latency_ms": 1.0}]
    (tmp_path / "xgb").mkdir()
    (tmp_path / "xgb" / "state.json").write_text(json.dumps(_arm_state(curve)))
    assert main(["tune-checkpoints", str(tmp_path)]) == 2
    assert "no arm besides xgb" in capsys.readouterr().err
    shutil.copytree(tmp_path / "xgb", tmp_path / "crosstune")
    assert main(["tune-checkpoints", str(tmp_path), "--arms", "crosstune-typo"]) == 2
    assert "no arm crosstune-typo (its arms: crosstune)" in capsys.readouterr().err
    assert main(["tune-checkpoints", str(tmp_path)]) == 2  # states, but no databases
    assert "no tuning database for xgb, crosstune" in capsys.readouterr().err
    assert main(["tune-checkpoints", str(tmp_path), "--at", "0.15,0"]) == 2
    assert "0 is out of range" in capsys.readouterr().err


def test_a_configuration_of_another_cpu_is_scored_as_unseen_hardware(ms_model):
    """local-sse-1c is a name every CPU has: the trained descriptor stands for the same CPU measured on
    another day, not for another vendor's chip under that name."""
    from dataclasses import replace

    from crosstune.tvm.costmodel import scoring_descriptor

    trained = ms_model.hardware_descriptor("local-sse-1c")
    assert scoring_descriptor(ms_model, "local-sse-1c", trained) == (trained, None)
    another_day = replace(trained, mem_bandwidth_gbs=trained.mem_bandwidth_gbs * 2)
    used, note = scoring_descriptor(ms_model, "local-sse-1c", another_day)
    assert used == trained and "the descriptor the model was trained with" in note
    other_cpu = replace(trained, vendor="OtherVendor", arch="Other CPU 9000")
    used, note = scoring_descriptor(ms_model, "local-sse-1c", other_cpu)
    assert used == other_cpu and "another CPU" in note and "Other CPU 9000" in note
    assert scoring_descriptor(ms_model, "local-avx2-2c", other_cpu) == (other_cpu, None)  # never trained on


def test_an_unfinished_arm_goes_on_only_on_the_machine_it_was_tuned_on():
    from crosstune.tvm.rounds import resume_refusal, this_machine

    here = this_machine()

    def state(done, *machines):
        return {"done": done, "sessions": [{"loadavg_start": [0.1], **({"machine": m} if m else {})} for m in machines]}

    assert resume_refusal(state(False), here) is None  # a fresh arm
    assert resume_refusal(state(False, None), here) is None  # from before machines were recorded
    assert resume_refusal(state(False, here), here) is None
    why = resume_refusal(state(False, "GenuineIntel Xeon"), here)
    assert "GenuineIntel Xeon" in why and here in why
    assert resume_refusal(state(True, "GenuineIntel Xeon"), here) is None  # finished: only re-read


def test_compiled_arms_are_timed_once_and_only_with_their_databases(tmp_path):
    """tune-compare's last step: an arm whose database lost its trials is left out and said so; a timing of
    the same arms, trial counts and CPU is re-used; a failed timing is reported, not raised."""
    from crosstune.tvm.arm_timing import TIMING_FILE, time_in_fresh_process

    said = []
    args = ("resnet18", "local-sse-2c", "CPU A")
    assert time_in_fresh_process(tmp_path, {"xgb": 7}, {"xgb": 0}, *args, print_fn=said.append) == {}
    assert "xgb: not compiled or timed: its database holds 0 of its 7 trials" in said
    earlier = {"machine": "CPU A", "arms": {"xgb": {"trials": 7, "latency_ms": 5.0}, "random": {"trials": 7}}}
    (tmp_path / TIMING_FILE).write_text(json.dumps(earlier))
    assert time_in_fresh_process(tmp_path, {"xgb": 7, "random": 7}, {"xgb": 7, "random": 9}, *args,
                                 print_fn=said.append)["xgb"]["latency_ms"] == 5.0
    said.clear()  # one more trial, or another CPU: timed again; here the databases are missing, so it fails
    assert time_in_fresh_process(tmp_path, {"xgb": 8, "random": 7}, {"xgb": 8, "random": 7}, *args,
                                 print_fn=said.append) == {}
    assert any("no tuning database for xgb, random" in line for line in said), said
    assert "timing the compiled arms failed (exit code 2" in said[-1]


def test_convergence_rule_and_the_two_task_choices():
    from crosstune.tvm.rounds import Arm, converged, estimated_latency_ms
    from crosstune.tvm.tune_compare import _fraction_without, seconds_on_tasks

    def curve(points):
        return [{"trials": t, "seconds": float(t), "estimated_latency_ms": ms} for t, ms in points]

    assert not converged(curve([(100, float("nan")), (400, 10.0)]))  # no estimate where the last 25% began
    assert converged(curve([(100, 10.0), (300, 9.9), (400, 9.85)]))  # 1.5% over the last 25% of trials
    assert not converged(curve([(100, 10.0), (300, 10.0), (400, 9.7)]))  # 3%
    heavy = {"weight": 4.0, "history": [2e-3, 1.8e-3]}
    light = {"weight": 1.0, "history": [1e-3, 0.9e-3]}
    assert Arm._weighted_score(heavy) > Arm._weighted_score(light)
    assert Arm._gradient_score(heavy) > Arm._gradient_score(light)
    stalled_once = {"weight": 3.0, "history": [3e-3, 2e-3, 2e-3]}
    stalled_long = {"weight": 3.0, "history": [3e-3, 2e-3, 2e-3, 2e-3, 2e-3, 2e-3]}
    lighter = {"weight": 2.5, "history": [3e-3, 2e-3, 2e-3]}
    assert Arm._weighted_score(stalled_once) > Arm._weighted_score(lighter)  # one stall: the heavier first
    assert Arm._weighted_score(stalled_long) < Arm._weighted_score(lighter)  # not round after round
    tasks = [{"weight": 2.0, "best_seconds": 1e-3}, {"weight": 1.0, "best_seconds": None}]
    assert np.isnan(estimated_latency_ms(tasks))  # a task without a measured program: no network estimate
    tasks[1]["best_seconds"] = 4e-3
    assert estimated_latency_ms(tasks) == pytest.approx(6.0)
    rounds = [{"seconds": 10.0, "task": "a"}, {"seconds": 25.0, "task": "b"},
              {"seconds": 30.0, "task": None},  # trials of a round a kill interrupted, counted on restart
              {"seconds": 37.0, "task": "b"}, {"seconds": 40.0, "task": "a"}]
    assert seconds_on_tasks(rounds, {"b"}) == pytest.approx(22.0)  # 15 s + 7 s
    assert seconds_on_tasks(rounds, {"b"}, until=30.0) == pytest.approx(15.0)  # the round ending at 37 s not yet
    assert _fraction_without(37.0, rounds, {"b"}, 100.0, 50.0) == pytest.approx((37 - 22) / 50)
    assert np.isnan(_fraction_without(float("nan"), rounds, {"b"}, 100.0, 50.0))  # never reached


def test_one_program_tasks_share_the_lowest_reading_of_any_arm():
    from crosstune.tvm.tune_compare import lowest_measurements

    arms = {"xgb": [{"name": "e", "best_seconds": 28e-3}, {"name": "conv", "best_seconds": 5e-3}],
            "crosstune": [{"name": "e", "best_seconds": 0.15e-3}, {"name": "conv", "best_seconds": 4e-3}],
            "stopped": [{"name": "e", "best_seconds": None}, {"name": "conv", "best_seconds": None}]}
    assert lowest_measurements(arms, {"e"}) == {"e": 0.15e-3}  # a tuned task is never shared
    assert lowest_measurements(arms, set()) == {}


def test_one_program_tasks_latencies_shared_with_the_baseline():
    from crosstune.tvm.tune_compare import first_reach, shared_latency_curve

    # task "e" has one program: measured at 30 us by this arm, 50 us by the baseline; "c" is searched
    tasks = [{"name": "c", "weight": 2.0, "history": [1e-3, 0.8e-3], "best_seconds": 0.8e-3},
             {"name": "e", "weight": 3.0, "history": [30e-6], "best_seconds": 30e-6}]
    curve = [{"seconds": 5.0, "trials": 1, "task": "e", "estimated_latency_ms": float("nan")},
             {"seconds": 10.0, "trials": 9, "task": "c", "estimated_latency_ms": 2.09},
             {"seconds": 20.0, "trials": 17, "task": "c", "estimated_latency_ms": 1.69}]
    shared = shared_latency_curve(curve, tasks, {"e": 50e-6})
    assert np.isnan(shared[0]["estimated_latency_ms"])
    assert [p["estimated_latency_ms"] for p in shared[1:]] == pytest.approx([2.15, 1.75])  # + 3 × 20 us
    assert first_reach(curve, 1.72)["seconds"] == 20.0 and np.isnan(first_reach(shared, 1.72)["seconds"])
    unchanged = shared_latency_curve(curve, tasks, {"e": 30e-6})  # its own measurement
    np.testing.assert_array_equal([p["estimated_latency_ms"] for p in unchanged], [p["estimated_latency_ms"] for p in curve])
    # measured only in a round a kill interrupted (no round of its own in the curve): its final best counts
    killed = [{**curve[1], "task": None}, curve[2]]
    assert [p["estimated_latency_ms"] for p in shared_latency_curve(killed, tasks, {"e": 50e-6})] == pytest.approx([2.15, 1.75])


def test_a_round_that_finds_at_most_half_the_programs_asked_for_stops_its_task():
    from crosstune.tvm.rounds import exhaustion_stop

    assert exhaustion_stop(33, 64, True, False) is None  # more than half: the space still gives
    assert exhaustion_stop(32, 64, True, False) == "search space exhausted"
    assert exhaustion_stop(0, 64, False, False) == "search space exhausted"
    assert exhaustion_stop(1, 1, True, False) is None  # a 1-trial round that got its program
    assert exhaustion_stop(1, 1, True, True) == "its one program is measured"
    assert exhaustion_stop(1, 64, False, True) == "its one program failed to build or run"
    assert "failed" in exhaustion_stop(3, 64, False, False)  # says why the estimate stays undefined
    assert exhaustion_stop(40, 64, False, False) is None  # many failures, but the search still gives


def test_the_report_says_when_sessions_ran_at_different_machine_speeds():
    from crosstune.tvm.rounds import machine_speed_ms, speed_mismatch

    assert speed_mismatch({"xgb": [100.0], "crosstune": [112.0, 108.0]}) is None  # within 15%
    assert speed_mismatch({"xgb": [100.0], "crosstune": []}) is None  # nothing to compare
    said = speed_mismatch({"xgb": [190.0], "crosstune": [100.0]})
    assert "1.90x" in said and "xgb: 190 ms" in said and "one session" in said and "--at-trials" in said
    assert speed_mismatch({"xgb": [100.0, 130.0]}) is not None  # one arm's own sessions differ too
    assert machine_speed_ms(repeats=1) > 0


def test_a_first_round_is_small_only_with_the_small_first_round_option(tmp_path):
    from types import SimpleNamespace

    from crosstune.tvm.rounds import DEFAULT_HEAD_START, Arm, ArmSettings

    def arm(head_start, rounds, trials=0, light=False, seeds=0):
        settings = ArmSettings("crosstune", "model", "resnet18", "local-avx2-2c", ["conv2d"], round_trials=64,
                               first_round_trials=16, head_start=list(head_start))
        return SimpleNamespace(settings=settings, state={"trials": trials, "tasks": [{"rounds": rounds}]},
                               one_program=lambda index: False, light=lambda index: light,
                               seed_traces=lambda index: [["trace"]] * seeds if rounds == 0 else [])

    assert "small-first-round" not in DEFAULT_HEAD_START and "light-first-round" in DEFAULT_HEAD_START
    assert Arm.round_size(arm(DEFAULT_HEAD_START, rounds=0), 0, budget=1000) == 64  # the default: a full round...
    assert Arm.round_size(arm(DEFAULT_HEAD_START, rounds=0, light=True), 0, budget=1000) == 16  # ...unless light
    assert Arm.round_size(arm(["small-first-round"], rounds=0), 0, budget=1000) == 16
    assert Arm.round_size(arm(["small-first-round"], rounds=1), 0, budget=1000) == 64  # only the first
    assert Arm.round_size(arm(DEFAULT_HEAD_START, rounds=3, trials=990), 0, budget=1000) == 10  # the budget's rest
    # light-first-round: small only for a light task, and only its first round
    assert Arm.round_size(arm(["light-first-round"], rounds=0, light=True), 0, budget=1000) == 16
    assert Arm.round_size(arm(["light-first-round"], rounds=0, light=False), 0, budget=1000) == 64
    assert Arm.round_size(arm(["light-first-round"], rounds=1, light=True), 0, budget=1000) == 64
    assert Arm.round_size(arm(["early-stop"], rounds=0, light=True), 0, budget=1000) == 64  # not without the option
    # a seeded first round measures the seeds, whatever the round would have been, within the budget
    from crosstune.tvm.seeds import SeedDatabase

    killed = SimpleNamespace(seeds=SeedDatabase(tmp_path, {"w": [(1.0, ["trace"])]}),
                             state={"tasks": [{"rounds": 0, "trials": 3}]})
    assert Arm.seed_traces(killed, 0) == []  # a killed seed round's trials are re-used, not measured again
    assert Arm.round_size(arm(DEFAULT_HEAD_START, rounds=0, seeds=5), 0, budget=1000) == 5
    assert Arm.round_size(arm(DEFAULT_HEAD_START, rounds=0, light=True, seeds=40), 0, budget=1000) == 40
    assert Arm.round_size(arm(DEFAULT_HEAD_START, rounds=0, trials=997, seeds=5), 0, budget=1000) == 3
    # trimmed-first-round: a heavy task's first round is three quarters of a round; a light one keeps its 16
    trimmed = [*DEFAULT_HEAD_START, "trimmed-first-round"]
    assert Arm.round_size(arm(trimmed, rounds=0), 0, budget=1000) == 48
    assert Arm.round_size(arm(trimmed, rounds=0, light=True), 0, budget=1000) == 16
    assert Arm.round_size(arm(trimmed, rounds=1), 0, budget=1000) == 64


def test_light_search_lightens_only_one_program_rounds_and_light_first_rounds():
    from types import SimpleNamespace

    from crosstune.tvm.rounds import ONE_PROGRAM_SEARCH, Arm, ArmSettings, SearchSettings

    def arm(head_start, rounds=0, light=False, one_program=False):
        settings = ArmSettings("crosstune", "model", "mobilenet_v2", "local-avx2-2c", ["conv2d"],
                               head_start=list(head_start), search=SearchSettings(512, 4, 50))
        return SimpleNamespace(settings=settings, state={"tasks": [{"rounds": rounds}]},
                               _contexts_by_search={"made": []} if {"light-search", "lean-first-pass"} & set(head_start) else {},
                               one_program=lambda index: one_program, light=lambda index: light)

    both = ["one-program-tasks", "light-first-round", "light-search"]
    assert Arm.round_search(arm(both, one_program=True), 0) == ONE_PROGRAM_SEARCH
    assert Arm.round_search(arm(both, light=True), 0) == SearchSettings(256, 2, 50)  # half the arm's search
    assert Arm.round_search(arm(both, light=True, rounds=1), 0) is None  # only its first round
    assert Arm.round_search(arm(both), 0) is None  # a heavy task keeps the full search
    assert Arm.round_search(arm(["one-program-tasks", "light-first-round"], light=True), 0) is None  # option off
    # a one-program task searched for a full round (one-program-tasks off) keeps the full search too
    assert Arm.round_search(arm(["light-first-round", "light-search"], one_program=True), 0) is None
    # lean-first-pass: every task's first round gets the halved search, heavy ones too; later rounds the arm's
    lean = ["one-program-tasks", "light-first-round", "light-search", "lean-first-pass"]
    assert Arm.round_search(arm(lean), 0) == SearchSettings(256, 2, 50)
    assert Arm.round_search(arm(lean, rounds=1), 0) is None
    assert Arm.round_search(arm(lean, one_program=True), 0) == ONE_PROGRAM_SEARCH


def test_explore_on_stall_draws_half_a_stalled_tasks_round_at_random():
    from types import SimpleNamespace

    from crosstune.tvm.rounds import ONE_PROGRAM_SEARCH, Arm, ArmSettings, SearchSettings

    def arm(head_start, history, one_program=False):
        settings = ArmSettings("crosstune", "model", "mobilenet_v2", "local-avx2-2c", ["conv2d"],
                               head_start=list(head_start), search=SearchSettings(512, 4, 50))
        return SimpleNamespace(settings=settings, state={"tasks": [{"rounds": len(history), "history": history}]},
                               _contexts_by_search={"made": []}, one_program=lambda index: one_program,
                               light=lambda index: False)

    explore = ["one-program-tasks", "light-search", "explore-on-stall"]
    assert Arm.round_search(arm(explore, [2e-4, 2e-4]), 0) == SearchSettings(512, 4, 50, eps_greedy=0.5)
    assert Arm.round_search(arm(explore, [3e-4, 2e-4, 2e-4]), 0).eps_greedy == 0.5  # its last round gained nothing
    assert Arm.round_search(arm(explore, [3e-4, 2e-4]), 0) is None  # it gained: the model's picks again
    assert Arm.round_search(arm(explore, [2e-4]), 0) is None  # one round: nothing to compare
    assert Arm.round_search(arm(explore, [None, None]), 0) is None  # nothing ran yet
    assert Arm.round_search(arm(explore, [2e-4, 2e-4], one_program=True), 0) == ONE_PROGRAM_SEARCH
    assert Arm.round_search(arm(explore[:2], [2e-4, 2e-4]), 0) is None  # option off


def test_arm_settings_saved_before_eps_greedy_existed_still_resume():
    from crosstune.tvm.rounds import ArmSettings, SearchSettings

    saved = ArmSettings("xgb", "xgb", "resnet18", "local-avx2-2c", ["conv2d"]).to_json()
    assert "eps_greedy" not in saved["search"]  # what the arms saved before session 38 hold
    widened = ArmSettings("xgb", "xgb", "resnet18", "local-avx2-2c", ["conv2d"],
                          search=SearchSettings(eps_greedy=0.5))
    assert widened.to_json()["search"]["eps_greedy"] == 0.5


def test_light_tasks_are_those_under_two_percent_of_the_weighted_flops():
    from types import SimpleNamespace

    import tvm
    from tvm import te

    from crosstune.tvm.rounds import Arm

    def elementwise(n):  # n FLOPs, as operator_of counts an elementwise task
        a = te.placeholder((n,), name="a", dtype="float32")
        return SimpleNamespace(mod=tvm.IRModule({"main": te.create_prim_func([a, te.compute((n,), lambda i: a[i] + 1.0, name="T_add")])}))

    # the small task is 1% of the FLOPs once, 3% when it occurs three times in the network
    fake = SimpleNamespace(contexts=[elementwise(990), elementwise(10)], weights=[1.0, 1.0], _flop_shares=None)
    assert not Arm.light(fake, 0) and Arm.light(fake, 1)
    fake = SimpleNamespace(contexts=[elementwise(990), elementwise(10)], weights=[1.0, 3.0], _flop_shares=None)
    assert not Arm.light(fake, 0) and not Arm.light(fake, 1)


def test_a_crosstune_variant_gets_a_folder_name_of_its_own():
    from crosstune.tvm.rounds import HEAD_START_OPTIONS, SearchSettings
    from crosstune.tvm.tune_compare import crosstune_arm_name

    assert crosstune_arm_name(list(reversed(HEAD_START_OPTIONS[:4]))) == "crosstune"
    assert crosstune_arm_name(list(HEAD_START_OPTIONS)) == ("crosstune-with-light-first-round+online-trees+light-search+"
                                                             "explore-on-stall+lean-first-pass+trimmed-first-round")
    assert crosstune_arm_name([]) == "crosstune-none"
    assert crosstune_arm_name(["early-stop", "small-first-round"]) == "crosstune-small-first-round+early-stop"
    assert crosstune_arm_name(["early-stop", "weighted-rounds", "one-program-tasks"]) == "crosstune-without-small-first-round"
    lean = SearchSettings(population_size=256, genetic_num_iters=2)
    assert crosstune_arm_name(list(HEAD_START_OPTIONS[:4]), lean) == "crosstune-search256x2"
    assert crosstune_arm_name(["early-stop"], lean) == "crosstune-early-stop-search256x2"
    # the later option only adds a suffix: the names of arms archived before it stay what they were
    assert crosstune_arm_name(["early-stop", "weighted-rounds", "one-program-tasks", "light-first-round"], lean) \
        == "crosstune-without-small-first-round-with-light-first-round-search256x2"
    assert crosstune_arm_name(["one-program-tasks", "weighted-rounds", "early-stop", "light-first-round", "online-trees"],
                              lean) == "crosstune-without-small-first-round-with-light-first-round+online-trees-search256x2"


def test_tune_compare_refuses_bad_options_with_one_line(capsys, tmp_path):
    from crosstune.cli import main

    common = ["tune-compare", "--network", "resnet18", "--hardware-config", "local-sse-2c", "--trials", "4"]
    assert main([*common, "--out", "unused", "--arms", "crosstune,random"]) == 2
    assert "xgb (the baseline) included" in capsys.readouterr().err
    assert main([*common, "--out", "unused", "--head-start", "early-stop,fast"]) == 2
    err = capsys.readouterr().err
    assert "unknown fast" in err and len(err.strip().splitlines()) == 1
    assert main([*common, "--out", str(tmp_path / "nothing-here"), "--report-only"]) == 2
    assert "holds no baseline arm" in capsys.readouterr().err
    assert not (tmp_path / "nothing-here").exists()  # the folder it claimed is removed again
    assert main([*common, "--out", "unused", "--report-only", "--overwrite"]) == 2
    assert "cannot be combined with --overwrite" in capsys.readouterr().err
    assert main([*common, "--out", str(tmp_path / "m"), "--model", "M", "--pretrain-on", "all"]) == 2
    assert "--model is already trained" in capsys.readouterr().err
    assert main([*common, "--out", str(tmp_path / "c"), "--checkpoints", "0.15,0"]) == 2
    err = capsys.readouterr().err
    assert "--checkpoints" in err and len(err.strip().splitlines()) == 1 and not (tmp_path / "c").exists()
    assert main([*common, "--out", str(tmp_path / "s"), "--seeds-from", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "not a MetaSchedule database folder" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "s").exists()
    from conftest import MS_DB

    assert main([*common, "--out", str(tmp_path / "x"), "--arms", "xgb", "--seeds-from", str(MS_DB)]) == 2
    assert "--seeds-from seeds the crosstune arm" in capsys.readouterr().err
    assert main([*common, "--out", str(tmp_path / "own"), "--seeds-from", str(tmp_path / "own" / "xgb")]) == 2
    err = capsys.readouterr().err
    assert "inside this run's --out" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "own").exists()


def test_tune_compare_says_whether_a_given_model_saw_the_tuned_configuration(tmp_path, tiny_dataset):
    """--model: what it was trained on is read from its config.json, and the report's pretrain entry and
    printed line say whether the run is zero-shot for the tuned configuration."""
    from crosstune.dataset import load_dataset
    from crosstune.experiment import fit_model
    from crosstune.train import TrainConfig
    from crosstune.tvm.tune_compare import CompareSettings, _pretrained_model

    ds = load_dataset([str(tiny_dataset)])
    model, _ = fit_model("crossfeat", ds, TrainConfig(epochs=1))
    model.save(tmp_path / "m")
    seen = sorted(ds.hardware_names)
    lines = []
    for config, zero_shot in ((seen[0], False), ("local-avx512-2c", True)):
        settings = CompareSettings("resnet18", config, tmp_path / "run", model=str(tmp_path / "m"))
        path, info = _pretrained_model(settings, lines.append)
        assert path == str(tmp_path / "m") and info["pretrained_on"] == seen and info["zero_shot"] is zero_shot
    assert lines[0].endswith("NOT zero-shot: " + seen[0] + "'s own records were in its training "
                             "(a CPU other than the one that measured them is still unseen hardware)")
    assert lines[1].endswith("; zero-shot for local-avx512-2c")


def test_tune_compare_resumes_after_a_kill_and_reports_time_fractions_per_arm(tmp_path):
    """One comparison (the arms tune two small tasks and one with a single program; one run checks all of
    it, since each costs minutes): killed in the baseline's first chunk, resumed with the trials re-used,
    then every arm's report."""
    import re

    out = tmp_path / "run"
    command = [sys.executable, "-m", "crosstune", "tune-compare", "--network", "resnet18", "--hardware-config",
               "local-avx2-2c", "--trials", "7", "--round-trials", "3", "--first-round-trials", "2",
               "--chunk-trials", "3", "--fine-tune-every", "2", "--fine-tune-epochs", "2", "--epochs", "1", "--tasks", "mean,max_pool2d,fused_batch_norm_relu",
               "--population", "16", "--genetic-iters", "1", "--skip-end-to-end", "--out", str(out),
               # the first four options, small-first-round too (off by default), and light-search: the one-program
               # task's round then searches a handful of samples
               "--head-start", "small-first-round,one-program-tasks,weighted-rounds,early-stop,light-search"]
    state = out / "xgb" / "state.json"
    log = tmp_path / "first-run.log"
    with open(log, "wb") as stream:
        proc = subprocess.Popen(command, stdout=stream, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 600
        while not (state.is_file() and json.loads(state.read_text())["trials"] >= 3):  # the first chunk is saved
            assert proc.poll() is None, "the run ended before its first chunk: " + log.read_text()[-3000:]
            assert time.monotonic() < deadline, "no chunk finished in time"
            time.sleep(0.5)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the whole group: TVM's builder and runner workers too
        proc.wait(timeout=30)
    killed_at = json.loads(state.read_text())["trials"]
    assert 3 <= killed_at < 7
    # the stopped run's report, tuning nothing: only the arm that had started, as saved
    # --checkpoints with only the baseline in the folder: said, not silently skipped, and nothing compiled
    stopped = subprocess.run([*command, "--report-only", "--checkpoints", "0.5"], capture_output=True, text=True,
                             timeout=600)
    assert stopped.returncode == 0, stopped.stderr[-3000:]
    assert "--checkpoints: " + str(out) + " holds no arm besides xgb yet; nothing timed" in stopped.stdout
    assert not (out / "tune-checkpoints.json").exists()
    assert "xgb: not tuned (--report-only)" in stopped.stdout and "stopped before its end" in stopped.stdout
    partial = json.loads((out / "tune-compare.json").read_text())
    assert list(partial["runs"]) == ["xgb"] and partial["runs"]["xgb"]["stop_reason"] is None
    assert partial["runs"]["xgb"]["trials"] >= killed_at and len(partial["runs"]["xgb"]["sessions"]) == 1
    assert not (out / "crosstune").exists()
    with open(out / "xgb" / "database_tuning_record.json", "ab") as stream:
        stream.write(b'[0, [[[["GetSBlock", [], ["conv')  # a record cut short by the kill
    again = subprocess.run([*command, "--resume"], capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    reused = int(re.search(r"xgb: re-using (\d+) trials", again.stdout).group(1))
    assert reused >= killed_at
    assert "re-using the pre-trained crossfeat" in again.stdout  # trained before the kill, not again
    pretrain = json.loads((out / "pretrain.json").read_text())
    assert pretrain["process"] == "child" and pretrain["records"] > 0 and (out / "crossfeat-model").is_dir()
    at = command.index("--epochs") + 1  # the kept model is not handed to a run that asks for another one
    other = subprocess.run([*command[:at], "2", *command[at + 1:], "--resume"], capture_output=True, text=True,
                           timeout=900)
    assert other.returncode == 2 and "pre-trained with other settings than --epochs 2 (it used 1)" in other.stderr
    assert "Traceback" not in other.stderr
    every = subprocess.run([*command, "--pretrain-on", "all", "--resume"], capture_output=True, text=True, timeout=900)
    assert every.returncode == 2 and "than --pretrain-on all (it used others)" in every.stderr
    assert "crosstune model " + str(out / "crossfeat-model") + ": trained on" in again.stdout
    assert "; zero-shot for local-avx2-2c" in again.stdout
    assert "crosstune-with-light-search: tuning with the baseline's budget of 7 trials" in again.stdout
    assert "reach xgb final" in again.stdout  # the table
    report = json.loads((out / "tune-compare.json").read_text())
    assert report["pretrain"]["zero_shot"] is True and "local-avx2-2c" not in report["pretrain"]["pretrained_on"]
    assert (out / "tune-compare-curve.png").stat().st_size > 10_000
    runs = report["runs"]
    assert list(runs) == ["xgb", "crosstune-with-light-search", "random"]
    baseline = runs["xgb"]
    assert baseline["trials"] == report["budget_trials"] == 7 and runs["random"]["trials"] == 7
    assert baseline["trials_reused"] == reused and len(baseline["sessions"]) == 2
    assert all(x["speed_probe_ms"] > 0 for x in baseline["sessions"])  # each session's machine speed
    assert "speed_mismatch" in report  # None, or the sentence the report printed
    from crosstune.tvm.rounds import this_machine

    assert all(run["machines"] == [this_machine()] for run in runs.values())
    assert f"tuned on {this_machine()}" in again.stdout
    assert baseline["curve"][-1]["trials"] == 7
    assert 0 < runs["crosstune-with-light-search"]["trials"] <= 7  # early stop may leave some of the budget unused
    for run in runs.values():
        assert {t["name"] for t in run["tasks"] if t["rounds"]} == {"mean", "max_pool2d", "fused_batch_norm_relu"}
        single = next(t for t in run["tasks"] if t["name"] == "fused_batch_norm_relu")
        assert single["rounds"] == 1 and single["trials"] == 1 and single["stopped"]  # never searched again
        assert np.isfinite(run["best_estimated_latency_ms"])
        assert {"fraction_to_reach_baseline_final", "fraction_to_within_5pct", "trials_to_within_5pct"} <= set(run)
        assert np.isfinite(run["one_program_latency_difference_ms"])
        assert run["time_split_seconds"]["build"] > 0 and len(run["sessions"][0]["loadavg_start"]) == 3
    assert 0 < baseline["fraction_to_reach_baseline_final"] <= 1  # at the latest when it ends
    # shared: every arm's one-program task at the lowest of the arms' readings, so no arm's estimate rises
    shared = report["one_program_shared_seconds"]
    assert shared["fused_batch_norm_relu"] == min(
        next(t["best_seconds"] for t in run["tasks"] if t["name"] == "fused_batch_norm_relu") for run in runs.values())
    assert all(run["one_program_latency_difference_ms"] >= 0 for run in runs.values())
    assert report["baseline_final_one_program_shared_ms"] == pytest.approx(
        report["baseline_final_estimated_latency_ms"] - baseline["one_program_latency_difference_ms"])
    assert "set in every arm to the lowest of the arms' measurements" in again.stdout
    assert 0 < baseline["one_program_task_seconds"] < baseline["tuning_seconds"]
    ours = runs["crosstune-with-light-search"]
    assert [c["trials"] for c in ours["curve"][:2]] == [1, 3]  # one program, then a small first round of 2
    assert [t["stopped"] for t in ours["tasks"] if t["name"] == "fused_batch_norm_relu"] == ["its one program is measured"]
    assert ours["cost_model_seconds"]["fine_tunes"] >= 1 and ours["cost_model_seconds"]["failures"] == 0
    assert ours["cost_model_seconds"]["fine_tune"] > 0
    # the fine-tune schedule is the crosstune arm's setting; the baseline's saved settings do not name it
    # (arms saved before it existed resume)
    saved = {name: json.loads((out / name / "state.json").read_text())["settings"] for name in runs}
    assert saved["crosstune-with-light-search"]["fine_tune_epochs"] == 2 and "fine_tune_epochs" not in saved["xgb"]
    tuned = json.loads((out / "crosstune-with-light-search" / "tuned-model" / "config.json").read_text())
    assert len(tuned["history"]["fine_tune"]["epochs"]) == 2  # the last fine-tune ran two epochs


def test_a_seeded_arm_measures_the_other_databases_fastest_programs_as_a_tasks_first_round(tmp_path):
    """--seeds-from: a task the seed database holds starts with its fastest programs there, replayed for this
    target, built and run without a search; a task it lacks gets an ordinary first round; the baseline gets
    no seeds. The seeds' time is in the arm's clock and its time split. The arm runs as the --model xgb
    control, so MetaSchedule's XGBoost is told the seeds' latencies (crosstune's model is told them the same
    way, but learns from them only when it fine-tunes)."""
    from conftest import MS_DB

    from crosstune.tvm.convert import plain
    from crosstune.tvm.rounds import SearchSettings
    from crosstune.tvm.seeds import read_seed_database
    from crosstune.tvm.tune_compare import CompareSettings, tune_compare

    lines: list[str] = []
    settings = CompareSettings("resnet18", "local-avx2-2c", tmp_path / "run", trials=5, arms=["xgb", "crosstune"],
                               model="xgb", tasks=["conv2d", "mean"], round_trials=2, first_round_trials=2,
                               search=SearchSettings(population_size=16, genetic_num_iters=1, init_min_unmeasured=2),
                               fine_tune_every=0, end_to_end=False, seeds_from=str(MS_DB), seeds_per_task=2)
    report = tune_compare(settings, print_fn=lines.append)
    seeded_name = next(name for name in report["runs"] if name != "xgb")
    assert seeded_name.endswith("-xgb-model-seeded")
    assert any("no pre-trained model (--model xgb): a control" in line for line in lines)
    seeded, baseline = report["runs"][seeded_name], report["runs"]["xgb"]
    assert seeded["settings"]["seeds_from"] == str(MS_DB.resolve()) and "seeds_from" not in baseline["settings"]
    first = {point["task"]: point for point in reversed(seeded["curve"])}  # each task's first point
    assert first["conv2d"].get("seeds") == 2 and "seeds" not in first["mean"]
    assert not any("seeds" in point for point in baseline["curve"])
    assert seeded["time_split_seconds"]["seeds"] > 0 and baseline["time_split_seconds"]["seeds"] == 0
    assert any("a database tuned elsewhere" in note for note in report["notes"])
    assert any("seeds: 24 programs of 2 workloads" in line for line in lines)
    # the arm's first two conv2d records are the seed database's two fastest conv2d programs, replayed
    arm = tmp_path / "run" / seeded_name
    shashes = [json.loads(line)[0] for line in (arm / "database_workload.json").read_text().splitlines()]
    conv = [json.loads(line) for line in (arm / "database_tuning_record.json").read_text().splitlines()
            if shashes[json.loads(line)[0]] == "14443411499083074304"]
    expected = read_seed_database(MS_DB).traces("14443411499083074304", 2)
    assert [plain(record[1][0]) for record in conv[:2]] == [plain(trace) for trace in expected]
    assert all(record[1][1] for record in conv[:2])  # they ran here
    assert any("1 of the 2 tasks are there" in line for line in lines)
    # a database of another network seeds nothing: refused before any tuning of the arm
    other = CompareSettings("resnet18", "local-avx2-2c", tmp_path / "other", trials=2, arms=["xgb", "crosstune"],
                            model="xgb", tasks=["mean"], round_trials=2, end_to_end=False, fine_tune_every=0,
                            search=settings.search, seeds_from=str(MS_DB))
    with pytest.raises(CrosstuneError, match="holds none of the 1 tuned tasks"):
        tune_compare(other, print_fn=lines.append)


def test_a_stop_signal_inside_a_tvm_callback_is_an_interruption_not_a_traceback(monkeypatch, capsys,
                                                                                 signal_handlers_restored):
    """SIGTERM while TVM runs crosstune's Python (a cost model's predict): the KeyboardInterrupt comes out of
    TVM as a RuntimeError. It is still a stop: one line, exit 130. A RuntimeError with no signal still raises."""
    import tvm_ffi

    from crosstune import cli, cli_registry

    def command_calling_through_tvm(callback):
        def define(parser):
            def handler(args):
                tvm_ffi.convert(callback)()
                return 0
            return handler
        return define, "test"

    def stop():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(10)  # the signal's handler raises long before this ends

    def fail():
        raise RuntimeError("a real failure")

    monkeypatch.setitem(cli_registry.COMMANDS, "stop-inside-tvm", command_calling_through_tvm(stop))
    monkeypatch.setitem(cli_registry.COMMANDS, "fail-inside-tvm", command_calling_through_tvm(fail))
    assert cli.main(["stop-inside-tvm"]) == 130
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1] == "crosstune stop-inside-tvm: interrupted"
    with pytest.raises(RuntimeError, match="a real failure"):  # the flag does not outlive a run
        cli.main(["fail-inside-tvm"])
