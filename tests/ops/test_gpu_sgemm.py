"""The cuda engine's SGEMM paths (cuda/gemm.cu) through its layers, against
the NumPy reference in float64: CNNCUDA_SGEMM=wide (the wide kernel, BM x 128
tiles with 8x8 outputs per thread, on every product, the convolution's bias
and NCHW layouts fused into it), tile64 (the 64x64 tile everywhere) and auto
(the default: wide for products of at least 2^27 multiply-adds).

The shapes are odd: each row tile of the wide kernel (32, 64, 128 rows),
ragged edges, split-K, strides and uneven padding; one convolution is large
enough for auto to take the wide kernel. The variable is read when an
engine context is made, so each case sets it before building its network.
"""
import numpy as np
import pytest

from cnncuda.engine import make_net
from conftest import RELU_FUSION_NETWORKS as NETWORKS
from conftest import ADAM, SPARSE_LOGITS, engine_params, run_both
from conftest import train_relu_fusion as train

CUDA = engine_params(("cuda",))
KERNELS = ["wide", "tile64", "auto"]

CONV_CASES = [
    # input (h, w, c), filters, kernel, strides, padding, batch
    ((13, 11, 7), 37, (3, 3), (1, 1), "same", 5),    # forward 37 x 715 x 63: 64-row tiles
    ((9, 9, 20), 33, (3, 3), (1, 1), "valid", 4),    # dW 33 x 180 over 196 on the wide kernel
    ((11, 9, 5), 130, (3, 2), (2, 2), "same", 7),    # 130 filters; stride 2, uneven padding
    ((6, 6, 64), 64, (3, 3), (1, 1), "valid", 9),    # the seed CNN's third layer: split-K
    ((15, 15, 3), 8, (3, 3), (1, 1), "valid", 3),    # few filters: 32-row tiles
    ((15, 15, 32), 64, (3, 3), (1, 1), "valid", 48), # 64 x 8112 x 288: auto takes the wide kernel
]


@pytest.mark.parametrize("engine", CUDA)
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("shape,filters,size,strides,padding,n", CONV_CASES)
@pytest.mark.parametrize("use_bias", [True, False])
def test_conv2d_on_both_sgemm_paths(monkeypatch, engine, kernel, shape, filters, size, strides,
                                    padding, n, use_bias):
    monkeypatch.setenv("CNNCUDA_SGEMM", kernel)
    layers = [{"kind": "conv2d", "units": filters, "kernel": size, "strides": strides,
               "padding": padding, "use_bias": use_bias}]
    net, _ = run_both(engine, layers, shape, n=n, rtol=1e-4, atol=1e-4)
    rng = np.random.default_rng(2)
    w = [a + 0.5 * rng.standard_normal(a.shape).astype(np.float32) for a in net.get_weights()]
    run_both(engine, layers, shape, n=n, rtol=1e-4, atol=1e-4, weights=w)


@pytest.mark.parametrize("engine", CUDA)
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("fan_in,units,n", [(300, 130, 70), (1024, 64, 150), (129, 257, 33)])
def test_dense_on_both_sgemm_paths(monkeypatch, engine, kernel, fan_in, units, n):
    monkeypatch.setenv("CNNCUDA_SGEMM", kernel)
    layers = [{"kind": "dense", "units": units}]
    run_both(engine, layers, (fan_in,), n=n, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("engine", CUDA)
def test_wide_path_is_deterministic(monkeypatch, engine):
    # split-K and the channel sums add in a fixed order: two networks from
    # the same seed give the same bits after a few steps
    monkeypatch.setenv("CNNCUDA_SGEMM", "wide")
    layers = [{"kind": "conv2d", "units": 32, "kernel": (3, 3)}, {"kind": "activation", "activation": "relu"},
              {"kind": "maxpool", "kernel": (2, 2)},
              {"kind": "conv2d", "units": 64, "kernel": (3, 3)}, {"kind": "activation", "activation": "relu"},
              {"kind": "flatten"}, {"kind": "dense", "units": 10}]
    rng = np.random.default_rng(5)
    x = rng.standard_normal((96, 16, 16, 3)).astype(np.float32)
    y = rng.integers(0, 10, 96)
    weights = []
    for _ in range(2):
        net = make_net(engine, layers, (16, 16, 3), 32, SPARSE_LOGITS, ADAM, seed=4)
        for i in range(3):
            net.train_batch(x[32 * i:32 * (i + 1)], y[32 * i:32 * (i + 1)])
        weights.append(net.get_weights())
    for a, b in zip(*weights):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("engine", CUDA)
def test_unknown_sgemm_kernel_is_a_clear_error(monkeypatch, engine):
    monkeypatch.setenv("CNNCUDA_SGEMM", "tile256")
    with pytest.raises(ValueError, match="CNNCUDA_SGEMM"):
        make_net(engine, [{"kind": "dense", "units": 3}], (4,), 2, SPARSE_LOGITS, ADAM)


@pytest.mark.parametrize("engine", CUDA)
@pytest.mark.parametrize("kernel", ["auto", "wide"])
@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_relu_fusion_same_bits_on_the_gpu(monkeypatch, engine, kernel, name):
    # conv2d_forward_relu (the ReLU in the GEMM's epilogue under wide, in the
    # bias scatter under auto at these sizes) and pool_backward_relu give the
    # bits of the ops run apart (CNNCUDA_FUSE=0)
    monkeypatch.setenv("CNNCUDA_SGEMM", kernel)
    fused = train(engine, NETWORKS[name], True, monkeypatch)
    plain = train(engine, NETWORKS[name], False, monkeypatch)
    assert len(fused) == len(plain)
    for i, (a, b) in enumerate(zip(fused, plain)):
        assert a.tobytes() == b.tobytes(), "array %d differs" % i


@pytest.mark.parametrize("engine", CUDA)
@pytest.mark.parametrize("split", ["occupancy", "blocks"])
def test_wide_split_k_targets(monkeypatch, engine, split):
    # a 32-row filter gradient over 18,816 columns: CNNCUDA_WIDE_SPLITK=
    # occupancy (the default) cuts it into more slices than blocks (on 132
    # SMs 294 against 236: plan_slices rounds each slice up to a multiple
    # of 16 columns); both against the float64 reference
    monkeypatch.setenv("CNNCUDA_SGEMM", "wide")
    monkeypatch.setenv("CNNCUDA_WIDE_SPLITK", split)
    layers = [{"kind": "conv2d", "units": 8, "kernel": (3, 3)}]
    run_both(engine, layers, (30, 30, 3), n=24, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("engine", CUDA)
def test_a_bad_wide_split_k_setting_is_refused(monkeypatch, engine):
    monkeypatch.setenv("CNNCUDA_WIDE_SPLITK", "many")
    with pytest.raises(ValueError, match="CNNCUDA_WIDE_SPLITK: expected 'occupancy' or 'blocks', "
                                         "got 'many'"):
        make_net(engine, [{"kind": "dense", "units": 3}], (4,), 2, SPARSE_LOGITS, ADAM)
