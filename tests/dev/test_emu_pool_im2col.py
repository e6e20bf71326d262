"""The host emulation of dev/cuda/pool_im2col_kernels.cuh (dev/emu; the
pool+im2col fusion, retired from the engine): no GPU needed. The
seed networks' pool -> convolution pairs and 300 random shapes: the fused
kernel's y and argmax bit for bit against the baseline's pool.cu forward
(as it was at e705609, before max_window/avg_window, kept in
dev/emu/reference/pool_e705609 so no git history is needed), its column
matrix against conv2d_kernels.cuh's im2col over that y (NaN-filled, with
guard zones), the working tree's pool.cu forward kernels (unsigned and
size_t) against the baseline's, and the host entry's refusals
(dev/emu/pool_im2col_check.cpp). Skipped without g++/gcc or on other than
x86-64."""
from emulation import run_emulation


def test_pool_im2col_emulation():
    run = run_emulation("run_pool_im2col.sh", 300, 5, 60000, 1, tools=("g++", "gcc"))
    assert " 0 failures" in run.stdout, run.stdout
    assert "306 shapes" in run.stdout, run.stdout
