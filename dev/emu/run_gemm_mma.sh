#!/bin/bash
# dev/emu/run_gemm_mma.sh [random shapes per instance] [seed]: builds the
# host emulation of the working tree's wide SGEMM on tensor cores (the TF32,
# bfloat16 and float16 instances of cuda/gemm_wide_kernels.cuh, their
# mma.sync emulated by emu.cpp) and runs gemm_mma_check (gemm_mma_check.cpp
# says what it checks). No GPU needed: g++ and the repository. Default: 6
# shapes for each of the 36 instances, seed 7. EMU_GEMM_WIDE: another copy
# of the header (mutate_gemm_mma.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
# as run_gemm_shapes.sh: the fake CUDA headers first, no contraction into
# fma, no fortified longjmp; the header's launch rewritten, found in $out
python3 "$here/prep_kernels.py" "${EMU_GEMM_WIDE:-$root/cuda/gemm_wide_kernels.cuh}" \
    "$out/gemm_wide_kernels.cuh"
flags=(-O2 -std=c++20 -ffp-contract=off -U_FORTIFY_SOURCE -D_FORTIFY_SOURCE=0 -w
       -I"$out" -I"$here" -I"$root/cuda" -I"$root/csrc")
g++ "${flags[@]}" -c "$here/emu.cpp" -o "$out/emu.o"
g++ "${flags[@]}" -c "$here/gemm_mma_check.cpp" -o "$out/main.o"
g++ "$out/emu.o" "$out/main.o" -o "$out/gemm_mma_check"
"$out/gemm_mma_check" "${1:-6}" "${2:-7}"
