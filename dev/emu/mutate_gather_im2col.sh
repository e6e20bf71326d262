#!/bin/bash
# dev/emu/mutate_gather_im2col.sh [random shapes] [seed]: does
# run_gather_im2col.sh catch bugs? Each mutant is a temporary copy of
# cuda/gather_im2col.cu, cuda/cuda_common.cuh or cuda/conv2d_kernels.cuh
# (im2col_column, for the fused kernel only) with one sed edit (the tree
# is not touched), checked on the given shapes (default 150, seed 3, no
# seed-network shapes) plus the refusals; a mutant must fail. The unmutated copy runs first and must pass.
# Prints one line per mutant; exit status 1 when a mutant survives
# (mutate_lib.sh: the loop).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
shapes="${1:-150}"
seed="${2:-3}"
# file|description|sed expression (cuda_common.cuh: its cnn_step_position,
# the start of the step that gather.cu shares, so mutated for both)
mutants=(
  "gather_im2col.cu|the position ignored (idx = order)|s/const int32_t \*idx = order + cnn_step_position(counters, ticket, rows);/const int32_t *idx = order; cnn_step_position(counters, ticket, rows);/"
  "gather_im2col.cu|images: idx[i] replaced by i|s/const int32_t src = idx\[q \/ p\];/const int32_t src = q \/ p;/"
  "gather_im2col.cu|targets: idx[i] replaced by i|s/const int32_t r = idx\[i\];/const int32_t r = (int32_t)i;/"
  "gather_im2col.cu|images: negative-index zeroing dropped|s/src >= 0 ? data/true ? data/"
  "gather_im2col.cu|targets: negative-index zeroing dropped|s/if (r >= 0) val = /val = /"
  "conv2d_kernels.cuh|pad_top sign flipped|s/r \* d.sh - d.pad_top/r * d.sh + d.pad_top/"
  "conv2d_kernels.cuh|pad_left sign flipped|s/s \* d.sw - d.pad_left/s * d.sw + d.pad_left/"
  "conv2d_kernels.cuh|pad_top and pad_left swapped|s/r \* d.sh - d.pad_top, column0 = s \* d.sw - d.pad_left/r * d.sh - d.pad_left, column0 = s * d.sw - d.pad_top/"
  "conv2d_kernels.cuh|x read with row and column swapped|s/xc\[(size_t)row \* d.w + column\]/xc[(size_t)column * d.h + row]/"
  "conv2d_kernels.cuh|output row and column of q swapped|s/const int r = rs \/ d.ow, s = rs - r \* d.ow;/const int s = rs \/ d.oh, r = rs - s * d.oh;/"
  "conv2d_kernels.cuh|col row kj*kh+ki (transposed)|s/(size_t)(ki \* kw + kj)/(size_t)(kj * kh + ki)/"
  "conv2d_kernels.cuh|3x3, 5x5: col row kj*KS+ki (transposed)|s/v\[ki \* KS + kj\] = in/v[kj * KS + ki] = in/"
  "conv2d_kernels.cuh|col column q+1|s/\* kh \* kw \* np + q;/* kh * kw * np + q + 1;/"
  "conv2d_kernels.cuh|3x3, 5x5: a value outside the image not replaced by 0|s/v\[ki \* KS + kj\] = in ? x : 0.0f;/v[ki * KS + kj] = x;/"
  "conv2d_kernels.cuh|3x3, 5x5: the row's test dropped|s/const bool in = row_in \&\& /const bool in = /"
  "conv2d_kernels.cuh|3x3, 5x5: a row of the plane h floats long|s/min(max(row, 0), d.h - 1) \* d.w;/min(max(row, 0), d.h - 1) * d.h;/"
  "conv2d_kernels.cuh|3x3, 5x5: the stores of two rows of col swapped|s/out\[(size_t)k \* np\]/out[(size_t)(k ^ 1) * np]/"
  "conv2d_kernels.cuh|host: a non-square kernel taken as 3x3 or 5x5|s/return d.kh == d.kw \&\& /return /"
  "gather_im2col.cu|channel plane dropped from the image|s/ + (size_t)ch \* plane : nullptr/ : nullptr/"
  "conv2d_kernels.cuh|row bound row <= h|s/row < d.h;/row <= d.h;/"
  "conv2d_kernels.cuh|column bound column <= w|s/column < d.w)/column <= d.w)/"
  "gather_im2col.cu|counters moved by count instead of rows|s/cnn_step_position(counters, ticket, rows);/cnn_step_position(counters, ticket, d.n);/"
  "cuda_common.cuh|ticket not handed back|s/if (cnn_last_block(ticket)) {/if (atomicAdd(ticket, 1u) == gridDim.x - 1) {/"
  "cuda_common.cuh|counters moved by block 0 (no ticket)|s/if (cnn_last_block(ticket)) {/if (blockIdx.x == 0) {/"
  "cuda_common.cuh|mask = ++forwards|s/= counters\[CNN_COUNT_FORWARDS\]++;/= ++counters[CNN_COUNT_FORWARDS];/"
  "cuda_common.cuh|steps += rows|s/counters\[CNN_COUNT_STEPS\] += 1;/counters[CNN_COUNT_STEPS] += rows;/"
  "cuda_common.cuh|barrier after the position's read dropped|s/__syncthreads();//"
  "gather_im2col.cu|targets left out of the loop|s/const I total = col_units + (I)d.n \* t_units;/const I total = col_units;/"
  "gather_im2col.cu|targets over rows instead of count|s/const I total = col_units + (I)d.n \* t_units;/const I total = col_units + (I)rows * t_units;/"
  "gather_im2col.cu|targets: unit k dropped from the source|s/src_t\[(size_t)r \* t_units + k\]/src_t[(size_t)r * t_units]/"
  "gather_im2col.cu|host: 4-byte targets without the alignment test|s/if (t_row_bytes % 4 == 0 \&\& align % 4 == 0)/if (t_row_bytes % 4 == 0)/"
  "gather_im2col.cu|host: t_row_bytes kept where src_t is NULL|s/if (!src_t) t_row_bytes = 0;//"
  "gather_im2col.cu|host: d->n not compared with count|s/if (d->n != count || /if (/"
  "gather_im2col.cu|host: x_row_bytes not checked|s/if (x_row_bytes != (size_t)d->c \* d->h \* d->w \* sizeof(float))/if (0)/"
  "gather_im2col.cu|host: negative count accepted|s/if (count < 0) return/if (0) return/"
  "gather_im2col.cu|host: the batch-size limit dropped|s/if (np > (size_t)INT32_MAX || /if (0 \&\& /"
)
sources=(gather_im2col.cu cuda_common.cuh conv2d_kernels.cuh)
run_check() { # DIR -> exit status of the check on DIR's sources
    EMU_GATHER_IM2COL="$1/gather_im2col.cu" EMU_CUDA_COMMON="$1/cuda_common.cuh" \
        EMU_CONV2D_KERNELS="$1/conv2d_kernels.cuh" \
        bash "$here/run_gather_im2col.sh" "$shapes" "$seed" 30000 0 > "$tmp/out" 2> "$tmp/err"
}
source "$here/mutate_lib.sh"
mutate_all
