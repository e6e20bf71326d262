"""The host emulation of cuda/gather_im2col.cu (dev/emu): no GPU needed. The
seed networks' first convolutions (CIFAR-10, LeNet-5 'same', tiny MNIST with
categorical targets), two edges and 500 random shapes: the fused kernel's
column matrix bit for bit against cuda/gather.cu's gather_batch followed by
conv2d_kernels.cuh's im2col (NaN-filled, with guard zones), its targets,
counters and ticket against gather.cu's, a second launch giving the next
batch, the size_t and unsigned loops on full and small grids, and the host
entry's refusals (dev/emu/gather_im2col_check.cpp). Skipped without
g++/gcc or on other than x86-64."""
import os
import platform
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_gather_im2col_emulation():
    if (platform.machine() not in ("x86_64", "AMD64") or not shutil.which("g++")
            or not shutil.which("gcc")):
        pytest.skip("the emulation needs g++ and gcc on x86-64")
    run = subprocess.run(["bash", os.path.join(ROOT, "dev", "emu", "run_gather_im2col.sh"),
                          "500", "5", "40000", "1"], capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    assert " 0 failures" in run.stdout, run.stdout
    assert "505 shapes" in run.stdout, run.stdout
    assert run.stderr.count("refused ") == 23, run.stderr[-3000:]
