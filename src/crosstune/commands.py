"""Sub-commands beyond import/info, registered with :func:`crosstune.cli.command`.

Each handler first checks its arguments and every place it will write (:mod:`crosstune.outputs`),
then does the work, so that a mistake costs seconds, not a training run."""

from __future__ import annotations

import argparse
import functools
from pathlib import Path

from .cli_registry import Handler, command
from .options import (COUNT, FRACTION, POSITIVE_INT, SEED, ExtendList, choice_list, integer, number,
                      number_list, split_list)


class Names:
    """A closed set of names (argparse ``choices``) read only when argparse needs it, so that building
    the parser does not import PyTorch for the model names."""

    def __init__(self, load):
        self._load = load

    def __iter__(self):
        return iter(self._load())

    def __contains__(self, item) -> bool:
        return item in self._load()


def model_names() -> tuple[str, ...]:
    """The one place the command line learns which models exist."""
    from .models import MODEL_KINDS

    return tuple(MODEL_KINDS)


MODELS = Names(model_names)


def _split_kinds() -> tuple[str, ...]:
    from .splits import SPLIT_KINDS

    return tuple(SPLIT_KINDS)


def _operator_kinds() -> tuple[str, ...]:
    from .records.operators import OP_KINDS

    return tuple(OP_KINDS)


def _strategies() -> tuple[str, ...]:
    from .prune import STRATEGIES

    return tuple(STRATEGIES)


def _add_overwrite(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--overwrite", action="store_true",
                   help=f"replace an existing {what} in the output folder (the old one is kept until this run succeeds)")


# ---------------------------------------------------------------------------------------------------

def hardware_prefix(text: str) -> str:
    """``collect --hardware-prefix``: the start of a hardware name."""
    from .hardware.registry import valid_name

    if text and not valid_name(text):
        raise argparse.ArgumentTypeError(f"{text!r}: a hardware name has letters, digits, '.', '_' and '-' "
                                         "and starts with a letter or digit")
    return text


@command("collect", "measure real programs of real networks on this machine with TVM MetaSchedule")
def _collect_args(p: argparse.ArgumentParser) -> Handler:
    p.add_argument("--network", nargs="+", type=split_list, action=ExtendList, required=True, metavar="NAME[,NAME]",
                   help="networks to take tasks from: resnet18, mobilenet_v2, bert_layer")
    p.add_argument("--hardware-config", nargs="+", type=split_list, action=ExtendList, required=True,
                   metavar="CONFIG[,CONFIG]",
                   help="local configurations, e.g. local-sse-2c,local-avx2-1c,local-avx2-2c,local-avx512-2c")
    p.add_argument("--programs-per-task", type=integer(2), required=True, help="programs measured per task (at least 2)")
    p.add_argument("--tasks-per-network", type=COUNT, default=0, help="measure only the N heaviest-looking tasks (0: all)")
    p.add_argument("--evolutionary-fraction", type=number(0.0, 1.0, closed_high=False), default=0.2,
                   help="share of programs proposed by evolutionary search (the rest: random sampling), in [0, 1)")
    p.add_argument("--seed", type=SEED, default=0, help="random seed of the program sampling")
    p.add_argument("--hardware-prefix", type=hardware_prefix, default="", metavar="PREFIX",
                   help="name each configuration's hardware PREFIX + its name in the dataset (e.g. zen4- gives "
                        "zen4-local-avx2-2c): needed to train beside the bundled data, whose local-* "
                        "configurations were measured on another CPU")
    p.add_argument("--out", required=True, metavar="DB_DIR", help="collection folder (MetaSchedule databases + dataset)")
    p.add_argument("--resume", action="store_true", help="continue an interrupted collection in DB_DIR (same options)")
    _add_overwrite(p, "collection")
    p.add_argument("--rpc-tracker", metavar="HOST:PORT", help="measure through TVM's RPC tracker")
    p.add_argument("--device-key", help="device key registered with the tracker")
    p.add_argument("--quiet", action="store_true", help="no progress bars")

    def run(args: argparse.Namespace) -> int:
        from .errors import CrosstuneError
        from .outputs import claim_folder

        if bool(args.rpc_tracker) != bool(args.device_key):
            raise CrosstuneError("--rpc-tracker and --device-key go together")
        out = claim_folder(args.out, "collection", overwrite=args.overwrite, resume=args.resume, resumable=True)
        from .tvm.collect import CollectSettings, collect  # TVM loads slowly: after the cheap checks
        from .tvm.measure import RpcSettings

        settings = CollectSettings(args.network, args.hardware_config, args.programs_per_task,
                                   args.tasks_per_network, args.evolutionary_fraction, args.seed, args.hardware_prefix)
        rpc = RpcSettings(args.rpc_tracker, args.device_key) if args.rpc_tracker else None
        with out:
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
    p.add_argument("--split", default=default, choices=Names(_split_kinds), metavar="KIND",
                   help="how to hold out test data: %(choices)s")
    p.add_argument("--test-hardware", type=split_list, default=[], metavar="NAME[,NAME]",
                   help="by-hardware: hardware names to hold out, comma-separated")
    p.add_argument("--test-fraction", type=FRACTION, default=0.2,
                   help="within-task/by-task/by-operator/by-network: share held out, in (0, 1)")
    p.add_argument("--test-operators", type=choice_list(Names(_operator_kinds)), default=[], metavar="KIND[,KIND]",
                   help="by-operator: operator kinds to hold out, comma-separated")
    p.add_argument("--network-map", metavar="FILE.json", help="by-network: task id or workload key -> network(s)")
    p.add_argument("--test-networks", type=split_list, default=[], metavar="NAME[,NAME]",
                   help="by-network: networks to hold out, comma-separated")
    p.add_argument("--target-fraction", type=number(0.0, 1.0, closed_high=False), default=0.0,
                   help="few-shot: give this share of each test task (e.g. 0.05) to fine-tuning, in [0, 1)")


def _split_options(args: argparse.Namespace):
    from .experiment import SplitOptions

    return SplitOptions(args.split, args.test_hardware, args.test_fraction, args.test_operators, args.network_map,
                        args.test_networks, args.target_fraction)


def _add_train_args(p: argparse.ArgumentParser) -> None:
    # Defaults are None so that an option the user gave can be told from one left out: a model that
    # cannot honour it (xgb has no epochs or loss) refuses it instead of ignoring it.
    p.add_argument("--epochs", type=POSITIVE_INT, default=None, help="training epochs of the neural models (default: 12)")
    p.add_argument("--seed", type=SEED, default=0, help="random seed (split, initialisation, batches)")
    p.add_argument("--device", default=None, help="cpu, cuda or cuda:N (default: cpu)")
    p.add_argument("--loss", default=None, choices=("lambdarank", "pairwise", "mse"),
                   help="pairwise (RankNet, every pair equal; crossfeat's default), lambdarank (NDCG-weighted pairs; "
                        "tlp's default) or mse")
    p.add_argument("--lr", type=number(0.0, 10.0, closed_low=False), default=None,
                   help="learning rate, in (0, 10] (default: the model's own; 7e-4 for tlp)")
    p.add_argument("--arch", type=parse_settings, default={}, metavar="NAME=VALUE,...",
                   help="override the model's architecture, e.g. d_model=32,layers=1,heads=2 for crossfeat, or "
                        "unseen_hardware=own (score an unseen machine with its own descriptor instead of the "
                        "training machines' tokens mixed by similarity); in compare, each setting goes to the "
                        "models that have it")
    p.add_argument("--quiet", action="store_true", help="no progress bars")


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


def _check_model_options(args: argparse.Namespace, kinds: list[str], study: bool = False) -> None:
    """Before any data is read: refuse --arch settings that no model of the run has or values a model
    cannot take, and training options no model of the run honours; name the models that do not use
    an option the others do. In a study (``study``), --resume continues the study, not a training."""
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
        if getattr(args, option, None) in (None, False) or (study and option == "resume"):
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
    p.add_argument("datasets", nargs="+", metavar="DATASET", help="dataset folders (made by crosstune import)")
    p.add_argument("--model", default="crossfeat", choices=MODELS, metavar="MODEL", help="model to train: %(choices)s")
    _add_split_args(p)
    _add_train_args(p)
    p.add_argument("--out", required=True, metavar="MODEL_DIR", help="folder for the trained model")
    p.add_argument("--resume", action="store_true", help="continue an interrupted training from its checkpoint")
    _add_overwrite(p, "model")
    p.add_argument("--stream", action="store_true",
                   help="stream batches from the dataset files instead of loading every record (bounded memory; "
                        "automatic above 20 million records)")
    p.add_argument("--shuffle-buffer", type=POSITIVE_INT, default=200_000, metavar="RECORDS",
                   help="with --stream: records shuffled together")

    def run(args: argparse.Namespace) -> int:
        from pathlib import Path

        from .dataset import load_dataset
        from .experiment import train_on_split
        from .outputs import claim_folder

        _check_model_options(args, [args.model])
        cfg = _train_config(args, args.model)
        out = claim_folder(args.out, "model", overwrite=args.overwrite, resume=args.resume, resumable=True,
                           inputs=tuple(args.datasets))
        from . import streaming

        if args.stream or streaming.total_records(args.datasets) > streaming.AUTO_STREAM_RECORDS:
            with out:
                print(streaming.train_command(args.datasets, args.model, cfg, Path(args.out), args.split,
                                              args.test_hardware, args.test_fraction, args.shuffle_buffer,
                                              args.resume, not args.quiet))
            return 0
        ds = load_dataset(args.datasets)
        split, few_shot = _split_options(args).make(ds, args.seed)
        print(f"{args.split}: {split.description}; train {len(split.train)} records (+{len(few_shot)} few-shot), "
              f"test {len(split.test)} records")
        with out:
            outcome = train_on_split(ds, args.model, split, few_shot, cfg, Path(args.out), args.resume,
                                     not args.quiet)
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
    p.add_argument("model_dir", metavar="MODEL_DIR", help="a folder written by crosstune train")
    p.add_argument("datasets", nargs="+", metavar="DATASET", help="dataset folders to evaluate on")
    p.add_argument("--hardware", type=split_list, default=None, metavar="NAME[,NAME]",
                   help="only these hardware names, comma-separated (default: all)")
    p.add_argument("--include-training-records", action="store_true",
                   help="also score the records the model was trained on")
    p.add_argument("--json", metavar="FILE", help="also write the numbers as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress bar")

    def run(args: argparse.Namespace) -> int:
        from .experiment import evaluate_model_dir
        from .outputs import check_file
        from .reporting import eval_json, eval_table, write_json

        check_file(args.json)
        result, notes = evaluate_model_dir(args.model_dir, args.datasets, args.hardware, args.include_training_records,
                                           progress=not args.quiet)
        print(eval_table(result))
        for key, value in notes.items():
            print(f"note: {key.replace('_', ' ')}: {value}")
        if args.json:
            write_json(args.json, eval_json(result, notes))
        return 0
    return run


@command("compare", "train and evaluate several models on one split, one table")
def _compare_args(p: argparse.ArgumentParser) -> Handler:
    p.add_argument("datasets", nargs="+", metavar="DATASET", help="dataset folders (made by crosstune import)")
    p.add_argument("--models", type=choice_list(MODELS), default=None, metavar="MODEL[,MODEL]",
                   help="models to compare, comma-separated; default: all")
    _add_split_args(p)
    _add_train_args(p)
    p.add_argument("--seeds", type=POSITIVE_INT, default=1, help="repeat with seeds seed..seed+N-1 and report mean and spread")
    p.add_argument("--json", metavar="FILE", help="also write the numbers as JSON")
    p.add_argument("--out", metavar="DIR",
                   help="also keep the trained models and the results here (crosstune report DIR makes a page)")
    _add_overwrite(p, "comparison")

    def run(args: argparse.Namespace) -> int:
        from pathlib import Path

        from .compare import run_comparison
        from .outputs import check_file, claim_folder

        args.models = args.models or list(model_names())
        _check_model_options(args, args.models)
        check_file(args.json)
        out = claim_folder(args.out, "compare", overwrite=args.overwrite, inputs=tuple(args.datasets)) if args.out else None
        if out is None:
            run_comparison(args.datasets, args.models, _split_options(args), lambda kind: _train_config(args, kind),
                           seeds=args.seeds, progress=not args.quiet, json_path=args.json)
            return 0
        with out:
            data = run_comparison(args.datasets, args.models, _split_options(args),
                                  lambda kind: _train_config(args, kind), seeds=args.seeds, progress=not args.quiet,
                                  json_path=args.json, out=Path(args.out))
            _write_compare_folder(Path(args.out), data, args)
        print(f"models and results in {args.out}/ (crosstune report {args.out} makes an HTML page)")
        return 0
    return run


def _write_compare_folder(out, data: dict, args: argparse.Namespace) -> None:
    """What `crosstune report DIR` reads: the results, how they were made, and a plot."""
    import numpy as np

    from .demo import plot_models
    from .report import compare_runs
    from .reporting import write_json

    data = {**data, "datasets": list(args.datasets), "models": list(args.models), "command": args.command_line}
    write_json(out / "compare.json", data)
    rows = [{"model": entry["model"], **{m: float(np.mean(entry["values"][m])) for m in ("pca", "top1", "top5")}}
            for entry in compare_runs(data)]
    plot_models(rows, out / "compare.png", data["split"]["description"])


@command("prune", "write a smaller dataset that keeps ranking accuracy")
def _prune_args(p: argparse.ArgumentParser) -> Handler:
    p.add_argument("dataset", metavar="DATASET", help="the dataset folder to prune (left unchanged)")
    p.add_argument("--strategy", required=True, choices=Names(_strategies), metavar="NAME",
                   help="how to choose the records to keep: %(choices)s")
    p.add_argument("--keep", type=number(0.0, 1.0, closed_low=False), required=True,
                   help="fraction of records to keep, in (0, 1]")
    p.add_argument("--seed", type=SEED, default=0, help="random seed of the strategies that sample")
    p.add_argument("--out", required=True, metavar="DATASET2", help="folder for the new, smaller dataset (must be new)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")

    def run(args: argparse.Namespace) -> int:
        from pathlib import Path

        from .dataset import load_dataset
        from .errors import CrosstuneError
        from .outputs import claim_folder, folder_kind
        from .prune import check_request, prune, write_pruned

        check_request(args.strategy, args.keep)  # names and ranges before loading anything
        if folder_kind(Path(args.out)) == "dataset":
            raise CrosstuneError(f"--out {args.out}: already holds a dataset; pruning never overwrites a dataset")
        out = claim_folder(args.out, "dataset", inputs=(args.dataset,))
        ds = load_dataset([args.dataset])
        pruning = prune(ds, args.strategy, args.keep, args.seed, progress=not args.quiet)
        with out:
            write_pruned(Path(args.dataset), ds, pruning, Path(args.out), args.strategy, args.keep, args.seed)
        print(f"{args.out}: kept {pruning.kept} of {len(ds)} records ({pruning.kept / len(ds):.1%})")
        for reason, count in pruning.removed.most_common():
            if count:
                print(f"  removed {count}: {reason}")
        return 0
    return run


@command("prune-study", "train on pruned data at several sizes, evaluate on unseen hardware, CSV + plot")
def _prune_study_args(p: argparse.ArgumentParser) -> Handler:
    p.add_argument("datasets", nargs="+", metavar="DATASET", help="dataset folders (made by crosstune import)")
    p.add_argument("--test-hardware", type=choice_list(), required=True, metavar="NAME[,NAME]",
                   help="hardware to hold out and evaluate on, comma-separated")
    p.add_argument("--model", default="xgb", choices=MODELS, metavar="MODEL", help="model to train: %(choices)s")
    p.add_argument("--keep", type=choice_list(), default=["1.0", "0.8", "0.6", "0.47", "0.3", "0.2"],
                   metavar="F[,F]", help="fractions of the training records to keep, comma-separated")
    p.add_argument("--strategies", type=choice_list(Names(_strategies)), default=None, metavar="NAME[,NAME]",
                   help="pruning strategies, comma-separated (default: all)")
    p.add_argument("--epochs", type=POSITIVE_INT, default=None, help="training epochs of neural models (default: 6)")
    p.add_argument("--seed", type=SEED, default=0, help="first random seed")
    p.add_argument("--seeds", type=POSITIVE_INT, default=1, help="average every point over this many seeds (from --seed)")
    p.add_argument("--out", default="prune-study", metavar="STUDY_DIR", help="folder for the CSV, JSON and plot")
    p.add_argument("--resume", action="store_true", help="reuse the points an interrupted run saved in STUDY_DIR")
    _add_overwrite(p, "pruning study")
    p.add_argument("--redo", type=split_list, default=[], metavar="NAME[,NAME]",
                   help="with --resume: recompute these strategies' points")

    def run(args: argparse.Namespace) -> int:
        from pathlib import Path

        from .outputs import claim_folder
        from .studies import parse_keeps, prune_study

        _check_model_options(args, [args.model], study=True)
        args.epochs = args.epochs or 6
        keeps = parse_keeps(",".join(args.keep))
        out = claim_folder(args.out, "prune-study", overwrite=args.overwrite, resume=args.resume, resumable=True,
                           inputs=tuple(args.datasets))
        with out:
            prune_study(args.datasets, args.test_hardware, args.model, keeps, Path(args.out),
                        args.strategies, _train_config(args, args.model), args.seeds,
                        args.resume, args.redo)
        print(f"results in {args.out}/ (crosstune report {args.out} makes an HTML page)")
        return 0
    return run


@command("split-study", "one model under every split strategy, with a leakage report")
def _split_study_args(p: argparse.ArgumentParser) -> Handler:
    p.add_argument("datasets", nargs="+", metavar="DATASET", help="dataset folders (made by crosstune import)")
    p.add_argument("--model", default="xgb", choices=MODELS, metavar="MODEL", help="model to train: %(choices)s")
    p.add_argument("--test-hardware", type=split_list, default=None, metavar="NAME[,NAME]",
                   help="hardware held out by the by-hardware split, comma-separated (default: the last hardware)")
    p.add_argument("--network-map", metavar="FILE.json", help="task id -> network(s); enables the by-network split")
    p.add_argument("--test-fraction", type=FRACTION, default=0.2, help="share held out by the other splits, in (0, 1)")
    p.add_argument("--epochs", type=POSITIVE_INT, default=None, help="training epochs of neural models (default: 6)")
    p.add_argument("--seed", type=SEED, default=0, help="random seed")
    p.add_argument("--out", default="split-study", metavar="STUDY_DIR", help="folder for the CSV, JSON and plot")
    _add_overwrite(p, "split study")

    def run(args: argparse.Namespace) -> int:
        from pathlib import Path

        from .outputs import claim_folder
        from .studies import split_study

        _check_model_options(args, [args.model])
        args.epochs = args.epochs or 6
        out = claim_folder(args.out, "split-study", overwrite=args.overwrite, inputs=tuple(args.datasets))
        with out:
            split_study(args.datasets, args.model, Path(args.out), args.test_hardware, args.network_map,
                        _train_config(args, args.model), args.test_fraction)
        print(f"results in {args.out}/ (crosstune report {args.out} makes an HTML page)")
        return 0
    return run


@command("few-shot-study", "few-shot curves: each model as the unseen device measures k programs per task")
def _few_shot_study_args(p: argparse.ArgumentParser) -> Handler:
    p.add_argument("datasets", nargs="+", metavar="DATASET", help="dataset folders (made by crosstune import)")
    p.add_argument("--test-hardware", required=True, metavar="NAME", help="the device to hold out and measure few-shot")
    p.add_argument("--models", type=choice_list(MODELS), default=["xgb", "crossfeat", "nearest"], metavar="MODEL[,MODEL]",
                   help="models, comma-separated (default: xgb,crossfeat,nearest)")
    p.add_argument("--shots", default="0,16,64,256,all", metavar="K[,K]",
                   help="points of the curve: programs per task (16), a share of each task (5%%), or all "
                        "(the within-device 90/10 ceiling); default: %(default)s")
    _add_train_args(p)
    p.add_argument("--seeds", type=POSITIVE_INT, default=1, help="repeat with seeds seed..seed+N-1 (mean and spread)")
    p.add_argument("--out", default="few-shot-study", metavar="STUDY_DIR", help="folder for the JSON, CSV and plot")
    p.add_argument("--resume", action="store_true", help="reuse the points an interrupted run saved in STUDY_DIR")
    _add_overwrite(p, "few-shot study")

    def run(args: argparse.Namespace) -> int:
        from pathlib import Path

        from .fewshot_study import few_shot_study, parse_shots
        from .outputs import claim_folder

        shots = parse_shots(args.shots)
        _check_model_options(args, args.models, study=True)
        out = claim_folder(args.out, "few-shot-study", overwrite=args.overwrite, resume=args.resume, resumable=True,
                           inputs=tuple(args.datasets))
        with out:
            few_shot_study(args.datasets, args.test_hardware, args.models, shots, Path(args.out),
                           lambda kind: _train_config(args, kind), args.seeds, args.resume, args.command_line,
                           progress=not args.quiet)
        print(f"results in {args.out}/ (crosstune report {args.out} makes an HTML page)")
        return 0
    return run


@command("report", "an HTML page of a study, benchmark, demo, comparison or tuning folder")
def _report_args(p: argparse.ArgumentParser) -> Handler:
    p.add_argument("directory", metavar="DIR", help="a folder written by demo, compare --out, prune-study, "
                                                    "split-study, few-shot-study, bench, tune or tune-compare")

    def run(args: argparse.Namespace) -> int:
        from pathlib import Path

        from .outputs import check_file
        from .report import write_report

        check_file(Path(args.directory) / "index.html", "DIR")
        path = write_report(Path(args.directory))
        print(f"wrote {path}")
        return 0
    return run


@command("bench", "MLPerf-HPC-style benchmark: time to train to a target PCA, staging, scaling, mllog logs")
def _bench_args(p: argparse.ArgumentParser) -> Handler:
    p.add_argument("--dataset", nargs="+", type=split_list, action=ExtendList, required=True, metavar="DATASET",
                   help="dataset folders")
    p.add_argument("--split", default="by-task", choices=Names(_split_kinds), metavar="KIND",
                   help="split whose test side is the validation set: %(choices)s")
    p.add_argument("--test-hardware", type=split_list, default=[], metavar="NAME[,NAME]",
                   help="by-hardware: hardware to hold out, comma-separated")
    p.add_argument("--test-fraction", type=FRACTION, default=0.2, help="share held out, in (0, 1)")
    p.add_argument("--target-pca", type=number(0.5, 1.0, closed_low=False, closed_high=False), required=True,
                   help="quality target: validation PCA, in (0.5, 1)")
    p.add_argument("--seeds", type=POSITIVE_INT, default=5, help="number of seeded runs")
    p.add_argument("--first-seed", type=SEED, default=0, help="seed of the first run")
    p.add_argument("--model", default="crossfeat", choices=MODELS, metavar="MODEL",
                   help="a neural model: %(choices)s (xgb has no epochs to time)")
    p.add_argument("--max-epochs", type=POSITIVE_INT, default=10,
                   help="a run that has not reached the target by then is aborted")
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    p.add_argument("--processes", type=choice_list(), default=["1"], metavar="N[,N]",
                   help="data-parallel process counts for strong scaling, comma-separated, e.g. 1,2")
    p.add_argument("--concurrent-models", type=COUNT, default=0, help="throughput mode: train this many models at once (0: off)")
    p.add_argument("--no-roofline", action="store_true", help="skip the roofline measurement")
    p.add_argument("--out", required=True, metavar="BENCH_DIR", help="folder for logs, summary and plots")
    _add_overwrite(p, "benchmark")

    def run(args: argparse.Namespace) -> int:
        import sys

        from .bench.mlperf import BenchSettings
        from .bench.suite import run_suite
        from .errors import CrosstuneError
        from .outputs import claim_folder

        try:
            processes = [int(p) for p in args.processes]
        except ValueError:
            raise CrosstuneError("--processes must be whole numbers, e.g. 1,2") from None
        if min(processes) < 1:
            raise CrosstuneError("--processes must be at least 1")
        settings = BenchSettings(args.dataset, args.target_pca, list(range(args.first_seed, args.first_seed + args.seeds)),
                                 args.out, args.split, args.test_hardware, args.test_fraction, args.model,
                                 args.max_epochs, args.device, processes[0])
        settings.check()
        out = claim_folder(args.out, "bench", overwrite=args.overwrite, keep_partial=True,  # logs of a stopped run
                           inputs=tuple(args.dataset))
        with out:
            data = run_suite(settings, processes, args.concurrent_models, not args.no_roofline)
        if data["aborted_runs"] or data["incomplete_runs"]:
            print("crosstune bench: some runs did not reach the target (see the logs)", file=sys.stderr)
            return 1
        return 0
    return run


@command("tune", "tune a whole network with MetaSchedule guided by a cost model, compile, check, time it")
def _tune_args(p: argparse.ArgumentParser) -> Handler:
    p.add_argument("--network", required=True, help="network to tune: resnet18, mobilenet_v2 or bert_layer")
    p.add_argument("--model", required=True, help="a crosstune model folder, or xgb (MetaSchedule's default)")
    p.add_argument("--trials", type=POSITIVE_INT, required=True, help="measured programs in total")
    p.add_argument("--hardware-config", required=True, help="local configuration, e.g. local-avx512-2c")
    p.add_argument("--fallback-xgb", action="store_true", help="use XGBoost if the model folder does not load")
    p.add_argument("--fine-tune-every", type=COUNT, default=0, help="fine-tune the model every N new measurements (0: never)")
    p.add_argument("--seed", type=SEED, default=0, help="random seed of the search")
    p.add_argument("--seeds-from", default=None, metavar="DB_DIR",
                   help="a MetaSchedule database tuned on other hardware (or other flags): each task's fastest "
                        "programs there are measured first, within --trials, and the search starts from them (they "
                        "go into the database the search starts from; the cost model learns from its own rounds only)")
    p.add_argument("--seeds-per-task", type=POSITIVE_INT, default=16, help="seed programs per task with --seeds-from")
    p.add_argument("--out", required=True, metavar="RUN_DIR", help="folder for the tuning database, results and plot")
    _add_overwrite(p, "tuning run")

    def run(args: argparse.Namespace) -> int:
        from .outputs import claim_folder

        out = claim_folder(args.out, "tune", overwrite=args.overwrite,
                           inputs=(args.model, *([args.seeds_from] if args.seeds_from else [])))
        from .tvm.tune import tune_network  # TVM loads slowly: after the cheap checks

        with out:
            r = tune_network(args.network, args.model, args.trials, args.hardware_config, args.out, args.fallback_xgb,
                             args.fine_tune_every, args.seed, args.seeds_from, args.seeds_per_task)
        print(f"{args.network} tuned with {r.cost_model}: {r.trials} trials in {r.tuning_seconds / 60:.1f} min; "
              f"end-to-end {r.latency_ms:.3f} ms (PyTorch eager {r.pytorch_latency_ms:.3f} ms); output "
              f"{'matches' if r.output_matches else 'DOES NOT match'} PyTorch (max abs error {r.output_max_abs_error:.2e})")
        if r.cost_model != "xgb":
            print(f"cost-model calls failed: {r.cost_model_failures} (of {r.cost_model_predict_calls} predict calls)")
        for note in r.notes:
            print(f"note: {note}")
        return 0 if r.output_matches else 1
    return run


def pretraining_datasets(values: list[str] | None) -> list[str]:
    """tune-compare's --dataset: folders, the word 'bundled' standing for the bundled dataset (the default)."""
    from .data import bundled_dataset

    return [str(bundled_dataset()) if value == "bundled" else value for value in (values or ["bundled"])]


def _search_settings(population: int, genetic_iters: int):
    from .tvm.rounds import SearchSettings  # imported when a run starts, after the cheap checks

    return SearchSettings(population_size=population, genetic_num_iters=genetic_iters,
                          init_min_unmeasured=min(50, population))


@command("tune-compare", "MetaSchedule's XGBoost (until converged), a pre-trained crosstune model and random "
                         "search on the same tuning budget: time to the baseline's latency")
def _tune_compare_args(p: argparse.ArgumentParser) -> Handler:
    from .tvm.rounds import DEFAULT_HEAD_START, HEAD_START_OPTIONS  # no TVM import: the options are plain names

    p.add_argument("--network", required=True, help="network to tune: resnet18, mobilenet_v2 or bert_layer")
    p.add_argument("--hardware-config", required=True, help="local configuration, e.g. local-avx512-2c")
    p.add_argument("--out", required=True, metavar="RUN_DIR", help="folder for every arm, the report and the curves")
    p.add_argument("--resume", action="store_true", help="continue a killed run in --out, re-using its trials")
    p.add_argument("--report-only", action="store_true",
                   help="tune nothing: write the report and curves from the arms as saved in --out (a run stopped "
                        "before its end; give the run's own options, and stop a live run first)")
    _add_overwrite(p, "tuning comparison")
    budget = p.add_mutually_exclusive_group(required=True)
    budget.add_argument("--trials", type=POSITIVE_INT, help="the baseline's fixed budget (the other arms get the same)")
    budget.add_argument("--until-converged", action="store_true",
                        help="run the baseline until its best estimated latency gains < 2%% over its last 25%% of trials")
    p.add_argument("--max-trials", type=POSITIVE_INT, default=4000, help="the baseline's cap with --until-converged")
    p.add_argument("--chunk-trials", type=POSITIVE_INT, default=256,
                   help="check convergence and save the cost model every N trials")
    p.add_argument("--arms", default="xgb,crosstune,random", help="comma-separated, of xgb,crosstune,random (xgb is the baseline)")
    p.add_argument("--model", default=None, metavar="DIR",
                   help="a pre-trained crosstune model (default: pre-train crossfeat on the dataset's other "
                        "configurations); xgb: the crosstune arm's options and seeds with MetaSchedule's XGBoost, a "
                        "control (early-stop and online-trees need a pre-trained model and do nothing there)")
    p.add_argument("--pretrain-on", choices=("others", "all"), default="others",
                   help="without --model, pre-train on the dataset's other configurations (zero-shot for "
                        "--hardware-config) or on all of them, its own records included (the report says "
                        "NOT zero-shot)")
    p.add_argument("--dataset", nargs="+", type=split_list, action=ExtendList, default=None, metavar="DATASET",
                   help="pre-training data; 'bundled' names the dataset that comes with crosstune, e.g. "
                        "--dataset bundled MINE adds your own records to it (default: bundled)")
    p.add_argument("--epochs", type=POSITIVE_INT, default=8, help="pre-training epochs of crossfeat")
    p.add_argument("--fine-tune-every", type=COUNT, default=64,
                   help="fine-tune the crosstune model on the run's own measurements every N of them (0: never)")
    p.add_argument("--fine-tune-epochs", type=POSITIVE_INT, default=1, help="epochs of each of those fine-tunes")
    p.add_argument("--fine-tune-lr-scale", type=float, default=0.25,
                   help="their learning rate, as a fraction of the model's own")
    p.add_argument("--head-start", default=",".join(DEFAULT_HEAD_START),
                   help="the crosstune arm's options, of " + ",".join(HEAD_START_OPTIONS) + ", or none: "
                        "16 programs in a task's first round (off by default: it measured slower to XGBoost's "
                        "latency); one 1-trial round for a task with one possible program; "
                        "rounds to the tasks that weigh most; stop a task when the model sees little left to gain; "
                        "16 programs in the first round of a task under 2%% of the network's FLOPs (on by default); "
                        "blend the model's scores with per-task trees fitted on the run's own measurements "
                        "(online-trees, off by default); search 4 samples for a one-program task and half the "
                        "population and iterations for a light task's first round (light-search); after a round that found "
                        "nothing faster, draw half the task's next round at random instead of 5%% (explore-on-stall, "
                        "off by default); every task's first round searches half the population and iterations "
                        "(lean-first-pass, off by default); a heavy task's first round measures three quarters of a "
                        "round (trimmed-first-round, off by default)")
    p.add_argument("--first-round-trials", type=POSITIVE_INT, default=16,
                   help="first round of a task with small-first-round, or of a light task with light-first-round")
    p.add_argument("--round-trials", type=POSITIVE_INT, default=64, help="programs per round (MetaSchedule's default)")
    p.add_argument("--tasks", default=None, help="tune only these tasks (comma-separated MetaSchedule task names; default: all)")
    p.add_argument("--population", type=POSITIVE_INT, default=512, help="evolutionary search population (MetaSchedule's default; "
                        "well below --round-trials, a round cannot find enough programs and its task stops)")
    p.add_argument("--genetic-iters", type=POSITIVE_INT, default=4, help="evolutionary search iterations (MetaSchedule's default)")
    p.add_argument("--crosstune-population", type=POSITIVE_INT, default=None,
                   help="the crosstune arm's own search population (default: --population); its folder's name says so")
    p.add_argument("--crosstune-genetic-iters", type=POSITIVE_INT, default=None,
                   help="the crosstune arm's own search iterations (default: --genetic-iters)")
    p.add_argument("--seeds-from", default=None, metavar="DB_DIR",
                   help="a MetaSchedule database tuned on other hardware (or other flags), e.g. an arm's folder of "
                        "another run: the crosstune arm measures each task's fastest programs there as the task's "
                        "first round, before any search (its folder's name says so)")
    p.add_argument("--seeds-per-task", type=POSITIVE_INT, default=16, help="seed programs per task with --seeds-from")
    p.add_argument("--skip-end-to-end", action="store_true", help="do not compile, check and time the tuned networks (done once every arm has finished, in a fresh process, arms interleaved)")
    p.add_argument("--checkpoints", type=number_list(number(0.0, 2.0, closed_low=False)), default=[],
                   metavar="FRACTIONS",
                   help="once the arms are done, compile every arm's network in --out (earlier runs' arms too) as it "
                        "stood at these fractions of xgb's tuning time (e.g. 0.15,0.25) and time it beside xgb's "
                        "final, as crosstune tune-checkpoints OUT --at FRACTIONS does")
    p.add_argument("--seed", type=SEED, default=0, help="random seed")

    def run(args: argparse.Namespace) -> int:
        from .errors import CrosstuneError
        from .outputs import claim_folder

        if args.report_only and args.overwrite:
            raise CrosstuneError("--report-only reads the run in --out; it cannot be combined with --overwrite")
        out = claim_folder(args.out, "tune-compare", overwrite=args.overwrite, resume=args.resume or args.report_only,
                           resumable=True, inputs=(*(args.dataset or ()), *([args.seeds_from] if args.seeds_from else [])))
        from .tvm.tune_compare import CompareSettings, tune_compare

        head_start = [] if args.head_start.strip() == "none" else split_list(args.head_start)
        settings = CompareSettings(
            args.network, args.hardware_config, Path(args.out), trials=args.trials,
            until_converged=args.until_converged, max_trials=args.max_trials, chunk_trials=args.chunk_trials,
            arms=split_list(args.arms), model=args.model, datasets=pretraining_datasets(args.dataset),
            pretrain_on=args.pretrain_on,
            epochs=args.epochs, fine_tune_every=args.fine_tune_every, fine_tune_epochs=args.fine_tune_epochs,
            fine_tune_lr_scale=args.fine_tune_lr_scale, head_start=head_start,
            first_round_trials=args.first_round_trials, round_trials=args.round_trials,
            tasks=split_list(args.tasks) if args.tasks else None,
            search=_search_settings(args.population, args.genetic_iters),
            crosstune_search=None if args.crosstune_population is None and args.crosstune_genetic_iters is None
            else _search_settings(args.crosstune_population or args.population,
                                  args.crosstune_genetic_iters or args.genetic_iters),
            seed=args.seed, end_to_end=not args.skip_end_to_end, report_only=args.report_only,
            checkpoints=args.checkpoints, seeds_from=args.seeds_from, seeds_per_task=args.seeds_per_task)
        with out:
            summary = tune_compare(settings, print_fn=functools.partial(print, flush=True))  # in order with TVM's log
        print(f"report: {Path(args.out) / 'tune-compare.json'}, curves: {Path(args.out) / 'tune-compare-curve.png'}")
        if "checkpoints" in summary:
            print(f"checkpoints: {summary['checkpoints']['file']}")
        elif len(summary["runs"]) > 1:
            print(f"the arms' networks as they stood at 15% and 25% of xgb's time, compiled and timed beside xgb's "
                  f"final: crosstune tune-checkpoints {args.out} (or --checkpoints 0.15,0.25 here)")
        ok = [r["output_matches"] for r in summary["runs"].values() if r["output_matches"] is not None]
        ok += [summary["checkpoints"]["output_matches"]] if "checkpoints" in summary else []
        return 0 if all(ok) else 1
    return run


@command("tune-checkpoints", "compile each arm of a tune-compare run as it stood at fractions of the baseline's "
                             "time and time it beside the baseline's final network")
def _tune_checkpoints_args(p: argparse.ArgumentParser) -> Handler:
    from .tvm.checkpoints import DEFAULT_FRACTIONS, ROUNDS

    p.add_argument("run", metavar="RUN_DIR", help="a tune-compare --out folder (its xgb arm is the baseline)")
    p.add_argument("--at", type=number_list(number(0.0, 2.0, closed_low=False)), default=None,
                   help="fractions of the baseline's tuning time, comma-separated, in (0, 2] (an arm may tune "
                        "longer than the baseline did on the same trials; default: "
                        f"{','.join(f'{f:g}' for f in DEFAULT_FRACTIONS)} unless --at-trials is given)")
    p.add_argument("--at-trials", type=number_list(POSITIVE_INT), default=[], metavar="COUNTS",
                   help="also cut every arm after these many trials, comma-separated: arms tuned on machines of "
                        "different speed compared at like measurements (an arm with fewer stops at its end)")
    p.add_argument("--arms", default=None, help="arm folders to checkpoint, comma-separated (default: every arm but xgb)")
    p.add_argument("--rounds", type=POSITIVE_INT, default=ROUNDS, help="interleaved timing rounds (median)")
    p.add_argument("--report-only", action="store_true", help="print the table of RUN's saved tune-checkpoints.json, "
                                                              "timing nothing")

    def run(args: argparse.Namespace) -> int:
        from .tvm import require_tvm
        from .tvm.checkpoints import check_run, format_checkpoints, outputs_match, saved_checkpoints, time_checkpoints

        if args.report_only:
            print(format_checkpoints(saved_checkpoints(Path(args.run))))
            return 0
        arms = split_list(args.arms) if args.arms else None
        check_run(Path(args.run), arms)  # a mistyped folder or arm fails here, before TVM loads
        require_tvm()
        fractions = args.at if args.at is not None else ([] if args.at_trials else list(DEFAULT_FRACTIONS))
        result = time_checkpoints(Path(args.run), arms, fractions, args.rounds,
                                  print_fn=functools.partial(print, flush=True), trial_counts=args.at_trials)
        print(format_checkpoints(result))
        print(f"report: {Path(args.run) / 'tune-checkpoints.json'}")
        return 0 if outputs_match(result) else 1
    return run


@command("demo", "train on all bundled hardware configurations but one, test on the unseen one, report")
def _demo_args(p: argparse.ArgumentParser) -> Handler:
    p.add_argument("--out", default="crosstune-demo", metavar="DIR", help="folder for the results and the HTML page")
    p.add_argument("--held-out", default=None, metavar="NAME",
                   help="hardware configuration to test on (default: local-avx512-2c, else the dataset's last)")
    p.add_argument("--epochs", type=POSITIVE_INT, default=6, help="training epochs of the neural models")
    p.add_argument("--seed", type=SEED, default=0, help="random seed")
    p.add_argument("--dataset", default=None, help="use this dataset instead of the bundled one (default: bundled)")
    _add_overwrite(p, "demo result")
    p.add_argument("--quiet", action="store_true", help="no progress bars")

    def run(args: argparse.Namespace) -> int:
        from .demo import run_demo
        from .outputs import claim_folder

        out = claim_folder(args.out, "demo", overwrite=args.overwrite, inputs=(args.dataset,) if args.dataset else ())
        with out:
            run_demo(args.out, args.held_out, args.epochs, args.seed, args.dataset, progress=not args.quiet,
                     command=args.command_line)
        return 0
    return run


@command("similarity", "how alike devices rank the programs they share, and each device's noise ceiling")
def _similarity_args(p: argparse.ArgumentParser) -> Handler:
    p.add_argument("datasets", nargs="+", metavar="DATASET", help="dataset folders (made by crosstune import)")
    p.add_argument("--json", metavar="FILE", help="also write the matrix as JSON (default: not written)")
    p.add_argument("--png", metavar="FILE", help="also draw it as a heatmap (default: not drawn)")

    def run(args: argparse.Namespace) -> int:
        from .outputs import check_file
        from .similarity import similarity_of_datasets, write_heatmap, write_json

        check_file(args.json)
        check_file(args.png, "--png")
        matrix = similarity_of_datasets(args.datasets)
        print(matrix.table())
        if args.json:
            write_json(matrix, args.json)
        if args.png:
            write_heatmap(matrix, args.png)
        return 0
    return run
