"""`crosstune report DIR`: one HTML page with the tables and plots found in a result directory
(prune study, split study, compare/demo results, benchmark runs, tuning runs). Plots stay PNG files
beside the page, so it opens in any browser without a server."""

from __future__ import annotations

import csv
import html
import json
from pathlib import Path

from .dataset import atomic_write_text
from .errors import CrosstuneError

_SECTIONS = (
    ("demo.json", "Demo: transfer to a held-out hardware configuration"),
    ("compare.json", "Model comparison"),
    ("prune-study.csv", "Pruning study"),
    ("split-study.csv", "Split-strategy study"),
    ("bench-summary.json", "Training benchmark (MLPerf HPC style)"),
    ("tune-compare.json", "Tuning comparison"),
    ("tune.json", "Tuning run"),
)


def _table(rows: list[dict], columns: list[str] | None = None) -> str:
    if not rows:
        return "<p>(empty)</p>"
    columns = columns or list(rows[0])
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = []
    for row in rows:
        cells = []
        for c in columns:
            value = row.get(c, "")
            try:
                number = float(value)
                text = f"{number:.4f}" if abs(number) < 1000 and number != int(number) else f"{number:g}"
            except (TypeError, ValueError):
                text = str(value)
            cells.append(f"<td>{html.escape(text)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _images(directory: Path, stem: str) -> str:
    return "".join(f'<figure><img src="{html.escape(p.name)}" alt="{html.escape(p.stem)}"><figcaption>{html.escape(p.name)}</figcaption></figure>'
                   for p in sorted(directory.glob(f"{stem}*.png")))


def _section(directory: Path, name: str, title: str) -> str:
    path = directory / name
    stem = name.rsplit(".", 1)[0]
    parts = [f"<h2>{html.escape(title)}</h2>"]
    if name.endswith(".csv"):
        with open(path, newline="") as stream:
            parts.append(_table(list(csv.DictReader(stream))))
        summary = directory / f"{stem}.json"
        if summary.is_file():
            data = json.loads(summary.read_text())
            if data.get("best"):
                best = data["best"]
                parts.append(f"<p>Largest reduction within 0.5 PCA points of full data: <b>{html.escape(best['strategy'])}</b> "
                             f"keeps {best['kept_fraction']:.0%} of the records (PCA {best['pca']:.4f} vs "
                             f"{data['full']['pca']:.4f}).</p>")
            for note in data.get("skipped", []):
                parts.append(f"<p>Skipped: {html.escape(note)}</p>")
    else:
        data = json.loads(path.read_text())
        for key, value in data.items():
            if isinstance(value, list) and value and isinstance(value[0], dict):
                parts.append(f"<h3>{html.escape(key)}</h3>" + _table(value))
            elif isinstance(value, (str, int, float)):
                parts.append(f"<p>{html.escape(key)}: {html.escape(str(value))}</p>")
        if "table" in data:
            parts.append(f"<pre>{html.escape(data['table'])}</pre>")
    parts.append(_images(directory, stem))
    return "\n".join(parts)


def write_report(directory: Path) -> Path:
    if not directory.is_dir():
        raise CrosstuneError(f"{directory}: no such directory")
    sections = [_section(directory, name, title) for name, title in _SECTIONS if (directory / name).is_file()]
    if not sections:
        known = ", ".join(name for name, _ in _SECTIONS)
        raise CrosstuneError(f"{directory}: nothing to report (expected one of {known})")
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>crosstune report: {html.escape(directory.name)}</title>
<style>body{{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}}
table{{border-collapse:collapse;margin:1em 0;font-size:90%}}td,th{{border:1px solid #ccc;padding:3px 7px;text-align:right}}
th{{background:#f0f0f0}}img{{max-width:100%}}figure{{margin:1em 0}}pre{{background:#f6f6f6;padding:1em;overflow:auto}}</style>
</head><body><h1>crosstune report: {html.escape(str(directory))}</h1>
{''.join(sections)}
</body></html>
"""
    out = directory / "index.html"
    atomic_write_text(out, page)
    return out
