"""Shared fixtures: small real measurement samples committed under tests/data (Roller's MIT-licensed Ansor
records, TVM's Apache-2.0 format variants, a MetaSchedule database measured with `crosstune collect`), so the
suite runs on a fresh clone. The large sets in ../shared/data serve the `integration` tests only, which skip
with their reason where ../shared is absent."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("CROSSTUNE_SHARED_DATA", REPO.parent / "shared" / "data"))
TEST_DATA = REPO / "tests" / "data"
MS_DB = TEST_DATA / "ms-resnet18-2tasks"
FORMAT_VARIANTS = TEST_DATA / "ansor-format-variants"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The large shared sets: only `integration` tests use them; a fresh clone has none."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"integration data not found at {SHARED_DATA} (a fresh clone has no ../shared; "
                    "set CROSSTUNE_SHARED_DATA to run these)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def roller() -> Path:
    """A few real task files of each GPU (tests/data/roller-ansor/README.md)."""
    return TEST_DATA / "roller-ansor"


@pytest.fixture(scope="session")
def small_roller(tmp_path_factory, roller) -> Path:
    """Four real task files per GPU (one per operator kind), the same operators on both GPUs."""
    root = tmp_path_factory.mktemp("roller-small")
    common = ["ansor_matmul_128_4032_1000", "ansor_depthwise_128_168_42_42_3_3_1_SAME",
              "ansor_avg_pooling_128_168_42_42_3_3_1_SAME"]
    picks = {"k80": common + ["ansor_conv2d_128_256_14_14_256_3_3_1_0"],
             "v100": common + ["ansor_conv2d_128_256_14_14_256_3_3_1_SAME"]}
    for gpu, stems in picks.items():
        (root / gpu).mkdir()
        for stem in stems:
            src = roller / gpu / f"{stem}.json.gz"
            assert src.exists(), src
            (root / gpu / src.name).symlink_to(src)
    return root


def real_lines(roller: Path, n: int = 20) -> list[bytes]:
    path = sorted((roller / "k80").iterdir())[0]
    with gzip.open(path, "rb") as stream:
        return [next(stream) for _ in range(n)]


@pytest.fixture(scope="session")
def small_dataset(tmp_path_factory, small_roller) -> Path:
    from crosstune.importer import import_sources

    out = tmp_path_factory.mktemp("ds") / "roller-small"
    import_sources([small_roller / "k80"], "k80", out)
    import_sources([small_roller / "v100"], "v100", out)
    return out


@pytest.fixture(scope="session")
def tiny_dataset(tmp_path_factory, small_dataset) -> Path:
    """10% of the small dataset (100 real programs per task and GPU), written as a dataset."""
    from crosstune.dataset import load_dataset
    from crosstune.prune import prune, write_pruned

    ds = load_dataset([small_dataset])
    out = tmp_path_factory.mktemp("tiny") / "ds"
    write_pruned(small_dataset, ds, prune(ds, "random", 0.1), out, "random", 0.1, 0)
    return out


@pytest.fixture
def signal_handlers_restored():
    """For tests that run crosstune's main() (or crosstune.stopping.install) in this process: pytest's own
    SIGTERM and Ctrl-C handling comes back afterwards."""
    import signal

    saved = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    yield
    signal.signal(signal.SIGTERM, saved[0])
    signal.signal(signal.SIGINT, saved[1])
