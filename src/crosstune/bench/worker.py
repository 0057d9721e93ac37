"""Entry point of one benchmark run: ``python -m crosstune.bench.worker SETTINGS_JSON SEED LOG`` (plain
or under torchrun, which makes it data-parallel)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .mlperf import BenchSettings, run_once


def main(argv: list[str]) -> int:
    settings = BenchSettings(**json.loads(argv[0]))
    run_once(settings, int(argv[1]), Path(argv[2]))
    from ..distributed import context, shutdown

    shutdown(context(settings.device))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
