#!/usr/bin/env bash
# Device check for one lent NVIDIA GPU, about 8 minutes: the neural models' transfer runs that these 2 CPU
# cores cannot fit, as many processes side by side on the one GPU (each trains small batches and leaves the
# GPU mostly idle), plus data-parallel training with 2 ranks on that GPU.
#
#   benchmarks/gpu_transfer.sh ROLLER_DS AUTOTVM_DS WORK_DIR           (PART=1, the default)
#   PART=2 LIMIT=360 benchmarks/gpu_transfer.sh ROLLER_DS AUTOTVM_DS WORK_DIR
#
# Part 1: DDP, K80 <-> V100 and the x86 CPUs held out with two hardware-token variants; part 2: the ARM
# boards held out, the within-device ceiling (within-task 90/10 over all five devices, read per device) and
# few-shot fine-tuning on the x86 CPUs.
#
# ROLLER_DS: the shared K80 + V100 records (benchmarks/cpu_compare.sh makes it); AUTOTVM_DS: the five
# AutoTVM devices (docs/BENCHMARKS.md, "Five AutoTVM devices"). Writes one `compare --json` per process
# (after every seed, so a process stopped at the time limit keeps its finished seeds) and a log each;
# benchmarks/merge_compare.py makes the tables. The tree models and the copying baselines run on the CPU
# (benchmarks/cpu_compare.sh, docs/BENCHMARKS.md): XGBoost's CUDA build does not travel.
set -uo pipefail
roller=${1:?roller dataset}; autotvm=${2:?autotvm dataset}; work=${3:?work dir}
part=${PART:-1}; epochs=${EPOCHS:-3}; limit=${LIMIT:-420}; device=${DEVICE:-cuda}  # DEVICE=cpu checks the script itself
export PYTHONPATH="$PWD/src:${PYTHONPATH:-}" PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
mkdir -p "$work"
smi=
if [ "$device" = cuda ]; then
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name(0))"
    nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv -l 20 > "$work/gpu-use.csv" 2>&1 &
    smi=$!
fi
start=$(date +%s)

compare() {  # NAME DATASET ARGS...: one `crosstune compare` on the GPU, stopped at the time limit
    local name=$1 ds=$2; shift 2
    timeout "$limit" python3 -m crosstune compare "$ds" --device "$device" --epochs "$epochs" --quiet \
        --json "$work/$name.json" "$@" > "$work/$name.log" 2>&1
    echo "$name: exit $? after $(( $(date +%s) - start )) s"
}

if [ "$part" = 2 ]; then
    for held_out in cortex-a72 cortex-a7; do
        for model in crossfeat crossfeat-nohw tlp; do
            compare "autotvm-test-$held_out-$model" "$autotvm" --test-hardware "$held_out" --models "$model" --seeds 3 &
        done
    done
    compare autotvm-within-task-crossfeat "$autotvm" --split within-task --test-fraction 0.1 --models crossfeat --seeds 3 &
    for fraction in 0.01 0.05; do
        compare "autotvm-test-i7-3770-fewshot-$fraction" "$autotvm" --test-hardware i7-3770 --target-fraction "$fraction" \
            --models crossfeat --seeds 3 &
    done
    compare "autotvm-test-amd-3700x-fewshot-0.05" "$autotvm" --test-hardware amd-3700x --target-fraction 0.05 \
        --models crossfeat --seeds 3 &
    wait $(jobs -p | grep -vx "${smi:-none}")
    [ -n "$smi" ] && kill "$smi"
    echo "all done after $(( $(date +%s) - start )) s"
    exit 0
fi

# Data-parallel: 2 ranks on one GPU.
benchmarks/ddp_one_gpu.sh "$roller" "$work/ddp" "$device" &

# K80 <-> V100, the three neural models, 3 seeds (the CPU runs xgb).
for held_out in v100 k80; do
    compare "roller-test-$held_out" "$roller" --test-hardware "$held_out" --models crossfeat,crossfeat-nohw,tlp --seeds 3 &
done
# Five AutoTVM devices, leave one x86 CPU out: each model (and two hardware-token variants) in its own process.
for held_out in i7-3770 amd-3700x; do
    for model in crossfeat crossfeat-nohw tlp; do
        compare "autotvm-test-$held_out-$model" "$autotvm" --test-hardware "$held_out" --models "$model" --seeds 3 &
    done
    compare "autotvm-test-$held_out-crossfeat-hwdrop" "$autotvm" --test-hardware "$held_out" --models crossfeat \
        --arch hardware_dropout=0.3 --seeds 3 &
    compare "autotvm-test-$held_out-crossfeat-hwnoise" "$autotvm" --test-hardware "$held_out" --models crossfeat \
        --arch hardware_noise=0.5 --seeds 3 &
done
wait $(jobs -p | grep -vx "${smi:-none}")
[ -n "$smi" ] && kill "$smi"
echo "all done after $(( $(date +%s) - start )) s"
