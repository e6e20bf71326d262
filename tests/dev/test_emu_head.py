"""The host emulation of cuda/dense_head.cu's backward (dev/emu): no GPU
needed. Forty random shapes and the seeds' heads, the kernel's outputs bit
for bit against the orders its comments document and against the kernel
before the rewrite where the orders are the same (dev/emu/head_check.cpp).
Skipped without g++, on other than x86-64, or where the baseline revision is
not in the repository (a copy without git history)."""
import os
import platform
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BASELINE = "62fe45f"


def test_head_backward_emulation():
    if platform.machine() not in ("x86_64", "AMD64") or not shutil.which("g++"):
        pytest.skip("the emulation needs g++ on x86-64")
    if not shutil.which("git") or subprocess.run(
            ["git", "-C", ROOT, "cat-file", "-e", BASELINE + ":cuda/dense_head.cu"],
            capture_output=True).returncode != 0:
        pytest.skip("revision %s is not in this checkout" % BASELINE)
    run = subprocess.run(["bash", os.path.join(ROOT, "dev", "emu", "run_head.sh"), "40",
                          "300000", "11", BASELINE], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    assert " 0 failures" in run.stdout, run.stdout
