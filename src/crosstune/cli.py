"""crosstune: cost models for tensor-program auto-tuning that transfer to hardware they were never trained on.

Import measurement records (TenSet/Ansor logs, MetaSchedule databases) into a dataset, train and compare
cost models on honest splits (unseen hardware, unseen tasks), prune datasets, and tune real networks with
TVM MetaSchedule guided by a trained model.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from . import __version__, stopping
from .cli_registry import COMMANDS, Handler, command
from .errors import CrosstuneError
from .options import POSITIVE_INT, HelpFormatter, Parser
from .tables import plural


# ---------------------------------------------------------------------------------------------------
# import / info
# ---------------------------------------------------------------------------------------------------

@command("import", "import Ansor/TenSet, MetaSchedule or AutoTVM records into a dataset")
def _import_args(p: argparse.ArgumentParser) -> Handler:
    p.add_argument("sources", nargs="+", metavar="SRC", help="record files or directories (format detected per file)")
    p.add_argument("--hardware", required=True, help="name of the hardware the records were measured on")
    p.add_argument("--hardware-spec", metavar="FILE.json", help="descriptor for hardware not in the registry")
    p.add_argument("--out", required=True, metavar="DATASET", help="dataset folder (created, or added to)")
    p.add_argument("--codegen-isa", metavar="ISA", help="what the measured code was compiled for when it differs "
                   "from the chip (e.g. x86-64 for 'llvm' without -mcpu); the hardware vector uses its vector width")
    p.add_argument("--strict", action="store_true",
                   help="stop at the first bad line instead of skipping it (a new dataset is then not created)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--jobs", type=POSITIVE_INT, default=None, metavar="N",
                   help="read the files in N processes (default: the cores this process may use, once the "
                        "files pass 16 MiB); the dataset is the same for any N")

    def run(args: argparse.Namespace) -> int:
        from .importer import describe_report, import_sources
        from .outputs import claim_folder
        from .verify import verify_dataset

        out = claim_folder(args.out, "dataset", adds=True)
        if out.mode == "add":
            verify_dataset(out.path)  # adding to a damaged dataset would fail half-way or hide the damage
        with out:
            result = import_sources(args.sources, args.hardware, args.out, args.hardware_spec, args.strict, args.quiet,
                                    codegen_isa=args.codegen_isa, jobs=args.jobs)
            report = result.report
            if result.added == 0 and out.mode == "new":
                # an empty dataset is a mistake (wrong folder, wrong format): say so, and leave no folder
                raise CrosstuneError(f"no records imported from {' '.join(args.sources)} "
                                     f"({plural(report.lines, 'line')} read in {plural(report.files, 'file')}, "
                                     f"{plural(report.skipped_lines, 'line')} skipped, "
                                     f"{plural(len(report.skipped_files), 'file')} not records); {args.out} not created")
        print(f"{result.path}: +{plural(result.added, 'record')} of {result.hardware} "
              f"({plural(report.lines, 'line')} in {plural(report.files, 'file')}; "
              f"{plural(report.failed_measurements, 'failed measurement')} kept; "
              f"{report.duplicates} already present; {plural(report.skipped_lines, 'line')} skipped)")
        for line in describe_report(report):
            print(line)
        return 0
    return run


@command("info", "summarise one or more datasets (and check that their files are whole)")
def _info_args(p: argparse.ArgumentParser) -> Handler:
    p.add_argument("datasets", nargs="+", metavar="DATASET", help="dataset folders (made by crosstune import)")

    def run(args: argparse.Namespace) -> int:
        from .info import describe_dataset

        for path in args.datasets:
            print(describe_dataset(Path(path)))
        return 0
    return run


# ---------------------------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    _load_command_modules()
    parser = Parser(prog="crosstune", description=__doc__, epilog=_EPILOG,
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"crosstune {__version__}",
                        help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for name, (define, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text, formatter_class=HelpFormatter)
        p.set_defaults(handler=define(p))
    return parser


_EPILOG = """first steps:
  crosstune demo                                   train on 3 bundled CPU configurations, test on a 4th
  crosstune import LOGS --hardware v100 --out DS   your own records into a dataset
  crosstune compare DS --test-hardware v100        every model on the same unseen-hardware split
  crosstune COMMAND --help                         each command's options and their defaults"""


def _load_command_modules() -> None:
    """Commands of later layers register themselves from their own modules."""
    from . import commands  # noqa: F401


def main(argv: Sequence[str] | None = None) -> int:
    stopping.install()
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = parser.parse_args(argv)
    except SystemExit as done:
        if done.code in (0, None):  # --help, --version
            raise
        return done.code  # a usage mistake, already reported in one line by Parser.error
    args.command_line = "crosstune " + shlex.join(argv)  # shown in reports as the command that reproduces them
    if not getattr(args, "handler", None):
        parser.print_help()
        return 2
    stderr = sys.stderr
    sys.stderr = tracked = _LineEnds(stderr)  # progress bars draw here: see _say
    try:
        with stopping.failures_after_a_stop_are_interruptions():
            return args.handler(args)
    except CrosstuneError as err:
        _say(tracked, f"crosstune {args.command}: error: {err}")
        return 2
    except KeyboardInterrupt:
        _say(tracked, f"crosstune {args.command}: interrupted")
        return 130
    except BrokenPipeError:
        # the reader went away (`crosstune info DS | head`): stop quietly, as other command-line tools do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so that flushing stdout at exit does not raise again
        return 141
    finally:
        sys.stderr = stderr


class _LineEnds:
    """stderr, remembering whether what was last written ended its line (a progress bar's never does)."""

    def __init__(self, stream):
        self._stream = stream
        self.at_line_start = True

    def write(self, text: str) -> int:
        if text:
            self.at_line_start = text.endswith("\n")
        return self._stream.write(text)

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _say(stderr: _LineEnds, message: str) -> None:
    """A final message on a line of its own, never appended to a progress bar's."""
    _close_progress_bars()
    if not stderr.at_line_start:
        stderr.write("\n")
    print(message, file=stderr)


def _close_progress_bars() -> None:
    """End any progress bar still drawn (one inside a generator stays open until collected)."""
    try:
        from tqdm import tqdm
    except ImportError:
        return
    for bar in list(getattr(tqdm, "_instances", ())):
        bar.close()


if __name__ == "__main__":
    sys.exit(main())  # commands register in cli_registry, which a `python -m crosstune.cli` copy shares
