"""Keras 3's other activations (elu, selu, gelu, swish, softplus, softsign,
hard_sigmoid, leaky_relu, relu6, exponential, mish, and Keras's general
relu) and the PReLU layer on every C engine against the NumPy reference
(float64), forward and backward: odd sizes, values around 0 and of large
magnitude. omp gives the cpu engine's bits. They run as steps of their own:
no planning rule fuses them.

Tolerances: float32 against float64, rtol 1e-5 and atol 1e-6 (one
transcendental per element; erfc and expm1 are float32's within a few ulps).
"""
import numpy as np
import pytest

from cnncuda.engine import make_net
from cnncuda.reference import ELEMENTWISE
from conftest import ADAM, C_ENGINES, SPARSE_LOGITS, assert_close

SHAPES = [(5, 7, 3), (13,), (1, 1, 1)]

# parameters besides Keras's defaults (reference.ACTIVATION_PARAMETERS)
PARAMETERS = [
    ("elu", {"alpha": 0.37}),
    ("leaky_relu", {"alpha": 0.05}),
    ("relu_general", {"alpha": 0.1, "max_value": 4.0, "threshold": 0.5}),
    ("relu_general", {"alpha": 0.0, "max_value": 2.5, "threshold": 0.0}),
    ("relu_general", {"alpha": 0.3, "max_value": None, "threshold": 1.0}),
]


def samples(n, shape, seed, act=""):
    """Standard normal values, then tiny ones, zeros, and large magnitudes
    (exponential: up to 40, where float32 still holds exp(x))."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n,) + tuple(shape))
    flat = x.reshape(-1)
    big = 40.0 if act == "exponential" else 60.0
    special = np.array([0.0, -0.0, 1e-4, -1e-4, 1e-30, -3.0, 3.0, 6.0, 5.9999, -big, big,
                        -7.5, 7.5, -15.0, 15.0, 0.5, 4.0])
    k = min(len(flat), len(special))
    flat[:k] = special[:k]
    flat[k::3] *= 8.0  # a third of the rest of larger magnitude
    return x.astype(np.float32)


def compare(engine, layers, shape, x, weights=None, rtol=1e-5, atol=1e-6):
    """Forward, input gradient and parameter gradients of `layers` on
    `engine` against the float64 reference; returns the engine's net."""
    n = len(x)
    net = make_net(engine, layers, shape, n, SPARSE_LOGITS, ADAM, seed=1)
    ref = make_net("numpy", layers, shape, n, SPARSE_LOGITS, ADAM, seed=1)
    ref = type(ref)(layers, shape, n, SPARSE_LOGITS, ADAM, seed=1, dtype=np.float64)
    if weights is not None:
        net.set_weights(weights)
        ref.set_weights(weights)
    y = net.forward(x, training=True)
    y_ref = ref.forward(x.astype(np.float64), training=True)
    assert_close(y, y_ref, rtol, atol, "forward")
    dy = np.random.default_rng(7).standard_normal(y.shape).astype(np.float32)
    dx = net.backward(dy)
    assert_close(dx, ref.backward(dy.astype(np.float64)), rtol, atol, "backward data")
    for i, (g, g_ref) in enumerate(zip(net.get_gradients(), ref.get_gradients())):
        assert_close(g, g_ref, rtol, 1e-5, "gradient %d" % i)
    return net, y, dx


@pytest.mark.parametrize("engine", C_ENGINES)
@pytest.mark.parametrize("act", ELEMENTWISE)
@pytest.mark.parametrize("shape", SHAPES)
def test_elementwise_activation(engine, act, shape):
    x = samples(3, shape, seed=len(act), act=act)
    compare(engine, [{"kind": "activation", "activation": act}], shape, x)


@pytest.mark.parametrize("engine", C_ENGINES)
@pytest.mark.parametrize("act,params", PARAMETERS)
def test_activation_parameters(engine, act, params):
    x = samples(4, (6, 5, 2), seed=3)
    compare(engine, [dict({"kind": "activation", "activation": act}, **params)], (6, 5, 2), x)


@pytest.mark.parametrize("engine", C_ENGINES)
@pytest.mark.parametrize("act", ["elu", "gelu", "swish", "mish", "leaky_relu"])
def test_between_layers(engine, act):
    """After a convolution and a dense layer (where the ReLU would be
    fused), before a pool and a dense head: the activation's input, the
    layer before's output, is kept for its backward."""
    layers = [{"kind": "conv2d", "units": 4, "kernel": (3, 3)},
              {"kind": "activation", "activation": act},
              {"kind": "maxpool", "kernel": (2, 2)},
              {"kind": "flatten"}, {"kind": "dense", "units": 9},
              {"kind": "activation", "activation": act},
              {"kind": "dense", "units": 3}]
    compare(engine, layers, (9, 8, 2), samples(5, (9, 8, 2), seed=2), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("engine", C_ENGINES)
@pytest.mark.parametrize("act", ["elu", "leaky_relu", "selu", "prelu"])
def test_trains_like_the_reference(engine, act):
    """Training steps through the loss (fused head and softmax where the
    engine has them: never over these activations) give the reference's
    losses and weights (PReLU's alpha trained too)."""
    middle = {"kind": "prelu"} if act == "prelu" else {"kind": "activation", "activation": act}
    layers = [{"kind": "dense", "units": 12}, middle,
              {"kind": "dense", "units": 4}, {"kind": "activation", "activation": "softmax"}]
    loss = {"kind": "sparse_categorical_crossentropy", "from_logits": False}
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 7)).astype(np.float32)
    y = rng.integers(0, 4, 16)
    net = make_net(engine, layers, (7,), 16, loss, ADAM, seed=5)
    ref = make_net("numpy", layers, (7,), 16, loss, ADAM, seed=5)
    for _ in range(5):
        got = net.train_batch(x, y)[0]
        want = ref.train_batch(x, y)[0]
        assert abs(got - want) <= 1e-4 * abs(want)
    for a, b in zip(net.get_weights(), ref.get_weights()):
        assert_close(a, b, 1e-4, 1e-5, "weights")


def test_omp_gives_the_cpu_bits():
    cases = [[{"kind": "activation", "activation": act}] for act in ELEMENTWISE]
    cases += [[{"kind": "prelu", "shared_axes": shared}] for shared in (None, [1, 2], [3])]
    for layers in cases:
        x = samples(256, (7, 9, 3), seed=1, act=layers[0].get("activation", ""))
        nets = [make_net(e, layers, (7, 9, 3), 256, SPARSE_LOGITS, ADAM)
                for e in ("cpu", "omp:2")]
        dy = np.random.default_rng(2).standard_normal(x.shape).astype(np.float32)
        for net in nets:
            net.set_weights([np.full(w.shape, 0.3, np.float32) for w in net.get_weights()])
        out = [(n.forward(x, training=True), n.backward(dy), n.get_gradients()) for n in nets]
        assert np.array_equal(out[0][0], out[1][0]) and np.array_equal(out[0][1], out[1][1])
        assert all(np.array_equal(a, b) for a, b in zip(out[0][2], out[1][2])), layers


PRELU_CASES = [((5, 7, 3), None), ((5, 7, 3), [1, 2]), ((5, 7, 3), [3]), ((4, 6, 2), [1]),
               ((4, 6, 2), [1, 2, 3]), ((11,), None), ((11,), [1]), ((1, 1, 5), None)]


@pytest.mark.parametrize("engine", C_ENGINES)
@pytest.mark.parametrize("shape,shared", PRELU_CASES)
def test_prelu(engine, shape, shared):
    layers = [{"kind": "prelu", "shared_axes": shared}]
    net = make_net(engine, layers, shape, 2, SPARSE_LOGITS, ADAM)
    (alpha,) = net.get_weights()
    want = tuple(1 if k + 1 in (shared or ()) else d for k, d in enumerate(shape))
    assert alpha.shape == want and not alpha.any()       # Keras's shape, zeros
    alpha = np.random.default_rng(4).uniform(-0.5, 1.5, want).astype(np.float32)
    compare(engine, layers, shape, samples(6, shape, seed=9), weights=[alpha])


@pytest.mark.parametrize("engine", C_ENGINES)
def test_prelu_between_layers(engine):
    """A PReLU after a convolution and after a dense layer, its alpha a
    weight in the layer's place of get_weights, its gradient summed over
    the batch."""
    layers = [{"kind": "conv2d", "units": 3, "kernel": (3, 3)}, {"kind": "prelu"},
              {"kind": "flatten"}, {"kind": "dense", "units": 5},
              {"kind": "prelu", "shared_axes": [1]}, {"kind": "dense", "units": 2}]
    net = make_net(engine, layers, (6, 5, 2), 3, SPARSE_LOGITS, ADAM, seed=2)
    shapes = [w.shape for w in net.get_weights()]
    assert shapes == [(3, 3, 2, 3), (3,), (4, 3, 3), (36, 5), (5,), (1,), (5, 2), (2,)]
    rng = np.random.default_rng(1)
    weights = [w + rng.uniform(-0.5, 0.5, w.shape).astype(np.float32)
               for w in net.get_weights()]
    compare(engine, layers, (6, 5, 2), samples(3, (6, 5, 2), seed=4), weights=weights,
            rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("engine", C_ENGINES)
@pytest.mark.parametrize("act", ["leaky_relu", "relu6", "elu"])
def test_steps_of_their_own(engine, act):
    """No planning rule fuses the new kinds (the ReLU into a convolution,
    a dense GEMM or a pool's backward; a dense bias gradient into the
    activation's backward): each runs as its own step."""
    layers = [{"kind": "conv2d", "units": 2, "kernel": (3, 3)},
              {"kind": "activation", "activation": act}, {"kind": "maxpool", "kernel": (2, 2)},
              {"kind": "flatten"}, {"kind": "dense", "units": 4},
              {"kind": "activation", "activation": act}, {"kind": "dense", "units": 3}]
    net = make_net(engine, layers, (8, 8, 1), 2, SPARSE_LOGITS, ADAM)
    forward, backward = net.plan(), net.plan(backward=True)
    # the first convolution: from its column matrix on cuda (the batch's
    # gather writes it), its ReLU not fused either way
    assert "conv2d_0.forward" in forward or "conv2d_0.forward_col" in forward, forward
    for name in ("activation_1.forward", "dense_4.forward", "activation_5.forward"):
        assert name in forward, forward
    for name in ("activation_5.backward", "dense_4.backward_filter", "maxpool_2.backward",
                 "activation_1.backward"):
        assert name in backward, backward


@pytest.mark.parametrize("engine", C_ENGINES)
def test_bad_parameters_are_refused(engine):
    def make(layer, shape=(4,)):
        return make_net(engine, [layer], shape, 2, SPARSE_LOGITS, ADAM)
    with pytest.raises(ValueError, match="activation.*expected one of .*mish.*got 'nope'"):
        make({"kind": "activation", "activation": "nope"})
    with pytest.raises(ValueError, match="relu_general needs max_value >= 0"):
        make({"kind": "activation", "activation": "relu_general", "max_value": -1.0})
    with pytest.raises(ValueError, match="relu_general needs .*threshold >= 0"):
        make({"kind": "activation", "activation": "relu_general", "threshold": -0.5})
    with pytest.raises(ValueError, match="alpha must be finite"):
        make({"kind": "activation", "activation": "elu", "alpha": float("nan")})
    with pytest.raises(TypeError, match=r"layers\[0\]\['alpha'\]: expected a number"):
        make({"kind": "activation", "activation": "elu", "alpha": "big"})
    with pytest.raises(ValueError, match=r"shared_axes'\]: expected axes in \[1, 3\]"):
        make({"kind": "prelu", "shared_axes": [0]})
    with pytest.raises(ValueError, match="prelu.*shared_axes must name axes"):
        make({"kind": "prelu", "shared_axes": [2]})              # a (N, F) input has axis 1
    make({"kind": "prelu", "shared_axes": [2]}, (3, 3, 2))       # an image has it


def test_reference_refuses_what_the_engines_refuse():
    for layer in ({"kind": "activation", "activation": "relu_general", "max_value": -1.0},
                  {"kind": "prelu", "shared_axes": [2]}):
        with pytest.raises(ValueError):
            make_net("numpy", [layer], (4,), 2, SPARSE_LOGITS, ADAM)


@pytest.mark.parametrize("engine", C_ENGINES)
def test_fit_path_like_the_reference(engine):
    """fit's path (resident data, train_range: a recorded step replayed on
    the GPU engines) through a PReLU, an ELU and a GELU: the reference's
    sums and weights."""
    layers = [{"kind": "conv2d", "units": 3, "kernel": (3, 3)},
              {"kind": "prelu", "shared_axes": [1, 2]},
              {"kind": "activation", "activation": "elu", "alpha": 0.5},
              {"kind": "flatten"}, {"kind": "dense", "units": 8},
              {"kind": "activation", "activation": "gelu"}, {"kind": "dense", "units": 3}]
    rng = np.random.default_rng(3)
    x = rng.standard_normal((40, 7, 7, 2)).astype(np.float32)
    y = rng.integers(0, 3, 40)
    nets = [make_net(e, layers, (7, 7, 2), 8, SPARSE_LOGITS, ADAM, seed=4)
            for e in (engine, "numpy")]
    for net in nets:
        net.set_data(x, y)
        net.set_order(np.random.default_rng(0).permutation(40))
        net.train_range(0, 40, 8)
    got, want = nets[0].read_sums(), nets[1].read_sums()
    assert_close(got, want, 1e-4, 1e-4, "sums")
    for a, b in zip(nets[0].get_weights(), nets[1].get_weights()):
        assert_close(a, b, 1e-3, 1e-5, "weights")
    assert np.abs(nets[0].get_weights()[2]).max() > 0          # alpha has trained
