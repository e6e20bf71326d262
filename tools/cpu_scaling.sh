#!/bin/bash
# CPU scaling of the cpu and omp engines against PyTorch on the CPU, on the
# device pool's 16-core host (BENCHMARKS.md, "CPU scaling: a fixed team"):
# every row in one call, the old way (CNNCUDA_OMP_TEAM=parts CNNCUDA_GEMM=avx2)
# beside the new defaults, and each change alone. From the repository root,
# after the build; logs and JSON under $OUT (default /tmp/cpu_scaling).
#   IMAGES=10000 bash tools/cpu_scaling.sh
set -o pipefail
export PYTHONPATH=$PWD OPENBLAS_NUM_THREADS=1 PYTHONUNBUFFERED=1
O=${OUT:-/tmp/cpu_scaling}; mkdir -p "$O"
N=${IMAGES:-10000}
ROWS='^(cifar10_cnn|lenet5|model) '
B="python3 -m cnncuda.bench --model cifar10_cnn --model lenet5 --frameworks none --verbose 0 --val-images 0 --epochs 2"
echo "== new defaults (fixed team, GEMM: this CPU's default), with PyTorch"
$B --images $N --device cpu --threads 1,2,4,8,16 --torch-threads 1,2,4,8,16 \
    --json "$O/new.json" 2>&1 | tee "$O/new.log" | grep -vE "^ *$"
echo "== old: CNNCUDA_OMP_TEAM=parts CNNCUDA_GEMM=avx2"
CNNCUDA_OMP_TEAM=parts CNNCUDA_GEMM=avx2 $B --images $N --device cpu --threads 1,2,4,8,16 \
    --json "$O/old.json" 2>&1 | grep -E "$ROWS"
echo "== the fixed team alone: CNNCUDA_GEMM=avx2"
CNNCUDA_GEMM=avx2 $B --images $N --device cpu --threads 4,8,16 --json "$O/team.json" 2>&1 | grep -E "$ROWS"
echo "== AVX-512 alone: CNNCUDA_OMP_TEAM=parts"
CNNCUDA_OMP_TEAM=parts $B --images $N --device omp:4 --device omp:16 2>&1 | grep -E "$ROWS"
for g in 0.25 0.5; do
    echo "== CNNCUDA_OMP_GRAIN=$g"
    CNNCUDA_OMP_GRAIN=$g $B --images $N --device omp:8 --device omp:16 2>&1 | grep -E "$ROWS"
done
echo "== OMP_PROC_BIND=close OMP_PLACES=cores"
OMP_PROC_BIND=close OMP_PLACES=cores $B --images $N --device omp:16 2>&1 | grep -E "$ROWS"
