#!/bin/bash
# dev/emu/run_gather_im2col.sh [random shapes] [seed] [most column matrix
# elements of a shape] [seed networks' shapes 1/0]: builds the host
# emulation of cuda/gather_im2col.cu (with gather_im2col_shim.inc: its
# kernel launched directly), of the working tree's cuda/gather.cu (the
# baseline, with conv2d_kernels.cuh's im2col) and of csrc/status.c, and runs
# gather_im2col_check (gather_im2col_check.cpp says what it checks). No GPU
# needed: g++, gcc (with -fsanitize=alignment: a 4-byte unit at an odd
# address aborts) and the repository. Default: 300 shapes of at most 40000
# column matrix elements, seed 7, the seed networks' first convolutions.
# EMU_GATHER_IM2COL=file.cu checks another source in place of the working
# tree's, EMU_CUDA_COMMON=file.cuh another cuda_common.cuh for the kernels'
# files (gather.cu's and gather_im2col.cu's: both use its cnn_step_position),
# EMU_CONV2D_KERNELS=file.cuh another conv2d_kernels.cuh for
# gather_im2col.cu alone (its im2col_column; the baseline im2col_kernel
# keeps the tree's) (mutants: mutate_gather_im2col.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
# a quoted #include looks in the including file's folder first
if [ -n "${EMU_CUDA_COMMON:-}" ]; then cp "$EMU_CUDA_COMMON" "$out/cuda_common.cuh"; fi
if [ -n "${EMU_CONV2D_KERNELS:-}" ]; then cp "$EMU_CONV2D_KERNELS" "$out/conv2d_kernels.cuh"; fi
python3 "$here/prep_kernels.py" "$root/cuda/gather.cu" "$out/gather_emu.cpp"
python3 "$here/prep_kernels.py" --shim "$here/gather_im2col_shim.inc" \
    "${EMU_GATHER_IM2COL:-$root/cuda/gather_im2col.cu}" "$out/gather_im2col_emu.cpp"
# the fake cuda_runtime.h first; no contraction of a * b + c into an fma, no
# fortified longjmp (the fibers switch stacks with it); the kernels' files
# with UBSan's alignment check (a unit wider than its address allows)
flags=(-O2 -std=c++20 -ffp-contract=off -U_FORTIFY_SOURCE -D_FORTIFY_SOURCE=0 -w
       -I"$here" -I"$root/cuda" -I"$root/csrc")
align=(-fsanitize=alignment -fno-sanitize-recover=alignment)
if ! echo 'int main() { return 0; }' | g++ "${align[@]}" -x c++ - -o "$out/probe" 2> /dev/null; then
    echo "run_gather_im2col.sh: no -fsanitize=alignment here: built without it" >&2
    align=()
fi
pids=()
g++ "${flags[@]}" -c "$here/emu.cpp" -o "$out/emu.o" & pids+=($!)
g++ "${flags[@]}" "${align[@]}" -c "$out/gather_emu.cpp" -o "$out/gather.o" & pids+=($!)
g++ "${flags[@]}" "${align[@]}" -c "$out/gather_im2col_emu.cpp" -o "$out/fused.o" & pids+=($!)
g++ "${flags[@]}" -c "$here/gather_im2col_check.cpp" -o "$out/main.o" & pids+=($!)
gcc -O2 -std=c11 -w -I"$root/csrc" -c "$root/csrc/status.c" -o "$out/status.o" & pids+=($!)
built=0
for pid in "${pids[@]}"; do wait "$pid" || built=1; done
[ $built -eq 0 ] || { echo "run_gather_im2col.sh: the build failed" >&2; exit 2; }
g++ "${align[@]}" "$out/emu.o" "$out/gather.o" "$out/fused.o" "$out/main.o" "$out/status.o" \
    -o "$out/gather_im2col_check"
"$out/gather_im2col_check" "${1:-300}" "${2:-7}" "${3:-40000}" "${4:-1}"
