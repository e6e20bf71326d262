"""The host emulation of a convolution's data gradient carried through the
pooling before it (cuda/conv2d_pool_backward_kernels.cuh,
dev/emu/pool_col_check.cpp): no GPU needed. The kernel that takes whole
planes a block gives, for every plane group and block size, the bits of the
kernel with a thread a pool output, and both those of a plain loop (col2im's
sums in order, then the pool's backward), on max and average pools with
and without the ReLU, argmaxes planted outside their windows included;
after a ReLU and a max pool both also with the ReLU tested on the pool's
output (the engine's way). Skipped without g++ or on other than x86-64."""
from emulation import run_emulation


def test_pool_col_emulation():
    run = run_emulation("run_pool_col.sh", 60, 11)
    assert "over 64 shapes, 0 failed" in run.stdout, run.stdout
