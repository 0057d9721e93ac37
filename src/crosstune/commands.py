"""Sub-commands beyond import/info, registered with :func:`crosstune.cli.command`."""

from __future__ import annotations

import argparse

from .cli import Handler, command


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
        print(f"measured {summary.measured} programs in {summary.seconds:.0f} s "
              f"({summary.programs_per_minute:.0f}/min); {summary.skipped_already_measured} were already measured")
        for reason, count in summary.failures.most_common():
            print(f"  failed {count}: {reason}")
        print(f"dataset: {summary.dataset}")
        return 0
    return run
