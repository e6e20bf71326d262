#!/bin/bash
# dev/emu/mutate_gather_im2col.sh [random shapes] [seed]: does
# run_gather_im2col.sh catch bugs? Each mutant is a temporary copy of
# cuda/gather_im2col.cu with one sed edit (the tree is not touched), checked
# on the given shapes (default 150, seed 3, no seed-network shapes) plus the
# refusals; a mutant must fail. The unmutated copy runs first and must pass.
# Prints one line per mutant; exit status 1 when a mutant survives.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
shapes="${1:-150}"
seed="${2:-3}"
# description|sed expression
mutants=(
  "the position ignored (idx = order)|s/const int32_t \*idx = order + position;/const int32_t *idx = order;/"
  "images: idx[i] replaced by i|s/const int32_t src = idx\[i\];/const int32_t src = (int32_t)i;/"
  "targets: idx[i] replaced by i|s/const int32_t r = idx\[i\];/const int32_t r = (int32_t)i;/"
  "images: negative-index zeroing dropped|s/src >= 0 ? data/true ? data/"
  "targets: negative-index zeroing dropped|s/if (r >= 0) val = /val = /"
  "pad_top sign flipped|s/r \* d.sh - d.pad_top/r * d.sh + d.pad_top/"
  "pad_left sign flipped|s/s \* d.sw - d.pad_left/s * d.sw + d.pad_left/"
  "pad_top and pad_left swapped|s/r \* d.sh - d.pad_top, column0 = s \* d.sw - d.pad_left/r * d.sh - d.pad_left, column0 = s * d.sw - d.pad_top/"
  "x read with row and column swapped|s/xc\[(size_t)row \* d.w + column\]/xc[(size_t)column * d.h + row]/"
  "output row and column of q swapped|s/const int r = rs \/ d.ow, s = rs - r \* d.ow;/const int s = rs \/ d.oh, r = rs - s * d.oh;/"
  "col row kj*kh+ki (transposed)|s/(size_t)(ki \* d.kw + kj)/(size_t)(kj * d.kh + ki)/"
  "col column q+1|s/\* khw \* np + q;/* khw * np + q + 1;/"
  "channel plane dropped from the image|s/ + (size_t)ch \* plane : nullptr/ : nullptr/"
  "row bound row <= h|s/row < d.h;/row <= d.h;/"
  "column bound column <= w|s/column < d.w)/column <= d.w)/"
  "counters moved by count instead of rows|s/position + rows;/position + d.n;/"
  "ticket not handed back|s/if (cnn_last_block(ticket)) {/if (atomicAdd(ticket, 1u) == gridDim.x - 1) {/"
  "counters moved by block 0 (no ticket)|s/if (cnn_last_block(ticket)) {/if (blockIdx.x == 0) {/"
  "mask = ++forwards|s/= counters\[CNN_COUNT_FORWARDS\]++;/= ++counters[CNN_COUNT_FORWARDS];/"
  "steps += rows|s/counters\[CNN_COUNT_STEPS\] += 1;/counters[CNN_COUNT_STEPS] += rows;/"
  "barrier after the position's read dropped|s/__syncthreads();//"
  "targets left out of the loop|s/const I total = col_units + (I)d.n \* t_units;/const I total = col_units;/"
  "targets over rows instead of count|s/const I total = col_units + (I)d.n \* t_units;/const I total = col_units + (I)rows * t_units;/"
  "targets: unit k dropped from the source|s/src_t\[(size_t)r \* t_units + k\]/src_t[(size_t)r * t_units]/"
  "host: 4-byte targets without the alignment test|s/if (t_row_bytes % 4 == 0 \&\& align % 4 == 0)/if (t_row_bytes % 4 == 0)/"
  "host: t_row_bytes kept where src_t is NULL|s/if (!src_t) t_row_bytes = 0;//"
  "host: d->n not compared with count|s/if (d->n != count || /if (/"
  "host: x_row_bytes not checked|s/if (x_row_bytes != (size_t)d->c \* d->h \* d->w \* sizeof(float))/if (0)/"
  "host: negative count accepted|s/if (count < 0) return/if (0) return/"
  "host: the batch-size limit dropped|s/if (np > (size_t)INT32_MAX || /if (0 \&\& /"
)
run() { # src -> exit status of the check
    EMU_GATHER_IM2COL="$1" bash "$here/run_gather_im2col.sh" "$shapes" "$seed" 30000 0 \
        > "$tmp/out" 2> "$tmp/err"
}
cp "$root/cuda/gather_im2col.cu" "$tmp/gather_im2col.cu"
if ! run "$tmp/gather_im2col.cu"; then
    echo "the unmutated source fails:"; cat "$tmp/out"; tail -20 "$tmp/err"; exit 1
fi
echo "unmutated: $(tail -1 "$tmp/out")"
survived=0
for m in "${mutants[@]}"; do
    IFS='|' read -r what expr <<< "$m"
    mkdir -p "$tmp/m"
    cp "$root/cuda/gather_im2col.cu" "$tmp/m/gather_im2col.cu"
    sed -i "$expr" "$tmp/m/gather_im2col.cu"
    if cmp -s "$tmp/m/gather_im2col.cu" "$root/cuda/gather_im2col.cu"; then
        echo "NOT APPLIED  $what (the sed matched nothing)"; survived=1; continue
    fi
    run "$tmp/m/gather_im2col.cu"
    rc=$?
    if [ $rc -eq 0 ]; then
        echo "SURVIVED     $what"; survived=1
    else
        how="$(grep -m1 -e '^FAIL' -e 'runtime error' "$tmp/err" | cut -c1-150)"
        [ -z "$how" ] && how="(no FAIL line: $(grep -m1 -v '^refused' "$tmp/err" | cut -c1-120))"
        echo "caught       $what: exit $rc, $(grep -c '^FAIL' "$tmp/err") FAIL lines; first: $how"
    fi
done
exit $survived
