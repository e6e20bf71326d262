#!/bin/bash
# dev/emu/mutate_pool_im2col.sh [random shapes] [seed]: does run_pool_im2col.sh
# catch bugs? Each mutant is a temporary copy of
# dev/cuda/pool_im2col_kernels.cuh, cuda/pool_geom.cuh or cuda/pool.cu
# with one sed edit (the tree is not touched), checked
# on the given shapes (default 120, seed 3, no seed-network shapes) plus the
# refusals; a mutant must fail. The unmutated copy runs first and must pass.
# Prints one line per mutant; exit status 1 when a mutant survives
# (mutate_lib.sh: the loop).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
shapes="${1:-120}"
seed="${2:-3}"
# file|description|sed expression
mutants=(
  "pool_im2col_kernels.cuh|rr < 0 break off by one (rr <= 0)|s/if (rr < 0) break;/if (rr <= 0) break;/"
  "pool_im2col_kernels.cuh|rr < 0 break off by one (rr < -1)|s/if (rr < 0) break;/if (rr < -1) break;/"
  "pool_im2col_kernels.cuh|rr % sh test dropped|s/if (rr % d.sh) continue;//"
  "pool_im2col_kernels.cuh|cc % sw test dropped|s/if (cc % d.sw) continue;//"
  "pool_im2col_kernels.cuh|column index r2*w (not r2*ow)|s/r2 \* d.ow + s2\]/r2 * d.w + s2]/"
  "pool_im2col_kernels.cuh|column index s2+1|s/r2 \* d.ow + s2\]/r2 * d.ow + s2 + 1]/"
  "pool_im2col_kernels.cuh|row index kj*kh+ki (transposed)|s/(size_t)(ki \* d.kw + kj)/(size_t)(kj * d.kh + ki)/"
  "pool_im2col_kernels.cuh|r2 >= oh test as r2 > oh|s/if (r2 >= d.oh) continue;/if (r2 > d.oh) continue;/"
  "pool_im2col_kernels.cuh|s2 >= ow test dropped|s/if (s2 >= d.ow) continue;//"
  "pool_im2col_kernels.cuh|image column offset image*p*... (np)|s/(size_t)image \* p;/(size_t)image * p * (ch == 0);/"
  "pool_im2col_kernels.cuh|channel row offset uses c*kh*kw*p|s/(size_t)ch \* d.kh \* d.kw \* np/(size_t)ch * d.kh * d.kw * p/"
  "pool_im2col_kernels.cuh|argmax not stored|s/argmax\[o\] = at;/(void)at;/"
  "pool_im2col_kernels.cuh|plane from q with in_plane swapped|s/x + (size_t)q \* in_plane/x + (size_t)q * out_plane/"
  "pool_im2col_kernels.cuh|host: h checked against the pool's input h|s/d->h != p->oh/d->h != p->h/"
  "pool_im2col_kernels.cuh|host: reads-inside check dropped|s/if (!cnn_conv_reads_inside(d))/if (0)/"
  "pool_im2col_kernels.cuh|host: n not compared|s/d->n != p->n || //"
  "pool_geom.cuh|max: last maximum wins (>=)|s/if (v > best) {/if (v >= best) {/"
  "pool_geom.cuh|avg: sum * (1/count)|s/sum \/ (float)count/sum * (1.0f \/ (float)count)/"
  "pool_geom.cuh|max: empty window gives argmax 0|s/\*at = -1;/*at = 0;/"
  "pool.cu|2x2: the last maximum of the window wins (>=)|s/if (v3 > best) best = v3/if (v3 >= best) best = v3/"
  "pool.cu|2x2: the second row's argmax one column on where w is odd|s/best_at = at + g.w;/best_at = at + g.w + g.w % 2;/"
  "pool.cu|2x2, floats: the second row read right to left|s/v2 = xq\[g.w\], v3 = xq\[g.w + 1\];/v2 = xq[g.w + 1], v3 = xq[g.w];/"
  "pool.cu|2x2, pairs: the second row read right to left|s/v2 = bottom.x, v3 = bottom.y;/v2 = bottom.y, v3 = bottom.x;/"
  "pool.cu|2x2: taken with a window clipped at the bottom|s/2 \* d->oh <= d->h/2 * d->oh <= d->h + 1/"
)
sources=(dev/cuda/pool_im2col_kernels.cuh pool_geom.cuh pool.cu)
run_check() { # DIR -> exit status of the check on DIR's sources
    EMU_POOL_IM2COL="$1/pool_im2col_kernels.cuh" EMU_POOL_GEOM="$1/pool_geom.cuh" EMU_POOL="$1/pool.cu" \
        bash "$here/run_pool_im2col.sh" "$shapes" "$seed" 30000 0 > "$tmp/out" 2> "$tmp/err"
}
source "$here/mutate_lib.sh"
mutate_all
