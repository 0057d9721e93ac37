"""Every module of the package imports on its own, in a fresh interpreter (an import circle shows up
only when the first import of a process is the wrong module)."""

from __future__ import annotations

import importlib.util
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import crosstune

HAS_TVM = importlib.util.find_spec("tvm") is not None


def _modules() -> list[str]:
    root = Path(crosstune.__file__).parent
    names = ["crosstune"] + [m.name for m in pkgutil.walk_packages([str(root)], prefix="crosstune.")]
    return sorted(names)


def _marks(name: str):
    if name.startswith("crosstune.tvm.") and not HAS_TVM:
        return [pytest.mark.skip(reason="TVM is not installed: crosstune.tvm.* needs it (pip install apache-tvm)")]
    return []


@pytest.mark.parametrize("module", [pytest.param(m, marks=_marks(m)) for m in _modules()])
def test_module_imports_in_a_fresh_interpreter(module):
    # crosstune.__main__ runs the command line when imported: run it with --version instead.
    command = ["-m", "crosstune", "--version"] if module == "crosstune.__main__" else ["-c", f"import {module}"]
    result = subprocess.run([sys.executable, *command], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]


def test_every_module_is_found():
    names = _modules()
    assert {"crosstune.train", "crosstune.models.registry", "crosstune.cli", "crosstune.commands"} <= set(names)
