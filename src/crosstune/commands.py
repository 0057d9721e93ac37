"""Sub-commands beyond import/info, registered with :func:`crosstune.cli.command`."""

from __future__ import annotations

import argparse
import functools
from pathlib import Path

from .cli_registry import Handler, command


def _csv(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


@command("collect", "measure real programs of real networks on this machine with TVM MetaSchedule")
def _collect_args(p: argparse.ArgumentParser) -> Handler:
    p.add_argument("--network", nargs="+", required=True, help="networks: resnet18, mobilenet_v2, bert_layer")
    p.add_argument("--hardware-config", nargs="+", required=True,
                   help="local configurations, e.g. local-sse-2c local-avx2-1c local-avx2-2c local-avx512-2c")
    p.add_argument("--programs-per-task", type=int, required=True)
    p.add_argument("--tasks-per-network", type=int, default=0, help="measure only the N heaviest-looking tasks (0: all)")
    p.add_argument("--evolutionary-fraction", type=float, default=0.2,
                   help="share of programs proposed by evolutionary search (the rest: random sampling)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, metavar="DB_DIR")
    p.add_argument("--rpc-tracker", metavar="HOST:PORT", help="measure through TVM's RPC tracker")
    p.add_argument("--device-key", help="device key registered with the tracker")
    p.add_argument("--quiet", action="store_true")

    def run(args: argparse.Namespace) -> int:
        from .errors import CrosstuneError
        from .tvm.collect import CollectSettings, collect
        from .tvm.measure import RpcSettings

        if bool(args.rpc_tracker) != bool(args.device_key):
            raise CrosstuneError("--rpc-tracker and --device-key go together")
        if not 0.0 <= args.evolutionary_fraction < 1.0:
            raise CrosstuneError("--evolutionary-fraction must be in [0, 1)")
        settings = CollectSettings(args.network, args.hardware_config, args.programs_per_task,
                                   args.tasks_per_network, args.evolutionary_fraction, args.seed)
        rpc = RpcSettings(args.rpc_tracker, args.device_key) if args.rpc_tracker else None
        summary = collect(settings, args.out, rpc=rpc, quiet=args.quiet)
        print(f"measured {summary.measured} programs in {summary.measure_seconds:.0f} s of measuring "
              f"({summary.programs_per_minute:.0f}/min; {summary.seconds:.0f} s in all); "
              f"{summary.skipped_already_measured} were already measured")
        for reason, count in summary.failures.most_common():
            print(f"  failed {count}: {reason}")
        print(f"dataset: {summary.dataset}")
        return 0
    return run


def _add_split_args(p: argparse.ArgumentParser, default: str = "by-hardware") -> None:
    from .splits import SPLIT_KINDS

    p.add_argument("--split", default=default, choices=SPLIT_KINDS, help=f"how to hold out test data (default {default})")
    p.add_argument("--test-hardware", type=_csv, default=[], help="by-hardware: comma-separated hardware names to hold out")
    p.add_argument("--test-fraction", type=float, default=0.2, help="within-task/by-task/by-operator/by-network share held out")
    p.add_argument("--test-operators", type=_csv, default=[], help="by-operator: operator kinds to hold out")
    p.add_argument("--network-map", metavar="FILE.json", help="by-network: task id or workload key -> network(s)")
    p.add_argument("--test-networks", type=_csv, default=[], help="by-network: networks to hold out")
    p.add_argument("--target-fraction", type=float, default=0.0,
                   help="few-shot: give this share of each test task (e.g. 0.05) to fine-tuning")


def _split_options(args: argparse.Namespace):
    from .experiment import SplitOptions

    return SplitOptions(args.split, args.test_hardware, args.test_fraction, args.test_operators, args.network_map,
                        args.test_networks, args.target_fraction)


def _add_train_args(p: argparse.ArgumentParser) -> None:
    # Defaults are None so that an option the user gave can be told from one left out: a model that
    # cannot honour it (xgb has no epochs or loss) refuses it instead of ignoring it.
    p.add_argument("--epochs", type=int, default=None, help="training epochs (default 12)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default=None, help="cpu, cuda or cuda:N (default cpu)")
    p.add_argument("--loss", default=None, choices=("lambdarank", "pairwise", "mse"),
                   help="lambdarank (NDCG-weighted pairs; the default), pairwise (RankNet, every pair equal) or mse")
    p.add_argument("--lr", type=float, default=None, help="learning rate (default: the model's own)")
    p.add_argument("--arch", type=parse_settings, default={}, metavar="NAME=VALUE,...",
                   help="override the model's architecture, e.g. d_model=32,layers=1,heads=2 for crossfeat "
                        "(in compare, each setting goes to the models that have it)")
    p.add_argument("--quiet", action="store_true")


def parse_settings(text: str) -> dict[str, str]:
    settings = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise argparse.ArgumentTypeError(f"{item!r} is not NAME=VALUE")
        settings[name.strip()] = value.strip()
    return settings


_TRAINING_OPTIONS = ("epochs", "loss", "lr", "device", "resume")


def _train_config(args: argparse.Namespace, kind: str):
    """The run's TrainConfig for one model kind: what the user gave, the rest left to the model
    (TrainConfig's and the model class's defaults)."""
    from .models import architecture_settings
    from .train import TrainConfig

    given = {name: getattr(args, name) for name in ("epochs", "loss", "lr", "device")
             if getattr(args, name, None) is not None}
    return TrainConfig(seed=args.seed, architecture={k: v for k, v in getattr(args, "arch", {}).items()
                                                     if k in architecture_settings(kind)}, **given)


def _check_model_options(args: argparse.Namespace, kinds: list[str]) -> None:
    """Before any data is read: refuse --arch settings that no model of the run has or values a model
    cannot take, and training options no model of the run honours; name the models that do not use
    an option the others do."""
    import sys

    from .errors import CrosstuneError
    from .models import MODEL_KINDS, architecture_settings, create_model, training_options

    unknown = [kind for kind in kinds if kind not in MODEL_KINDS]
    if unknown:
        raise CrosstuneError(f"unknown model {', '.join(unknown)}; choose from {', '.join(MODEL_KINDS)}")
    known = {name for kind in kinds for name in architecture_settings(kind)}
    bad = sorted(set(getattr(args, "arch", {})) - known)
    if bad:
        raise CrosstuneError(f"--arch: {', '.join(bad)} is not a setting of {', '.join(kinds)}; "
                             f"settings: {', '.join(sorted(known))}")
    for option in _TRAINING_OPTIONS:
        if getattr(args, option, None) in (None, False):
            continue
        users = [kind for kind in kinds if option in training_options(kind)]
        if not users:
            raise CrosstuneError(f"--{option} does not apply to {', '.join(kinds)}; leave it out")
        if len(users) < len(kinds):
            print(f"note: --{option} applies to {', '.join(users)} only "
                  f"({', '.join(k for k in kinds if k not in users)} does not use it)", file=sys.stderr)
    for kind in kinds:
        cfg = _train_config(args, kind)
        cfg.check()
        create_model(kind, cfg)  # architecture values the model cannot take


@command("train", "train a cost model on a split of one or more datasets")
def _train_args(p: argparse.ArgumentParser) -> Handler:
    from .models import MODEL_KINDS, models_help

    p.add_argument("datasets", nargs="+", metavar="DATASET")
    p.add_argument("--model", default="crossfeat", choices=MODEL_KINDS, help=models_help())
    _add_split_args(p)
    _add_train_args(p)
    p.add_argument("--out", required=True, metavar="MODEL_DIR")
    p.add_argument("--resume", action="store_true", help="continue an interrupted training from its checkpoint")

    def run(args: argparse.Namespace) -> int:
        from pathlib import Path

        from .dataset import load_dataset
        from .experiment import train_on_split

        _check_model_options(args, [args.model])
        cfg = _train_config(args, args.model)
        ds = load_dataset(args.datasets)
        split, few_shot = _split_options(args).make(ds, args.seed)
        print(f"{args.split}: {split.description}; train {len(split.train)} records (+{len(few_shot)} few-shot), "
              f"test {len(split.test)} records")
        outcome = train_on_split(ds, args.model, split, few_shot, cfg, Path(args.out), args.resume, not args.quiet)
        print(f"trained {args.model} in {outcome.seconds:.1f} s ({outcome.samples_per_second:.0f} samples/s); "
              f"saved to {args.out}")
        cropped = outcome.model.cropped(ds.select(split.train))
        if cropped.get("cropped_programs"):
            print(f"note: {args.model} reads at most {cropped['max_steps']} steps: {cropped['cropped_programs']} of "
                  f"{cropped['programs']} training programs were cropped (counted in the model's config.json)")
        print(f"evaluate on the held-out part with: crosstune eval {args.out} {' '.join(args.datasets)}"
              + (f" --hardware {','.join(args.test_hardware)}" if args.test_hardware else ""))
        return 0
    return run


@command("eval", "evaluate a trained model (records it was trained on are left out)")
def _eval_args(p: argparse.ArgumentParser) -> Handler:
    p.add_argument("model_dir", metavar="MODEL_DIR")
    p.add_argument("datasets", nargs="+", metavar="DATASET")
    p.add_argument("--hardware", type=_csv, default=None, help="only these hardware names (comma-separated)")
    p.add_argument("--include-training-records", action="store_true")
    p.add_argument("--json", metavar="FILE", help="also write the numbers as JSON")

    def run(args: argparse.Namespace) -> int:
        from .experiment import evaluate_model_dir
        from .reporting import eval_json, eval_table, write_json

        result, notes = evaluate_model_dir(args.model_dir, args.datasets, args.hardware, args.include_training_records)
        print(eval_table(result))
        for key, value in notes.items():
            print(f"note: {key.replace('_', ' ')}: {value}")
        if args.json:
            write_json(args.json, eval_json(result, notes))
        return 0
    return run


@command("compare", "train and evaluate several models on one split, one table")
def _compare_args(p: argparse.ArgumentParser) -> Handler:
    from .models import MODEL_KINDS, models_help

    p.add_argument("datasets", nargs="+", metavar="DATASET")
    p.add_argument("--models", type=_csv, default=list(MODEL_KINDS), metavar="KIND,...",
                   help=f"comma-separated, default all: {models_help()}")
    _add_split_args(p)
    _add_train_args(p)
    p.add_argument("--seeds", type=int, default=1, help="repeat with seeds seed..seed+N-1 and report mean and spread")
    p.add_argument("--json", metavar="FILE")
    p.add_argument("--out", metavar="DIR", help="also keep the trained models here")

    def run(args: argparse.Namespace) -> int:
        from pathlib import Path

        from .compare import run_comparison

        _check_model_options(args, args.models)
        run_comparison(args.datasets, args.models, _split_options(args), lambda kind: _train_config(args, kind),
                       seeds=args.seeds, progress=not args.quiet, json_path=args.json,
                       out=Path(args.out) if args.out else None)
        return 0
    return run


@command("prune", "write a smaller dataset that keeps ranking accuracy")
def _prune_args(p: argparse.ArgumentParser) -> Handler:
    from .prune import STRATEGIES

    p.add_argument("dataset", metavar="DATASET")
    p.add_argument("--strategy", required=True, help=f"one of {', '.join(STRATEGIES)}")
    p.add_argument("--keep", type=float, required=True, help="fraction of records to keep, in (0, 1]")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, metavar="DATASET2")

    def run(args: argparse.Namespace) -> int:
        from pathlib import Path

        from .dataset import load_dataset
        from .prune import check_request, prune, write_pruned

        check_request(args.strategy, args.keep)  # names and ranges before loading anything
        ds = load_dataset([args.dataset])
        pruning = prune(ds, args.strategy, args.keep, args.seed)
        write_pruned(Path(args.dataset), ds, pruning, Path(args.out), args.strategy, args.keep, args.seed)
        print(f"{args.out}: kept {pruning.kept} of {len(ds)} records ({pruning.kept / len(ds):.1%})")
        for reason, count in pruning.removed.most_common():
            print(f"  removed {count}: {reason}")
        return 0
    return run


@command("prune-study", "train on pruned data at several sizes, evaluate on unseen hardware, CSV + plot")
def _prune_study_args(p: argparse.ArgumentParser) -> Handler:
    from .models import MODEL_KINDS, models_help

    p.add_argument("datasets", nargs="+", metavar="DATASET")
    p.add_argument("--test-hardware", type=_csv, required=True)
    p.add_argument("--model", default="xgb", choices=MODEL_KINDS, help=models_help())
    p.add_argument("--keep", default="1.0,0.8,0.6,0.47,0.3,0.2", help="comma-separated fractions")
    p.add_argument("--strategies", type=_csv, default=None, help="default: all")
    p.add_argument("--epochs", type=int, default=None, help="neural models' training epochs (default 6)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--seeds", type=int, default=1, help="average every point over this many seeds (from --seed)")
    p.add_argument("--out", default="prune-study", metavar="STUDY_DIR")
    p.add_argument("--resume", action="store_true", help="reuse the points an interrupted run saved in STUDY_DIR")
    p.add_argument("--redo", type=_csv, default=[], help="with --resume: recompute these strategies' points")

    def run(args: argparse.Namespace) -> int:
        from pathlib import Path

        from .studies import parse_keeps, prune_study

        _check_model_options(args, [args.model])
        args.epochs = args.epochs or 6
        prune_study(args.datasets, args.test_hardware, args.model, parse_keeps(args.keep), Path(args.out),
                    args.strategies, _train_config(args, args.model), args.seeds,
                    args.resume, args.redo)
        print(f"results in {args.out}/ (crosstune report {args.out} makes an HTML page)")
        return 0
    return run


@command("split-study", "one model under every split strategy, with a leakage report")
def _split_study_args(p: argparse.ArgumentParser) -> Handler:
    from .models import MODEL_KINDS, models_help

    p.add_argument("datasets", nargs="+", metavar="DATASET")
    p.add_argument("--model", default="xgb", choices=MODEL_KINDS, help=models_help())
    p.add_argument("--test-hardware", type=_csv, default=None, help="by-hardware side (default: the last hardware)")
    p.add_argument("--network-map", metavar="FILE.json", help="enables the by-network split")
    p.add_argument("--test-fraction", type=float, default=0.2)
    p.add_argument("--epochs", type=int, default=None, help="neural models' training epochs (default 6)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="split-study", metavar="STUDY_DIR")

    def run(args: argparse.Namespace) -> int:
        from pathlib import Path

        from .studies import split_study

        _check_model_options(args, [args.model])
        args.epochs = args.epochs or 6
        split_study(args.datasets, args.model, Path(args.out), args.test_hardware, args.network_map,
                    _train_config(args, args.model), args.test_fraction)
        return 0
    return run


@command("report", "an HTML page of a study, benchmark, demo or tuning directory")
def _report_args(p: argparse.ArgumentParser) -> Handler:
    p.add_argument("directory", metavar="DIR")

    def run(args: argparse.Namespace) -> int:
        from pathlib import Path

        from .report import write_report

        path = write_report(Path(args.directory))
        print(f"wrote {path}")
        return 0
    return run


@command("bench", "MLPerf-HPC-style benchmark: time to train to a target PCA, staging, scaling, mllog logs")
def _bench_args(p: argparse.ArgumentParser) -> Handler:
    p.add_argument("--dataset", nargs="+", required=True, metavar="DATASET")
    p.add_argument("--split", default="by-task", help="split whose test side is the validation set (default by-task)")
    p.add_argument("--test-hardware", type=_csv, default=[])
    p.add_argument("--test-fraction", type=float, default=0.2)
    p.add_argument("--target-pca", type=float, required=True, help="quality target: validation PCA")
    p.add_argument("--seeds", type=int, default=5, help="number of seeded runs")
    p.add_argument("--first-seed", type=int, default=0)
    p.add_argument("--model", default="crossfeat")
    p.add_argument("--max-epochs", type=int, default=10, help="a run that has not reached the target by then is aborted")
    p.add_argument("--device", default="cpu")
    p.add_argument("--processes", type=_csv, default=["1"], help="data-parallel process counts for strong scaling, e.g. 1,2")
    p.add_argument("--concurrent-models", type=int, default=0, help="throughput mode: train this many models at once")
    p.add_argument("--no-roofline", action="store_true")
    p.add_argument("--out", required=True, metavar="BENCH_DIR")

    def run(args: argparse.Namespace) -> int:
        from .bench.mlperf import BenchSettings
        from .bench.suite import run_suite
        from .errors import CrosstuneError

        try:
            processes = [int(p) for p in args.processes]
        except ValueError:
            raise CrosstuneError("--processes must be integers, e.g. 1,2") from None
        settings = BenchSettings(args.dataset, args.target_pca, list(range(args.first_seed, args.first_seed + args.seeds)),
                                 args.out, args.split, args.test_hardware, args.test_fraction, args.model,
                                 args.max_epochs, args.device, processes[0])
        settings.check()
        data = run_suite(settings, processes, args.concurrent_models, not args.no_roofline)
        if data["aborted_runs"] or data["incomplete_runs"]:
            print("crosstune bench: some runs did not reach the target (see the logs)", file=__import__("sys").stderr)
            return 1
        return 0
    return run


@command("tune", "tune a whole network with MetaSchedule guided by a cost model, compile, check, time it")
def _tune_args(p: argparse.ArgumentParser) -> Handler:
    p.add_argument("--network", required=True, help="resnet18, mobilenet_v2 or bert_layer")
    p.add_argument("--model", required=True, help="a crosstune model directory, or xgb (MetaSchedule's default)")
    p.add_argument("--trials", type=int, required=True, help="measured programs in total")
    p.add_argument("--hardware-config", required=True, help="e.g. local-avx512-2c")
    p.add_argument("--fallback-xgb", action="store_true", help="use XGBoost if the model directory does not load")
    p.add_argument("--fine-tune-every", type=int, default=0, help="fine-tune the model every N new measurements (0: never)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, metavar="RUN_DIR")

    def run(args: argparse.Namespace) -> int:
        from .tvm.tune import tune_network

        r = tune_network(args.network, args.model, args.trials, args.hardware_config, args.out, args.fallback_xgb,
                         args.fine_tune_every, args.seed)
        print(f"{args.network} tuned with {r.cost_model}: {r.trials} trials in {r.tuning_seconds / 60:.1f} min; "
              f"end-to-end {r.latency_ms:.3f} ms (PyTorch eager {r.pytorch_latency_ms:.3f} ms); output "
              f"{'matches' if r.output_matches else 'DOES NOT match'} PyTorch (max abs error {r.output_max_abs_error:.2e})")
        if r.cost_model != "xgb":
            print(f"cost-model calls failed: {r.cost_model_failures} (of {r.cost_model_predict_calls} predict calls)")
        for note in r.notes:
            print(f"note: {note}")
        return 0 if r.output_matches else 1
    return run


@command("tune-compare", "MetaSchedule's XGBoost (until converged), a pre-trained crosstune model and random "
                         "search on the same tuning budget: time to the baseline's latency")
def _tune_compare_args(p: argparse.ArgumentParser) -> Handler:
    from .tvm.rounds import HEAD_START_OPTIONS  # no TVM import: the options are plain names

    p.add_argument("--network", required=True)
    p.add_argument("--hardware-config", required=True)
    p.add_argument("--out", required=True, metavar="RUN_DIR", help="run directory; a rerun with the same one resumes")
    budget = p.add_mutually_exclusive_group(required=True)
    budget.add_argument("--trials", type=int, help="the baseline's fixed budget (the other arms get the same)")
    budget.add_argument("--until-converged", action="store_true",
                        help="run the baseline until its best estimated latency gains < 2%% over its last 25%% of trials")
    p.add_argument("--max-trials", type=int, default=4000, help="the baseline's cap with --until-converged (default 4000)")
    p.add_argument("--chunk-trials", type=int, default=256,
                   help="check convergence and save the cost model every N trials (default 256)")
    p.add_argument("--arms", default="xgb,crosstune,random", help="of xgb,crosstune,random (xgb is the baseline)")
    p.add_argument("--model", default=None, metavar="DIR",
                   help="a pre-trained crosstune model (default: pre-train crossfeat on the dataset's other configurations)")
    p.add_argument("--dataset", nargs="+", default=None, help="pre-training data (default: the bundled dataset)")
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--fine-tune-every", type=int, default=64,
                   help="fine-tune the crosstune model on the run's own measurements every N of them (0: never)")
    p.add_argument("--head-start", default=",".join(HEAD_START_OPTIONS),
                   help="the crosstune arm's options, of " + ",".join(HEAD_START_OPTIONS) + ", or none (default: all)")
    p.add_argument("--first-round-trials", type=int, default=16, help="first round of a task with small-first-round")
    p.add_argument("--round-trials", type=int, default=64, help="programs per round (MetaSchedule's default 64)")
    p.add_argument("--tasks", default=None, help="tune only these tasks (comma-separated MetaSchedule task names)")
    p.add_argument("--population", type=int, default=512, help="evolutionary search population (MetaSchedule's 512)")
    p.add_argument("--genetic-iters", type=int, default=4, help="evolutionary search iterations (MetaSchedule's 4)")
    p.add_argument("--skip-end-to-end", action="store_true", help="do not compile and time the network per arm")
    p.add_argument("--seed", type=int, default=0)

    def run(args: argparse.Namespace) -> int:
        from .data import bundled_dataset
        from .tvm.rounds import SearchSettings
        from .tvm.tune_compare import CompareSettings, tune_compare

        head_start = [] if args.head_start.strip() == "none" else _csv(args.head_start)
        settings = CompareSettings(
            args.network, args.hardware_config, Path(args.out), trials=args.trials,
            until_converged=args.until_converged, max_trials=args.max_trials, chunk_trials=args.chunk_trials,
            arms=_csv(args.arms), model=args.model, datasets=args.dataset or [str(bundled_dataset())],
            epochs=args.epochs, fine_tune_every=args.fine_tune_every, head_start=head_start,
            first_round_trials=args.first_round_trials, round_trials=args.round_trials,
            tasks=_csv(args.tasks) if args.tasks else None,
            search=SearchSettings(population_size=args.population, genetic_num_iters=args.genetic_iters,
                                  init_min_unmeasured=min(50, args.population)),
            seed=args.seed, end_to_end=not args.skip_end_to_end)
        summary = tune_compare(settings, print_fn=functools.partial(print, flush=True))  # in order with TVM's log
        print(f"report: {Path(args.out) / 'tune-compare.json'}, curves: {Path(args.out) / 'tune-compare-curve.png'}")
        ok = [r["output_matches"] for r in summary["runs"].values() if r["output_matches"] is not None]
        return 0 if all(ok) else 1
    return run


@command("demo", "train on all bundled hardware configurations but one, test on the unseen one, report")
def _demo_args(p: argparse.ArgumentParser) -> Handler:
    p.add_argument("--out", default="crosstune-demo", metavar="DIR")
    p.add_argument("--held-out", default=None, help="configuration to test on (default local-avx512-2c)")
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dataset", default=None, help="use this dataset instead of the bundled one")
    p.add_argument("--quiet", action="store_true")

    def run(args: argparse.Namespace) -> int:
        from .demo import run_demo

        run_demo(args.out, args.held_out, args.epochs, args.seed, args.dataset, progress=not args.quiet)
        return 0
    return run
