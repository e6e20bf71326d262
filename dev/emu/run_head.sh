#!/bin/bash
# dev/emu/run_head.sh [random shapes] [most n in k of one] [seed] [baseline]:
# builds the host emulation of cuda/dense_head.cu (the working tree's) and of
# the baseline's, and runs head_check (head_check.cpp says what it checks).
# The baseline is a dense_head.cu file or a git revision holding one; default
# dev/emu/reference/dense_head_62fe45f.cu (the backward before its rewrite, as
# it was at 62fe45f, kept in the tree so the check runs in any copy). No GPU
# needed: g++. Default: 300 shapes of at most 1.5M n in k, seed 7; 3000 shapes
# take a few minutes.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
base="${4:-$here/reference/dense_head_62fe45f.cu}"
if [ -f "$base" ]; then
    cp "$base" "$out/old.cu"
else
    git -C "$root" show "$base:cuda/dense_head.cu" > "$out/old.cu"
fi
python3 "$here/prep.py" "$root/cuda/dense_head.cu" "$out/new_emu.cpp"
python3 "$here/prep.py" "$out/old.cu" "$out/old_emu.cpp"
# the fake cuda_runtime.h first; no contraction of a * b + c into an fma, no
# fortified longjmp (the fibers switch stacks with it)
flags=(-O2 -std=c++20 -ffp-contract=off -U_FORTIFY_SOURCE -D_FORTIFY_SOURCE=0 -w
       -I"$here" -I"$root/cuda" -I"$root/csrc")
g++ "${flags[@]}" -c "$here/emu.cpp" -o "$out/emu.o"
g++ "${flags[@]}" -c "$out/new_emu.cpp" -o "$out/new.o"
g++ "${flags[@]}" -Dcuda_dense_loss_head=cuda_dense_loss_head_old -c "$out/old_emu.cpp" \
    -o "$out/old.o"
g++ "${flags[@]}" -c "$here/head_check.cpp" -o "$out/main.o"
g++ "$out/emu.o" "$out/new.o" "$out/old.o" "$out/main.o" -o "$out/head_check"
"$out/head_check" "${1:-300}" "${2:-1500000}" "${3:-7}"
