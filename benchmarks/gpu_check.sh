#!/usr/bin/env bash
# Device check for an NVIDIA GPU (meant to finish in under 8 minutes on an H200): the MLPerf-style
# training benchmark on the GPU with its logs checked by the MLPerf compliance checker, data-parallel
# training with 2 ranks on the one GPU (benchmarks/ddp_one_gpu.sh), then, in the time left, the model
# comparison of both leave-one-GPU-out directions.
#
#   benchmarks/gpu_check.sh DATASET OUT_DIR [EPOCHS]
#
# DATASET is a crosstune dataset of the shared K80 + V100 records (crosstune import ... --out DATASET).
# The benchmark's quality target is chosen by a probe run: the best validation PCA it reaches in 8
# epochs minus 0.01, so that the reference settings reach it in most seeds.
# DEVICE=cpu runs the same steps without a GPU (to check the script itself on a small dataset).
set -uo pipefail
DATASET=${1:?dataset}; OUT=${2:?out dir}; EPOCHS=${3:-4}; DEVICE=${DEVICE:-cuda}
COMPARE_SECONDS=${COMPARE_SECONDS:-200}
mkdir -p "$OUT"
export PYTHONPATH="$PWD/src:${PYTHONPATH:-}" PYTHONUNBUFFERED=1
CT="python3 -m crosstune"
if [ "$DEVICE" = cuda ]; then
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name(0))"
fi
start=$(date +%s)
$CT bench --dataset "$DATASET" --split by-task --target-pca 0.999 --seeds 1 --first-seed 100 --max-epochs 8 \
    --device "$DEVICE" --no-roofline --out "$OUT/probe" > "$OUT/probe.txt" 2>&1  # never reaches 0.999: exit 2
[ -f "$OUT/probe/bench-summary.json" ] || { cat "$OUT/probe.txt"; exit 1; }
TARGET=$(python3 -c "import json;d=json.load(open('$OUT/probe/bench-summary.json'));print(round(max(d['runs'][0]['curve'])-0.01,3))")
echo "probe: curve $(python3 -c "import json;print(json.load(open('$OUT/probe/bench-summary.json'))['runs'][0]['curve'])"); target $TARGET"
$CT bench --dataset "$DATASET" --split by-task --target-pca "$TARGET" --seeds 5 --max-epochs 10 --device "$DEVICE" \
    --out "$OUT/bench" 2>&1 | tee "$OUT/bench.txt"
echo "bench done after $(( $(date +%s) - start )) s"
for log in $(python3 -c "import json;print(' '.join(r['log'] for r in json.load(open('$OUT/bench/bench-summary.json'))['runs']))"); do
    python3 -m mlperf_logging.compliance_checker --usage hpc --ruleset 3.0.0 \
        --config "$PWD/src/crosstune/bench/crosstune_hpc.yaml" --log_output "$OUT/compliance.log" "$log" \
        > "$OUT/compliance.txt" 2>&1 \
        && echo "compliance: $(basename "$log") passed" || { echo "compliance: $(basename "$log") FAILED"; tail -5 "$OUT/compliance.txt"; }
done
benchmarks/ddp_one_gpu.sh "$DATASET" "$OUT/ddp" "$DEVICE"
for test_gpu in v100 k80; do
    timeout "$COMPARE_SECONDS" $CT compare "$DATASET" --test-hardware "$test_gpu" --seeds 3 --epochs "$EPOCHS" \
        --device "$DEVICE" --quiet --json "$OUT/compare-test-$test_gpu.json" > "$OUT/compare-test-$test_gpu.txt" 2>&1 &
done
wait
cat "$OUT"/compare-*.txt
echo "all done after $(( $(date +%s) - start )) s"
