#!/bin/bash
# dev/emu/mutate_gemm_wide_sums.sh [random shapes] [seed]: does
# run_gemm_shapes.sh catch bugs in the wide kernel's row sums (the column of
# ones read from B's row n: a convolution's bias gradient in float32)? Each
# mutant is a temporary copy of cuda/gemm_wide_kernels.cuh with one sed edit
# (the tree is not touched), checked on the given shapes (default 40, seed
# 7); a mutant must fail. The unmutated copy runs first and must pass.
# Prints one line per mutant; exit status 1 when a mutant survives
# (mutate_lib.sh). Out of the host's reach, and so not here: conv2d.cu's
# row of ones (the GPU tests' bias gradients against the reference).
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
  "$f|B's row of ones not read (rows below n only)|s/if (col0 + tid \/ WBK + q \* B_Q < nc) b_rows_in/if (col0 + tid \/ WBK + q * B_Q < n) b_rows_in/"
  "$f|the partial tiles' column of ones not stored|s/    const int n_out = partial ? nc : n;/    const int n_out = n;/"
  "$f|C's column n stored with one slice (past its rows)|s/    const int n_out = partial ? nc : n;/    const int n_out = nc;/"
  "$f|alpha dropped from the row sums|s/x.row_sums\[gi\] = alpha \* cs\[i\]\[sj + u \* TW\];/x.row_sums[gi] = cs[i][sj + u * TW];/"
  "$f|the slice's partial tile at z m n (not z m nc)|s/partial + (size_t)blockIdx.z \* m \* nc : c;/partial + (size_t)blockIdx.z * m * n : c;/"
  "$f|the partial tiles' rows n apart (not nc)|s/partial ? (size_t)nc : x.cp > 0/partial ? (size_t)n : x.cp > 0/"
  "$f|the row sums from column n + 1|s/else if (sums .. gj == n)/else if (sums \&\& gj == n + 1)/"
)
sources=(gemm_wide_kernels.cuh)
run_check() { # DIR -> exit status of the check on DIR's copy
    EMU_GEMM_WIDE="$1/$f" bash "$here/run_gemm_shapes.sh" "$shapes" "$seed" > "$tmp/out" 2> "$tmp/err"
}
source "$here/mutate_lib.sh"
mutate_all
