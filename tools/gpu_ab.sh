#!/usr/bin/env bash
# Two trees side by side on a GPU machine, for a performance change: BASE (a
# copy of another commit: `git archive REV | tar -x -C .ab/base` here, then
# carried to the machine with the working tree) and the working tree, built
# at once, then the bench of each in turn, twice (A B A B: shared machines
# drift), then each tree's kernels of one step by ncu (tools/ncu_table.py).
# Usage (from the repo root, on the GPU machine):
#   tools/gpu_ab.sh BASE [bench arguments]
#   tools/gpu_ab.sh .ab/base --model cifar10_cnn --device cuda --batch-size 512 --precision bf16
# Defaults: --model cifar10_cnn --device cuda --batch-size 32 --epochs 3;
# --frameworks none always (PyTorch's and JAX's rows: tools/gpu_bench.sh).
# NCU_BATCH (default: the --batch-size given, else 32) and NCU_PRECISION
# (float32) set the ncu step; NCU=0 skips it. AB_ALSO="ARGS" runs a second
# bench, A B A B, on the same builds (e.g. AB_ALSO="--model cifar10_cnn
# --model lenet5 --model tiny_mnist --batch-size 32": whether a batch-512
# change costs the small batches). Writes nothing outside the trees'
# builds; prints each bench row prefixed by its tree.
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:?usage: tools/gpu_ab.sh BASE [bench arguments]}
shift
[ -f "$base/setup.py" ] || { echo "gpu_ab.sh: $base holds no cnncuda tree" >&2; exit 2; }
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--model cifar10_cnn --device cuda --batch-size 32)
batch=32
for ((i = 0; i < ${#args[@]}; i++)); do
    [ "${args[$i]}" = --batch-size ] && batch=${args[$((i + 1))]}
done
printf '%s\n' "${args[@]}" | grep -qx -- --epochs || args+=(--epochs 3)
export PYTHONUNBUFFERED=1
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
export CNNCUDA_CUDA_ARCH=${CNNCUDA_CUDA_ARCH:-$arch}
nvidia-smi -L
log=$(mktemp -d)
python3 setup.py -q build_ext --inplace > "$log/here.log" 2>&1 & here=$!
(cd "$base" && python3 setup.py -q build_ext --inplace) > "$log/base.log" 2>&1 & there=$!
wait $here || { cat "$log/here.log"; exit 1; }
wait $there || { cat "$log/base.log"; exit 1; }
head=1
# A B A B of the bench with the given arguments: the rows of its table (its
# header the first time only), each prefixed by its tree
ab() {
    for round in 1 2; do
        for tree in "$base" .; do
            (cd "$tree" && python3 -m cnncuda.bench "$@" --frameworks none 2>&1 \
                | awk -v head=$head '/^model / {t = 1; if (head) print; next}
                                     t && (NF == 0 || /^speedup:/) {t = 0} t' \
                | sed "s|^|$tree  |")
            head=0
        done
    done
}
ab "${args[@]}"
if [ -n "${AB_ALSO:-}" ]; then
    read -r -a also <<< "$AB_ALSO"
    printf '%s\n' "${also[@]}" | grep -qx -- --epochs || also+=(--epochs 3)
    ab "${also[@]}"
fi
[ "${NCU:-1}" = 0 ] && exit 0
for tree in "$base" .; do
    echo "== $tree: one step at batch ${NCU_BATCH:-$batch} (ncu, unrecorded)"
    (cd "$tree" && CNNCUDA_GRAPHS=0 PYTHONPATH=$PWD ncu --clock-control none --csv \
        --metrics gpu__time_duration.sum,launch__grid_size,launch__registers_per_thread \
        python3 tools/ncu_steps.py "${NCU_BATCH:-$batch}" cifar10_cnn "${NCU_PRECISION:-float32}" \
        > "$log/ncu.csv" 2> "$log/ncu.err") || { tail -5 "$log/ncu.err"; continue; }
    python3 tools/ncu_table.py "$log/ncu.csv"
done
rm -rf "$log"
