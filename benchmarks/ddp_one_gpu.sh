#!/usr/bin/env bash
# Data-parallel training with 2 ranks on one GPU under torchrun (tests/ddp_train.py: 2 epochs of crossfeat
# on a small slice of DATASET); passes when both ranks end with identical weights. The ranks share the GPU
# over gloo (NCCL refuses two ranks on one device; crosstune.distributed picks the backend).
#
#   benchmarks/ddp_one_gpu.sh DATASET WORK_DIR [DEVICE]      (DEVICE=cpu checks the script without a GPU)
set -uo pipefail
dataset=${1:?dataset}; work=${2:?work dir}; device=${3:-cuda}
mkdir -p "$work"
timeout 180 python3 -m torch.distributed.run --standalone --nproc-per-node 2 "$(dirname "$0")/../tests/ddp_train.py" \
    "$dataset" "$work" "$device" > "$work/ddp.log" 2>&1 || { echo "ddp: FAILED"; tail -20 "$work/ddp.log"; exit 1; }
python3 - "$work" <<'PY'
import sys

import torch
from safetensors.torch import load_file

a, b = (load_file(f"{sys.argv[1]}/rank{r}.safetensors") for r in (0, 1))
same = a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
print("ddp: 2 ranks on one device,", "identical weights" if same else "WEIGHTS DIFFER")
sys.exit(0 if same else 1)
PY
