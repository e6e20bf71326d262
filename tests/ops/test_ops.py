"""Every op, forward and backward, on every C engine against the NumPy reference.

Each case builds a small network of the op on the engine under test and on
the reference (float64), with the same seed, so with bit-identical initial
weights; runs a training forward on the same random input, then a backward
from the same random output gradient; and compares the output, the input
gradient and every parameter gradient.

Tolerances (float32 engine against float64 reference, values of order 1):
convolution and dense rtol 1e-4, atol 1e-4 (sums of up to a few hundred
products); pooling, layouts, activations and dropout 1e-5; batch
normalization 1e-4 (the backward divides by the batch standard deviation).
"""
import numpy as np
import pytest

from cnncuda.engine import make_net
from conftest import ADAM, C_ENGINES, SPARSE_LOGITS, assert_close, run_both


CONV_CASES = [
    # input (h, w, c), filters, kernel, strides, padding
    ((8, 8, 3), 4, (3, 3), (1, 1), "valid"),
    ((7, 9, 2), 5, (3, 3), (1, 1), "same"),
    ((9, 7, 3), 4, (3, 2), (2, 2), "same"),    # odd sizes, stride 2, asymmetric padding
    ((10, 10, 1), 6, (5, 5), (1, 1), "same"),  # LeNet's first layer
    ((11, 13, 4), 3, (3, 3), (2, 3), "valid"),
    ((6, 6, 5), 7, (1, 1), (1, 1), "valid"),   # 1x1
    ((5, 5, 3), 2, (4, 4), (2, 2), "same"),    # even kernel
    ((15, 15, 32), 64, (3, 3), (1, 1), "valid"),  # the seed CNN's second layer
]


@pytest.mark.parametrize("engine", C_ENGINES)
@pytest.mark.parametrize("shape,filters,kernel,strides,padding", CONV_CASES)
@pytest.mark.parametrize("use_bias", [True, False])
def test_conv2d(engine, shape, filters, kernel, strides, padding, use_bias):
    layers = [{"kind": "conv2d", "units": filters, "kernel": kernel, "strides": strides,
               "padding": padding, "use_bias": use_bias}]
    net, _ = run_both(engine, layers, shape, n=3, rtol=1e-4, atol=1e-4)
    if use_bias:  # biases start at zero; nonzero ones must be added too
        rng = np.random.default_rng(0)
        w = [a + rng.standard_normal(a.shape).astype(np.float32) for a in net.get_weights()]
        run_both(engine, layers, shape, n=3, rtol=1e-4, atol=1e-4, weights=w)


POOL_CASES = [
    ((8, 8, 3), (2, 2), None, "valid"),
    ((7, 9, 2), (2, 2), None, "valid"),        # odd sizes drop the last row/column
    ((7, 9, 2), (2, 2), None, "same"),
    ((9, 7, 3), (3, 3), (2, 2), "same"),       # overlapping windows, stride 2
    ((10, 10, 1), (3, 2), (1, 2), "valid"),
    ((5, 5, 4), (5, 5), (1, 1), "same"),       # windows clipped on every side
    ((7, 8, 2), (3, 3), None, "same"),         # disjoint windows, padding at the top
    ((9, 10, 2), (2, 2), (3, 3), "valid"),     # stride above the window: inputs in no window
]


@pytest.mark.parametrize("engine", C_ENGINES)
@pytest.mark.parametrize("kind", ["maxpool", "avgpool"])
@pytest.mark.parametrize("shape,pool,strides,padding", POOL_CASES)
def test_pooling(engine, kind, shape, pool, strides, padding):
    layer = {"kind": kind, "kernel": pool, "padding": padding}
    if strides:
        layer["strides"] = strides
    run_both(engine, [layer], shape, n=3)


@pytest.mark.parametrize("engine", C_ENGINES)
@pytest.mark.parametrize("shape", [(4, 5, 3), (1, 1, 7), (6,)])
def test_flatten(engine, shape):
    run_both(engine, [{"kind": "flatten"}], shape, n=2)


@pytest.mark.parametrize("engine", C_ENGINES)
@pytest.mark.parametrize("fan_in,units", [(1, 1), (7, 3), (33, 65), (1024, 64)])
@pytest.mark.parametrize("use_bias", [True, False])
def test_dense(engine, fan_in, units, use_bias):
    layers = [{"kind": "dense", "units": units, "use_bias": use_bias}]
    net, _ = run_both(engine, layers, (fan_in,), n=5, rtol=1e-4, atol=1e-4)
    rng = np.random.default_rng(1)
    w = [a + rng.standard_normal(a.shape).astype(np.float32) for a in net.get_weights()]
    run_both(engine, layers, (fan_in,), n=5, rtol=1e-4, atol=1e-4, weights=w)


@pytest.mark.parametrize("engine", C_ENGINES)
@pytest.mark.parametrize("activation", ["linear", "relu", "sigmoid", "tanh", "softmax"])
@pytest.mark.parametrize("shape", [(5, 4, 3), (13,)])
def test_activation(engine, activation, shape):
    if activation == "softmax" and len(shape) == 3:
        with pytest.raises(ValueError, match="softmax"):
            make_net(engine, [{"kind": "activation", "activation": "softmax"}], shape, 2,
                     SPARSE_LOGITS, ADAM)
        return
    run_both(engine, [{"kind": "activation", "activation": activation}], shape, n=4)


@pytest.mark.parametrize("engine", C_ENGINES)
@pytest.mark.parametrize("rate", [0.0, 0.3, 0.75])
@pytest.mark.parametrize("shape", [(5, 4, 3), (40,)])
def test_dropout(engine, rate, shape):
    layers = [{"kind": "dropout", "rate": rate}]
    net, ref = run_both(engine, layers, shape, n=4)  # the same masks, from the same RNG
    # the next training forward draws a new mask, the same on both
    x = np.random.default_rng(9).standard_normal((4,) + shape).astype(np.float32)
    first = net.forward(x, training=True)
    second = net.forward(x, training=True)
    assert_close(first, ref.forward(x.astype(np.float64), training=True), 1e-6, 1e-6, "step 1")
    assert_close(second, ref.forward(x.astype(np.float64), training=True), 1e-6, 1e-6, "step 2")
    if rate > 0:
        assert not np.array_equal(first, second), "a new step must draw a new mask"
        kept = np.count_nonzero(first) / first.size
        assert abs(kept - (1 - rate)) < 0.2
        assert_close(first[first != 0], x[first != 0] / (1 - rate), 1e-6, 1e-6, "scale")
    # inference passes x through
    assert_close(net.forward(x, training=False), x, 0, 0, "inference")


@pytest.mark.parametrize("engine", C_ENGINES)
@pytest.mark.parametrize("shape,n", [((5, 4, 3), 4), ((3, 3, 7), 1), ((9,), 6)])
def test_batchnorm(engine, shape, n):
    layers = [{"kind": "batchnorm", "momentum": 0.9, "epsilon": 1e-3}]
    rng = np.random.default_rng(2)
    c = shape[-1]
    w = [1 + rng.random(c).astype(np.float32), rng.standard_normal(c).astype(np.float32),
         rng.standard_normal(c).astype(np.float32), 0.5 + rng.random(c).astype(np.float32)]
    net, ref = run_both(engine, layers, shape, n=n, rtol=1e-4, atol=1e-4, weights=w)
    # the training forward updated the moving statistics the same way
    for i, (a, b) in enumerate(zip(net.get_weights(), ref.get_weights())):
        assert_close(a, b, 1e-5, 1e-5, "weight %d after a training forward" % i)
    # inference uses the moving statistics
    x = rng.standard_normal((n,) + shape).astype(np.float32)
    assert_close(net.forward(x), ref.forward(x.astype(np.float64)), 1e-5, 1e-5, "inference")


@pytest.mark.parametrize("engine", C_ENGINES)
def test_stacked_layers(engine):
    """Every kind of layer in one network, backward through all of them."""
    layers = [
        {"kind": "conv2d", "units": 4, "kernel": (3, 3), "padding": "same"},
        {"kind": "batchnorm"},
        {"kind": "activation", "activation": "relu"},
        {"kind": "maxpool", "kernel": (2, 2)},
        {"kind": "conv2d", "units": 6, "kernel": (3, 3), "strides": (2, 2)},
        {"kind": "activation", "activation": "tanh"},
        {"kind": "avgpool", "kernel": (2, 2), "padding": "same"},
        {"kind": "dropout", "rate": 0.25},
        {"kind": "flatten"},
        {"kind": "dense", "units": 7},
        {"kind": "activation", "activation": "sigmoid"},
        {"kind": "dense", "units": 5},
        {"kind": "activation", "activation": "softmax"},
    ]
    run_both(engine, layers, (13, 11, 3), n=4, rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("engine", C_ENGINES)
@pytest.mark.parametrize("shape,padding", [((8, 8, 3), "valid"), ((7, 9, 2), "same"),
                                           ((9, 7, 2), "valid")])
def test_maxpool_ties_send_the_gradient_to_the_first_maximum(engine, shape, padding):
    """Inputs with many equal values (ReLU outputs are often 0): the first
    maximum in row-major window order takes the gradient, as in the reference."""
    rng = np.random.default_rng(4)
    x = np.maximum(np.round(rng.standard_normal((3,) + shape)), 0).astype(np.float32)
    layers = [{"kind": "maxpool", "kernel": (2, 2), "padding": padding}]
    net = make_net(engine, layers, shape, 3, SPARSE_LOGITS, ADAM)
    ref = type(make_net("numpy", layers, shape, 3, SPARSE_LOGITS, ADAM))(
        layers, shape, 3, SPARSE_LOGITS, ADAM, dtype=np.float64)
    y = net.forward(x, training=True)
    assert_close(y, ref.forward(x.astype(np.float64), training=True), 0, 0, "forward")
    dy = rng.standard_normal(y.shape).astype(np.float32)
    assert_close(net.backward(dy), ref.backward(dy.astype(np.float64)), 0, 0, "backward")
