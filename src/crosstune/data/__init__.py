"""The dataset bundled with crosstune: real MetaSchedule measurements of ResNet-18, MobileNet-V2 and a
BERT encoder layer on one CPU at several ISA x core configurations (see its manifest's provenance)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from ..errors import CrosstuneError

BUNDLED = "local-cpu"


def bundled_dataset() -> Path:
    path = Path(str(resources.files("crosstune.data").joinpath(BUNDLED)))
    if not (path / "manifest.json").is_file():
        raise CrosstuneError(f"the bundled dataset is missing from this installation ({path})")
    return path
