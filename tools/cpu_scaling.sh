#!/bin/bash
# CPU scaling of the cpu and omp engines against PyTorch on the CPU, on the
# device pool's 16-core host (BENCHMARKS.md, "CPU scaling on the 16-core
# host: a fixed team, AVX-512"): every row in one call, the new defaults
# (with the PyTorch rows) and the old way (CNNCUDA_OMP_TEAM=parts
# CNNCUDA_GEMM=avx2) alternated, A B A B (the second round without omp:1,
# omp:2 and PyTorch). EXTRA=1 adds each change alone and the knobs that did
# not pay. From the repository root, after the build; logs and JSON under
# $OUT (default /tmp/cpu_scaling).
#   IMAGES=10000 bash tools/cpu_scaling.sh
set -o pipefail
export PYTHONPATH=$PWD OPENBLAS_NUM_THREADS=1 PYTHONUNBUFFERED=1
O=${OUT:-/tmp/cpu_scaling}; mkdir -p "$O"
N=${IMAGES:-10000}
ROWS='^(cifar10_cnn|lenet5|model) '
B="python3 -m cnncuda.bench --model cifar10_cnn --model lenet5 --frameworks none --verbose 0 --val-images 0 --epochs 2 --images $N --device cpu"
OLD="env CNNCUDA_OMP_TEAM=parts CNNCUDA_GEMM=avx2"
echo "== A1 new defaults (fixed team, GEMM: this CPU's default), with PyTorch"
$B --threads 1,2,4,8,16 --torch-threads 1,2,4,8,16 --json "$O/new1.json" 2>&1 \
    | tee "$O/new1.log" | grep -vE "^ *$"
echo "== B1 old: CNNCUDA_OMP_TEAM=parts CNNCUDA_GEMM=avx2"
$OLD $B --threads 1,2,4,8,16 --json "$O/old1.json" 2>&1 | grep -E "$ROWS"
echo "== A2 new"
$B --threads 4,8,16 --json "$O/new2.json" 2>&1 | grep -E "$ROWS"
echo "== B2 old"
$OLD $B --threads 4,8,16 --json "$O/old2.json" 2>&1 | grep -E "$ROWS"
[ "${EXTRA:-0}" = 1 ] || exit 0
echo "== the fixed team alone: CNNCUDA_GEMM=avx2"
CNNCUDA_GEMM=avx2 $B --threads 4,8,16 2>&1 | grep -E "$ROWS"
echo "== AVX-512 alone: CNNCUDA_OMP_TEAM=parts"
CNNCUDA_OMP_TEAM=parts $B --threads 4,16 2>&1 | grep -E "$ROWS"
for g in 0.25 0.5 4; do
    echo "== CNNCUDA_OMP_GRAIN=$g"
    CNNCUDA_OMP_GRAIN=$g $B --threads 8,16 2>&1 | grep -E "$ROWS"
done
echo "== OMP_PROC_BIND=close OMP_PLACES=cores"
OMP_PROC_BIND=close OMP_PLACES=cores $B --threads 16 2>&1 | grep -E "$ROWS"
