#!/bin/bash
# dev/emu/run_step_backward.sh [-x] [batches...]: builds the host emulation of
# dev/cuda/step_backward_phases.cuh (the seed CNN's training backward and
# Adam as phases; step_backward.cu's version 1 kernels) and runs
# step_backward_check against the float64 reference of
# dev/cuda/step_backward_reference.h (step_backward_check.cpp says what it
# checks). No GPU needed: g++. Default: batches 32, 1, 5 and 33, each with
# integer and uniform inputs; -x: stop after the first version that fails.
# EMU_STEP_BWD_PHASES=file.cuh checks another
# source in place of the working tree's (a mutant).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
# the backward's header includes the forward's: both rewritten, side by side
python3 "$here/prep_kernels.py" "$root/dev/cuda/step_forward_phases.cuh" "$out/step_forward_phases.cuh"
python3 "$here/prep_kernels.py" "${EMU_STEP_BWD_PHASES:-$root/dev/cuda/step_backward_phases.cuh}" \
    "$out/step_backward_phases_emu.h"
# the fake cuda_runtime.h first; no contraction of a * b + c into an fma, no
# fortified longjmp (the fibers switch stacks with it)
flags=(-O2 -std=c++20 -ffp-contract=off -U_FORTIFY_SOURCE -D_FORTIFY_SOURCE=0 -w
       -I"$here" -I"$out" -I"$root/dev/cuda")
g++ "${flags[@]}" -c "$here/emu.cpp" -o "$out/emu.o"
g++ "${flags[@]}" -c "$here/step_backward_check.cpp" -o "$out/main.o"
g++ "$out/emu.o" "$out/main.o" -o "$out/step_backward_check"
"$out/step_backward_check" "$@"
