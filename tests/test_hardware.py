"""The hardware registry: built-in entries, user spec files and their validation, local detection."""

from __future__ import annotations

import json
import math

import pytest

from crosstune.errors import CrosstuneError
from crosstune.hardware import FIELDS, builtin_specs, load_spec_file, resolve
from crosstune.hardware.local import detect_local, local_configurations


def test_builtin_registry_has_the_required_hardware_with_sources():
    specs = builtin_specs()
    for name in ("platinum-8272cl", "e5-2673-v4", "epyc-7452", "graviton2", "k80", "t4", "v100", "a100", "h100", "h200"):
        assert name in specs, name
        assert specs[name].source, f"{name} cites no source"
    assert specs["h200"].mem_bandwidth_gbs > specs["h100"].mem_bandwidth_gbs
    assert specs["graviton2"].vector_bytes == 16 and specs["k80"].kind == "gpu"


def _spec(**changes) -> dict:
    data = builtin_specs()["t4"].to_json()
    data.update(changes)
    return {k: v for k, v in data.items() if v is not None}


@pytest.mark.parametrize("changes, message", [
    ({"colour": "green"}, "unknown field"),
    ({"mem_gb": None}, "missing field"),
    ({"warp_size": 0}, "must be positive"),
    ({"clock_mhz": -5}, "must not be negative"),
    ({"kind": "fpga"}, "kind must be"),
    ({"peak_fp32_gflops": "fast"}, "finite number"),
    ({"name": "bad name/with slash"}, "letters, digits"),
])
def test_bad_spec_files_are_clear_errors(tmp_path, changes, message):
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(_spec(**changes)))
    with pytest.raises(CrosstuneError, match=message):
        load_spec_file(path)


def test_user_spec_file_round_trip(tmp_path):
    path = tmp_path / "mygpu.json"
    path.write_text(json.dumps(_spec(name="mygpu")))
    assert resolve("mygpu", path).name == "mygpu"
    with pytest.raises(CrosstuneError, match="named"):
        resolve("other", path)
    with pytest.raises(CrosstuneError, match="unknown hardware"):
        resolve("no-such-gpu")


def test_local_detection_and_configurations():
    local = detect_local()
    assert set(FIELDS) <= set(local.to_json())
    assert local.compute_units >= 1 and local.mem_bandwidth_gbs > 0 and local.vector_bytes >= 16
    configs = local_configurations()
    assert {"local-sse-1c", "local-sse-2c", "local-avx2-2c", "local-avx512-2c"} <= set(configs)
    assert configs["local-sse-2c"].spec.vector_bytes == 16 and configs["local-avx512-1c"].spec.compute_units == 1
    assert "stand-in" in configs["local-avx2-2c"].spec.notes


def test_autotvm_devices_are_in_the_registry():
    specs = builtin_specs()
    for name in ("amd-3700x", "i7-3770", "cortex-a72", "cortex-a7", "gtx1650"):
        assert specs[name].source, f"{name} cites no source"
    assert specs["gtx1650"].kind == "gpu" and specs["cortex-a7"].kind == "cpu"
    # peak FP32 = cores x clock x FLOP/cycle, as each source states
    assert specs["amd-3700x"].peak_fp32_gflops == pytest.approx(8 * 3.6 * 32)
    assert specs["i7-3770"].peak_fp32_gflops == pytest.approx(4 * 3.4 * 16)
    assert specs["cortex-a72"].peak_fp32_gflops > 6 * specs["cortex-a7"].peak_fp32_gflops


def test_codegen_isa_says_what_the_code_could_use(tmp_path):
    from crosstune.hardware.registry import FEATURE_NAMES, with_codegen

    chip = builtin_specs()["amd-3700x"]
    generic = with_codegen(chip, "x86-64")
    assert generic.codegen_vector_bytes == 16 and generic.code_vector_bytes == 16 and chip.code_vector_bytes == 32
    slot = FEATURE_NAMES.index("log2_1p_vector_bytes")
    assert generic.feature_vector()[slot] == pytest.approx(math.log2(17))
    assert chip.feature_vector()[slot] > generic.feature_vector()[slot]
    with pytest.raises(CrosstuneError, match="codegen-isa"):
        with_codegen(chip, "mmx")
    # a descriptor file may say it too, and round-trips through JSON
    path = tmp_path / "laptop.json"
    path.write_text(json.dumps({**generic.to_json(), "name": "laptop"}))
    assert load_spec_file(path).codegen_isa == "x86-64"
    path.write_text(json.dumps({**chip.to_json(), "name": "laptop", "codegen_isa": "avx2"}))
    with pytest.raises(CrosstuneError, match="codegen_vector_bytes"):
        load_spec_file(path)
