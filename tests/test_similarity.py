"""The device-similarity matrix: order agreement on shared programs, noise ceilings, the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest

from crosstune.cli import main
from crosstune.importer import import_sources
from crosstune.similarity import concordance, similarity_of_datasets
from test_baselines import log_line


def brute_force(a, b):
    agree = decided = 0
    for i in range(len(a)):
        for j in range(i + 1, len(a)):
            da, db = np.sign(a[i] - a[j]), np.sign(b[i] - b[j])
            if da and db:
                decided += 1
                agree += da == db
    return agree, decided


def test_concordance_counts_pairs_like_brute_force():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 6, 40).astype(float)  # many ties
    b = a + rng.normal(0, 2, 40).round()
    assert concordance(a, b) == pytest.approx(brute_force(a, b))
    assert concordance(np.arange(5.0), np.arange(5.0)[::-1]) == (0.0, 10.0)


def test_matrix_and_noise_ceiling_on_self_written_devices(tmp_path):
    speeds = {"amd-3700x": lambda i: 1e-3 * (1 + i), "i7-3770": lambda i: 2e-3 * (1 + i) ** 1.2,
              "cortex-a7": lambda i: 1e-2 * (20 - i)}
    out = tmp_path / "ds"
    for device, latency in speeds.items():
        lines = [log_line(i, latency(i)) for i in range(12)]
        if device == "amd-3700x":  # a second run: the same order except configs 0 and 1 swapped
            lines += [log_line(i, latency(i) * 1.05) for i in range(2, 12)]
            lines += [log_line(0, latency(1) * 1.06), log_line(1, latency(0) * 1.06)]
        path = tmp_path / f"{device}.log"
        path.write_bytes(b"".join(entry + b"\n" for entry in lines))
        import_sources([path], device, out)
    matrix = similarity_of_datasets([out])
    at = {h: i for i, h in enumerate(matrix.hardware)}
    # merged by their mean, the AMD repeats of configs 0 and 1 end up in swapped order: 1 pair of 66
    assert matrix.agreement[at["amd-3700x"], at["i7-3770"]] == pytest.approx(65 / 66)
    assert matrix.agreement[at["amd-3700x"], at["cortex-a7"]] == pytest.approx(1 / 66)
    assert matrix.agreement[at["i7-3770"], at["cortex-a7"]] == pytest.approx(0.0)
    assert matrix.shared_programs[at["i7-3770"], at["cortex-a7"]] == 12
    # 66 pairs of 12 programs, one of them (0, 1) swapped by the second run
    assert matrix.agreement[at["amd-3700x"], at["amd-3700x"]] == pytest.approx(65 / 66)
    assert matrix.noise_source["amd-3700x"].startswith("repeats merged at import")
    assert np.isnan(matrix.agreement[at["i7-3770"], at["i7-3770"]])  # no repeats: no ceiling


def test_cli_on_the_roller_sample(roller, tmp_path, capsys):
    ds = tmp_path / "roller"
    for gpu in ("k80", "v100"):
        import_sources([roller / gpu], gpu, ds)
    js, png = tmp_path / "sim.json", tmp_path / "sim.png"
    assert main(["similarity", str(ds), "--json", str(js), "--png", str(png)]) == 0
    printed = capsys.readouterr().out
    assert "k80" in printed and "noise ceiling" in printed
    data = json.loads(js.read_text())
    k80, v100 = data["hardware"].index("k80"), data["hardware"].index("v100")
    # the two GPUs share only pooling programs (one task): they rank them mostly alike
    assert data["tasks"][k80][v100] == 1 and 0.5 < data["agreement"][k80][v100] <= 1.0
    # the K80 sample measured some programs twice (as separate records): its noise ceiling
    assert data["noise_ceiling"]["k80"]["source"] == "repeated records in the dataset"
    assert 0.9 < data["noise_ceiling"]["k80"]["agreement"] <= 1.0
    assert png.stat().st_size > 5000
    assert main(["similarity", str(tmp_path / "nothing")]) == 2
