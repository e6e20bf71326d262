"""A ReLU fused into its neighbour on every engine (cnn.h:
conv2d_forward_relu, pool_backward_relu) gives the bits of the two ops run
one after the other.

The entries themselves, with their error paths, are checked in C
(tests/fusions/relu_fusion_check.c); here whole networks train with fusion on and
off (CNNCUDA_FUSE=0, read when a Net is made) and must agree bit for bit:
weights, gradients, predictions and the input gradient of a backward.
"""
import os
import shutil
import subprocess

import pytest

import cnncuda
from conftest import RELU_FUSION_NETWORKS as NETWORKS
from conftest import engine_params
from conftest import train_relu_fusion as train

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HOST_ENGINES = [d for d in ("cpu", "omp:1", "omp:2", "omp:3")
                if d.split(":")[0] in cnncuda.devices()]


@pytest.mark.parametrize("name", sorted(NETWORKS))
@pytest.mark.parametrize("device", HOST_ENGINES)
def test_networks_same_bits_fused_or_not(device, name, monkeypatch):
    fused = train(device, NETWORKS[name], True, monkeypatch)
    plain = train(device, NETWORKS[name], False, monkeypatch)
    assert len(fused) == len(plain)
    for i, (a, b) in enumerate(zip(fused, plain)):
        assert a.tobytes() == b.tobytes(), "array %d differs" % i


@pytest.mark.parametrize("name", sorted(NETWORKS))
@pytest.mark.parametrize("device", engine_params(("cuda", "cudnn")))
def test_gpu_networks_same_bits_fused_or_not(device, name, monkeypatch):
    """The GPU engines fuse too (the ReLU in the conv's GEMM epilogue or bias
    pass, and in the pool backward): the same bits as their ReLU layers run
    apart."""
    fused = train(device, NETWORKS[name], True, monkeypatch)
    plain = train(device, NETWORKS[name], False, monkeypatch)
    for i, (a, b) in enumerate(zip(fused, plain)):
        assert a.tobytes() == b.tobytes(), "array %d differs" % i


def test_the_fused_entries_in_c(tmp_path):
    """tests/fusions/relu_fusion_check.c: each fused entry against the two it
    replaces on random values (zeros, -0, a NaN), odd shapes, every host
    engine; and the entries' error paths."""
    gcc = shutil.which("gcc")
    if not gcc:
        pytest.skip("gcc is not installed")
    sources = sorted(os.path.join(d, f) for d in ("csrc", "csrc/net", "csrc/cpu")
                     for f in os.listdir(os.path.join(ROOT, d)) if f.endswith(".c"))
    flags = ["-std=c11", "-O2"]
    if "omp" in cnncuda.build_info()["engines"]:
        flags += ["-fopenmp", "-DCNNCUDA_HAVE_OPENMP=1"]
    exe = str(tmp_path / "relu_fusion_check")
    build = subprocess.run([gcc] + flags + ["-Icsrc"] + sources
                           + ["tests/fusions/relu_fusion_check.c", "-lm", "-o", exe],
                           cwd=ROOT, capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([exe], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "cpu:1: ok" in run.stdout
    if "omp" in cnncuda.build_info()["engines"]:
        assert "omp:3: ok" in run.stdout
