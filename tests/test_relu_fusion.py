"""A ReLU fused into its neighbour on every engine (cnn.h:
conv2d_forward_relu, pool_backward_relu) gives the bits of the two ops run
one after the other.

The entries themselves, with their error paths, are checked in C
(tests/relu_fusion_check.c); here whole networks train with fusion on and
off (CNNCUDA_FUSE=0, read when a Net is made) and must agree bit for bit:
weights, gradients, predictions and the input gradient of a backward.
"""
import os
import shutil
import subprocess

import numpy as np
import pytest

import cnncuda
from cnncuda.engine import make_net
from conftest import ADAM, SPARSE_LOGITS, conv, engine_params, relu

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOST_ENGINES = [d for d in ("cpu", "omp:1", "omp:2", "omp:3")
                if d.split(":")[0] in cnncuda.devices()]


# Every place a fusion applies or must not: conv + ReLU + max pool (odd
# planes: the pooling's tails), conv without bias + ReLU + average pool
# (full 2x2 windows), an overlapping clipped max pool after a ReLU, a ReLU
# as the first layer (its input gradient is not needed), a conv + ReLU whose
# ReLU is the network's output before Flatten, and a ReLU after a dense layer
# and after batchnorm (not fused).
NETWORKS = {
    "conv_relu_maxpool": [conv(6, 3), relu(), {"kind": "maxpool", "kernel": (2, 2)},
                          conv(5, 3, strides=(2, 2), padding="same", use_bias=False), relu(),
                          {"kind": "avgpool", "kernel": (2, 2)},
                          {"kind": "flatten"}, {"kind": "dense", "units": 7}, relu(),
                          {"kind": "dense", "units": 3}],
    "relu_first": [relu(), {"kind": "maxpool", "kernel": (3, 3), "strides": (2, 2),
                            "padding": "same"},
                   conv(4, 2), {"kind": "batchnorm"}, relu(),
                   {"kind": "avgpool", "kernel": (3, 3), "strides": (2, 2)},
                   conv(3, 1), relu(), {"kind": "flatten"}, {"kind": "dense", "units": 3}],
}


def train(device, layers, fuse, monkeypatch):
    monkeypatch.setenv("CNNCUDA_FUSE", "1" if fuse else "0")
    net = make_net(device, layers, (11, 13, 3), 8, SPARSE_LOGITS, ADAM, seed=3)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 11, 13, 3)).astype(np.float32)
    y = rng.integers(0, 3, 8).astype(np.int32)
    for _ in range(3):
        net.train_batch(x, y)
    grads = net.get_gradients()
    net.forward(x[:5], training=True)
    dx = net.backward(rng.standard_normal((5, 3)).astype(np.float32))
    return net.get_weights() + grads + [net.predict(x), dx]


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
    """tests/relu_fusion_check.c: each fused entry against the two it
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
                           + ["tests/relu_fusion_check.c", "-lm", "-o", exe],
                           cwd=ROOT, capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([exe], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "cpu:1: ok" in run.stdout
    if "omp" in cnncuda.build_info()["engines"]:
        assert "omp:3: ok" in run.stdout
