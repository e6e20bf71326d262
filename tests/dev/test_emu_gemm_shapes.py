"""The host emulation of the SGEMM kernels gemm.cu gives to products of
unusual shape (dev/emu/gemm_shapes_check.cpp): no GPU needed. The short-K
kernel (cuda/gemm_short_kernels.cuh) gives the bits of the wide and the tile
kernels on the same product, with every extra it takes, and float64's sums
within float32 rounding; a product of at most 32 columns on the tile kernel
with the wide kernel's slices of K gives the wide kernel's partial tiles;
the narrow kernel (cuda/gemm_narrow_kernels.cuh) gives the tile kernel's
partial tiles, the column of ones included, where gemm.cu would launch it;
the wide kernel's row sums (the column of ones read from B's row n) give
the tile kernel's, and the n columns keep their bits. Skipped without g++
or on other than x86-64."""
from emulation import run_emulation


def test_gemm_shapes_emulation():
    run = run_emulation("run_gemm_shapes.sh", 40, 11)
    assert "over 162 shapes (" in run.stdout and ", 0 failed" in run.stdout, run.stdout
    narrow = int(run.stdout.split("shapes (")[1].split()[0])
    assert narrow >= 100, run.stdout
