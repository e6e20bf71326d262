#!/usr/bin/env bash
# The GPU checks and timings of the two im2col fusions (BENCHMARKS.md,
# "The column matrices written by the kernel before": the gather's is on by
# default; the pool's is retired from the engine, its kernel kept in
# dev/cuda/pool_im2col_kernels.cuh for the stage program), written to
# fit one device call (3.5 minutes on an H100), on a machine with a CUDA GPU,
# from anywhere:
#   1. build for this GPU;
#   2. their GPU tests, with the recorded-step, early-launch and pool-col2im
#      tests beside them (the paths they share);
#   3. compute-sanitizer memcheck and initcheck over the fusions' seed and
#      targets tests (the fused kernels' writes stay inside the workspace;
#      nothing reads memory that was never written);
#   4. the stage program dev/cuda/pool_forward_im2col (v1 apart, v2 fused);
#   5. the seed models with the gather's fusion off and on, alternating, two rounds
#      (batch 32: CIFAR-10, LeNet-5, tiny MNIST; batch 512: CIFAR-10), the
#      JSON rows under OUTDIR;
#   6. the per-kernel profile of CIFAR-10 at batch 32, off and on.
# Stops at the first failure of 1-4.
# Usage: tools/gpu_im2col_fusions.sh [OUTDIR]   (default: .)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-.}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')
echo "== 1. build (sm_$arch)"
CNNCUDA_CUDA_ARCH=$arch python3 setup.py -q build_ext --inplace 2>&1 | grep -E "cnncuda build|error" || true
python3 -c "import cnncuda; print(cnncuda.devices(), cnncuda.cuda_devices())"
echo "== 2. GPU tests"
python3 -m pytest -q -m gpu -p no:cacheprovider tests/fusions/test_im2col_fusion.py \
    tests/fusions/test_pool_col2im_fusion.py tests/net/test_recorded_steps.py tests/net/test_early_launch.py
echo "== 3. compute-sanitizer memcheck, initcheck"
for tool in memcheck initcheck; do
    compute-sanitizer --tool $tool --error-exitcode 99 \
        python3 -m pytest -q -m gpu -p no:cacheprovider tests/fusions/test_im2col_fusion.py \
        -k "targets or (seeds and cifar10_cnn-7)"
done
echo "== 4. dev/cuda/pool_forward_im2col"
make -C dev/cuda -s ARCH="$arch" BUILD=build/sm_$arch pool_forward_im2col
dev/cuda/build/sm_$arch/pool_forward_im2col | tee "$out/pool_forward_im2col.log"
echo "== 5. the seeds, fusions off / on, alternating"
for round in 1 2; do
    for v in 0 1; do
        echo "-- round $round, CNNCUDA_FUSE_GATHER_IM2COL=$v"
        CNNCUDA_FUSE_GATHER_IM2COL=$v python3 -m cnncuda.bench \
            --device cuda --frameworks none --epochs 3 --val-images 0 --model cifar10_cnn \
            --model lenet5 --model tiny_mnist --batch-size 32 --json "$out/im2col_b32_${v}_$round.json"
        CNNCUDA_FUSE_GATHER_IM2COL=$v python3 -m cnncuda.bench \
            --device cuda --frameworks none --epochs 2 --val-images 0 --model cifar10_cnn \
            --batch-size 512 --json "$out/im2col_b512_${v}_$round.json"
    done
done
echo "== 6. per-kernel profile, CIFAR-10 b32, early launch off"
for v in 0 1; do
    echo "-- fusions $v"
    CNNCUDA_EARLY_LAUNCH=0 CNNCUDA_FUSE_GATHER_IM2COL=$v \
        python3 tools/profile_cuda.py cuda 32 3200 cifar10_cnn
done
