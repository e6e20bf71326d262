#!/bin/bash
# dev/emu/mutate_gemm_mma.sh [random shapes per instance] [seed]: does
# run_gemm_mma.sh catch bugs in the wide SGEMM's tensor-core paths (the
# fragments the kernel builds for mma.sync, its rounding of the operands,
# its outputs' rows and columns)? Each mutant is a temporary copy of
# cuda/gemm_wide_kernels.cuh with one sed edit (the tree is not touched),
# checked on the given shapes (default 2, seed 7); a mutant must fail. The
# unmutated copy runs first and must pass. Prints one line per mutant; exit
# status 1 when a mutant survives (mutate_lib.sh). Not a mutant: both
# operands' pairs packed hi first (k and k + 1 swapped in A and B alike
# leave every product and the sum as they were).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
shapes="${1:-2}"
seed="${2:-7}"
f=gemm_wide_kernels.cuh
# file|description|sed expression
mutants=(
  "$f|16-bit A: rows g + 8 taken from k + 8 (a1 and a2 swapped)|s/af\[mi\]\[1\] = wide_pack16<PREC>(as\[cur\]\[k0\]\[i + 8\], as\[cur\]\[k0 + 1\]\[i + 8\]);/af[mi][1] = wide_pack16<PREC>(as[cur][k0 + 8][i], as[cur][k0 + 9][i]);/"
  "$f|16-bit A: the pair's two k in the wrong halves|s/af\[mi\]\[0\] = wide_pack16<PREC>(as\[cur\]\[k0\]\[i\], as\[cur\]\[k0 + 1\]\[i\]);/af[mi][0] = wide_pack16<PREC>(as[cur][k0 + 1][i], as[cur][k0][i]);/"
  "$f|16-bit B: the upper k at + 4 (not + 8)|s/bf\[ni\]\[1\] = wide_pack16<PREC>(bs\[cur\]\[k0 + 8\]\[j\], bs\[cur\]\[k0 + 9\]\[j\]);/bf[ni][1] = wide_pack16<PREC>(bs[cur][k0 + 4][j], bs[cur][k0 + 5][j]);/"
  "$f|bf16 rounded as float16 (and float16 as bf16)|s/    return cnn_pack16<PREC>(lo, hi);/    return cnn_pack16<PREC == CNN_PRECISION_BF16 ? CNN_PRECISION_FP16 : CNN_PRECISION_BF16>(lo, hi);/"
  "$f|TF32 A: k + 4 rows from k|s/af\[mi\]\[2\] = wide_tf32(as\[cur\]\[k8 + t4 + 4\]\[i\]);/af[mi][2] = wide_tf32(as[cur][k8 + t4][i]);/"
  "$f|TF32 B: the upper k from k|s/bf\[ni\]\[1\] = wide_tf32(bs\[cur\]\[k8 + t4 + 4\]\[j\]);/bf[ni][1] = wide_tf32(bs[cur][k8 + t4][j]);/"
  "$f|TF32 A not rounded (the tensor cores truncate)|s/af\[mi\]\[3\] = wide_tf32(as\[cur\]\[k8 + t4 + 4\]\[i + 8\]);/af[mi][3] = __float_as_uint(as[cur][k8 + t4 + 4][i + 8]);/"
  "$f|an mma tile's lower rows at + 4 (not + 8)|s/if (MMA) return wm \* 32 + (r >> 1) \* 16 + g + (r \& 1) \* 8;/if (MMA) return wm * 32 + (r >> 1) * 16 + g + (r \& 1) * 4;/"
  "$f|an mma tile's column pair swapped|s/if (MMA) return wn \* 32 + (s >> 1) \* 8 + 2 \* t4 + (s \& 1);/if (MMA) return wn * 32 + (s >> 1) * 8 + 2 * t4 + 1 - (s \& 1);/"
  "$f|B16: ldmatrix without .trans on a plain tile (and with it on a transposed one)|s/wide_ldmatrix4<!TRANS_B>(r,/wide_ldmatrix4<TRANS_B>(r,/"
  "$f|B16: the matrices' k halves and column groups swapped|s/kk0 = 8 \* (mat \& 1);/kk0 = 8 * (mat >> 1);/"
  "$f|B16: an ldmatrix register given to the wrong fragment|s/bf\[2 \* h\]\[1\] = r\[1\];/bf[2 * h][1] = r[2];/"
  "$f|B16 plain: a piece past n read whole (past the buffer on its last row)|s/max(0, min(8, n - col0 - at))/max(0, min(8, n - col0))/"
  "$f|B16 transposed: a piece past the slice's k read whole|s/max(0, min(8, k_end - (k0 + at)))/max(0, min(8, k_end - k0))/"
  "$f|B16 transposed: B's row of ones not read|s/col0 + row < nc ? max/col0 + row < n ? max/"
  "$f|the staged epilogue's pair stored swapped|s/make_float2(acc\[r\]\[s\], acc\[r\]\[s + 1\]);/make_float2(acc[r][s + 1], acc[r][s]);/"
)
sources=(gemm_wide_kernels.cuh)
run_check() { # DIR -> exit status of the check on DIR's copy
    EMU_GEMM_WIDE="$1/$f" bash "$here/run_gemm_mma.sh" "$shapes" "$seed" > "$tmp/out" 2> "$tmp/err"
}
source "$here/mutate_lib.sh"
mutate_all
