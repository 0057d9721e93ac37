"""Import at scale: the fast import writes exactly what the reference import wrote, in one process or
several, with memory that does not grow with the size of a file."""

from __future__ import annotations

import pytest

import json

from import_digest import GOLDEN, dataset_digest, import_all


def assert_matches_golden(digest: dict) -> None:
    golden = json.loads(GOLDEN.read_text())
    # Import reports gained AutoTVM fields after the golden file was made; on these Ansor samples they are
    # empty, and every field the reference had must be unchanged.
    for entry, reference in zip(digest["imports"], golden["imports"]):
        added = {k: v for k, v in entry["report"].items() if k not in reference["report"]}
        assert not any(added.values()), added
        entry["report"] = {k: v for k, v in entry["report"].items() if k in reference["report"]}
    assert digest == golden


def test_import_writes_exactly_the_reference_dataset(tmp_path):
    assert_matches_golden(dataset_digest(import_all(tmp_path, tmp_path / "ds")))


def _outcome(reader, line, fast):
    from crosstune.records.ansor import _lenient_json
    from crosstune.records.canonical import BadLine
    import orjson

    try:
        if fast:
            record = reader.parse_line(line, "f", 1)
        else:
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError:
                obj = _lenient_json(line)
            record = reader._record(line, obj, None, "f", 1)
    except BadLine as err:
        return str(err)
    return record.record_id, record.tokens(), record.costs, record.error_no, record.timestamp, record.task_id


def test_fast_line_parse_agrees_with_the_full_parse_on_odd_lines(roller):
    from import_digest import mixed_lines
    from crosstune.records import ImportReport
    from crosstune.records.ansor import AnsorReader

    lines = [line for line in mixed_lines(roller) if not line.startswith(b"#")]
    base = lines[0]
    odd = [
        base.replace(b']]]], "r"', b'], ["CHW", 2, "warp.x"]]]], "r"'),  # unknown string argument
        base.replace(b'], ["SP"', b'], ["SP" ', 1),  # unusual spacing
        base.replace(b'], ["SP"', b'], ["SP", [1], ["a"]], ["SP"', 1),  # a nested list holding a string
        base.replace(b'"v": "v0.6"', b'"v": "v9.9"'),
        base.replace(b'"r": [[', b'"i": 1, "r": [[', 1),  # a second "i" key
        base.replace(b', "r": ', b', "r": [[1.0], 0, 1, 1], "x": [[[[1]]]], "r": ', 1),
        base[:-30],
    ]
    fast, full = AnsorReader("k80", ImportReport()), AnsorReader("k80", ImportReport())
    outcomes = [(_outcome(fast, line, True), _outcome(full, line, False)) for line in lines + odd]
    assert all(a == b for a, b in outcomes)
    assert not isinstance(outcomes[len(lines)][0], str)
    assert sum(isinstance(a, str) for a, _ in outcomes) >= 4  # the bad lines were bad on both paths
    assert fast.report.unknown_categories == full.report.unknown_categories == {"warp.x": 1}


@pytest.mark.slow
def test_two_processes_write_the_same_dataset_as_one(tmp_path):
    assert_matches_golden(dataset_digest(import_all(tmp_path, tmp_path / "ds", jobs=2)))
    assert not [p for p in (tmp_path / "ds").iterdir() if p.name.startswith(".")]  # scratch removed


@pytest.mark.slow
def test_strict_import_in_two_processes_stops_with_one_line(tmp_path, roller):
    import subprocess
    import sys

    bad = tmp_path / "src"
    bad.mkdir()
    for gpu in ("k80", "v100"):
        (bad / f"{gpu}.json.gz").symlink_to(next((roller / gpu).iterdir()))
    (bad / "z-broken.json").write_bytes(b'{"i": [[\n')
    result = subprocess.run([sys.executable, "-m", "crosstune", "import", str(bad), "--hardware", "k80", "--out",
                             str(tmp_path / "ds"), "--strict", "--jobs", "2", "--quiet"], capture_output=True, text=True)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().count("\n") == 0 and "z-broken.json:1" in result.stderr
    assert not (tmp_path / "ds" / "manifest.json").exists()
    assert not [p for p in (tmp_path / "ds").rglob("*") if p.is_file()]  # nothing half-written left


def test_id_set_keeps_first_occurrences_like_a_python_set():
    import numpy as np

    from crosstune.dataset import IdSet, new_rows

    rng = np.random.default_rng(0)
    seen, reference = IdSet(rng.integers(0, 5000, 300, dtype=np.uint64)), set()
    reference.update(seen._levels[0].tolist())
    for _ in range(40):
        ids = rng.integers(0, 5000, int(rng.integers(1, 400)), dtype=np.uint64)
        keep = new_rows(ids, seen)
        expected = []
        for i in ids.tolist():
            expected.append(i not in reference)
            reference.add(i)
        assert keep.tolist() == expected
    assert len(seen) == len(reference)
