"""matplotlib for writing PNG files: the Agg backend (no display is needed or used), written atomically."""

from __future__ import annotations

from pathlib import Path


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend (imported on first use: matplotlib is slow to import)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, path: str | Path, dpi: int = 110) -> None:
    """Write ``fig`` to ``path`` (format from its suffix) so that a reader never sees half a file, and
    close it."""
    from .atomic import staged_file

    try:
        with staged_file(path) as tmp:
            fig.savefig(tmp, dpi=dpi)
    finally:
        pyplot().close(fig)
