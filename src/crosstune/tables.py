"""Plain-text tables for the terminal (no colour codes, so they paste into issues and logs)."""

from __future__ import annotations

from collections.abc import Sequence


def fmt(value: object, digits: int = 3) -> str:
    if isinstance(value, float):
        if value != value:  # NaN
            return "-"
        return f"{value:.{digits}f}"
    return str(value)


def plural(count: int, noun: str) -> str:
    """``plural(1, "line")`` -> "1 line", ``plural(2, "line")`` -> "2 lines"."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]], digits: int = 3) -> str:
    cells = [[fmt(c, digits) for c in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)),
             "  ".join("-" * w for w in widths)]
    for row in cells:
        lines.append("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))))
    return "\n".join(lines)
