"""`crosstune info`: what a dataset holds, read from its manifest once its part files are checked
(a dataset `train` would refuse is never reported as fine)."""

from __future__ import annotations

from pathlib import Path

from .importer import describe_report
from .records.canonical import ImportReport
from .tables import format_table
from .verify import verify_dataset


def describe_dataset(path: Path) -> str:
    manifest = verify_dataset(path)
    counts = manifest.get("counts", {})
    lines = [f"dataset {path}  (format v{manifest.get('format_version')}, crosstune {manifest.get('crosstune_version')})",
             f"  records: {counts.get('records', 0)}   tasks: {counts.get('tasks', 0)}   "
             f"failed measurements: {counts.get('failed', 0)}   hardware: {len(manifest.get('hardware', {}))}"]
    per_hw = counts.get("per_hardware", {})
    if per_hw:
        rows = []
        for name, desc in sorted(manifest["hardware"].items()):
            stats = per_hw.get(name, {})
            rows.append([name, desc["kind"], desc["arch"], stats.get("records", 0), stats.get("tasks", 0),
                         stats.get("failed", 0)])
        lines.append(_indent(format_table(["hardware", "kind", "arch", "records", "tasks", "failed"], rows)))
    seq = counts.get("sequence_length")
    if seq:
        lines.append(f"  program length (schedule primitives): min {seq['min']}, median {seq['p50']:.0f}, "
                     f"mean {seq['mean']}, p95 {seq['p95']:.0f}, max {seq['max']}")
    per_op = counts.get("per_operator", {})
    if per_op:
        rows = [[op, n] for op, n in sorted(per_op.items(), key=lambda kv: -kv[1])]
        lines.append(_indent(format_table(["operator", "records"], rows)))
    report = ImportReport()
    for entry in manifest.get("imports", []):
        report.merge(ImportReport.from_json(entry.get("report", {})))
    lines.append(f"  imports: {len(manifest.get('imports', []))}; lines read {report.lines}, "
                 f"duplicates skipped {report.duplicates}, bad lines skipped {report.skipped_lines}")
    lines.extend(describe_report(report) or ["  nothing skipped"])
    if manifest.get("provenance"):
        lines.append("  provenance: " + ", ".join(f"{k}={v}" for k, v in manifest["provenance"].items()))
    return "\n".join(lines)


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())
