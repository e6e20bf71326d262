#!/bin/bash
# dev/emu/mutate_gemm_wide_epilogue.sh [random shapes] [seed]: do the host
# checks catch bugs in the wide SGEMM's float4 epilogue (the tile staged in
# shared memory, stored as float4s where C's rows are plain and 16-byte
# aligned)? Each mutant is
# a temporary copy of cuda/gemm_wide_kernels.cuh with one sed edit (the tree
# is not touched), run through run_gemm_shapes.sh (float32: the wide kernel
# against the tile, short and narrow kernels and float64) and
# run_gemm_mma.sh (the tensor-core instances against float64, with the
# bias by row or column, the ReLU, alpha, beta and several slices of K);
# a mutant must fail one of them. The unmutated copy runs first and must
# pass both. Default: 40 shapes (run_gemm_mma.sh: 4 per instance), seed 7.
# Prints one line per mutant; exit status 1 when a mutant survives
# (mutate_lib.sh).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
shapes="${1:-40}"
seed="${2:-7}"
f=gemm_wide_kernels.cuh
# file|description|sed expression
mutants=(
  "$f|a float4's first two outputs swapped|s/make_float4(v\[0\], v\[1\], v\[2\], v\[3\]);/make_float4(v[1], v[0], v[2], v[3]);/"
  "$f|a float4 with beta times the first old value|s/v\[e\] + beta \* o\[e\];/v[e] + beta * o[0];/"
  "$f|a float4 without the ReLU|s/if (x.relu) v\[e\] = v\[e\] < 0.0f ? 0.0f : v\[e\];/;/"
  "$f|a float4 with the first column's bias (by column)|s/v\[e\] += x.bias_columns ? x.bias\[gj + e\] : bv;/v[e] += x.bias_columns ? x.bias[gj] : bv;/"
  "$f|a float4 of partial sums with the bias and the ReLU|s/        if (!partial) {\$/        if (true) {/"
  "$f|a float4 read from the next column of the staged tile|s/\*reinterpret_cast<const float4 \*>(\&cs\[i\]\[vj\]);/*reinterpret_cast<const float4 *>(\&cs[i][vj + 1]);/"
  "$f|float4 rows VR + 1 apart|s/for (int i = tid \/ 32; i < CR; i += VR) {/for (int i = tid \/ 32; i < CR; i += VR + 1) {/"
  "$f|the row sums not stored from the float4 path|s/x.row_sums\[gi\] = alpha \* v.x;/;/"
  "$f|the row sums from the float4 path without alpha|s/x.row_sums\[gi\] = alpha \* v.x;/x.row_sums[gi] = v.x;/"
)
sources=(gemm_wide_kernels.cuh)
run_check() { # DIR -> exit status of the checks on DIR's copy
    EMU_GEMM_WIDE="$1/$f" bash "$here/run_gemm_shapes.sh" "$shapes" "$seed" > "$tmp/out" 2> "$tmp/err" &&
        EMU_GEMM_WIDE="$1/$f" bash "$here/run_gemm_mma.sh" $(((shapes + 9) / 10)) "$seed" \
            > "$tmp/out" 2> "$tmp/err"
}
source "$here/mutate_lib.sh"
mutate_all
