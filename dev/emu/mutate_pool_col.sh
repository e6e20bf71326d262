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
  "$f|pass_back: the pool's output read one element on|s/pool_y\[at\] > 0.0f/pool_y[at + 1] > 0.0f/"
  "$f|pass_back: the pool's output not tested|s/grad = pool_y \&\& !(pool_y\[at\] > 0.0f) ? 0.0f : 0.0f + v;/grad = 0.0f + v;/"
  "$f|pass_back: the pool's output tested >= 0|s/pool_y\[at\] > 0.0f/pool_y[at] >= 0.0f/"
  "$f|pass_back: the ReLU's output not tested per element|s/(!relu_at .. relu_at\[e\] > 0.0f)/true/"
  "$f|pass_back: the argmax not compared|s/(!MAX .. mark == me)/true/"
  "$f|pass_back: the last window's rows end at its own end|s/r == g.oh - 1 ? g.h : min/min/"
  "$f|planes: the copy's carry skips the other images' columns of a row|s/from += np - p;/from += p;/"
  "$f|pass_back, 2x2: the second row's pair stored swapped|s/make_float2(out\[2\], out\[3\])/make_float2(out[3], out[2])/"
  "$f|pass_back, 2x2: the second row's floats stored swapped|s/at_dx\[g.w\] = out\[2\], at_dx\[g.w + 1\] = out\[3\]/at_dx[g.w] = out[3], at_dx[g.w + 1] = out[2]/"
  "$f|pass_back, 2x2: the argmax compared one row on|s/const int m = me + (u >> 1) \* g.w + (u \& 1);/const int m = me + (u >> 1) * 2 * g.w + (u \& 1);/"
  "$f|pass_back, 2x2: taken where the owned rows run on past the window (gaps)|s/cols1 - cols0 == 2 \&\& rows1 == win_r1 \&\&/cols1 - cols0 == 2 \&\&/"
  "$f|planes: every plane summed from the first plane's rows|s/cols + at.pl \* kk \* row + first,/cols + first,/"
  "$f|planes: every plane written over the first|s/(q0 + at.pl) \* in_plane/q0 * in_plane/"
  "$f|planes, 16-byte copies: the runs' first float at offset 0|s/first = (int)(image \* p % 4);/first = 0;/"
  "$f|planes, 16-byte copies: the runs' rows P floats apart|s/async_copy16(\&cols\[run \* row + at + first\]/async_copy16(\&cols[run * p + at + first]/"
  "$f|planes, float copies: a run's carry moves one float|s/to += row - p;/to += 1;/"
  "$f|planes: pool_y of the first block's planes|s/async_copy(\&pool_ys\[o\], pool_y + q0 \* op + o, true)/async_copy(\&pool_ys[o], pool_y + o, true)/"
  "$f|planes: the argmax of the first block's planes|s/async_copy(\&marks\[o\], argmax + q0 \* op + o, true)/async_copy(\&marks[o], argmax + o, true)/"
)
sources=(conv2d_pool_backward_kernels.cuh)
run_check() { # DIR -> exit status of the check on DIR's copy
    EMU_POOL_COL="$1/$f" bash "$here/run_pool_col.sh" "$shapes" "$seed" 20000 1 > "$tmp/out" 2> "$tmp/err"
}
source "$here/mutate_lib.sh"
mutate_all
