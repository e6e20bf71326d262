#!/bin/bash
# dev/emu/run_pool_im2col.sh [random shapes] [seed] [most input elements of a
# shape] [seed networks' shapes 1/0] [baseline]: builds the host emulation
# of dev/cuda/pool_im2col_kernels.cuh (the pool+im2col fusion, retired from
# the engine), of the working tree's cuda/pool.cu and of the
# baseline revision's pool.cu (with its pool_geom.cuh: the forward before
# max_window/avg_window), with conv2d_kernels.cuh's im2col and csrc/status.c,
# and runs pool_im2col_check (pool_im2col_check.cpp says what it checks). The
# baseline is a folder holding pool.cu and pool_geom.cuh or a git revision;
# default dev/emu/reference/pool_e705609 (both files as they were at e705609,
# kept in the tree so the check runs in any copy). No GPU needed: g++ and
# gcc. Default: 300 shapes of at most 60000 input elements, seed 7, the seed
# networks' pairs.
# EMU_POOL_IM2COL=file.cuh, EMU_POOL_GEOM=file.cuh and EMU_POOL=pool.cu check
# other sources in place of the working tree's (mutants:
# mutate_pool_im2col.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
base="${5:-$here/reference/pool_e705609}"
mkdir "$out/old" "$out/new"
if [ -d "$base" ]; then
    cp "$base/pool.cu" "$base/pool_geom.cuh" "$out/old/"
else
    git -C "$root" show "$base:cuda/pool.cu" > "$out/old/pool.cu"
    git -C "$root" show "$base:cuda/pool_geom.cuh" > "$out/old/pool_geom.cuh"
fi
# a quoted #include looks in the including file's folder first: old/ gets the
# baseline's pool_geom.cuh, new/ the working tree's (or EMU_POOL_GEOM)
cp "${EMU_POOL_GEOM:-$root/cuda/pool_geom.cuh}" "$out/new/pool_geom.cuh"
python3 "$here/prep_kernels.py" --suffix _old --shim "$here/pool_shim.inc" "$out/old/pool.cu" \
    "$out/old/pool_emu.cpp"
python3 "$here/prep_kernels.py" --shim "$here/pool_shim.inc" "${EMU_POOL:-$root/cuda/pool.cu}" \
    "$out/new/pool_emu.cpp"
python3 "$here/prep_kernels.py" --shim "$here/pool_im2col_shim.inc" \
    "${EMU_POOL_IM2COL:-$root/dev/cuda/pool_im2col_kernels.cuh}" "$out/new/pool_im2col_emu.cpp"
# the fake cuda_runtime.h first; no contraction of a * b + c into an fma, no
# fortified longjmp (the fibers switch stacks with it)
flags=(-O2 -std=c++20 -ffp-contract=off -U_FORTIFY_SOURCE -D_FORTIFY_SOURCE=0 -w
       -I"$here" -I"$root/cuda" -I"$root/csrc")
g++ "${flags[@]}" -c "$here/emu.cpp" -o "$out/emu.o"
g++ "${flags[@]}" -c "$out/old/pool_emu.cpp" -o "$out/old.o"
g++ "${flags[@]}" -c "$out/new/pool_emu.cpp" -o "$out/new.o"
g++ "${flags[@]}" -c "$out/new/pool_im2col_emu.cpp" -o "$out/fused.o"
g++ "${flags[@]}" -c "$here/pool_im2col_check.cpp" -o "$out/main.o"
gcc -O2 -std=c11 -w -I"$root/csrc" -c "$root/csrc/status.c" -o "$out/status.o"
g++ "$out/emu.o" "$out/old.o" "$out/new.o" "$out/fused.o" "$out/main.o" "$out/status.o" \
    -o "$out/pool_im2col_check"
"$out/pool_im2col_check" "${1:-300}" "${2:-7}" "${3:-60000}" "${4:-1}"
