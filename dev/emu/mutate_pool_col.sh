#!/bin/bash
# dev/emu/mutate_pool_col.sh [random shapes] [seed]: does run_pool_col.sh
# catch bugs in cuda/conv2d_pool_backward_kernels.cuh? Each mutant is a
# temporary copy of the header with one sed edit (the tree is not touched),
# checked on the given shapes (default 60, seed 3, with the seed network's
# pairs); a mutant must fail. The unmutated copy runs first and must pass.
# Prints one line per mutant; exit status 1 when a mutant survives
# (mutate_lib.sh).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
shapes="${1:-60}"
seed="${2:-3}"
f=conv2d_pool_backward_kernels.cuh
# file|description|sed expression (no "|" in it: ".." stands for "||")
mutants=(
  "$f|planes: the pool's output read one element on|s/pool_y\[(size_t)q0 \* op + o\] > 0.0f/pool_y[(size_t)q0 * op + o + 1] > 0.0f/"
  "$f|planes: the pool's output not tested|s/vals\[o\] = pool_y \&\& !(pool_y\[(size_t)q0 \* op + o\] > 0.0f) ? 0.0f : 0.0f + v;/vals[o] = 0.0f + v;/"
  "$f|per output: the pool's output not tested|s/grad = pool_y \&\& !(pool_y\[o\] > 0.0f) ? 0.0f : 0.0f + v;/grad = 0.0f + v;/"
  "$f|per output: the pool's output tested >= 0|s/pool_y\[o\] > 0.0f/pool_y[o] >= 0.0f/"
  "$f|planes: the ReLU's output not tested per element|s/(!relu_at .. relu_at\[e0 + e\] > 0.0f)/true/"
  "$f|per output: the argmax not compared|s/(!MAX .. mark == me)/true/"
  "$f|planes: the argmax not compared|s/(!MAX .. marks\[o\] == at.i \* g.w + at.j)/true/"
  "$f|per output: the last window's rows end at its own end|s/r == g.oh - 1 ? g.h : min/min/"
)
sources=(conv2d_pool_backward_kernels.cuh)
run_check() { # DIR -> exit status of the check on DIR's copy
    EMU_POOL_COL="$1/$f" bash "$here/run_pool_col.sh" "$shapes" "$seed" 20000 1 > "$tmp/out" 2> "$tmp/err"
}
source "$here/mutate_lib.sh"
mutate_all
