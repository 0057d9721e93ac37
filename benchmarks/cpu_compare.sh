#!/usr/bin/env bash
# The four models on both leave-one-GPU-out splits of the shared Roller records, on this machine's CPU cores:
# crossfeat, crossfeat-nohw, tlp and xgb in one `crosstune compare` run per direction, 3 seeds, 3 epochs.
# Usage: benchmarks/cpu_compare.sh OUT_DIR   (SHARED=path/to/shared/data, EPOCHS=3, SEEDS=3)
set -euo pipefail
out=${1:?usage: cpu_compare.sh OUT_DIR}
shared=${SHARED:-$(dirname "$0")/../../shared/data}
epochs=${EPOCHS:-3}
seeds=${SEEDS:-3}
mkdir -p "$out"
ds="$out/roller-k80-v100"
if [ ! -f "$ds/manifest.json" ]; then
  crosstune import "$shared/roller-ansor/k80" --hardware k80 --out "$ds" --quiet
  crosstune import "$shared/roller-ansor/v100" --hardware v100 --out "$ds" --quiet
fi
for held_out in v100 k80; do
  train=$([ "$held_out" = v100 ] && echo k80 || echo v100)
  /usr/bin/time -v crosstune compare "$ds" --test-hardware "$held_out" --models crossfeat,crossfeat-nohw,tlp,xgb \
    --seeds "$seeds" --epochs "$epochs" --quiet --json "$out/cpu-compare-$train-to-$held_out.json" \
    2> "$out/cpu-compare-$train-to-$held_out.time" | tee "$out/cpu-compare-$train-to-$held_out.txt"
done
