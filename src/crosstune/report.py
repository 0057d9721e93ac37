"""`crosstune report DIR`: one HTML page of a result folder (demo, comparison, pruning or split study,
benchmark, tuning run) that a user can send to a colleague: what was trained on what, the results
table once with the random floor, the plots, the command that reproduces it, and what the numbers
mean. Plots stay PNG files beside the page, so it opens in any browser without a server."""

from __future__ import annotations

import csv
import html
import json
import math
from pathlib import Path

from .atomic import write_text as atomic_write_text
from .errors import CrosstuneError

# ---------------------------------------------------------------------------------------------------
# metric names
# ---------------------------------------------------------------------------------------------------

HEADLINE = ("pca", "pca_mean", "top1", "top5", "top10", "top1_mean", "peak@5")
LABELS = {"pca": "PCA", "pca_mean": "PCA task mean", "top1": "top-1 (Σ)", "top5": "top-5 (Σ)",
          "top10": "top-10 (Σ)", "top1_mean": "top-1 mean", "top5_mean": "top-5 mean", "top10_mean": "top-10 mean",
          "peak@5": "peak@5", "train_seconds": "training time", "model": "model"}


def headline(metrics: dict) -> dict:
    """The figures a page shows, under their names in the metrics rules: ``top1`` is the Σ form
    (TLP's headline), ``top1_mean`` the mean of per-task ratios, ``pca_mean`` the task mean of PCA.
    Results written before those names (``top1`` = mean, ``top1_sum`` = Σ, ``pca_unweighted``) are
    read too, so older result folders still make a correct page."""
    renamed = "top1_sum" not in metrics
    view = {"pca": metrics.get("pca"), "pca_mean": metrics.get("pca_mean", metrics.get("pca_unweighted")),
            "peak@5": metrics.get("peak@5")}
    for k in (1, 5, 10):
        view[f"top{k}"] = metrics.get(f"top{k}") if renamed else metrics.get(f"top{k}_sum")
        view[f"top{k}_mean"] = metrics.get(f"top{k}_mean") if renamed else metrics.get(f"top{k}")
    return view


def column_label(name: str, columns: list[str]) -> str:
    """A readable heading for a result column (the raw key only when nothing better is known)."""
    old_layout = "top1_sum" in columns
    if old_layout and name.startswith("top") and name[3:].isdigit():
        return f"top-{name[3:]} mean"
    if name.endswith("_sum") and name.startswith("top"):
        return f"top-{name[3:-4]} (Σ)"
    if name == "pca_unweighted":
        return "PCA task mean"
    if name.startswith("random_top") and name[10:].isdigit():
        return f"random top-{name[10:]}" + (" mean" if old_layout else " (Σ)")
    if name.endswith("_std") and name[:-4] in LABELS:
        return f"{LABELS[name[:-4]]} std"
    return LABELS.get(name, name.replace("_", " "))


MODEL_NOTES = {
    "crossfeat": "cross-feature model: attention over the program's schedule steps, joined with the hardware's features",
    "crossfeat-nohw": "the same model without the hardware features (ablation)",
    "tlp": "TLP: attention over schedule steps, no hardware features",
    "xgb": "XGBoost ranking on per-program feature counts (TVM's default kind of cost model)",
    "random": "the exact expectation of a random ranking (the floor every model must beat)",
}

GLOSSARY = (
    ("PCA", "pairwise comparison accuracy (TenSet): within a task, the share of program pairs the model orders like "
            "the measurements; averaged over tasks weighted by their number of programs. 0.5 is a coin toss."),
    ("PCA task mean", "the same, averaged over tasks with equal weight (small tasks count as much as big ones)."),
    ("top-k (Σ)", "TLP's headline: for each task, take the fastest of the model's k highest-ranked programs; "
                  "sum of the tasks' best latencies / sum of those picks' latencies. 1 = the best program is always "
                  "among the top k; heavy tasks weigh more."),
    ("top-k mean", "the mean over tasks of best latency / latency of the best of the top k picks (every task "
                   "counts the same)."),
    ("peak@k", "TenSet: mean over i ≤ k of best throughput among the top-i picks / the task's best throughput."),
    ("random floor", "what a random ranking scores, computed exactly (expectation over all orderings, not sampled); "
                     "for top-k (Σ): Σ best / Σ E[best of a random k-subset]."),
)


# ---------------------------------------------------------------------------------------------------
# HTML pieces
# ---------------------------------------------------------------------------------------------------

def esc(value) -> str:
    return html.escape(str(value))


def fmt(value, digits: int = 3) -> str:
    """Numbers as a reader wants them: 3 decimals for scores, no 13-digit floats anywhere."""
    if isinstance(value, bool) or value is None:
        return "" if value is None else ("yes" if value else "no")
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isnan(value):
            return "–"
        if value == int(value) and abs(value) >= 1000:
            return f"{int(value):,}"
        return f"{value:.{digits}f}" if abs(value) < 1000 else f"{value:,.0f}"
    try:
        return fmt(float(value), digits) if str(value).strip() and "." in str(value) else str(value)
    except ValueError:
        return str(value)


def duration(seconds: float) -> str:
    seconds = float(seconds)
    if seconds < 60:
        return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {rest} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def table(rows: list[dict], columns: list[str], labels: dict[str, str] | None = None, best: set[str] = frozenset(),
          floor_row: str | None = None) -> str:
    """An HTML table; in the ``best`` columns the highest value among the non-floor rows is bold."""
    if not rows:
        return "<p>(no rows)</p>"
    labels = labels or {c: column_label(c, columns) for c in columns}
    top = {}
    for c in best:
        values = [r.get(c) for r in rows if r.get("model") != floor_row and isinstance(r.get(c), (int, float))]
        top[c] = max(values) if values else None
    head = "".join(f"<th>{esc(labels.get(c, c))}</th>" for c in columns)
    body = []
    for row in rows:
        cells = []
        for c in columns:
            value = row.get(c, "")
            text = duration(value) if c.endswith("seconds") and isinstance(value, (int, float)) else fmt(value)
            strong = c in top and top[c] is not None and value == top[c]
            align = "" if _numeric(value) else ' class="text"'  # words left, numbers right
            cells.append(f"<td{align}>{'<b>' + esc(text) + '</b>' if strong else esc(text)}</td>")
        cls = ' class="floor"' if floor_row is not None and row.get("model") == floor_row else ""
        body.append(f"<tr{cls}>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _numeric(value) -> bool:
    try:
        float(str(value).split(" ")[0])
        return True
    except ValueError:
        return not str(value)


def figure(directory: Path, name: str, caption: str) -> str:
    if not (directory / name).is_file():
        return ""
    return (f'<figure><img src="{esc(name)}" alt="{esc(caption)}"><figcaption>{esc(caption)}</figcaption>'
            "</figure>")


LEGEND = ("PCA: share of program pairs ordered right (0.5 = coin toss); top-k (Σ): Σ best latency / Σ latency of "
          "the best of the model's k top picks (1 = perfect); top-1 mean: the per-task average of that ratio; "
          "peak@5: TenSet's peak performance within the top 5; random: the exact random-ranking floor. "
          "Bold: the best model in each column.")


def glossary() -> str:
    items = "".join(f"<dt>{esc(term)}</dt><dd>{esc(text)}</dd>" for term, text in GLOSSARY)
    return f'<h2>What the numbers mean</h2><dl class="glossary">{items}</dl>'


def reproduce(command: str | None, extra: str = "") -> str:
    if not command:
        return ""
    import shlex

    try:  # absolute paths become their last part: the reader has no such folder, and it is nobody's business
        command = shlex.join(shown_path(word) if word.startswith("/") else word for word in shlex.split(command))
    except ValueError:
        pass
    return f"<h2>Reproduce</h2><pre>{esc(command)}</pre>{extra}"


def shown_path(path: str | None) -> str:
    """A path as a page may show it: never absolute (a page is sent to people without that folder)."""
    if not path:
        return ""
    p = Path(path)
    return p.name if p.is_absolute() else str(p)


# ---------------------------------------------------------------------------------------------------
# sections, one per kind of result folder
# ---------------------------------------------------------------------------------------------------

def _load_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CrosstuneError(f"{path}: unreadable JSON ({err}); the result was damaged, run its command again") from None
    if not isinstance(data, dict):
        raise CrosstuneError(f"{path}: not a crosstune result (a JSON object was expected)")
    return data


def _load_csv(path: Path) -> list[dict]:
    try:
        with open(path, newline="") as stream:
            rows = list(csv.DictReader(stream))
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        raise CrosstuneError(f"{path}: unreadable CSV ({err})") from None
    return [{key: _number(value) for key, value in row.items()} for row in rows]


def _number(text):
    """CSV cells as numbers where they are numbers, so they are formatted like the JSON ones."""
    try:
        return int(text)
    except (TypeError, ValueError):
        pass
    try:
        return float(text)
    except (TypeError, ValueError):
        return text


def _missing(path: Path, key: str):
    return CrosstuneError(f"{path}: not a complete result (no {key!r}); run its command again")


def demo_section(directory: Path) -> tuple[str, str]:
    path = directory / "demo.json"
    data = _load_json(path)
    try:
        rows, held_out = data["rows"], data["held_out"]
    except KeyError as err:
        raise _missing(path, err.args[0]) from None
    columns = ["model", *[c for c in HEADLINE if any(r.get(c) is not None for r in rows)], "train_seconds"]
    shown_rows = [{**r, "train_seconds": r.get("train_seconds") if r["model"] != "random" else None} for r in rows]
    trained_on = data.get("trained_on", [])
    counts = data.get("counts", {})
    dataset = data.get("dataset_label") or shown_path(data.get("dataset"))
    models = [r["model"] for r in rows if r["model"] != "random"]
    winner = _winner(rows, "top1") or _winner(rows, "pca")
    parts = [
        "<p class=\"lead\">Can a cost model rank the programs of a hardware configuration it has never seen? "
        f"{len(models)} cost models were trained on the programs measured on <b>{esc(', '.join(trained_on))}</b>"
        + (f" ({fmt(counts.get('train_records'))} programs of {fmt(counts.get('tasks'))} tasks)" if counts else "")
        + f" and asked to rank the programs of the same tasks measured on <b>{esc(held_out)}</b>, which none of them saw"
        + (f" ({fmt(counts.get('test_records'))} programs)" if counts else "") + f". Dataset: {esc(dataset)}.</p>",
        "<ul class=\"models\">" + "".join(f"<li><b>{esc(m)}</b>: {esc(MODEL_NOTES.get(m, ''))}</li>" for m in models + ["random"])
        + "</ul>",
        f"<h2>Results on the unseen configuration {esc(held_out)}</h2>",
        table(shown_rows, columns, best=set(columns[1:-1]), floor_row="random"),
        f'<p class="legend">{esc(LEGEND)}</p>',
    ]
    if winner:
        parts.append(f"<p>On this split <b>{esc(winner[0])}</b> ranks best by {esc(LABELS[winner[1]])} "
                     f"({fmt(winner[2])}, random floor {fmt(winner[3])}).</p>")
    parts.append(figure(directory, "demo-models.png", f"Scores on the unseen configuration {held_out} (1 = perfect); "
                                                      "the random floor is the last group"))
    per_op = data.get("per_operator", [])
    if per_op:
        op_cols = [c for c in ("operator", "model", "pca", "top1", "top5") if any(c in r for r in per_op)]
        parts.append("<h2>Per operator kind</h2>" + table(per_op, op_cols + (["random_top1"] if "random_top1" in per_op[0] else []),
                     labels={**{c: column_label(c, op_cols) for c in op_cols}, "random_top1": "random top-1 (Σ)"}))
    took = f"<p>It took {duration(data['seconds'])} here" if "seconds" in data else "<p>"
    parts.append(reproduce(data.get("command"), f"{took}{', crosstune ' + esc(data['crosstune_version']) if data.get('crosstune_version') else ''}.</p>"))
    return "Does a cost model transfer to hardware it never saw?", "\n".join(parts)


def _winner(rows: list[dict], metric: str):
    scored = [r for r in rows if r["model"] != "random" and isinstance(r.get(metric), (int, float))]
    floor = next((r.get(metric) for r in rows if r["model"] == "random"), None)
    if not scored or floor is None:
        return None
    best = max(scored, key=lambda r: r[metric])
    return best["model"], metric, best[metric], floor


def compare_runs(data: dict) -> list[dict]:
    """Per model (and the random floor): each headline metric's values over the seeds, read through
    :func:`headline` so that every column is the form its name says."""
    runs = data.get("runs") or []
    if not runs:
        return []
    kinds = list(runs[0]["results"])
    rows = []
    for kind in kinds + ["random"]:
        views = [headline(run["results"][kinds[0]]["overall"]["random"] if kind == "random"
                          else run["results"][kind]["overall"]) for run in runs]
        row = {"model": kind, "values": {m: [v[m] for v in views if v.get(m) is not None] for m in HEADLINE}}
        if kind != "random":
            row["train_seconds"] = sum(run["timings"][kind]["train_seconds"] for run in runs) / len(runs)
        rows.append(row)
    return rows


def compare_section(directory: Path) -> tuple[str, str]:
    import numpy as np

    path = directory / "compare.json"
    data = _load_json(path)
    try:
        split = data["split"]
        per_model = compare_runs(data)
    except (KeyError, TypeError, IndexError) as err:
        raise _missing(path, err.args[0] if err.args else "runs") from None
    if not per_model:
        raise _missing(path, "runs")
    seeds = data.get("seeds", [])
    several = len(data["runs"]) > 1
    metrics = [m for m in HEADLINE if all(r["values"].get(m) for r in per_model)]
    rows = []
    for entry in per_model:
        row = {"model": entry["model"], "train_seconds": entry.get("train_seconds")}
        for m in metrics:
            values = np.array(entry["values"][m], dtype=float)
            row[m] = f"{values.mean():.3f} ± {values.std():.3f}" if several else float(values.mean())
        rows.append(row)
    columns = ["model"] + metrics + ["train_seconds"]
    labels = {c: column_label(c, columns) for c in columns}
    parts = [f"<p class=\"lead\">{len(rows) - 1} models trained on the same split and evaluated on the same held-out "
             f"records: <b>{esc(split.get('kind', ''))}</b>, {esc(split.get('description', ''))}. "
             + (f"Mean over seeds {', '.join(map(str, seeds))} (± standard deviation)." if several else
                f"Seed {seeds[0]}." if seeds else "") + "</p>",
             table(rows, columns, labels, best=set() if several else set(metrics), floor_row="random"),
             f'<p class="legend">{esc(LEGEND)}</p>',
             figure(directory, "compare.png", "Mean scores on the held-out records (1 = perfect)"),
             reproduce(data.get("command"))]
    if data.get("complete") is False:
        parts.insert(0, "<p><b>Incomplete:</b> the comparison was stopped before every seed finished.</p>")
    return "Model comparison", "\n".join(parts)


def prune_study_section(directory: Path) -> tuple[str, str]:
    rows = _load_csv(directory / "prune-study.csv")
    parts = []
    summary_path = directory / "prune-study.json"
    data = _load_json(summary_path) if summary_path.is_file() else {}
    if data.get("best") and data.get("full"):
        best, full = data["best"], data["full"]
        parts.append(f"<p class=\"lead\">Largest reduction within 0.005 PCA of the full training data: "
                     f"<b>{esc(best['strategy'])}</b> keeps {best['kept_fraction']:.0%} of the records "
                     f"(PCA {best['pca']:.4f} against {full['pca']:.4f}).</p>")
    elif data.get("complete") is not None:
        parts.append("<p class=\"lead\">No pruned training set stayed within 0.005 PCA of the full training data.</p>")
    columns = list(rows[0]) if rows else []
    parts.append(table(rows, columns))
    for note in data.get("skipped", []):
        parts.append(f"<p>Skipped: {esc(note)}</p>")
    parts.append(figure(directory, "prune-study.png", "Score against the share of training records kept"))
    return "Pruning study", "\n".join(parts)


def split_study_section(directory: Path) -> tuple[str, str]:
    rows = _load_csv(directory / "split-study.csv")
    columns = list(rows[0]) if rows else []
    summary_path = directory / "split-study.json"
    data = _load_json(summary_path) if summary_path.is_file() else {}
    parts = [f"<p class=\"lead\">One model ({esc(data.get('model', '?'))}) under every way of holding out test data, "
             "with how much the test side leaks from the training side.</p>", table(rows, columns)]
    for note in data.get("skipped", []):
        parts.append(f"<p>Skipped: {esc(note)}</p>")
    parts.append(figure(directory, "split-study.png", "Scores under each split strategy"))
    return "Split-strategy study", "\n".join(parts)


def few_shot_study_section(directory: Path) -> tuple[str, str]:
    path = directory / "few-shot-study.json"
    data = _load_json(path)
    try:
        rows, hardware, share = data["summary"], data["test_hardware"], data["test_share"]
    except (KeyError, TypeError) as err:
        raise _missing(path, err.args[0] if err.args else "summary") from None
    shown = [{"model": r["model"], "shots": r["shot"], "programs_per_task": r["programs_per_task"],
              **{m: f"{r[m]:.3f} ± {r[m + '_std']:.3f}" for m in ("pca", "top1", "top5")},
              "top1_mean": r["top1_mean"], "floor": f"{r['floor_top1']:.3f} / {r['floor_top5']:.3f}", "seeds": r["seeds"]}
             for r in rows]
    columns = ["model", "shots", "programs_per_task", "pca", "top1", "top5", "top1_mean", "floor", "seeds"]
    labels = {c: column_label(c, columns) for c in columns}
    labels.update({"shots": "measured", "programs_per_task": "programs per task",
                   "floor": "random floor top-1 / top-5 (Σ)"})
    parts = [f"<p class=\"lead\">How fast each model catches up with <b>{esc(hardware)}</b>'s own ranking as the user "
             f"measures programs of every task on it. Every point is scored on the same {share:.0%} of each "
             f"{esc(hardware)} task; \"all\" gives the model the whole rest (the within-device ceiling), \"0\" is "
             "zero-shot transfer from the other devices.</p>"]
    if data.get("complete") is False:
        parts.insert(0, "<p><b>Incomplete:</b> the study was stopped before every point finished.</p>")
    parts += [table(shown, columns, labels), f'<p class="legend">{esc(LEGEND)}</p>',
              figure(directory, "few-shot-study.png", "PCA and Σ top-1 against measured programs per task"),
              reproduce(data.get("command"))]
    return "Few-shot study", "\n".join(parts)


def generic_section(title: str, name: str, stem: str):
    """Benchmarks and tuning runs: their scalar results as a two-column table, their row lists as tables."""
    def render(directory: Path) -> tuple[str, str]:
        data = _load_json(directory / name)
        facts = [{"what": column_label(k, []), "value": duration(v) if k.endswith(("_s", "seconds")) and isinstance(v, (int, float))
                  else shown_path(v) if isinstance(v, str) and v.startswith("/") else v}
                 for k, v in data.items() if isinstance(v, (str, int, float, bool)) and k not in ("command",)]
        parts = [table(facts, ["what", "value"], {"what": "", "value": ""})] if facts else []
        for key, value in data.items():
            if isinstance(value, list) and value and isinstance(value[0], dict):
                columns = [c for c in value[0] if not isinstance(value[0][c], (dict, list))]
                parts.append(f"<h3>{esc(column_label(key, []).capitalize())}</h3>" + table(value, columns))
        parts.extend(figure(directory, p.name, p.stem.replace("-", " ")) for p in sorted(directory.glob(f"{stem}*.png")))
        parts.append(reproduce(data.get("command")))
        return title, "\n".join(parts)
    return render


_SECTIONS = (
    ("demo.json", demo_section),
    ("compare.json", compare_section),
    ("prune-study.csv", prune_study_section),
    ("split-study.csv", split_study_section),
    ("few-shot-study.json", few_shot_study_section),
    ("bench-summary.json", generic_section("Training benchmark (MLPerf HPC style)", "bench-summary.json", "bench")),
    ("tune-compare.json", generic_section("Tuning comparison", "tune-compare.json", "tune-compare")),
    ("tune.json", generic_section("Tuning run", "tune.json", "tune")),
)

_STYLE = """body{font-family:system-ui,sans-serif;max-width:1050px;margin:2em auto;padding:0 1em;color:#222;line-height:1.45}
h1{font-size:1.6em}h2{margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:1em 0;font-size:92%}td,th{border:1px solid #ccc;padding:4px 9px;text-align:right}
td:first-child,th:first-child,td.text{text-align:left}th{background:#f2f2f2}tr.floor td{color:#666;font-style:italic}
.lead{font-size:105%}.legend{font-size:88%;color:#555}img{max-width:100%}figure{margin:1em 0}
figcaption{font-size:88%;color:#555}pre{background:#f6f6f6;padding:.8em;overflow:auto}
dl.glossary dt{font-weight:bold;margin-top:.5em}dl.glossary dd{margin-left:1.5em}"""


def write_report(directory: Path) -> Path:
    if not directory.is_dir():
        raise CrosstuneError(f"{directory}: no such directory")
    found = [render for name, render in _SECTIONS if (directory / name).is_file()]
    if not found:
        known = ", ".join(name for name, _ in _SECTIONS)
        raise CrosstuneError(f"{directory}: nothing to report (expected one of {known})")
    sections = [render(directory) for render in found]  # all read before anything is written
    if len(sections) == 1:
        title, body = sections[0]
        content = f"<h1>{esc(title)}</h1>\n{body}"
    else:
        title = f"crosstune results: {directory.resolve().name}"
        content = f"<h1>{esc(title)}</h1>\n" + "\n".join(f"<h2>{esc(t)}</h2>\n{b}" for t, b in sections)
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>
<style>{_STYLE}</style>
</head><body>
{content}
{glossary()}
</body></html>
"""
    out = directory / "index.html"
    atomic_write_text(out, page)
    return out
