"""Every model trains on real records, ranks better than random, saves and loads without pickle,
resumes after a kill, and fails clearly on bad input."""

from __future__ import annotations

import copy
import json
import stat

import numpy as np
import pytest

from crosstune.dataset import load_dataset
from crosstune.errors import CrosstuneError
from crosstune.experiment import VALID_FRACTION, SplitOptions, evaluate_model, train_on_split
from crosstune.metrics import evaluate
from crosstune.features import Normalizer, training_hardware
from crosstune.hardware.registry import builtin_specs
from crosstune.models import BASELINE_KINDS, MODEL_KINDS, FitOptions, create_model, load_model, model_class
from crosstune.splits import holdout_groups
from crosstune.train import TrainConfig, TrainHooks

pytestmark = pytest.mark.slow  # trains every model kind

LEARNED_KINDS = [k for k in MODEL_KINDS if k not in BASELINE_KINDS]  # baselines: tests/test_baselines.py


@pytest.fixture(scope="module")
def tiny(small_dataset):
    """200 real programs of each of the 8 (task, GPU) groups."""
    ds = load_dataset([small_dataset])
    rows = np.concatenate([np.flatnonzero(ds.group == g)[:200] for g in np.unique(ds.group)])
    return ds.select(rows)


@pytest.fixture(scope="module")
def split(tiny):
    return SplitOptions(kind="by-hardware", test_hardware=["v100"]).make(tiny, 0)


@pytest.fixture(scope="module")
def trained(tiny, split, tmp_path_factory):
    models = {}
    for kind in MODEL_KINDS:  # the baselines train in no time and keep the same contract
        out = tmp_path_factory.mktemp(kind.replace("-", "_"))
        cfg = TrainConfig(epochs=3, seed=0)  # each model's own learning rate
        models[kind] = (train_on_split(tiny, kind, split[0], split[1], cfg, out, progress=False), out)
    return models


@pytest.mark.parametrize("kind", LEARNED_KINDS)
def test_model_ranks_unseen_gpu_better_than_random(kind, trained, tiny, split):
    outcome, _ = trained[kind]
    test = tiny.select(split[0].test)
    scores = outcome.model.predict(test)
    result = evaluate(test, scores)["overall"]
    assert result["pca"] > 0.55, result  # random is 0.5
    # With only four test groups, top-5 against the random expectation is too noisy to test; the
    # programs the model ranks best must still beat the ones it ranks worst.
    assert result["top5"] > evaluate(test, -scores)["overall"]["top5"] + 0.1, result


@pytest.mark.parametrize("kind", LEARNED_KINDS)
def test_save_load_round_trip_without_pickle(kind, trained, tiny):
    outcome, out = trained[kind]
    loaded = load_model(out)
    assert np.allclose(loaded.predict(tiny), outcome.model.predict(tiny), atol=1e-5)
    files = {p.name for p in out.iterdir()}
    assert "config.json" in files and not any(p.suffix in (".pkl", ".pt", ".pickle") for p in out.rglob("*"))
    config = json.loads((out / "config.json").read_text())
    assert config["kind"] == kind and "k80" in config["hardware_seen"]
    # the directories holding weights (an ensemble's members, else the model's own) keep their normaliser
    leaves = [p for p in out.rglob("config.json") if not any(p.parent.glob("member-*"))]
    assert leaves and all("normalizer" in json.loads(p.read_text()) for p in leaves)


def test_training_is_deterministic_and_resumable(tiny, split, tmp_path):
    def run(epochs, out, resume=False):
        cfg = TrainConfig(epochs=epochs, seed=5)
        return train_on_split(tiny, "crossfeat", split[0], split[1], cfg, out, resume=resume, progress=False)

    full = run(2, tmp_path / "a").model.predict(tiny)
    again = run(2, tmp_path / "b").model.predict(tiny)
    assert np.array_equal(full, again)

    class Killed(TrainHooks):
        def epoch_end(self, record):
            raise KeyboardInterrupt  # the process is stopped once its first epoch is checkpointed

    # The first epoch of the same run as train_on_split makes it (same rows, same config) ...
    fit_rows, valid_rows = holdout_groups(tiny, split[0].train, VALID_FRACTION, 5)
    with pytest.raises(KeyboardInterrupt):
        create_model("crossfeat", TrainConfig(epochs=2, seed=5)).fit(
            tiny.select(fit_rows), tiny.select(valid_rows),
            FitOptions(progress=False, checkpoint_dir=tmp_path / "c" / "checkpoint", hooks=Killed()))
    killed = json.loads((tmp_path / "c" / "checkpoint" / "progress.json").read_text())["history"]
    resumed = run(2, tmp_path / "c", resume=True)  # ... continued from its checkpoint
    assert [e["epoch"] for e in resumed.history["epochs"]] == [0, 1]
    assert resumed.history["epochs"][0] == killed[0]  # epoch 0 was not trained again
    assert np.allclose(resumed.model.predict(tiny), full, atol=1e-6)
    assert not (tmp_path / "c" / "checkpoint").exists()  # the finished model replaced it


def test_few_shot_fine_tuning_uses_only_the_sampled_target_records(tiny):
    split, few_shot = SplitOptions(kind="by-hardware", test_hardware=["v100"], target_fraction=0.05).make(tiny, 0)
    assert len(few_shot) == 40 and not set(few_shot) & set(split.test)
    outcome = train_on_split(tiny, "crossfeat", split, few_shot, TrainConfig(epochs=2), progress=False)
    assert set(outcome.history) == {"pretrain", "fine_tune"}


def test_few_shot_records_weigh_up_in_the_trees(tiny):
    split, few_shot = SplitOptions(kind="by-hardware", test_hardware=["v100"], target_fraction=0.05).make(tiny, 0)
    small = {"n_estimators": 20, "max_depth": 4}
    weighted = train_on_split(tiny, "xgb", split, few_shot, TrainConfig(architecture=small), progress=False)
    info = weighted.history["few_shot"]
    # 4 V100 tasks, 10 sampled programs each, against 800 K80 records (less the validation groups)
    assert info["records"] == 40 and info["groups"] == 4
    assert info["group_weight"] == pytest.approx((weighted.history["records"] - 40) / 40)
    flat = train_on_split(tiny, "xgb", split, few_shot, TrainConfig(architecture={**small, "few_shot_weight": 1}),
                          progress=False)
    assert flat.history["few_shot"]["group_weight"] == 1.0
    test = tiny.select(split.test)
    assert not np.allclose(weighted.model.predict(test), flat.model.predict(test))
    # the weights sit on the sampled groups, in the order of XGBoost's query groups
    train = tiny.select(np.union1d(split.train, few_shot))
    mask = np.isin(np.union1d(split.train, few_shot), few_shot)
    rows, matrix = weighted.model._matrix(train, mask)
    query_groups = np.unique(train.group[rows])
    sampled_groups = np.unique(train.group[mask])
    expected = np.where(np.isin(query_groups, sampled_groups), weighted.model.history["few_shot"]["group_weight"], 1.0)
    assert np.array_equal(matrix.get_weight(), expected)


def test_few_shot_records_sharing_a_group_with_training_records_are_not_weighed_up(tiny):
    split, few_shot = SplitOptions(kind="within-task", test_fraction=0.2, target_fraction=0.1).make(tiny, 0)
    outcome = train_on_split(tiny, "xgb", split, few_shot, TrainConfig(architecture={"n_estimators": 5}),
                             progress=False)
    info = outcome.history["few_shot"]
    # every group holds sampled records; those whose other records went to validation hold only sampled ones
    assert info["groups"] + info["mixed_groups"] == len(np.unique(tiny.group[few_shot]))
    assert info["mixed_groups"] > info["groups"]


def test_corrupt_or_foreign_model_directories_fail_clearly(trained, tmp_path):
    _, out = trained["crossfeat"]
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text((out / "config.json").read_text())
    (broken / "weights.safetensors").write_bytes((out / "weights.safetensors").read_bytes()[:100])
    with pytest.raises(CrosstuneError, match="corrupt"):
        load_model(broken)
    config = json.loads((out / "config.json").read_text())
    config["format_version"] = 99
    (broken / "config.json").write_text(json.dumps(config))
    with pytest.raises(CrosstuneError, match="format version"):
        load_model(broken)
    (broken / "config.json").write_text("{not json")
    with pytest.raises(CrosstuneError, match="corrupt model config"):
        load_model(broken)
    with pytest.raises(CrosstuneError, match="no such model"):
        load_model(tmp_path / "nothing")
    _, xgb_out = trained["xgb"]
    (broken / "config.json").write_text((xgb_out / "config.json").read_text())
    with pytest.raises(CrosstuneError, match="missing or corrupt"):
        load_model(broken)


def test_unseen_kinds_nan_features_and_single_program_tasks(trained, tiny):
    outcome, _ = trained["crossfeat"]
    ds = tiny.select(np.arange(len(tiny)))
    ds.kinds = ds.kinds.copy()
    ds.kinds[:5] = 29  # add_unit_loop: never in these Ansor records
    ds.args = ds.args.copy()
    ds.args[5:8, 0] = np.nan
    one = np.flatnonzero(ds.group == ds.group[0])[:1]
    rest = np.flatnonzero(ds.group != ds.group[0])
    ds = ds.select(np.r_[one, rest])  # the first task now has a single program
    result, notes = evaluate_model(outcome.model, ds)
    assert notes["tokens_of_kinds_never_seen_in_training"] >= 1
    assert notes["non_finite_feature_values_zeroed"] >= 1
    assert result["overall"]["skipped_single_program_tasks"] == 1
    assert np.isfinite(result["overall"]["pca"])


def test_empty_training_split_is_refused(tiny):
    with pytest.raises(CrosstuneError):
        create_model("crossfeat").fit(tiny.select(np.array([], dtype=np.int64)))


@pytest.mark.parametrize("kind", MODEL_KINDS)
def test_construct_fit_save_load_leave_the_callers_configs_unchanged(kind, tiny, split, tmp_path):
    cls = model_class(kind)
    train_config = TrainConfig(epochs=1, seed=3, architecture={})
    model_config = cls.config_cls()
    before = copy.deepcopy((train_config, model_config))
    model = cls(model_config, train_config)
    train = tiny.select(split[0].train)
    model.fit(train, tiny.select(split[0].test), FitOptions(progress=False))
    if model.warm_starts:  # a fine-tuning fit with its own schedule
        model.fit(train, None, FitOptions(progress=False, warm_start=True, epochs=1, lr=1e-5))
    model.save(tmp_path / "model")
    loaded = load_model(tmp_path / "model")
    assert (train_config, model_config) == before
    if model.warm_starts:  # the saved training settings are the pre-training ones, defaults filled in
        saved = json.loads((tmp_path / "model" / "config.json").read_text())["train"]
        assert saved["epochs"] == 1 and saved["lr"] == create_model(kind).train_config.lr == loaded.train_config.lr


def test_held_out_hardware_never_enters_training_state(trained, tiny, split):
    train = tiny.select(split[0].train)
    assert "v100" in train.hardware_names and list(training_hardware(train)) == ["k80"]
    for kind in MODEL_KINDS:
        outcome, out = trained[kind]
        assert list(json.loads((out / "config.json").read_text())["hardware_seen"]) == ["k80"], kind
        assert list(outcome.model.hardware_seen) == ["k80"], kind
    # The hardware scale: the registry plus the training hardware, the held-out V100 not counted again.
    rows = [s.feature_vector() for s in builtin_specs().values()] + [tiny.specs["k80"].feature_vector()]
    assert np.allclose(Normalizer.fit(train).hw_mean, np.mean(np.asarray(rows, np.float32), axis=0), atol=1e-5)


@pytest.mark.parametrize("kind", MODEL_KINDS)
def test_finished_model_directory_is_complete_and_uniform(kind, trained):
    _, out = trained[kind]
    names = {p.name for p in out.rglob("*")}
    assert "checkpoint" not in names and not any(n.startswith(".") for n in names), names
    modes = {str(p.relative_to(out)): stat.S_IMODE(p.stat().st_mode) for p in out.rglob("*") if p.is_file()}
    assert len(set(modes.values())) == 1, modes  # weights.safetensors like config.json


def test_saving_over_a_model_replaces_it_and_never_a_foreign_folder(trained, tmp_path):
    outcome, _ = trained["xgb"]
    out = tmp_path / "model"
    outcome.model.save(out)
    outcome.model.save(out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]  # no staging or old copies left
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "notes.txt").write_text("mine")
    with pytest.raises(CrosstuneError, match="not a crosstune model directory"):
        outcome.model.save(tmp_path / "home")
    assert (tmp_path / "home" / "notes.txt").read_text() == "mine"


def test_xgb_records_validation_pca_and_stops_early_only_when_asked(trained, tiny, split):
    history = trained["xgb"][0].model.history
    assert history["rounds"] == 300 and 0.5 < history["valid_pca"] <= 1.0 and "best_round" not in history
    fit_rows, valid_rows = holdout_groups(tiny, split[0].train, VALID_FRACTION, 0)
    model = create_model("xgb", TrainConfig(architecture={"early_stopping_rounds": 5}))
    stopped = model.fit(tiny.select(fit_rows), tiny.select(valid_rows))
    assert 1 <= stopped["best_round"] < stopped["rounds"] < 300 and 0.5 < stopped["best_valid_pca"] <= 1.0
    assert model.booster.num_boosted_rounds() == stopped["best_round"]


@pytest.mark.parametrize("regulariser", [{"hardware_dropout": 0.99}, {"hardware_noise": 3.0}])
def test_hardware_regularisers_act_per_device_in_training_only(tiny, regulariser):
    import torch

    from crosstune.features import featurize

    model = create_model("crossfeat", TrainConfig(architecture=regulariser))
    model.normalizer = Normalizer.fit(tiny)
    net = model.build_net()
    with torch.no_grad():
        torch.nn.init.normal_(net.unknown_hardware) if hasattr(net, "unknown_hardware") else None
    rows = np.concatenate([np.flatnonzero(tiny.hardware == h)[:3] for h in np.unique(tiny.hardware)])
    hw = model.batch_tensors(featurize(tiny, model.normalizer), rows, torch.device("cpu"))["hw"]
    torch.manual_seed(0)
    with torch.no_grad():
        net.eval()
        assert torch.equal(net._hardware_token(hw), net.hardware_mlp(hw))  # prediction sees the real device
        net.train()
        token = net._hardware_token(hw)
    assert not torch.allclose(token, net.hardware_mlp(hw))
    for h in range(len(np.unique(tiny.hardware))):  # one draw per device: its programs share the token
        same = token[3 * h: 3 * h + 3]
        # a shared draw gives the same input rows; the matrix product may round rows apart (~5e-7)
        assert torch.allclose(same, same[:1].expand_as(same), atol=1e-5)


def test_cropping_is_counted(trained, tiny, split):
    train = tiny.select(split[0].train)
    for kind, steps in (("xgb", 40), ("tlp", 40)):  # TLP's GPU shape: the training hardware is a GPU
        model = trained[kind][0].model
        assert model.max_steps == steps
        assert model.cropped(train) == {"cropped_programs": int((train.seq_len > steps).sum()),
                                        "programs": len(train), "max_steps": steps}
    saved = json.loads((trained["tlp"][1] / "config.json").read_text())["history"]  # of the fit rows
    assert saved["max_steps"] == 40 and 0 <= saved["cropped_programs"] <= model.cropped(train)["cropped_programs"]
    assert trained["crossfeat"][0].model.cropped(train) == {}


def test_flat_by_position_lays_out_each_position_and_pads_or_crops():
    import torch

    from crosstune import tokens
    from crosstune.models.crossfeat import flat_by_position

    args = torch.arange(2 * 3 * tokens.NUM_ARGS, dtype=torch.float32).reshape(2, 3, tokens.NUM_ARGS) + 1
    mask = torch.tensor([[True, True, True], [True, False, False]])  # the second program has one token
    width = tokens.NUM_ARGS + 1
    flat = flat_by_position(args, mask, 4).reshape(2, 4, width)
    assert torch.equal(flat[0, :3, :-1], args[0]) and flat[0, :3, -1].tolist() == [1, 1, 1]
    assert flat[0, 3].abs().sum() == 0  # padded past the longest program
    assert torch.equal(flat[1, 0, :-1], args[1, 0]) and flat[1, 1:].abs().sum() == 0  # padding stays zero
    assert torch.equal(flat_by_position(args, mask, 2).reshape(2, 2, width), flat[:, :2])  # cropped


def test_architecture_switches_read_words_and_refuse_others():
    from crosstune.models.registry import model_config
    from crosstune.models.crossfeat import CrossFeatConfig

    assert model_config(CrossFeatConfig, {"category_scaled_args": "false"}, "crossfeat").category_scaled_args is False
    assert model_config(CrossFeatConfig, {"category_scaled_args": "on"}, "crossfeat").category_scaled_args is True
    with pytest.raises(CrosstuneError, match="not a valid bool"):
        model_config(CrossFeatConfig, {"category_scaled_args": "maybe"}, "crossfeat")


def test_factor_twos_count_powers_of_two_of_whole_factors_only():
    from crosstune import tokens
    from crosstune.features import MAX_TWOS, factor_twos

    n_kinds = len(tokens.KINDS)
    identity = Normalizer(np.zeros((n_kinds, tokens.NUM_ARGS), np.float32), np.ones((n_kinds, tokens.NUM_ARGS), np.float32),
                          np.zeros(1), np.ones(1), np.zeros(1), np.ones(1), np.ones(n_kinds, bool))
    factors = [1, 3, 8, 12, 96, 1024]
    split = tokens.split_args(0.0, 0.0, 96, factors[:4], 5)  # log2 of 96 and of four inner factors
    args = np.array([split, tokens.split_args(0.0, 0.0, 1024, factors[4:], 3)], np.float32)
    kinds = np.full(2, tokens.KIND_ID["split"])
    twos = factor_twos(kinds, args, identity)
    assert twos.dtype == np.uint8
    assert twos[0].tolist() == [0, 0, 5, 0, 0, 0, 3, 2]  # stage, iter: not factors; n_parts=5: not a log2 slot
    assert twos[1].tolist() == [0, 0, MAX_TWOS, 0, 5, MAX_TWOS, 0, 0]  # 1024 = 2^10, capped
    fused = np.array([[0.0, 3.0, 0.5, 0, 0, 0, 0, 0]], np.float32)  # fuse has no log2 slot; 2^0.5 is not whole
    assert factor_twos(np.array([tokens.KIND_ID["fuse"]]), fused, identity).tolist() == [[0] * tokens.NUM_ARGS]


def test_lane_channels_place_each_factor_against_its_own_machines_vector_width():
    from crosstune import tokens
    from crosstune.features import LANE_CHANNELS, factor_twos, lane_channels

    n_kinds = len(tokens.KINDS)
    identity = Normalizer(np.zeros((n_kinds, tokens.NUM_ARGS), np.float32), np.ones((n_kinds, tokens.NUM_ARGS), np.float32),
                          np.zeros(1), np.ones(1), np.zeros(1), np.ones(1), np.ones(n_kinds, bool))
    split = tokens.split_args(0.0, 0.0, 512, [1, 8, 16, 6], 5)  # inner factors 1, 8, 16, 6
    args = np.array([[split, split]], np.float32).repeat(2, axis=0)  # (rows, width, NUM_ARGS)
    kinds = np.full((2, 2), tokens.KIND_ID["split"])
    kinds[:, 1] = tokens.KIND_ID["parallel"]  # a parallel extent is no vector: no lane features
    twos = factor_twos(kinds, args, identity)
    sse, avx512 = 2.0, 4.0  # log2 of 4 and of 16 float32 lanes
    lanes = lane_channels(kinds, args, twos, np.array([sse, avx512], np.float32), identity)
    assert lanes.shape == (2, 2, LANE_CHANNELS) and lanes.dtype == np.float32
    distance, multiple = lanes[..., :tokens.NUM_ARGS], lanes[..., tokens.NUM_ARGS:]
    factors = slice(4, 8)  # the log2_f0..f3 slots; stage, iter, extent and n_parts get none
    assert not distance[:, 0, :4].any() and not multiple[:, 0, :4].any()
    assert np.allclose(distance[0, 0, factors], [0, (3 - 2) / 4, (4 - 2) / 4, (np.log2(6) - 2) / 4])
    assert np.allclose(distance[1, 0, factors], [0, (3 - 4) / 4, 0, (np.log2(6) - 4) / 4])
    assert multiple[0, 0, factors].tolist() == [0, 1, 1, 0]  # 8 and 16 fill SSE's 4 lanes; 6 does not
    assert multiple[1, 0, factors].tolist() == [0, 0, 1, 0]  # only 16 fills AVX-512's 16
    assert not lanes[:, 1].any()  # the parallel token


def test_crossfeat_lane_features_act_survive_saving_and_stay_the_rows_own(tiny, split, tmp_path):
    from crosstune.features import featurize

    model = create_model("crossfeat", TrainConfig(epochs=1, architecture={"lane_features": True}))
    model.fit(tiny.select(split[0].train))
    model.save(tmp_path / "lanes")
    loaded = load_model(tmp_path / "lanes")
    assert loaded.config.lane_features is True
    programs = tiny.select(split[0].test[:64])
    assert np.allclose(loaded.predict(programs), model.predict(programs), atol=1e-5)
    feats = featurize(programs, model.normalizer)
    assert np.array_equal(feats.on_hardware(feats.hw[0]).log2_lanes, feats.log2_lanes)  # a token swap keeps them
    wider = featurize(programs, model.normalizer)
    wider.log2_lanes = wider.log2_lanes + 3.0  # the same programs on a machine with 8x the lanes
    assert not np.allclose(model.predict_features(wider), model.predict_features(feats))  # the feature acts


def test_crossfeat_saved_before_the_program_reading_settings_loads_as_trained(tiny, split, tmp_path):
    """A model directory written before flat_tokens / category_scaled_args / factor_twos / unseen_hardware
    existed has none of them in its config: it loads with them off, or with its own hardware token for an
    unseen machine (how it was trained and evaluated), whatever today's default."""
    off = {"flat_tokens": 0, "category_scaled_args": False, "factor_twos": False, "unseen_hardware": "own",
           "lane_features": False}
    model = create_model("crossfeat", TrainConfig(epochs=1, architecture={"factor_twos": False, "unseen_hardware": "own"}))
    model.fit(tiny.select(split[0].train))
    model.save(tmp_path / "old")
    config = json.loads((tmp_path / "old" / "config.json").read_text())
    for name in off:
        del config["model"][name]
    (tmp_path / "old" / "config.json").write_text(json.dumps(config))
    loaded = load_model(tmp_path / "old")
    assert all(getattr(loaded.config, name) == value for name, value in off.items())
    assert np.allclose(loaded.predict(tiny), model.predict(tiny), atol=1e-5)


def test_xgb_reads_factor_twos_as_further_positional_features(tiny, split):
    plain = create_model("xgb")
    twos = create_model("xgb", TrainConfig(architecture={"factor_twos": True}))
    for model in (plain, twos):
        model.normalizer = Normalizer.fit(tiny)
    steps = plain.max_steps
    assert twos.features(tiny).shape[1] - plain.features(tiny).shape[1] == steps * 8


def test_hardware_mix_weights_give_training_machines_their_own_token():
    from crosstune.models.crossfeat import hardware_mix_weights

    known = np.array([[0.0, 0.0], [3.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    hw = np.array([[3.0, 0.0], [0.0, 0.9], [1.0, 0.0]], dtype=np.float32)  # a training machine, two others
    for mode in ("nearest", "similar", "mean"):
        weights = hardware_mix_weights(hw, known, mode)
        assert np.allclose(weights.sum(axis=1), 1.0)
        assert np.array_equal(weights[0], [0.0, 1.0, 0.0])  # on a training machine: its own token only
    assert np.array_equal(hardware_mix_weights(hw, known, "nearest")[1:], [[0, 0, 1], [1, 0, 0]])
    assert np.allclose(hardware_mix_weights(hw, known, "mean")[2], 1 / 3)
    with pytest.raises(ValueError, match="choose from"):
        hardware_mix_weights(hw, known, "own")  # "own" needs no mixture: the caller's job
    with pytest.raises(CrosstuneError, match="no hardware token"):
        create_model("crossfeat-nohw", TrainConfig(architecture={"unseen_hardware": "nearest"}))
    similar = hardware_mix_weights(hw, known, "similar")[2]  # distances 1, 2, sqrt(2): weights 1, 1/4, 1/2
    assert np.allclose(similar, np.array([1.0, 0.25, 0.5]) / 1.75)


def test_unseen_hardware_nearest_scores_a_new_machine_as_its_nearest_training_machine(trained, tiny, split):
    from crosstune.features import featurize, normalised_hardware

    model = trained["crossfeat"][0].model
    train_rows, test_rows = split[0].train[:50], split[0].test[:50]
    (k80_vector,) = model.hardware_seen.values()  # trained on the K80 alone
    k80 = normalised_hardware([k80_vector], model.normalizer)[0]
    assert model.config.unseen_hardware == "similar"  # the default
    own = model.with_unseen_hardware("own")
    own_test, own_train = own.predict(tiny.select(test_rows)), own.predict(tiny.select(train_rows))
    mixed = model.with_unseen_hardware("nearest")
    assert model.config.unseen_hardware == "similar" and own.config.unseen_hardware == "own"  # variants only
    with pytest.raises(CrosstuneError, match="must be one of"):
        model.with_unseen_hardware("closest")
    with pytest.raises(CrosstuneError, match="no hardware token"):
        trained["crossfeat-nohw"][0].model.with_unseen_hardware("similar")
    as_k80 = model.predict_features(featurize(tiny.select(test_rows), model.normalizer).on_hardware(k80))
    assert np.allclose(mixed.predict(tiny.select(test_rows)), as_k80)  # the V100's programs, K80's token
    assert not np.allclose(own_test, as_k80)  # the V100 token did change the scores: the setting acts
    assert np.array_equal(mixed.predict(tiny.select(train_rows)), own_train)  # a training machine keeps its own
