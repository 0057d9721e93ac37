"""Readers on real records and on every kind of bad input the issue lists."""

from __future__ import annotations

import gzip
import json
import math
import os

import pytest

from conftest import FORMAT_VARIANTS, MS_DB, real_lines
from crosstune import tokens
from crosstune.errors import CrosstuneError
from crosstune.records import ImportReport, read_records
from crosstune.records.operators import parse_workload_key


def read_all(paths, report=None, hardware="k80"):
    report = report or ImportReport()
    return list(read_records(paths, hardware, report)), report


def test_every_format_variant_imports():
    records, report = read_all([FORMAT_VARIANTS], hardware="cpu-test")
    assert report.skipped_lines == 0, report.to_json()
    assert report.files == 5
    assert len(records) >= 10
    versions_seen = {r.source_file.rsplit("/", 1)[-1] for r in records}
    assert len(versions_seen) == 5  # every file contributed records
    kinds = {tokens.KINDS[t[0]] for r in records for t in r.tokens()}
    assert {"rfactor", "compute_root", "compute_inline", "split", "cache_read"} <= kinds
    assert "unknown" not in kinds


def test_hash_and_named_workload_keys():
    hashed = parse_workload_key('["d7b65649a4dd54becea0a52aabbc5af5", 1, 1000, 1, 1000]')
    assert hashed.kind == "unknown" and hashed.args == (1.0, 1000.0, 1.0, 1000.0) and math.isnan(hashed.flops)
    conv = parse_workload_key('["conv2d_layer", 128, 1008, 42, 42, 168, 1, 1, 1, 0]')
    assert conv.kind == "conv2d"
    assert conv.flops == 2.0 * 128 * 168 * 42 * 42 * 1008
    tutorial = parse_workload_key('["conv2d_layer", 1, 7, 7, 512, 512, 3, 3, [1, 1], [1, 1]]')
    assert tutorial.flops == 2.0 * 1 * 512 * 7 * 7 * 512 * 9
    sparse = parse_workload_key('["sparse_dense", 512, 512, 512, [9831, 16, 1], [9831], [33], "float32"]')
    assert sparse.kind == "sparse"


def test_real_roller_file_keeps_all_repeats_and_failures(roller):
    path = roller / "k80" / "ansor_matmul_128_4032_1000.json.gz"
    records, report = read_all([path])
    with gzip.open(path, "rb") as stream:
        lines = sum(1 for _ in stream)
    assert len(records) == lines and report.skipped_lines == 0
    assert all(r.operator.kind == "matmul" for r in records)
    assert records[0].source_line == 1 and records[-1].source_line == lines
    assert all(len(r.program) > 0 for r in records)


def write_lines(path, lines):
    path.write_bytes(b"".join(line if line.endswith(b"\n") else line + b"\n" for line in lines))
    return path


def test_bad_lines_are_skipped_with_reasons(tmp_path, roller):
    good = real_lines(roller, 3)
    record = json.loads(good[0])

    def variant(**changes):
        data = json.loads(json.dumps(record))
        for key, value in changes.items():
            if key == "v":
                data["v"] = value
            elif key == "costs":
                data["r"][0] = value
            elif key == "wk":
                data["i"][0][0] = value
        return json.dumps(data).encode()

    lines = [
        good[0],
        good[1][: len(good[1]) // 2],  # truncated
        b"this is not json",
        variant(v="v9.9"),
        variant(costs=[0.0]),
        variant(costs=[-1.0]),
        b'{"i": [["[\\"matmul_layer\\", 1, 2, 3]", "cuda", [1]], [[], [["SP", 2, 0, 8, [2], 1]]]], "r": [[NaN], 0, 1.0, 1], "v": "v0.6"}',
        variant(wk="not a json list"),
        good[2],
    ]
    path = write_lines(tmp_path / "bad.json", lines)
    records, report = read_all([path])
    assert len(records) == 2  # the two good lines
    assert report.skipped["not JSON (truncated or corrupt line)"] == 2
    assert report.skipped["unsupported record version 'v'"] == 1
    assert report.skipped["cost is zero or negative"] == 2
    assert report.skipped["cost is NaN or inf"] == 1
    assert sum(v for k, v in report.skipped.items() if k.startswith("workload key does not parse")) == 1
    assert report.examples["cost is NaN or inf"] == f"{path}:7"


def test_infinite_cost_is_skipped(tmp_path):
    line = b'{"i": [["[\\"matmul_layer\\", 1, 2, 3]", "cuda"], [[], [["SP", 2, 0, 8, [2], 1]]]], "r": [[1e999], 0, 1.0, 1], "v": "v0.6"}'
    records, report = read_all([write_lines(tmp_path / "inf.json", [line])])
    assert records == [] and report.skipped["cost is NaN or inf"] == 1


def test_failed_measurement_is_kept_but_flagged(tmp_path, roller):
    data = json.loads(real_lines(roller, 1)[0])
    data["r"][1] = 4
    data["r"][0] = [1e10]
    records, report = read_all([write_lines(tmp_path / "failed.json", [json.dumps(data).encode()])])
    assert len(records) == 1 and records[0].error_no == 4 and report.skipped_lines == 0


def test_unknown_step_kind_becomes_unknown_token(tmp_path):
    line = b'{"i": [["[\\"matmul_layer\\", 1, 2, 3]", "cuda"], [[], [["SP", 2, 0, 8, [2], 1], ["XYZ", 1, 2]]]], "r": [[0.5], 0, 1.0, 1], "v": "v0.6"}'
    records, report = read_all([write_lines(tmp_path / "unknown.json", [line])])
    assert [tokens.KINDS[t[0]] for t in records[0].tokens()] == ["split", "unknown"]
    assert report.unknown_kinds["XYZ"] == 1


def test_empty_file_and_non_record_files_in_directory(tmp_path, roller):
    (tmp_path / "empty.json").write_bytes(b"")
    (tmp_path / "README.md").write_text("not records")
    (tmp_path / "notes.txt").write_text("neither")
    write_lines(tmp_path / "good.json", real_lines(roller, 2))
    records, report = read_all([tmp_path])
    assert len(records) == 2
    assert "empty" in report.skipped_files[str(tmp_path / "empty.json")]
    assert str(tmp_path / "README.md") in report.skipped_files
    assert str(tmp_path / "notes.txt") in report.skipped_files


def test_gzip_cut_short_keeps_what_was_read(tmp_path, roller):
    source = roller / "k80" / "ansor_matmul_128_4032_1000.json.gz"
    data = source.read_bytes()
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(data[: len(data) // 2])
    records, report = read_all([cut])
    assert 0 < len(records) < 1000
    assert sum(v for k, v in report.skipped.items() if k.startswith("file cut short")) == 1


def test_missing_source_is_a_clear_error(tmp_path):
    with pytest.raises(CrosstuneError, match="no such file"):
        read_all([tmp_path / "nope.json"])


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file whatever its mode (CI and this machine run as root)")
def test_unreadable_file_is_a_clear_error(tmp_path):
    locked = tmp_path / "locked.json"
    locked.write_text("{}")
    locked.chmod(0)
    try:
        with pytest.raises(CrosstuneError, match="cannot be read"):
            read_all([locked])
    finally:
        locked.chmod(0o644)


def test_strict_mode_stops_at_first_bad_line(tmp_path, roller):
    path = write_lines(tmp_path / "bad.json", [real_lines(roller, 1)[0], b"garbage"])
    with pytest.raises(CrosstuneError, match=r"bad.json:2: not JSON"):
        read_all([path], ImportReport(strict=True))


def test_metaschedule_database_reads_without_tvm():
    records, report = read_all([MS_DB], hardware="local-sse-2c")
    assert report.skipped_lines == 0 and report.files == 1
    assert len(records) == 24
    tasks = {r.task_id for r in records}
    assert len(tasks) == 2
    assert {r.operator.kind for r in records} == {"conv2d"}
    assert all(r.costs and r.error_no == 0 for r in records)
    kinds = {tokens.KINDS[t[0]] for t in records[0].tokens()}
    assert {"split", "reorder", "parallel", "vectorize", "compute_at"} <= kinds
    assert "unknown" not in kinds
    # FLOPs from the parameter shapes: 2 * output elements * (Cin * KH * KW)
    assert all(r.operator.flops > 1e6 for r in records)


def test_a_seed_database_lists_each_workloads_programs_that_ran_fastest_first(tmp_path):
    """crosstune.tvm.seeds reads a MetaSchedule database (the committed real one) without TVM: per workload,
    distinct programs fastest first; a record that never ran and an unreadable line are counted, not seeds."""
    import shutil

    from crosstune.tvm.seeds import read_seed_database

    whole = read_seed_database(MS_DB)
    assert sorted(whole.by_workload) == ["14443411499083074304", "444661384500512004"]
    for programs in whole.by_workload.values():
        assert len(programs) == 12 and [s for s, _ in programs] == sorted(s for s, _ in programs)
    fastest = whole.by_workload["444661384500512004"]
    assert whole.traces("444661384500512004", 3) == [trace for _, trace in fastest[:3]]
    assert whole.traces("444661384500512004", 100) == [trace for _, trace in fastest]
    assert whole.traces("no-such-workload", 3) == [] and whole.traces("444661384500512004", 0) == []
    db = tmp_path / "db"
    shutil.copytree(MS_DB, db)
    records = (db / "database_tuning_record.json").read_text().splitlines()
    never_ran = json.loads(records[0])
    never_ran[1][1] = None  # as MetaSchedule writes a program that failed to build or run
    duplicate = json.loads(records[1])
    (db / "database_tuning_record.json").write_text("\n".join(
        [json.dumps(never_ran), *records[1:], json.dumps(duplicate), '[0, [[["GetSBlock"']) + "\n")
    damaged = read_seed_database(db / "database_tuning_record.json")  # the file names its folder too
    assert damaged.failed_programs == 1 and damaged.skipped_lines == 1
    assert sum(len(p) for p in damaged.by_workload.values()) == 24  # 23 that ran + the duplicate line
    assert never_ran[0] == duplicate[0] == 0  # both of the first workload's
    assert len(damaged.traces("14443411499083074304", 100)) == 11  # 12 ran, one twice: it seeds once
    assert "1 records that never ran left out" in damaged.summary() and "1 unreadable lines" in damaged.summary()
    with pytest.raises(CrosstuneError, match="not a MetaSchedule database folder"):
        read_seed_database(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "database_workload.json").write_text("")
    (empty / "database_tuning_record.json").write_text("")
    with pytest.raises(CrosstuneError, match="holds no program that ran"):
        read_seed_database(empty)
