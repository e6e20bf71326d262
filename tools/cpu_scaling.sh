#!/bin/bash
# CPU scaling of the cpu and omp engines against PyTorch on the CPU, on the
# device pool's 16-core host (BENCHMARKS.md, "CPU scaling on the 16-core
# host"): every row in one call, twice (the second round without omp:1,
# omp:2 and PyTorch), then the GEMM's AVX2 kernel beside this CPU's default.
# (The comparisons against a team of threads per region and scaled grains,
# CNNCUDA_OMP_TEAM and CNNCUDA_OMP_GRAIN, were retired with those switches
# on 2026-11-26; BENCHMARKS.md keeps what they measured.) From the
# repository root, after the build; logs and JSON under $OUT (default
# /tmp/cpu_scaling).
#   IMAGES=10000 bash tools/cpu_scaling.sh
set -o pipefail
export PYTHONPATH=$PWD OPENBLAS_NUM_THREADS=1 PYTHONUNBUFFERED=1
O=${OUT:-/tmp/cpu_scaling}; mkdir -p "$O"
N=${IMAGES:-10000}
ROWS='^(cifar10_cnn|lenet5|model) '
B="python3 -m cnncuda.bench --model cifar10_cnn --model lenet5 --frameworks none --verbose 0 --val-images 0 --epochs 2 --images $N --device cpu"
echo "== round 1, with PyTorch"
$B --threads 1,2,4,8,16 --torch-threads 1,2,4,8,16 --json "$O/round1.json" 2>&1 \
    | tee "$O/round1.log" | grep -vE "^ *$"
echo "== round 2"
$B --threads 4,8,16 --json "$O/round2.json" 2>&1 | grep -E "$ROWS"
echo "== CNNCUDA_GEMM=avx2"
CNNCUDA_GEMM=avx2 $B --threads 4,8,16 2>&1 | grep -E "$ROWS"
echo "== OMP_PROC_BIND=close OMP_PLACES=cores"
OMP_PROC_BIND=close OMP_PLACES=cores $B --threads 16 2>&1 | grep -E "$ROWS"
