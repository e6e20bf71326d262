#!/usr/bin/env bash
# The GPU checks, on a machine with a CUDA GPU (run from anywhere):
#   build for this GPU, run the gpu-marked tests, then the same tests under
#   compute-sanitizer: memcheck over the whole gpu suite (leak check on),
#   racecheck over the op tests (every kernel that uses shared memory runs
#   there), initcheck over the op tests and the recorded-step tests (no read
#   of memory never written), synccheck over the op tests (barriers).
# Usage: tools/gpu_tests.sh [quick]   ("quick" skips the sanitizer runs)
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
CNNCUDA_CUDA_ARCH=${CNNCUDA_CUDA_ARCH:-$arch} python3 setup.py -q build_ext --inplace 2>&1 \
    | grep -E "cnncuda build|error" || true
python3 -c "import cnncuda; print(cnncuda.devices(), cnncuda.cuda_devices())"
python3 -m pytest -q -m gpu -p no:cacheprovider
[ "${1:-}" = quick ] && exit 0
echo "== compute-sanitizer memcheck"
compute-sanitizer --tool memcheck --error-exitcode 99 --leak-check full \
    python3 -m pytest -q -m gpu -p no:cacheprovider -k "not out_of_memory and not outlives"
# (out_of_memory makes a failing cudaMalloc on purpose; under the tool the
# frames of returned functions stay alive, so a network the outlives test
# deletes is still held -- docs/reliability.md -- and cnncuda's exit handler
# frees it at the end instead)
echo "== compute-sanitizer racecheck"
compute-sanitizer --tool racecheck --error-exitcode 99 \
    python3 -m pytest -q -m gpu -p no:cacheprovider tests/ops/test_ops.py
echo "== compute-sanitizer initcheck"
compute-sanitizer --tool initcheck --error-exitcode 99 \
    python3 -m pytest -q -m gpu -p no:cacheprovider tests/ops/test_ops.py tests/net/test_recorded_steps.py \
    -k "not device_memory"  # initcheck keeps memory of its own per allocation
echo "== compute-sanitizer synccheck"
compute-sanitizer --tool synccheck --error-exitcode 99 \
    python3 -m pytest -q -m gpu -p no:cacheprovider tests/ops/test_ops.py
