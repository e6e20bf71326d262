"""The host emulation of cuda/dense_head.cu's backward (dev/emu): no GPU
needed. Forty random shapes and the seeds' heads, the kernel's outputs bit
for bit against the orders its comments document and against the kernel
before the rewrite where the orders are the same (dev/emu/head_check.cpp).
The kernel before the rewrite is kept in the tree
(dev/emu/reference/dense_head_62fe45f.cu), so no git history is needed.
Skipped without g++ or on other than x86-64."""
import os

from emulation import ROOT, run_emulation

BASELINE = os.path.join(ROOT, "dev", "emu", "reference", "dense_head_62fe45f.cu")


def test_head_backward_emulation():
    run = run_emulation("run_head.sh", 40, 300000, 11, BASELINE)
    assert " 0 failures" in run.stdout, run.stdout
