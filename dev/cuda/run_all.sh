#!/usr/bin/env bash
# Builds the kernel-development programs for this machine's GPU, runs every
# version of every program (each checks itself against its CPU reference),
# and writes the measurements as a JSON list to $1 (default
# dev/cuda/stages.json), with every program's full output next to it
# (stages.log). Prints each program's summary. Exits nonzero if a build, a
# run or any check failed.
#
#   bash dev/cuda/run_all.sh [OUT.json]
#   ARCH=90 bash dev/cuda/run_all.sh      (skip the nvidia-smi query)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/stages.json}
case $out in /*) ;; *) out=$PWD/$out ;; esac
log=${out%.json}.log
mkdir -p "$(dirname "$out")"
programs=(sgemm conv2d_forward conv2d_winograd maxpool_forward conv2d_backward_filter conv2d_backward_data_pool
          pool_forward_im2col gather_im2col step_forward step_backward)

arch=${ARCH:-$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')}
if [ -z "$arch" ]; then
    echo "run_all.sh: nvidia-smi found no GPU (set ARCH=90 to build anyway)" >&2
    exit 2
fi
build=${BUILD:-$here/build/sm_$arch}
echo "== building for sm_$arch into $build"
if ! make -C "$here" -j"$(nproc 2>/dev/null || echo 4)" ARCH="$arch" BUILD="$build" >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    echo "run_all.sh: build failed (full output in $log)" >&2
    exit 2
fi
grep -i "warning" "$log" >&2 || true

rows=$(mktemp)
one=$(mktemp)
trap 'rm -f "$rows" "$one"' EXIT
guard=()
command -v timeout >/dev/null && guard=(timeout 300) # each program takes seconds; this only guards a hang
status=0
for prog in "${programs[@]}"; do
    ${guard[@]+"${guard[@]}"} "$build/$prog" --jsonl "$rows" >"$one" 2>&1
    rc=$?
    { echo "== $prog (exit status $rc)"; cat "$one"; } >>"$log"
    sed -n '/^== summary/,$p' "$one"
    if [ $rc -ne 0 ]; then
        grep -E "CHECK FAILED|error|rror:" "$one" | head -n 10 >&2
        echo "run_all.sh: $prog exited with status $rc (full output in $log)" >&2
        status=1
    fi
done

# the JSON list: the rows, comma-separated
{
    echo "["
    sed '$!s/$/,/' "$rows"
    echo "]"
} >"$out"
echo "== $(grep -c '"op"' "$out") rows written to $out; full output in $log"
if [ $status -ne 0 ]; then
    echo "run_all.sh: FAILED (${SECONDS} s)" >&2
else
    echo "run_all.sh: all checks passed (${SECONDS} s)"
fi
exit $status
