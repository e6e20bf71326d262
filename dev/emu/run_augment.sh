#!/bin/bash
# dev/emu/run_augment.sh [random cases] [seed]: builds the host emulation of
# the augmentation kernels (cuda/random_flip.cu, random_affine.cu,
# random_contrast.cu, random_crop.cu) and of csrc/status.c, and runs
# augment_check (augment_check.cpp says what it checks). No GPU needed: g++
# and gcc. Default: 200 random cases, seed 7, then one sample larger than
# the grid's tiles for each kernel.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
objs=()
for op in flip affine contrast crop; do
    python3 "$here/prep_kernels.py" "$root/cuda/random_$op.cu" "$out/random_${op}_emu.cpp"
done
# the fake cuda_runtime.h first; no contraction of a * b + c into an fma, no
# fortified longjmp (the fibers switch stacks with it)
flags=(-O2 -std=c++20 -ffp-contract=off -U_FORTIFY_SOURCE -D_FORTIFY_SOURCE=0 -w
       -I"$here" -I"$root/cuda" -I"$root/csrc")
pids=()
g++ "${flags[@]}" -c "$here/emu.cpp" -o "$out/emu.o" & pids+=($!)
for op in flip affine contrast crop; do
    g++ "${flags[@]}" -c "$out/random_${op}_emu.cpp" -o "$out/random_$op.o" & pids+=($!)
    objs+=("$out/random_$op.o")
done
g++ "${flags[@]}" -c "$here/augment_check.cpp" -o "$out/main.o" & pids+=($!)
gcc -O2 -std=c11 -w -I"$root/csrc" -c "$root/csrc/status.c" -o "$out/status.o" & pids+=($!)
built=0
for pid in "${pids[@]}"; do wait "$pid" || built=1; done
[ $built -eq 0 ] || { echo "run_augment.sh: the build failed" >&2; exit 2; }
g++ "$out/emu.o" "${objs[@]}" "$out/main.o" "$out/status.o" -o "$out/augment_check"
"$out/augment_check" "${1:-200}" "${2:-7}"
