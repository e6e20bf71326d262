#!/usr/bin/env bash
# The GPU timings of BENCHMARKS.md in one go, on a machine with a CUDA GPU:
# the seed CIFAR-10 CNN at batch 32 and 512 on cuda and cudnn with the
# recorded step (the default) and without it (CNNCUDA_GRAPHS=0), PyTorch (strict fp32)
# eager and with a CUDA graph and JAX (where installed) in the same run; LeNet-5 and the tiny MNIST net
# at batch 32. Writes the JSON rows under $1 (default: .).
# Usage: tools/gpu_bench.sh [OUTDIR]   (after building, from the repo root)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-.}
export PYTHONUNBUFFERED=1
bench() { python3 -m cnncuda.bench "$@"; }
for b in 32 512; do
    bench --model cifar10_cnn --device cuda --device cudnn --batch-size $b \
        --epochs 3 --json "$out/cifar10_b$b.json"
    CNNCUDA_GRAPHS=0 bench --model cifar10_cnn --device cuda --device cudnn --batch-size $b --frameworks none \
        --epochs 3 --json "$out/cifar10_b${b}_eager.json"
done
bench --model lenet5 --model tiny_mnist --device cuda --device cudnn --epochs 3 \
    --json "$out/mnist_nets_b32.json"
