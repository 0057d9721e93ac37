#!/usr/bin/env bash
# Device check: the four models side by side on a GPU, 3 seeds each, on both leave-one-GPU-out splits
# (train K80 -> test V100, train V100 -> test K80) and on a within-task split, the three `crosstune
# compare` runs in parallel on one GPU (the models are bound by per-batch overheads, not by the GPU).
#
#   benchmarks/gpu_compare.sh DATASET OUT_DIR [EPOCHS [WITHIN_DATASET]]
#
# DATASET is a crosstune dataset of the shared K80 + V100 records; the within-task split runs on
# WITHIN_DATASET (default DATASET; the K80 records alone make it comparable to a one-GPU 90/10 split).
# Each compare writes its JSON after every seed, so a run cut short by COMPARE_SECONDS still leaves
# the seeds it finished.
# FEWSHOT=0.05 also runs both directions few-shot (that share of each test task given to training) for
# FEWSHOT_MODELS (default crossfeat,xgb).
# DEVICE=cpu runs the same steps without a GPU (to check the script itself on a small dataset).
set -uo pipefail
DATASET=${1:?dataset}; OUT=${2:?out dir}; EPOCHS=${3:-10}; WITHIN=${4:-$1}; DEVICE=${DEVICE:-cuda}
COMPARE_SECONDS=${COMPARE_SECONDS:-480}; MODELS=${MODELS:-crossfeat,tlp,xgb,crossfeat-nohw}; SEEDS=${SEEDS:-3}
export PYTHONPATH="$PWD/src:${PYTHONPATH:-}" PYTHONUNBUFFERED=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-5}
mkdir -p "$OUT"
if [ "$DEVICE" = cuda ]; then
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name(0))"
fi
start=$(date +%s)
compare() {  # name, dataset, then the split arguments
    local name=$1 data=$2; shift 2
    timeout "$COMPARE_SECONDS" python3 -m crosstune compare "$data" "$@" --models "$MODELS" --seeds "$SEEDS" \
        --epochs "$EPOCHS" --device "$DEVICE" --quiet --json "$OUT/compare-$name.json" > "$OUT/compare-$name.txt" 2>&1
    echo "compare $name: exit $? after $(( $(date +%s) - start )) s"
}
compare k80-to-v100 "$DATASET" --test-hardware v100 &
compare v100-to-k80 "$DATASET" --test-hardware k80 &
compare within-task "$WITHIN" --split within-task --test-fraction 0.1 &
if [ -n "${FEWSHOT:-}" ]; then
    MODELS=${FEWSHOT_MODELS:-crossfeat,xgb} compare fewshot-k80-to-v100 "$DATASET" --test-hardware v100 --target-fraction "$FEWSHOT" &
    MODELS=${FEWSHOT_MODELS:-crossfeat,xgb} compare fewshot-v100-to-k80 "$DATASET" --test-hardware k80 --target-fraction "$FEWSHOT" &
fi
wait
for f in "$OUT"/compare-*.txt; do echo "== $f"; cat "$f"; done
echo "all done after $(( $(date +%s) - start )) s"
