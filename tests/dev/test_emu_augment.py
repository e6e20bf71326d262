"""The host emulation of the augmentation kernels (cuda/random_flip.cu,
random_affine.cu, random_contrast.cu, random_crop.cu; dev/emu): no GPU
needed. 200 random cases and one sample larger than the grid's tiles per
kernel, each output bit for bit against the transform written as plain
loops (dev/emu/augment_check.cpp). Skipped without g++ or on other than
x86-64."""
from emulation import run_emulation


def test_augment_kernels_emulation():
    run = run_emulation("run_augment.sh", 200, 13)
    assert " 0 failures" in run.stdout, run.stdout
