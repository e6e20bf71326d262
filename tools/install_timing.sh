#!/usr/bin/env bash
# Times the install of cnncuda as a new user meets it (issue #23): a fresh
# copy of the source into a fresh venv, then
#   1. pip install -e ".[bench]"      the first build (nothing cached)
#   2. pip install -e ".[test]"       the README's second command
#   3. pip install -e ".[test]"       again, no source changed
#   4. the same with --no-build-isolation (what pip's isolated build env costs)
#   5. python -m cnncuda              what was built
# and, with "colab", the notebooks' install cell instead: git clone --depth 1
# SOURCE, then pip install -e of the clone (no extras), twice.
#
# Usage: tools/install_timing.sh [SOURCE] [colab]
#   SOURCE: a git URL, a checkout (cloned) or a source folder without .git
#   (copied, less build/ and built modules); default: this source tree.
#   On 2 cores of a bigger machine:  taskset -c 0,1 bash tools/install_timing.sh
#   Every default architecture even where a GPU is visible: CNNCUDA_CUDA_ARCH=all
#   (unset: the visible GPUs' architectures, or the defaults without one).
#   Without a package index (OFFLINE=1): the venv sees the system's packages
#   (numpy, setuptools), pip installs with --no-build-isolation --no-deps
#   --no-index, and steps 2-4 time the same reinstall.
# Prints one line per step (wall, user and system seconds, load before it,
# the build's own lines) and keeps the logs in the folder it names.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
source="${1:-$here}"
mode="${2:-}"
offline="${OFFLINE:-0}"
work=$(mktemp -d /tmp/cnncuda-install-timing.XXXXXX)
python=${PYTHON:-python3}
echo "== $(date -Is) $(hostname); $(nproc) CPUs usable; python $($python -V 2>&1 | cut -d' ' -f2)"
echo "   nvcc: $(command -v nvcc || echo none); GPUs: $(nvidia-smi --query-gpu=name,compute_cap \
    --format=csv,noheader 2>/dev/null | paste -sd';' || true)"
echo "   CNNCUDA_CUDA_ARCH=${CNNCUDA_CUDA_ARCH-(unset)} MAX_JOBS=${MAX_JOBS-(unset)}" \
     "OFFLINE=$offline; logs: $work"

step() {  # step NAME COMMAND...: runs COMMAND in the copy, timed
    local name=$1; shift
    local load; load=$(cut -d' ' -f1-3 /proc/loadavg)
    ( cd "$work/src" && /usr/bin/time -f "%e %U %S" -o "$work/$name.time" "$@" ) \
        > "$work/$name.log" 2>&1 || { echo "$name failed:"; tail -30 "$work/$name.log"; exit 1; }
    read -r wall user sys < "$work/$name.time"
    printf '%-22s %7.1f s wall %7.1f s user %6.1f s sys   load before %s\n' \
        "$name" "$wall" "$user" "$sys" "$load"
    grep -ho "cnncuda build: [0-9]* [A-Z]* objects.*" "$work/$name.log" | sed 's/^/    /' || true
}

if [ -d "$source" ] && ! git -C "$source" rev-parse --git-dir > /dev/null 2>&1; then
    mkdir "$work/src"
    tar -C "$source" --exclude=./build --exclude='*.so' --exclude=__pycache__ \
        --exclude='*.egg-info' -cf - . | tar -C "$work/src" -xf -
    echo "   copied from $source"
else
    git clone -q ${mode:+--depth 1} "$source" "$work/src"
    echo "   commit $(git -C "$work/src" rev-parse --short HEAD)"
fi
if [ "$offline" = 1 ]; then
    $python -m venv --system-site-packages "$work/venv"
    opts=(--no-build-isolation --no-deps --no-index)
else
    $python -m venv "$work/venv"
    "$work/venv/bin/pip" install -q --upgrade pip > /dev/null
    opts=()
fi
pip="$work/venv/bin/pip"

if [ "$mode" = colab ]; then
    step colab-install "$pip" install -v "${opts[@]}" -e .
    step colab-reinstall "$pip" install -v "${opts[@]}" -e .
else
    step "install[bench]" "$pip" install -v "${opts[@]}" -e ".[bench]"
    step "install[test]" "$pip" install -v "${opts[@]}" -e ".[test]"
    step "reinstall[test]" "$pip" install -v "${opts[@]}" -e ".[test]"
    [ "$offline" = 1 ] || "$pip" install -q setuptools wheel  # what the build needs without isolation
    step "reinstall,no-isolation" "$pip" install -v --no-build-isolation "${opts[@]}" -e ".[test]"
fi
grep -ho "cnncuda build: cc .*" "$work"/*.log | head -1 | sed 's/^ */   /'
( cd "$work" && "$work/venv/bin/python" -m cnncuda )
