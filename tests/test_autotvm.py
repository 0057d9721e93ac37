"""AutoTVM logs: lines this test writes itself in AutoTVM's public log format (the shared droplet-autotvm
logs are GPL-3.0 and never copied here), read, merged, detected and imported through the CLI."""

from __future__ import annotations

import gzip
import json
import math

import numpy as np
import pyarrow.parquet as pq
import pytest

from crosstune import tokens
from crosstune.cli import main
from crosstune.dataset import load_dataset, read_manifest
from crosstune.records.operators import OP_KINDS
from crosstune.errors import CrosstuneError
from crosstune.records import ImportReport, read_records
from crosstune.records.autotvm import sniff

TARGET = "llvm -keys=cpu "
CONV_ARGS = [["TENSOR", [1, 64, 56, 56], "float32"], ["TENSOR", [128, 64, 3, 3], "float32"], [2, 2], [1, 1, 1, 1],
             [1, 1], "NCHW", "NCHW", "float32"]
DENSE_ARGS = [["TENSOR", [4, 512], "float32"], ["TENSOR", [1000, 512], "float32"], None, "float32"]


def line(template, args, index, entity, costs, error_no=0, timestamp=1700000000.0, tvm="0.10.0") -> bytes:
    return json.dumps({"input": [TARGET, template, args, {}],
                       "config": {"index": index, "code_hash": None, "entity": entity},
                       "result": [costs, error_no, 0.5, timestamp], "version": 0.2, "tvm_version": tvm}).encode()


def conv_entity(ic, oc, ow, unroll):
    return [["tile_ic", "sp", [-1, ic]], ["tile_oc", "sp", [-1, oc]], ["tile_ow", "sp", [-1, ow]],
            ["unroll_kw", "ot", unroll]]


def dense_entity(y, x, k):
    return [["tile_y", "sp", [-1, y]], ["tile_x", "sp", [-1, x]], ["tile_k", "sp", [-1, k]]]


def sample_lines() -> list[bytes]:
    return [
        line("conv2d_NCHWc.x86", CONV_ARGS, 0, conv_entity(1, 1, 1, False), [3e-3, 3.1e-3, 3.2e-3]),
        line("conv2d_NCHWc.x86", CONV_ARGS, 1, conv_entity(2, 1, 1, True), [2e-3, 2.1e-3, 2.2e-3]),
        line("conv2d_NCHWc.x86", CONV_ARGS, 2, conv_entity(4, 8, 7, True), [1e-3, 1.1e-3, 1.2e-3]),
        line("conv2d_NCHWc.x86", CONV_ARGS, 3, conv_entity(8, 8, 7, False), [1e9], error_no=6),  # build timeout
        line("dense_pack.x86", DENSE_ARGS, 0, dense_entity(1, 8, 16), [4e-5, 4.2e-5, 4.1e-5], tvm="0.13.dev0"),
        line("dense_pack.x86", DENSE_ARGS, 1, dense_entity(2, 16, 16), [2e-5, 2.1e-5, 2.2e-5], tvm="0.13.dev0"),
    ]


def repeat_lines() -> list[bytes]:
    """A second run of the three valid conv configs (same order, a little slower) and of the failed one,
    which now builds."""
    return [
        line("conv2d_NCHWc.x86", CONV_ARGS, 0, conv_entity(1, 1, 1, False), [3.3e-3, 3.4e-3, 3.5e-3]),
        line("conv2d_NCHWc.x86", CONV_ARGS, 1, conv_entity(2, 1, 1, True), [2.3e-3, 2.3e-3, 2.3e-3]),
        line("conv2d_NCHWc.x86", CONV_ARGS, 2, conv_entity(4, 8, 7, True), [1.3e-3, 1.3e-3, 1.3e-3]),
        line("conv2d_NCHWc.x86", CONV_ARGS, 3, conv_entity(8, 8, 7, False), [5e-3, 5e-3, 5e-3]),
    ]


def write(path, lines, compress=False):
    data = b"".join(entry + b"\n" for entry in lines)
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


def read_all(paths, hardware="amd-3700x", strict=False):
    report = ImportReport(strict=strict)
    return list(read_records(paths, hardware, report)), report


def test_records_operators_tokens_and_failures(tmp_path):
    path = write(tmp_path / "resnet-gridsearch.log", sample_lines() + [b'{"input": ["llvm", "conv2d_NCHWc.x86", [['])
    records, report = read_all([path])
    assert len(records) == 6 and report.lines == 7
    assert report.skipped == {"not JSON (truncated or corrupt line)": 1}
    assert report.versions == {"autotvm log 0.2, tvm 0.10.0": 4, "autotvm log 0.2, tvm 0.13.dev0": 2}
    conv = [r for r in records if r.operator.kind == "conv2d"]
    dense = [r for r in records if r.operator.kind == "dense"]
    assert len(conv) == 4 and len(dense) == 2
    # 56x56 input, 3x3 kernel, stride 2, padding 1 -> 28x28 output
    assert conv[0].operator.flops == 2.0 * 1 * 128 * 28 * 28 * 64 * 9
    assert conv[0].operator.args[:7] == (1.0, 64.0, 56.0, 56.0, 128.0, 3.0, 3.0)
    assert dense[0].operator.flops == 2.0 * 4 * 512 * 1000
    assert len({r.task_id for r in conv}) == 1 and conv[0].task_id != dense[0].task_id
    failed = [r for r in records if r.error_no != 0]
    assert len(failed) == 1 and failed[0].error_no == 6 and failed[0].costs == []  # 1e9 is never a latency
    # knobs -> shared vocabulary: the knob name is the category, split factors in log2
    toks = conv[2].tokens()
    assert [tokens.KINDS[t[0]] for t in toks] == ["split", "split", "split", "unroll"]
    assert [tokens.CATEGORIES[t[1]] for t in toks] == ["tile_ic", "tile_oc", "tile_ow", "unroll_kw"]
    assert toks[0][2][4] == 2.0  # log2 of the inner factor 4
    assert conv[0].program != conv[1].program
    assert not report.unknown_categories and not report.unknown_kinds


def test_repeats_are_merged_per_task_and_config(tmp_path):
    grid = write(tmp_path / "net-gridsearch.json", sample_lines())
    xgb = write(tmp_path / "net-xgb.json.gz", repeat_lines(), compress=True)
    records, report = read_all([grid, xgb])
    assert len(records) == 6 and report.merged_repeats == 4
    by_index = {r.source_line: r for r in records if r.operator.kind == "conv2d" and r.source_file == str(grid)}
    first = by_index[1]
    assert first.costs == [3e-3, 3.1e-3, 3.2e-3, 3.3e-3, 3.4e-3, 3.5e-3]  # all repeats kept, nothing lost
    rescued = [r for r in records if r.operator.kind == "conv2d" and r.source_file == str(xgb)]
    assert len(rescued) == 1 and rescued[0].error_no == 0 and rescued[0].costs == [5e-3] * 3
    # both runs order the three repeated configs alike: the noise ceiling of this "device" is 1
    assert list(report.repeat_pairs.values()) == [[3, 3]]
    # the same config gets the same record id whichever run came first
    again, _ = read_all([xgb, grid])
    assert {r.record_id for r in again} == {r.record_id for r in records}


def test_detection_mixes_formats_and_cli_import(tmp_path, roller, capsys):
    src = tmp_path / "logs"
    src.mkdir()
    write(src / "bert.log", sample_lines())
    write(src / "bert-repeat.json.gz", repeat_lines(), compress=True)
    ansor = sorted((roller / "k80").iterdir())[0]
    assert sniff(src / "bert.log") and sniff(src / "bert-repeat.json.gz") and not sniff(ansor)
    out = tmp_path / "ds"
    assert main(["import", str(src), "--hardware", "amd-3700x", "--out", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "+6 records of amd-3700x" in printed and "merged" in printed and "tvm 0.10.0" in printed
    manifest = read_manifest(out)
    report = manifest["imports"][0]["report"]
    assert report["merged_repeats"] == 4 and report["versions"]["autotvm log 0.2, tvm 0.13.dev0"] == 2
    table = pq.read_table(out / manifest["parts"][0]["path"], columns=["format", "latency", "error_no", "costs"])
    assert set(table.column("format").to_pylist()) == {"autotvm"}
    latency = table.column("latency").to_numpy()
    assert np.all(latency[np.isfinite(latency)] < 1.0)  # no 1e9 anywhere
    ds = load_dataset([out])
    assert ds.valid.sum() == 6 and {OP_KINDS[k] for k in ds.op_kind} == {"conv2d", "dense"}
    # an Ansor file beside AutoTVM logs is read by its own reader
    assert main(["import", str(ansor), str(src / "bert.log"), "--hardware", "k80", "--out", str(tmp_path / "mixed"),
                 "--quiet"]) == 0
    mixed = pq.read_table(tmp_path / "mixed" / read_manifest(tmp_path / "mixed")["parts"][0]["path"],
                          columns=["format"]).column("format").to_pylist()
    assert set(mixed) == {"ansor", "autotvm"}


def test_gzip_cut_short_and_strict(tmp_path, capsys):
    many = [line("dense_pack.x86", DENSE_ARGS, i, dense_entity(1, 2 ** (i % 6), 2 ** (i // 6)), [1e-5 * (1 + i)])
            for i in range(36)]
    data = gzip.compress(b"".join(entry + b"\n" for entry in many))
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(data[: len(data) * 2 // 3])
    records, report = read_all([cut])
    assert 0 < len(records) < 36
    assert any("cut short" in reason for reason in report.skipped)
    with pytest.raises(CrosstuneError, match="--strict"):
        read_all([write(tmp_path / "bad.log", sample_lines()[:2] + [b'{"input": 1, "config": {}, "result": []}'])],
                 strict=True)
    assert main(["import", str(tmp_path / "bad.log"), "--hardware", "amd-3700x", "--out", str(tmp_path / "ds"),
                 "--strict", "--quiet"]) == 2
    assert "bad.log:3" in capsys.readouterr().err


def test_vocabulary_extension_keeps_existing_ids():
    # ids of vocabulary v1 (saved models) are unchanged; the knob names come after them
    assert tokens.CAT_ID["software_pipeline_order"] == tokens.BASE_CATEGORIES - 1
    assert tokens.CATEGORIES[tokens.BASE_CATEGORIES] == "tile_ic"
    assert tokens.CAT_ID["auto_unroll_max_step"] < tokens.BASE_CATEGORIES  # shared with Ansor's pragma
    unknown: dict[str, int] = {}
    (tok,) = tokens.tokenize_autotvm_knob("tile_zz", "sp", [-1, 4, 2], unknown)
    assert tok[1] == tokens.OTHER_CAT and unknown == {"tile_zz": 1}
    annotated = tokens.tokenize_autotvm_knob("ann_spatial", "an", ["none", "unroll", "vec"])
    assert [tokens.KINDS[t[0]] for t in annotated] == ["unroll", "vectorize"]
    with pytest.raises(ValueError):
        tokens.tokenize_autotvm_knob("tile_x", "sp", "eight")
    # orders that differ only after the sixth axis are different programs
    long_a = tokens.tokenize_autotvm_knob("reorder_0", "re", list(range(10)))
    long_b = tokens.tokenize_autotvm_knob("reorder_0", "re", list(range(8)) + [9, 8])
    assert len(long_a) == 2 and long_a[0] == long_b[0] and long_a != long_b


@pytest.mark.integration
def test_shared_autotvm_device_imports(shared_data, tmp_path):
    source = shared_data / "droplet-autotvm" / "cortex-a7"
    if not source.is_dir():
        pytest.skip(f"{source} not found")
    assert main(["import", str(source), "--hardware", "cortex-a7", "--out", str(tmp_path / "ds"), "--quiet"]) == 0
    manifest = read_manifest(tmp_path / "ds")
    report = manifest["imports"][0]["report"]
    assert report["lines"] == 79_610 and report["skipped"] == {}
    assert report["records"] + report["merged_repeats"] == report["lines"]
    ds = load_dataset([tmp_path / "ds"])
    assert not np.any(ds.latency[ds.valid] >= 1e8)
    assert 0 < ds.valid.mean() < 1  # the README: failed builds on the ARM boards
    names = np.asarray(ds.workload_keys)[ds.task]
    winograd = np.char.find(names.astype(str), "winograd") >= 0
    assert winograd.any() and not ds.valid[winograd].any()  # every Cortex-A7 winograd task failed to build
    assert math.isfinite(np.nanmean(ds.flops))


def test_import_says_what_the_code_was_compiled_for(tmp_path):
    src = write(tmp_path / "dense.log", sample_lines()[4:])
    out = tmp_path / "ds"
    assert main(["import", str(src), "--hardware", "i7-3770", "--codegen-isa", "x86-64", "--out", str(out),
                 "--quiet"]) == 0
    stored = read_manifest(out)["hardware"]["i7-3770"]
    assert stored["codegen_isa"] == "x86-64" and stored["codegen_vector_bytes"] == 16
    # the same name without the codegen is another descriptor: refused rather than mixed
    assert main(["import", str(src), "--hardware", "i7-3770", "--out", str(out), "--quiet"]) == 2


def test_a_model_saved_before_the_knob_categories_still_loads():
    import torch

    from crosstune.models.crossfeat import CrossFeatConfig, CrossFeatNet
    from crosstune.models.neural import _grown_embeddings

    net = CrossFeatNet(CrossFeatConfig())
    state = {k: v.clone() for k, v in net.state_dict().items()}
    old = state["cat_embedding.weight"][: tokens.BASE_CATEGORIES].clone()
    state["cat_embedding.weight"] = old  # as saved by vocabulary v1
    net.load_state_dict(_grown_embeddings(state, net.state_dict()))
    weight = net.cat_embedding.weight.detach()
    assert torch.equal(weight[: tokens.BASE_CATEGORIES], old)
    assert torch.equal(weight[tokens.CAT_ID["tile_ic"]], old[tokens.OTHER_CAT])  # a knob name was 'other' to it
