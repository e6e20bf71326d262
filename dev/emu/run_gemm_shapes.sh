#!/bin/bash
# dev/emu/run_gemm_shapes.sh [random shapes] [seed]: builds the host
# emulation of the working tree's SGEMM kernels (cuda/gemm_short_kernels.cuh,
# gemm_kernels.cuh and the float32 instances of gemm_wide_kernels.cuh) and
# runs gemm_shapes_check (gemm_shapes_check.cpp says what it checks). No GPU
# needed: g++ and the repository. Default: 40 shapes, seed 7.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
# the fake cuda_runtime.h (and cuda_bf16.h, cuda_fp16.h) first; no
# contraction of a * b + c into an fma (the kernels' fmaf stays one), no
# fortified longjmp (the fibers switch stacks with it); the wide header's
# split-K sum launch rewritten by prep_kernels.py, found in $out before the
# tree's cuda/
# (or EMU_GEMM_WIDE's copy: mutate_gemm_wide_sums.sh)
python3 "$here/prep_kernels.py" "${EMU_GEMM_WIDE:-$root/cuda/gemm_wide_kernels.cuh}" \
    "$out/gemm_wide_kernels.cuh"
# the narrow kernel's header, or EMU_GEMM_NARROW's copy (mutate_gemm_narrow.sh)
cp "${EMU_GEMM_NARROW:-$root/cuda/gemm_narrow_kernels.cuh}" "$out/gemm_narrow_kernels.cuh"
flags=(-O2 -std=c++20 -ffp-contract=off -U_FORTIFY_SOURCE -D_FORTIFY_SOURCE=0 -w
       -I"$out" -I"$here" -I"$root/cuda" -I"$root/csrc")
g++ "${flags[@]}" -c "$here/emu.cpp" -o "$out/emu.o"
g++ "${flags[@]}" -c "$here/gemm_shapes_check.cpp" -o "$out/main.o"
g++ "$out/emu.o" "$out/main.o" -o "$out/gemm_shapes_check"
"$out/gemm_shapes_check" "${1:-40}" "${2:-7}"
