"""The host emulation of cuda/gather_im2col.cu (dev/emu): no GPU needed. The
seed networks' first convolutions (CIFAR-10, LeNet-5 'same', tiny MNIST with
categorical targets), two edges and 500 random shapes: the fused kernel's
column matrix bit for bit against cuda/gather.cu's gather_batch followed by
conv2d_kernels.cuh's im2col (NaN-filled, with guard zones), its targets,
counters and ticket against gather.cu's, a second launch giving the next
batch, the size_t and unsigned loops on full and small grids, and the host
entry's refusals (dev/emu/gather_im2col_check.cpp). Skipped without
g++/gcc or on other than x86-64."""
from emulation import run_emulation


def test_gather_im2col_emulation():
    run = run_emulation("run_gather_im2col.sh", 500, 5, 40000, 1, tools=("g++", "gcc"))
    assert " 0 failures" in run.stdout, run.stdout
    assert "505 shapes" in run.stdout, run.stdout
    assert run.stderr.count("refused ") == 23, run.stderr[-3000:]
