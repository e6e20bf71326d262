"""The cuda engine's SGEMM (cuda/gemm.cu) through its layers, against the
NumPy reference in float64. The engine runs a product of at least 2^27
multiply-adds on the wide kernel (BM x 128 tiles with 8x8 outputs per
thread, the convolution's bias and NCHW layouts fused into it) and the
others on the tile kernel (tiles fitted to the product). A convolution's
three products (forward, filter gradient, data gradient) all have the same
count of multiply-adds, f * N*oh*ow * c*kh*kw, so a layer takes one kernel
for all three; a dense layer's likewise (batch * fan_in * units).

Above 2^27, a K of at most 32 runs on the short kernel (one thread a
column) and a product of at most 32 columns on the tile kernel with the wide
kernel's slices of K (narrow), both with the bits of the kernels they
replace (dev/cuda's sgemm checks that bit for bit, dev/emu's gemm_shapes on
the host).

The shapes are odd: ragged edges, split-K, strides and uneven padding, on
the tile kernel (CONV_CASES) and on each row tile of the wide kernel (32,
64 and 128 rows), the short kernel and the narrow products
(WIDE_CONV_CASES, sized past 2^27). dev/cuda's sgemm
program checks both kernels on every product of its odd shapes as well
(cnn_cuda_sgemm_wide and _tile reach either whatever the size).
"""
import numpy as np
import pytest

from cnncuda.engine import make_net
from conftest import RELU_FUSION_NETWORKS as NETWORKS
from conftest import ADAM, SPARSE_LOGITS, engine_params, run_both
from conftest import train_relu_fusion as train

CUDA = engine_params(("cuda",))
WIDE_FMAS = 2 ** 27

CONV_CASES = [
    # input (h, w, c), filters, kernel, strides, padding, batch
    ((13, 11, 7), 37, (3, 3), (1, 1), "same", 5),    # forward 37 x 715 x 63
    ((9, 9, 20), 33, (3, 3), (1, 1), "valid", 4),    # dW 33 x 180 over 196
    ((11, 9, 5), 130, (3, 2), (2, 2), "same", 7),    # 130 filters; stride 2, uneven padding
    ((6, 6, 64), 64, (3, 3), (1, 1), "valid", 9),    # the seed CNN's third layer: split-K
    ((15, 15, 3), 8, (3, 3), (1, 1), "valid", 3),    # few filters
]

WIDE_CONV_CASES = [
    ((15, 15, 32), 64, (3, 3), (1, 1), "valid", 48),   # 64 x 8112 x 288: 64-row tiles
    ((33, 33, 16), 24, (3, 3), (1, 1), "valid", 45),   # 24 filters: 32-row tiles; dcol (144 rows,
                                                       # K = 24) on the short kernel, A transposed
    ((21, 19, 8), 125, (3, 2), (2, 2), "same", 340),   # 125 filters: 128-row tiles; stride 2,
                                                       # uneven padding
    ((21, 19, 5), 125, (3, 2), (2, 2), "same", 340),   # K = 30: the forward on the short kernel
                                                       # (125 rows), dW (125 x 30) narrow
    ((30, 30, 3), 8, (3, 3), (1, 1), "valid", 800),    # dW 8 x 27 over 627,200: narrow, split-K;
                                                       # the forward on the short kernel
]

WIDE_DENSE_CASES = [(1100, 257, 480), (2049, 130, 600)]   # fan_in, units, batch


def conv_fmas(shape, filters, size, strides, padding, n):
    h, w, c = shape
    if padding == "same":
        oh, ow = -(-h // strides[0]), -(-w // strides[1])
    else:
        oh, ow = (h - size[0]) // strides[0] + 1, (w - size[1]) // strides[1] + 1
    return filters * n * oh * ow * c * size[0] * size[1]


def test_the_cases_take_the_kernels_they_are_for():
    for case in CONV_CASES:
        assert conv_fmas(*case) < WIDE_FMAS, case
    for case in WIDE_CONV_CASES:
        assert conv_fmas(*case) >= WIDE_FMAS, case
    for fan_in, units, n in WIDE_DENSE_CASES:
        assert fan_in * units * n >= WIDE_FMAS


@pytest.mark.parametrize("engine", CUDA)
@pytest.mark.parametrize("shape,filters,size,strides,padding,n", CONV_CASES + WIDE_CONV_CASES)
@pytest.mark.parametrize("use_bias", [True, False])
def test_conv2d_on_both_sgemm_kernels(engine, shape, filters, size, strides, padding, n,
                                      use_bias):
    layers = [{"kind": "conv2d", "units": filters, "kernel": size, "strides": strides,
               "padding": padding, "use_bias": use_bias}]
    net, _ = run_both(engine, layers, shape, n=n, rtol=1e-4, atol=1e-4)
    rng = np.random.default_rng(2)
    w = [a + 0.5 * rng.standard_normal(a.shape).astype(np.float32) for a in net.get_weights()]
    run_both(engine, layers, shape, n=n, rtol=1e-4, atol=1e-4, weights=w)


@pytest.mark.parametrize("engine", CUDA)
@pytest.mark.parametrize("fan_in,units,n", [(300, 130, 70), (1024, 64, 150), (129, 257, 33)]
                         + WIDE_DENSE_CASES)
def test_dense_on_both_sgemm_kernels(engine, fan_in, units, n):
    layers = [{"kind": "dense", "units": units}]
    run_both(engine, layers, (fan_in,), n=n, rtol=1e-4, atol=1e-4)


WIDE_NETWORK = [{"kind": "conv2d", "units": 32, "kernel": (3, 3)},
                {"kind": "activation", "activation": "relu"},
                {"kind": "maxpool", "kernel": (2, 2)},
                {"kind": "conv2d", "units": 64, "kernel": (3, 3)},
                {"kind": "activation", "activation": "relu"},
                {"kind": "flatten"}, {"kind": "dense", "units": 10}]


def train_wide_network(engine, monkeypatch, fuse="1"):
    # batch 512 of 16x16 images: the second convolution's products (64 x
    # 12,800 x 288) on the wide kernel, its ReLU in the GEMM's epilogue
    monkeypatch.setenv("CNNCUDA_FUSE", fuse)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1536, 16, 16, 3)).astype(np.float32)
    y = rng.integers(0, 10, 1536)
    net = make_net(engine, WIDE_NETWORK, (16, 16, 3), 512, SPARSE_LOGITS, ADAM, seed=4)
    for i in range(3):
        net.train_batch(x[512 * i:512 * (i + 1)], y[512 * i:512 * (i + 1)])
    return net.get_weights()


@pytest.mark.parametrize("engine", CUDA)
def test_wide_path_is_deterministic_and_fuses_the_relu_bit_for_bit(engine, monkeypatch):
    # split-K and the channel sums add in a fixed order: two networks from
    # the same seed give the same bits after a few steps; the ReLU applied
    # by the wide GEMM's store gives the bits of the ReLU run apart
    first = train_wide_network(engine, monkeypatch)
    again = train_wide_network(engine, monkeypatch)
    apart = train_wide_network(engine, monkeypatch, fuse="0")
    for a, b, c in zip(first, again, apart):
        assert np.array_equal(a, b)
        assert np.array_equal(a, c)


@pytest.mark.parametrize("engine", CUDA)
@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_relu_fusion_same_bits_on_the_gpu(monkeypatch, engine, name):
    # conv2d_forward_relu (the ReLU in the tile GEMM's store at these sizes)
    # and pool_backward_relu give the bits of the ops run apart
    # (CNNCUDA_FUSE=0)
    fused = train(engine, NETWORKS[name], True, monkeypatch)
    plain = train(engine, NETWORKS[name], False, monkeypatch)
    assert len(fused) == len(plain)
    for i, (a, b) in enumerate(zip(fused, plain)):
        assert a.tobytes() == b.tobytes(), "array %d differs" % i
