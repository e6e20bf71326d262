#!/usr/bin/env bash
# tools/gpu_fit_speed.sh OUTDIR [OLD_TREE]: the fit-speed figures of
# BENCHMARKS.md ("fit as a user calls it") on a GPU machine, in one call.
#
# Builds this tree (and OLD_TREE, an earlier tree to compare with, when
# given) for this GPU, then runs tools/seed_script_timing.py on cuda --
# the seed CIFAR-10 script as written, 15 epochs, under a pseudo-terminal
# so the bar redraws in place as in a terminal or Jupyter -- alternating
# old and new twice, and `python -m cnncuda.bench --script` for the engine's
# epoch beside fit's. Results: OUTDIR/fit_*.json, OUTDIR/bench_script.txt.
set -euo pipefail
out=${1:?usage: tools/gpu_fit_speed.sh OUTDIR [OLD_TREE]}
old=${2:-}
mkdir -p "$out"
here=$(cd "$(dirname "$0")/.." && pwd)
export PYTHONUNBUFFERED=1
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
build() { (cd "$1" && CNNCUDA_CUDA_ARCH=$arch python3 setup.py -q build_ext --inplace) > "$2" 2>&1; }
if [ ! -f "$here/.built-$arch" ]; then
    build "$here" "$out/build_new.log" &
    if [ -n "$old" ]; then build "$old" "$out/build_old.log" & fi
    wait
    touch "$here/.built-$arch"
fi
in_pty() { python3 -c 'import pty, sys; sys.exit(pty.spawn(sys.argv[1:]) >> 8)' "$@"; }
for round in 1 2; do
    for which in new old; do
        tree=$here
        if [ "$which" = old ]; then [ -n "$old" ] || continue; tree=$old; fi
        in_pty python3 "$here/tools/seed_script_timing.py" --tree "$tree" --device cuda \
            --epochs 15 --json "$out/fit_${which}_$round.json" > "$out/fit_${which}_$round.log"
        grep -a '^RESULT' "$out/fit_${which}_$round.log" | cut -c1-600
    done
done
(cd "$here" && python3 -m cnncuda.bench --model cifar10_cnn --device cuda --device cudnn \
    --epochs 3 --script --frameworks none --verbose 0) 2>&1 | tail -12 | tee "$out/bench_script.txt"
