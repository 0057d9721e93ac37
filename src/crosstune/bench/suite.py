"""The whole benchmark: seeded runs, strong scaling (1..N processes), throughput mode (several
models trained at once, MLPerf HPC's weak-scaling metric), the roofline and the plots."""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

from ..reporting import write_json
from ..tables import format_table
from .mlperf import BenchSettings, _worker_command, parse_log, run_bench, start_group, stop_group


def throughput_mode(settings: BenchSettings, models: int, print_fn=print) -> dict:
    """Train ``models`` seeds at once, one process each, the cores shared between them."""
    out = Path(settings.out)
    env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS=str(max(1, (os.cpu_count() or 1) // models)))
    seeds = [settings.seeds[0] + 1000 + i for i in range(models)]
    logs = [out / f"run-concurrent{models}-seed{s}.log" for s in seeds]
    started = time.perf_counter()
    procs = [start_group(_worker_command(settings, s, log, 1), env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL) for s, log in zip(seeds, logs)]
    try:
        for proc in procs:
            proc.wait()
    except BaseException:
        for proc in procs:
            stop_group(proc)
        raise
    wall = time.perf_counter() - started
    results = [parse_log(log) for log in logs]
    done = sum(r.status == "success" for r in results)
    data = {"models": models, "wall_s": wall, "successful": done, "models_per_hour": 3600 * done / wall,
            "runs": [asdict(r) for r in results]}
    print_fn(f"throughput mode: {done} of {models} models reached the target in {wall:.0f} s "
             f"({data['models_per_hour']:.1f} models/hour)")
    return data


def roofline_section(settings: BenchSettings, samples_per_s: float, out: Path) -> dict:
    from ..dataset import load_dataset
    from ..features import Normalizer, featurize
    from ..models import create_model
    from .roofline import Roofline, measure_bandwidth_gbs, measure_peak_gflops, plot_roofline, training_cost_per_sample

    ds = load_dataset(settings.datasets)
    model = create_model(settings.model)
    rows = np.arange(min(len(ds), 4096))
    sample = ds.select(rows)
    feats = featurize(sample, Normalizer.fit(sample))
    batch = rows[: model.train_config.group_size * model.train_config.groups_per_batch]
    flops, nbytes = training_cost_per_sample(model, feats, batch, settings.device)
    roof = Roofline(flops, nbytes, samples_per_s, measure_peak_gflops(settings.device), measure_bandwidth_gbs(settings.device))
    plot_roofline(roof, out / "bench-roofline.png", f"{settings.model} training on {settings.device}")
    return roof.to_json()


def plot_convergence(results: list[dict], target: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for run in results:
        if run["curve"]:
            ax.plot(range(1, len(run["curve"]) + 1), run["curve"], marker="o", label=f"seed {run['seed']} ({run['status']})")
    ax.axhline(target, color="black", linestyle="--", label=f"target PCA {target}")
    ax.set_xlabel("epoch")
    ax.set_ylabel("validation PCA (held-out tasks)")
    ax.set_title("Convergence to the quality target")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_scaling(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 4))
    procs = [r["processes"] for r in rows]
    ax.plot(procs, [r["samples_per_s"] for r in rows], marker="o", label="measured")
    ax.plot(procs, [rows[0]["samples_per_s"] * p for p in procs], linestyle="--", color="grey", label="ideal")
    ax.set_xlabel("data-parallel processes (torchrun)")
    ax.set_ylabel("training throughput (samples/s)")
    ax.set_title("Strong scaling")
    ax.set_xticks(procs)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run_suite(settings: BenchSettings, processes: list[int], concurrent_models: int = 0, roofline: bool = True,
              print_fn=print) -> dict:
    out = Path(settings.out)
    scaling = []
    main_summary = None
    for count in processes:
        summary = run_bench(replace(settings, processes=count), print_fn)
        main_summary = main_summary or summary
        scaling.append({"processes": count, "time_to_train_s": summary["time_to_train_s"],
                        "samples_per_s": summary["samples_per_s"], "successful_runs": summary["successful_runs"],
                        "epochs_to_target": summary["epochs_to_target"]})
    for row in scaling:
        row["speedup"] = scaling[0]["time_to_train_s"] / row["time_to_train_s"] if row["time_to_train_s"] else float("nan")
        row["throughput_speedup"] = row["samples_per_s"] / scaling[0]["samples_per_s"] if scaling[0]["samples_per_s"] else float("nan")
    data = {**{k: v for k, v in main_summary.items() if k != "runs"}, "runs": main_summary["runs"],
            "strong_scaling": scaling}
    if concurrent_models > 1:
        data["throughput_mode"] = throughput_mode(settings, concurrent_models, print_fn)
    if roofline:
        data["roofline"] = roofline_section(settings, main_summary["samples_per_s"], out)
    plot_convergence(main_summary["runs"], settings.target_pca, out / "bench-convergence.png")
    if len(scaling) > 1:
        plot_scaling(scaling, out / "bench-scaling.png")
    data["table"] = summary_text(data, settings)
    print_fn(data["table"])
    write_json(out / "bench-summary.json", data)
    return data


def summary_text(data: dict, settings: BenchSettings) -> str:
    lines = [f"target validation PCA {settings.target_pca} ({settings.split}, model {settings.model}, "
             f"{len(settings.seeds)} seeds): {data['successful_runs']} reached it, {data['aborted_runs']} aborted, "
             f"{data['incomplete_runs']} incomplete",
             f"time to train (MLPerf HPC score: mean without fastest and slowest): {data['time_to_train_s']:.1f} s; "
             f"staging {data['staging_s']:.1f} s ({data['staging_share']:.1%} of staging + training); "
             f"{data['epochs_to_target']:.1f} epochs to target; {data['samples_per_s']:.0f} samples/s"]
    if data.get("strong_scaling"):
        lines.append(format_table(("processes", "time to train s", "samples/s", "speedup", "throughput speedup"),
                                  [[r["processes"], r["time_to_train_s"], r["samples_per_s"], r["speedup"],
                                    r["throughput_speedup"]] for r in data["strong_scaling"]], digits=2))
    if data.get("roofline"):
        r = data["roofline"]
        lines.append(f"roofline: {r['flops_per_sample'] / 1e6:.1f} MFLOP and {r['bytes_per_sample'] / 1e6:.2f} MB per "
                     f"sample ({r['intensity_flop_per_byte']:.1f} FLOP/byte); machine {r['peak_gflops']:.0f} GFLOP/s, "
                     f"{r['bandwidth_gbs']:.0f} GB/s; achieved {r['achieved_gflops']:.1f} GFLOP/s = "
                     f"{r['fraction_of_roof']:.1%} of the {r['bound']}-bound roof")
    return "\n".join(lines)
