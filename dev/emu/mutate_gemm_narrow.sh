#!/bin/bash
# dev/emu/mutate_gemm_narrow.sh [random shapes] [seed]: does
# run_gemm_shapes.sh catch bugs in the narrow kernel? Each mutant is a
# temporary copy of cuda/gemm_narrow_kernels.cuh with one sed edit (the tree
# is not touched), checked on the given shapes (default 40, seed 7); a
# mutant must fail. The unmutated copy runs first and must pass. Prints one
# line per mutant; exit status 1 when a mutant survives (mutate_lib.sh).
# Out of the host's reach, and so not here: the waits on the copies (the
# emulation copies at once) and a read of A's rows past m (never stored:
# its outputs are dropped, so only a bounds checker sees it).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
shapes="${1:-40}"
seed="${2:-7}"
f=gemm_narrow_kernels.cuh
# file|description|sed expression
mutants=(
  "$f|the last group of k read whole (count not clipped)|s/max(0, min(4, k_end - gk))/max(0, min(4, k_end - gk + 4))/"
  "$f|the column of ones in the first stage only|s/e < S \* NARROW_ROW; e += NARROW_THREADS/e < NARROW_ROW; e += NARROW_THREADS/"
  "$f|the column of ones copied over from B|s/if (!(b_ones \&\& i == n))/if (true)/"
  "$f|the column of ones skipped in the wrong copy (c_row == n only)|s/(c_row == n .. c_row + Q_ROWS == n)/(c_row == n)/"
  "$f|the image walker moved on by 12|s/a_pix += NARROW_K;/a_pix += NARROW_K - 4;/"
  "$f|the image walker wraps at >|s/while (a_pix >= x.ap)/while (a_pix > x.ap)/"
  "$f|k's order within a group of four reversed|s/for (int e = 0; e < 4; ++e)/for (int e = 3; e >= 0; --e)/"
  "$f|B's rows read with A's leading dimension|s/b_at + (size_t)q \* Q_ROWS \* ldb/b_at + (size_t)q * Q_ROWS * lda/"
  "$f|A's image jump (m - 1) P as m P|s/(size_t)(m - 1) \* x.ap/(size_t)m * x.ap/"
  "$f|alpha dropped|s/= alpha \* acc\[r\]\[s\];/= acc[r][s];/"
  "$f|the slice's partial tile at z m n (not z m nc)|s/(size_t)blockIdx.x \* m \* nc;/(size_t)blockIdx.x * m * n;/"
)
sources=(gemm_narrow_kernels.cuh)
run_check() { # DIR -> exit status of the check on DIR's copy
    EMU_GEMM_NARROW="$1/$f" bash "$here/run_gemm_shapes.sh" "$shapes" "$seed" > "$tmp/out" 2> "$tmp/err"
}
source "$here/mutate_lib.sh"
mutate_all
