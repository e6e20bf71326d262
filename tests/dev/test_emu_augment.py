"""The host emulation of the augmentation kernels (cuda/random_flip.cu,
random_affine.cu, random_contrast.cu, random_crop.cu; dev/emu): no GPU
needed. 200 random cases and one sample larger than the grid's tiles per
kernel, each output bit for bit against the transform written as plain
loops (dev/emu/augment_check.cpp). Skipped without g++ or on other than
x86-64."""
import os
import platform
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_augment_kernels_emulation():
    if platform.machine() not in ("x86_64", "AMD64") or not shutil.which("g++"):
        pytest.skip("the emulation needs g++ on x86-64")
    run = subprocess.run(["bash", os.path.join(ROOT, "dev", "emu", "run_augment.sh"), "200",
                          "13"], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    assert " 0 failures" in run.stdout, run.stdout
