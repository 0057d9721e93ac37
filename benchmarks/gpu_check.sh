#!/usr/bin/env bash
# Device check for an NVIDIA GPU (under 8 minutes on an H200): the MLPerf-style training benchmark on
# the GPU, then the model comparison of both leave-one-GPU-out directions.
#
#   benchmarks/gpu_check.sh DATASET OUT_DIR [EPOCHS]
#
# DATASET is a crosstune dataset of the shared K80 + V100 records (crosstune import ... --out DATASET).
# The benchmark's quality target is chosen by a probe run: the best validation PCA it reaches in 8
# epochs minus 0.01, so that the reference settings reach it in most seeds.
set -uo pipefail
DATASET=${1:?dataset}; OUT=${2:?out dir}; EPOCHS=${3:-4}
mkdir -p "$OUT"
export PYTHONPATH="$PWD/src:${PYTHONPATH:-}" PYTHONUNBUFFERED=1
CT="python3 -m crosstune.cli"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name(0))"
start=$(date +%s)
$CT bench --dataset "$DATASET" --split by-task --target-pca 0.999 --seeds 1 --first-seed 100 --max-epochs 8 \
    --device cuda --no-roofline --out "$OUT/probe" > "$OUT/probe.txt" 2>&1
TARGET=$(python3 -c "import json;d=json.load(open('$OUT/probe/bench-summary.json'));print(round(max(d['runs'][0]['curve'])-0.01,3))")
echo "probe: curve $(python3 -c "import json;print(json.load(open('$OUT/probe/bench-summary.json'))['runs'][0]['curve'])"); target $TARGET"
$CT bench --dataset "$DATASET" --split by-task --target-pca "$TARGET" --seeds 5 --max-epochs 10 --device cuda \
    --out "$OUT/bench" 2>&1 | tee "$OUT/bench.txt"
echo "bench done after $(( $(date +%s) - start )) s"
$CT compare "$DATASET" --test-hardware v100 --seeds 3 --epochs "$EPOCHS" --device cuda --quiet \
    --json "$OUT/compare-k80-to-v100.json" > "$OUT/compare-k80-to-v100.txt" 2>&1 &
$CT compare "$DATASET" --test-hardware k80 --seeds 3 --epochs "$EPOCHS" --device cuda --quiet \
    --json "$OUT/compare-v100-to-k80.json" > "$OUT/compare-v100-to-k80.txt" 2>&1 &
wait
cat "$OUT"/compare-*.txt
echo "all done after $(( $(date +%s) - start )) s"
