#!/bin/bash
# dev/emu/run_pool_col.sh [random shapes] [seed] [most dx elements of a
# shape] [seed networks' pairs 1/0]: builds the host emulation of the
# working tree's cuda/conv2d_pool_backward_kernels.cuh (a convolution's data
# gradient through the pooling before it) and runs pool_col_check
# (pool_col_check.cpp says what it checks). No GPU needed: g++ and the
# repository. Default: 150 shapes of at most 20000 dx elements, seed 7, the
# seed network's pairs.
# EMU_POOL_COL=file.cuh checks another source in place of the working tree's
# (a mutant).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
# the kernel's dynamic shared memory from the emulation's per-block buffer
sed 's|extern __shared__ __align__(16) float plane_smem\[\];|float *plane_smem = emu::block_smem(PLANES_SMEM_MAX_FLOATS);|' \
    "${EMU_POOL_COL:-$root/cuda/conv2d_pool_backward_kernels.cuh}" \
    > "$out/conv2d_pool_backward_kernels.cuh"
grep -q 'emu::block_smem' "$out/conv2d_pool_backward_kernels.cuh" ||
    { echo "run_pool_col.sh: the kernel's shared memory line was not found" >&2; exit 2; }
# the fake cuda_runtime.h first; no contraction of a * b + c into an fma, no
# fortified longjmp (the fibers switch stacks with it)
flags=(-O2 -std=c++20 -ffp-contract=off -U_FORTIFY_SOURCE -D_FORTIFY_SOURCE=0 -w
       -I"$out" -I"$here" -I"$root/cuda" -I"$root/csrc")
g++ "${flags[@]}" -c "$here/emu.cpp" -o "$out/emu.o"
g++ "${flags[@]}" -c "$here/pool_col_check.cpp" -o "$out/main.o"
g++ "$out/emu.o" "$out/main.o" -o "$out/pool_col_check"
"$out/pool_col_check" "${1:-150}" "${2:-7}" "${3:-20000}" "${4:-1}"
