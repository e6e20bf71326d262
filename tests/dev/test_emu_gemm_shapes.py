"""The host emulation of the SGEMM kernels gemm.cu gives to products of
unusual shape (dev/emu/gemm_shapes_check.cpp): no GPU needed. The short-K
kernel (cuda/gemm_short_kernels.cuh) gives the bits of the wide and the tile
kernels on the same product, with every extra it takes, and float64's sums
within float32 rounding; a product of at most 32 columns on the tile kernel
with the wide kernel's slices of K gives the wide kernel's partial tiles.
Skipped without g++ or on other than x86-64."""
import os
import platform
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_gemm_shapes_emulation():
    if platform.machine() not in ("x86_64", "AMD64") or not shutil.which("g++"):
        pytest.skip("the emulation needs g++ on x86-64")
    run = subprocess.run(["bash", os.path.join(ROOT, "dev", "emu", "run_gemm_shapes.sh"), "40",
                          "11"], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    assert " 0 failed" in run.stdout, run.stdout
