"""Runs a host emulation script of dev/emu for the tests here: skipped
where its compilers are missing or the machine is not x86-64 (the fibers
switch stacks with x86-64 setjmp), and failed where the script exits
nonzero."""
import os
import platform
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_emulation(script, *args, tools=("g++",), timeout=600):
    """The finished process of `bash dev/emu/<script> args...` (its output
    as text), after asserting its exit status 0."""
    missing = [t for t in tools if not shutil.which(t)]
    if platform.machine() not in ("x86_64", "AMD64") or missing:
        pytest.skip("the emulation needs %s on x86-64" % " and ".join(tools))
    run = subprocess.run(["bash", os.path.join(ROOT, "dev", "emu", script), *map(str, args)],
                         capture_output=True, text=True, timeout=timeout)
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    return run
