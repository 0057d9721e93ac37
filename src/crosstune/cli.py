"""The `crosstune` command: a thin layer over library functions that tests call directly.

Every user mistake surfaces as a CrosstuneError, printed as one line on stderr with exit status 2.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from . import __version__
from .cli_registry import COMMANDS, Handler, command
from .errors import CrosstuneError


# ---------------------------------------------------------------------------------------------------
# import / info
# ---------------------------------------------------------------------------------------------------

@command("import", "import Ansor/TenSet or MetaSchedule records into a dataset")
def _import_args(p: argparse.ArgumentParser) -> Handler:
    p.add_argument("sources", nargs="+", metavar="SRC", help="record files or directories (format detected per file)")
    p.add_argument("--hardware", required=True, help="name of the hardware the records were measured on")
    p.add_argument("--hardware-spec", metavar="FILE.json", help="descriptor for hardware not in the registry")
    p.add_argument("--out", required=True, metavar="DATASET", help="dataset directory (created or added to)")
    p.add_argument("--strict", action="store_true", help="stop at the first bad line instead of skipping it")
    p.add_argument("--quiet", action="store_true", help="no progress bar")

    def run(args: argparse.Namespace) -> int:
        from .importer import describe_report, import_sources

        result = import_sources(args.sources, args.hardware, args.out, args.hardware_spec, args.strict, args.quiet)
        report = result.report
        print(f"{result.path}: +{result.added} records of {result.hardware} "
              f"({report.lines} lines in {report.files} file(s); {report.failed_measurements} failed "
              f"measurements kept; {report.duplicates} already present; {report.skipped_lines} lines skipped)")
        for line in describe_report(report):
            print(line)
        return 0
    return run


@command("info", "summarise one or more datasets")
def _info_args(p: argparse.ArgumentParser) -> Handler:
    p.add_argument("datasets", nargs="+", metavar="DATASET")

    def run(args: argparse.Namespace) -> int:
        from .info import describe_dataset

        for path in args.datasets:
            print(describe_dataset(Path(path)))
        return 0
    return run


# ---------------------------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    _load_command_modules()
    parser = argparse.ArgumentParser(prog="crosstune", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"crosstune {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (define, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(handler=define(p))
    return parser


def _load_command_modules() -> None:
    """Commands of later layers register themselves from their own modules."""
    from . import commands  # noqa: F401


def _interrupt_on_sigterm(signum, frame) -> None:
    raise KeyboardInterrupt  # a `kill` stops a command as cleanly as Ctrl-C (children stopped, exit 130)


def main(argv: Sequence[str] | None = None) -> int:
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _interrupt_on_sigterm)
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return 2
    try:
        return args.handler(args)
    except CrosstuneError as err:
        print(f"crosstune {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"crosstune {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())  # commands register in cli_registry, which a `python -m crosstune.cli` copy shares
