#!/usr/bin/env bash
# One compute-sanitizer tool over a set of GPU tests, as SLICES processes
# side by side (each a share of the test ids, round robin), so that slow
# tools (racecheck over trainings) finish on a many-core GPU machine. Each
# slice's log goes to OUTDIR/NAME.slice.KK.log; a line per slice at the end
# gives its pytest summary and the tool's summary. Build first (gpu_tests.sh).
# Usage: tools/sanitizer_slices.sh OUTDIR NAME TOOL SLICES LIMIT_S PYTEST_ARGS...
#   e.g. tools/sanitizer_slices.sh /tmp/san race_pool racecheck 4 470 \
#          tests/fusions/test_pool_col2im_fusion.py -k "cuda and not cudnn"
# Tests that count kernels through the PyTorch profiler fail under any tool
# (CUPTI takes one subscriber; docs/reliability.md).
set -uo pipefail
[ $# -ge 6 ] || { sed -n 2,11p "$0" >&2; exit 2; }
out=$1 name=$2 tool=$3 slices=$4 limit=$5
shift 5
cd "$(dirname "$0")/.."
mkdir -p "$out"
python3 -m pytest --collect-only -q -m gpu -p no:cacheprovider "$@" 2>/dev/null | grep "::" \
    > "$out/$name.ids"
echo "$name: $(wc -l < "$out/$name.ids") tests in $slices slices"
split -n "r/$slices" -d "$out/$name.ids" "$out/$name.slice."
for f in "$out/$name".slice.[0-9][0-9]; do
    # one test id a line: ids may hold spaces (parametrize ids)
    (mapfile -t ids < "$f"
     timeout "$limit" compute-sanitizer --tool "$tool" --error-exitcode 99 \
        python3 -m pytest -q -m gpu -p no:cacheprovider "${ids[@]}" > "$f.log" 2>&1
     echo "rc $?" >> "$f.log") &
done
wait
for f in "$out/$name".slice.[0-9][0-9].log; do
    echo "$(basename "$f"): $(grep -E 'passed|failed' "$f" | tail -1) |" \
         "$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$f" | tail -1) | $(tail -1 "$f")"
done
