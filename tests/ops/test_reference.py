"""Tests of cnncuda/reference.py: every op's backward against central finite
differences in float64, forwards against naive loops, the RNG and the initial
weights pinned independently, and the NumpyNet engine end to end."""

import importlib.util
import math
import pathlib

import numpy as np
import pytest

try:
    from cnncuda import reference as ref
except ImportError:  # the package's __init__ may need the compiled core
    _path = pathlib.Path(__file__).resolve().parents[2] / "cnncuda" / "reference.py"
    _spec = importlib.util.spec_from_file_location("cnncuda_reference", _path)
    ref = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(ref)


# ---------------------------------------------------------------- helpers

def numgrad(f, x, h=1e-6):
    """Central finite differences of the scalar f() with respect to the array
    x, which f reads (x is perturbed in place and restored)."""
    g = np.zeros_like(x)
    flat, gflat = x.reshape(-1), g.reshape(-1)
    for i in range(flat.size):
        old = flat[i]
        flat[i] = old + h
        fp = f()
        flat[i] = old - h
        fm = f()
        flat[i] = old
        gflat[i] = (fp - fm) / (2 * h)
    return g


def assert_close(a, b, rtol=1e-6, atol=1e-8):
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


def rng(seed=0):
    return np.random.default_rng(seed)


def distinct(shape, seed=0):
    """Float64 values with no ties (gaps 0.1 >> the finite-difference step)."""
    n = int(np.prod(shape))
    return (rng(seed).permutation(n) * 0.1 - n * 0.05).reshape(shape)


# -------------------------------------------------------------- the RNG

MASK = 2 ** 64 - 1


def py_mix64(z):
    z = (z + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def py_key(seed, stream):
    return py_mix64((seed & MASK) ^ py_mix64(stream))


def py_uniform(key, counter):
    return (py_mix64(key ^ py_mix64(counter)) >> 40) / 2.0 ** 24


def test_mix64_matches_python_ints():
    for z in (0, 1, 12345, 2 ** 63 + 7, MASK):
        assert int(ref.mix64(z)) == py_mix64(z)
    zs = [0, 3, 2 ** 40, MASK - 1]
    np.testing.assert_array_equal(ref.mix64(np.array(zs, dtype=np.uint64)),
                                  np.array([py_mix64(z) for z in zs], dtype=np.uint64))


@pytest.mark.parametrize("seed,stream,counter", [(0, 0, 0), (42, 3, 17), (2 ** 64 - 1, 7, 123456789)])
def test_uniform_pinned(seed, stream, counter):
    key = py_key(seed, stream)
    assert int(ref.rng_key(seed, stream)) == key
    expect = py_uniform(key, counter)
    got = ref.uniform(ref.rng_key(seed, stream), counter)
    assert isinstance(got, np.float32)
    assert float(got) == expect
    # vectorized over a counter array, same values
    arr = ref.uniform(key, np.array([counter, counter + 1], dtype=np.uint64))
    assert arr.dtype == np.float32 and arr.shape == (2,)
    assert float(arr[0]) == expect and float(arr[1]) == py_uniform(key, counter + 1)


def test_uniform_range_and_spread():
    u = ref.uniform(ref.rng_key(1, 1), np.arange(10000))
    assert u.min() >= 0 and u.max() < 1
    assert abs(u.mean() - 0.5) < 0.02


# --------------------------------------------------------- initial weights

def test_glorot_bounds_and_determinism():
    shape, fan_in, fan_out = (3, 3, 2, 5), 18, 45
    w = ref.glorot_uniform(7, 2, shape, fan_in, fan_out)
    assert w.dtype == np.float32 and w.shape == shape
    limit = np.sqrt(np.float32(6) / np.float32(fan_in + fan_out))
    assert np.all(np.abs(w) <= limit)
    assert np.abs(w).max() > 0.8 * limit             # spread over the range
    np.testing.assert_array_equal(w, ref.glorot_uniform(7, 2, shape, fan_in, fan_out))
    assert not np.array_equal(w, ref.glorot_uniform(8, 2, shape, fan_in, fan_out))
    assert not np.array_equal(w, ref.glorot_uniform(7, 3, shape, fan_in, fan_out))
    # bit-exact with the formula, u from the pure-Python RNG
    key = py_key(7, 4)
    flat = w.reshape(-1)
    for j in (0, 1, 50, flat.size - 1):
        u = np.float32(py_uniform(key, j))
        assert flat[j] == (np.float32(2) * u - np.float32(1)) * limit


# ------------------------------------------------------------- geometry

@pytest.mark.parametrize("n,k,s,out,top,bottom", [
    (5, 3, 2, 3, 1, 1), (6, 3, 2, 3, 0, 1), (7, 3, 1, 7, 1, 1), (4, 2, 2, 2, 0, 0),
    (4, 2, 1, 4, 0, 1), (6, 1, 2, 3, 0, 0), (28, 5, 1, 28, 2, 2), (5, 4, 3, 2, 1, 1)])
def test_same_sizes(n, k, s, out, top, bottom):
    assert ref.output_size(n, k, s, "same") == out
    assert ref.same_padding(n, k, s) == (top, bottom)
    assert ref.padding_geometry(n, k, s, "same") == (out, top, bottom)


@pytest.mark.parametrize("n,k,s,out", [(5, 3, 2, 2), (6, 3, 2, 2), (28, 5, 1, 24), (7, 2, 2, 3)])
def test_valid_sizes(n, k, s, out):
    assert ref.padding_geometry(n, k, s, "valid") == (out, 0, 0)


def test_window_too_large():
    with pytest.raises(ValueError):
        ref.padding_geometry(2, 3, 1, "valid")


# ----------------------------------------------------------------- conv2d

def naive_conv(x, w, b, strides, padding):
    n, h, wd, c = x.shape
    kh, kw, _, f = w.shape
    oh, pt, _ = ref.padding_geometry(h, kh, strides[0], padding)
    ow, pl, _ = ref.padding_geometry(wd, kw, strides[1], padding)
    y = np.zeros((n, oh, ow, f))
    for i in range(n):
        for r in range(oh):
            for s in range(ow):
                for a in range(kh):
                    for bb in range(kw):
                        row, col = r * strides[0] - pt + a, s * strides[1] - pl + bb
                        if 0 <= row < h and 0 <= col < wd:
                            y[i, r, s] += x[i, row, col] @ w[a, bb]
    return y + (0 if b is None else b)


CONV_CASES = [  # (x shape, kernel, strides, padding)
    ((2, 5, 7, 3), (3, 3), (2, 2), "same"),    # pad 1/1 rows, 1/1 cols
    ((1, 6, 6, 2), (3, 3), (2, 2), "same"),    # asymmetric: pad 0 top, 1 bottom
    ((2, 5, 4, 2), (2, 3), (1, 2), "same"),    # even kernel, mixed strides
    ((2, 7, 5, 3), (3, 2), (2, 1), "valid"),
    ((1, 5, 5, 1), (5, 5), (1, 1), "valid"),
]


@pytest.mark.parametrize("shape,kernel,strides,padding", CONV_CASES)
def test_conv2d_forward_naive(shape, kernel, strides, padding):
    g = rng(1)
    x = g.standard_normal(shape)
    w = g.standard_normal(kernel + (shape[3], 4))
    b = g.standard_normal(4)
    y = ref.conv2d_forward(x, w, b, strides, padding)
    assert_close(y, naive_conv(x, w, b, strides, padding), rtol=1e-12, atol=1e-12)
    assert_close(ref.conv2d_forward(x, w, None, strides, padding),
                 naive_conv(x, w, None, strides, padding), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape,kernel,strides,padding", CONV_CASES[:4])
def test_conv2d_backward_fd(shape, kernel, strides, padding):
    g = rng(2)
    x = g.standard_normal(shape)
    w = g.standard_normal(kernel + (shape[3], 3))
    b = g.standard_normal(3)
    y = ref.conv2d_forward(x, w, b, strides, padding)
    r = g.standard_normal(y.shape)                   # L = sum(r * y)
    dx, dw, db = ref.conv2d_backward(r, x, w, strides, padding, use_bias=True)
    loss = lambda: np.sum(r * ref.conv2d_forward(x, w, b, strides, padding))
    assert_close(dx, numgrad(loss, x))
    assert_close(dw, numgrad(loss, w))
    assert_close(db, numgrad(loss, b))
    assert ref.conv2d_backward(r, x, w, strides, padding, use_bias=False)[2] is None


# ---------------------------------------------------------------- pooling

def naive_pool(x, pool, strides, padding, mode):
    n, h, w, c = x.shape
    oh, pt, _ = ref.padding_geometry(h, pool[0], strides[0], padding)
    ow, pl, _ = ref.padding_geometry(w, pool[1], strides[1], padding)
    y = np.zeros((n, oh, ow, c))
    for r in range(oh):
        for s in range(ow):
            r0, c0 = r * strides[0] - pt, s * strides[1] - pl
            win = x[:, max(r0, 0):min(r0 + pool[0], h), max(c0, 0):min(c0 + pool[1], w), :]
            y[:, r, s] = win.max(axis=(1, 2)) if mode == "max" else win.mean(axis=(1, 2))
    return y


POOL_CASES = [  # (x shape, pool, strides, padding)
    ((2, 5, 5, 2), (2, 2), (2, 2), "same"),     # clipped last window
    ((1, 6, 7, 3), (3, 3), (2, 2), "same"),     # overlapping, asymmetric pad
    ((2, 5, 6, 2), (2, 3), (1, 2), "valid"),
    ((1, 4, 4, 1), (3, 3), (1, 1), "same"),
]


@pytest.mark.parametrize("shape,pool,strides,padding", POOL_CASES)
@pytest.mark.parametrize("mode", ["max", "avg"])
def test_pool_forward_naive(shape, pool, strides, padding, mode):
    x = distinct(shape, 3)
    if mode == "max":
        y, _ = ref.max_pool2d_forward(x, pool, strides, padding)
    else:
        y = ref.avg_pool2d_forward(x, pool, strides, padding)
    assert_close(y, naive_pool(x, pool, strides, padding, mode), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape,pool,strides,padding", POOL_CASES)
@pytest.mark.parametrize("mode", ["max", "avg"])
def test_pool_backward_fd(shape, pool, strides, padding, mode):
    x = distinct(shape, 4)
    r = None

    def fwd():
        if mode == "max":
            return ref.max_pool2d_forward(x, pool, strides, padding)[0]
        return ref.avg_pool2d_forward(x, pool, strides, padding)

    r = rng(5).standard_normal(fwd().shape)
    if mode == "max":
        _, am = ref.max_pool2d_forward(x, pool, strides, padding)
        dx = ref.max_pool2d_backward(r, am, x.shape, pool, strides, padding)
    else:
        dx = ref.avg_pool2d_backward(r, x.shape, pool, strides, padding)
    assert_close(dx, numgrad(lambda: np.sum(r * fwd()), x))


def test_maxpool_first_max_wins():
    x = np.zeros((1, 2, 2, 1))                       # all ties
    y, am = ref.max_pool2d_forward(x, (2, 2))
    assert am.ravel()[0] == 0
    dx = ref.max_pool2d_backward(np.ones_like(y), am, x.shape, (2, 2))
    np.testing.assert_array_equal(dx.ravel(), [1, 0, 0, 0])


def test_pool_default_strides():
    x = distinct((1, 4, 4, 1))
    assert ref.max_pool2d_forward(x, (2, 2))[0].shape == (1, 2, 2, 1)


# ------------------------------------------------------- dense, flatten

def test_dense_backward_fd():
    g = rng(6)
    x, w, b = g.standard_normal((4, 5)), g.standard_normal((5, 3)), g.standard_normal(3)
    r = g.standard_normal((4, 3))
    loss = lambda: np.sum(r * ref.dense_forward(x, w, b))
    dx, dw, db = ref.dense_backward(r, x, w)
    assert_close(dx, numgrad(loss, x))
    assert_close(dw, numgrad(loss, w))
    assert_close(db, numgrad(loss, b))


def test_flatten_is_nhwc_order():
    x = distinct((2, 3, 4, 5))
    y = ref.flatten_forward(x)
    np.testing.assert_array_equal(y[1], x[1].ravel())
    np.testing.assert_array_equal(ref.flatten_backward(y, x.shape), x)


# ----------------------------------------------------------- activations

@pytest.mark.parametrize("act", ref.ACTIVATIONS)
def test_activation_backward_fd(act):
    g = rng(7)
    x = g.standard_normal((3, 5))
    if act in ("relu", "leaky_relu", "relu6", "relu_general", "elu", "selu"):
        x[np.abs(x) < 1e-3] = 0.5                    # away from the kink
    r = g.standard_normal(x.shape)
    y = ref.activation_forward(x, act)
    dx = ref.activation_backward(y, r, act, x)
    assert_close(dx, numgrad(lambda: np.sum(r * ref.activation_forward(x, act)), x))


def test_activation_values():
    x = np.array([[-1000.0, -1.0, 0.0, 2.0, 1000.0]])
    with np.errstate(over="raise", invalid="raise"):  # no overflow anywhere
        s = ref.activation_forward(x, "sigmoid")
        sm = ref.activation_forward(x, "softmax")
    assert_close(s, [[0.0, 1 / (1 + math.e), 0.5, 1 / (1 + math.exp(-2)), 1.0]])
    assert_close(sm.sum(), 1.0)
    assert_close(ref.activation_forward(x, "relu"), [[0, 0, 0, 2, 1000]])


# ---------------------------------------------------------------- dropout

def test_dropout_mask_and_backward():
    key = ref.rng_key(ref.rng_key(3, 2 * 1 + 1), 0)
    x = rng(8).standard_normal((2, 3, 4, 5))
    rate = 0.25
    y = ref.dropout_forward(x, rate, key)
    u = ref.uniform(key, np.arange(x.size)).reshape(x.shape)
    keep = u >= np.float32(rate)
    scale = np.float32(1) / (np.float32(1) - np.float32(rate))
    np.testing.assert_array_equal(y, np.where(keep, x * np.float64(scale), 0))
    assert 0.6 < keep.mean() < 0.9
    r = rng(9).standard_normal(x.shape)
    dx = ref.dropout_backward(r, rate, key)
    assert_close(dx, numgrad(lambda: np.sum(r * ref.dropout_forward(x, rate, key)), x))
    np.testing.assert_array_equal(ref.dropout_forward(x, 0.0, key), x)


# -------------------------------------------------------------- batchnorm

@pytest.mark.parametrize("shape", [(3, 4, 5, 2), (6, 3)])
def test_batchnorm_train_fd(shape):
    g = rng(10)
    c = shape[-1]
    x = g.standard_normal(shape) * 2 + 1
    gamma, beta = g.standard_normal(c), g.standard_normal(c)
    mm, mv = np.zeros(c), np.ones(c)
    r = g.standard_normal(shape)
    y, mean, invstd, nm, nv = ref.batchnorm_forward_train(x, gamma, beta, mm, mv, 0.9, 1e-3)
    axes = tuple(range(len(shape) - 1))
    assert_close(mean, x.mean(axis=axes))
    assert_close(nm, 0.1 * x.mean(axis=axes))
    assert_close(nv, 0.9 + 0.1 * x.var(axis=axes))
    assert_close(y, gamma * (x - x.mean(axis=axes)) / np.sqrt(x.var(axis=axes) + 1e-3) + beta)
    dx, dgamma, dbeta = ref.batchnorm_backward(r, x, gamma, mean, invstd)
    loss = lambda: np.sum(r * ref.batchnorm_forward_train(x, gamma, beta, mm, mv, 0.9, 1e-3)[0])
    assert_close(dx, numgrad(loss, x), rtol=1e-5, atol=1e-7)
    assert_close(dgamma, numgrad(loss, gamma))
    assert_close(dbeta, numgrad(loss, beta))


def test_batchnorm_infer_fd():
    g = rng(11)
    x = g.standard_normal((4, 3))
    gamma, beta, mm, mv = g.standard_normal(3), g.standard_normal(3), g.standard_normal(3), g.random(3) + 0.5
    r = g.standard_normal(x.shape)
    loss = lambda: np.sum(r * ref.batchnorm_forward_infer(x, gamma, beta, mm, mv))
    dx, dgamma, dbeta = ref.batchnorm_backward_infer(r, x, gamma, mm, mv)
    assert_close(dx, numgrad(loss, x))
    assert_close(dgamma, numgrad(loss, gamma))
    assert_close(dbeta, numgrad(loss, beta))


# ----------------------------------------------------------------- losses

def loss_inputs(kind, from_logits, n=4, k=3, seed=12):
    g = rng(seed)
    if from_logits:
        y = g.standard_normal((n, k)) * 2
    elif kind == "binary_crossentropy":
        y = g.uniform(0.05, 0.95, (n, k))
    else:
        y = g.uniform(0.1, 1.0, (n, k))              # unnormalized probabilities
    if kind == "sparse_categorical_crossentropy":
        t = g.integers(0, k, n)
    elif kind == "categorical_crossentropy":
        t = g.uniform(0, 1, (n, k))                  # soft, unnormalized targets
    else:
        t = g.uniform(0, 1, (n, k))
    return y, t


@pytest.mark.parametrize("kind", ref.LOSS_KINDS)
@pytest.mark.parametrize("from_logits", [True, False])
def test_loss_gradient_fd(kind, from_logits):
    y, t = loss_inputs(kind, from_logits)
    n = y.shape[0]
    loss_sum, correct, dy = ref.loss_forward_backward(kind, y, t, from_logits)
    mean_loss = lambda: ref.loss_forward_backward(kind, y, t, from_logits, grad=False)[0] / n
    assert_close(dy, numgrad(mean_loss, y), rtol=1e-5, atol=1e-8)
    assert 0 <= correct <= n
    # scale_n divides the gradient, not the sum
    l2, _, dy2 = ref.loss_forward_backward(kind, y, t, from_logits, scale_n=2 * n)
    assert l2 == loss_sum
    assert_close(dy2, dy / 2)


def test_loss_values_by_hand():
    z = np.array([[1.0, 2.0, 0.5], [0.0, -1.0, 3.0]])
    labels = np.array([1, 0])
    lse = np.log(np.exp(z).sum(axis=1))
    l, c, _ = ref.sparse_categorical_crossentropy(z, labels, from_logits=True)
    assert_close(l, (lse - z[[0, 1], labels]).sum())
    assert c == 1.0
    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    l2, c2, _ = ref.sparse_categorical_crossentropy(p, labels, from_logits=False)
    assert_close(l2, l)
    assert c2 == 1.0
    # binary from logits: mean over k, accuracy the mean over k
    t = np.array([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]])
    lb, cb, _ = ref.binary_crossentropy(z, t, from_logits=True)
    s = 1 / (1 + np.exp(-z))
    assert_close(lb, (-(t * np.log(s) + (1 - t) * np.log(1 - s))).mean(axis=1).sum())
    assert_close(cb, 2 / 3 + 3 / 3)


def test_loss_clipping_zero_gradient():
    y = np.array([[0.0, 0.5, 0.5]])                  # q_0 = 0 is clipped
    _, _, dy = ref.categorical_crossentropy(y, np.array([[1.0, 0.0, 0.0]]))
    assert np.all(np.isfinite(dy))
    l, _, dyb = ref.binary_crossentropy(np.array([[0.0, 1.0, 0.3]]), np.array([[1.0, 0.0, 1.0]]))
    assert dyb[0, 0] == 0 and dyb[0, 1] == 0 and dyb[0, 2] != 0
    # clipped at Keras's float32 bounds: eps = float32(1e-7), 1 - eps = 0.99999988
    eps = float(np.float32(1e-7))
    hi = float(np.float32(1) - np.float32(1e-7))
    assert_close(l, (-np.log(eps) - np.log(1 - hi) - np.log(0.3)) / 3, rtol=1e-9)


def test_loss_float32_stays_float32():
    for kind in ref.LOSS_KINDS:
        for fl in (True, False):
            y, t = loss_inputs(kind, fl)
            _, _, dy = ref.loss_forward_backward(kind, y.astype(np.float32), t, fl)
            assert dy.dtype == np.float32


# ------------------------------------------------------------- optimizers

def test_adam_one_step_by_hand():
    g = rng(13)
    p0, grad = g.standard_normal(5), g.standard_normal(5)
    p, m, v = p0.copy(), np.zeros(5), np.zeros(5)
    lr, b1, b2, eps = 0.01, 0.9, 0.999, 1e-7
    ref.adam_step(p, grad, m, v, 1, lr, b1, b2, eps)
    for i in range(5):  # Keras: alpha = lr sqrt(1 - b2^t) / (1 - b1^t) ...
        mi = 0 + (grad[i] - 0) * (1 - b1)
        vi = 0 + (grad[i] ** 2 - 0) * (1 - b2)
        alpha = lr * math.sqrt(1 - b2 ** 1) / (1 - b1 ** 1)
        assert math.isclose(m[i], mi, rel_tol=1e-14)
        assert math.isclose(v[i], vi, rel_tol=1e-14)
        assert math.isclose(p[i], p0[i] - mi * alpha / (math.sqrt(vi) + eps), rel_tol=1e-12)
    # second step uses t = 2
    p1, m1, v1 = p.copy(), m.copy(), v.copy()
    ref.adam_step(p, grad, m, v, 2, lr, b1, b2, eps)
    m2, v2 = m1 + (grad - m1) * (1 - b1), v1 + (grad ** 2 - v1) * (1 - b2)
    alpha2 = lr * math.sqrt(1 - b2 ** 2) / (1 - b1 ** 2)
    assert_close(p, p1 - m2 * alpha2 / (np.sqrt(v2) + eps), rtol=1e-12)


def test_adam_float32():
    p = np.ones(3, np.float32)
    m, v = np.zeros(3, np.float32), np.zeros(3, np.float32)
    ref.adam_step(p, np.array([1, -1, 0.5], np.float32), m, v, 1)
    assert p.dtype == m.dtype == v.dtype == np.float32
    assert_close(p, [1 - 1e-3, 1 + 1e-3, 1 - 1e-3], rtol=1e-5)


def test_sgd_variants():
    g = np.array([1.0, -2.0])
    p = np.array([0.5, 0.5])
    ref.sgd_step(p, g, None, 0.1)
    assert_close(p, [0.4, 0.7])
    p, vel = np.zeros(2), np.array([0.2, 0.2])
    ref.sgd_step(p, g, vel, 0.1, momentum=0.9)
    assert_close(vel, [0.18 - 0.1, 0.18 + 0.2])
    assert_close(p, vel)
    p, vel = np.zeros(2), np.array([0.2, 0.2])
    ref.sgd_step(p, g, vel, 0.1, momentum=0.9, nesterov=True)
    assert_close(p, 0.9 * vel - 0.1 * g)


# -------------------------------------------------------------- NumpyNet

IMAGE_LAYERS = [
    {"kind": "conv2d", "units": 4, "kernel": (3, 3), "strides": (1, 1), "padding": "same"},
    {"kind": "batchnorm"},
    {"kind": "activation", "activation": "relu"},
    {"kind": "maxpool", "kernel": (2, 2)},
    {"kind": "conv2d", "units": 3, "kernel": (2, 2), "strides": (2, 2), "padding": "same",
     "use_bias": False},
    {"kind": "avgpool", "kernel": (2, 2), "strides": (1, 1), "padding": "same"},
    {"kind": "flatten"},
    {"kind": "dropout", "rate": 0.2},
    {"kind": "dense", "units": 3},
]
SPARSE = {"kind": "sparse_categorical_crossentropy", "from_logits": True}


def make_net(dtype=np.float64, layers=IMAGE_LAYERS, optimizer=None, seed=5, loss=SPARSE,
             input_shape=(7, 7, 2)):
    return ref.NumpyNet(layers, input_shape, 8, loss,
                        optimizer or {"kind": "adam", "learning_rate": 0.02}, seed=seed,
                        dtype=dtype)


def test_net_shapes_and_weights():
    net = make_net()
    assert net.output_shape == (3,) and net.max_batch == 8 and net.device == "numpy"
    shapes = [w.shape for w in net.get_weights()]
    # conv k+b, bn x4, conv k (no bias), dense k+b (7 -> pool 3 -> conv s2 2: 2*2*3 = 12)
    assert shapes == [(3, 3, 2, 4), (4,), (4,), (4,), (4,), (4,), (2, 2, 4, 3),
                      (12, 3), (3,)]
    assert [g.shape for g in net.get_gradients()] == shapes[:4] + shapes[6:]
    w = net.get_weights()
    np.testing.assert_array_equal(w[0], ref.glorot_uniform(5, 0, (3, 3, 2, 4), 18, 36))
    np.testing.assert_array_equal(w[6], ref.glorot_uniform(5, 4, (2, 2, 4, 3), 16, 12))
    np.testing.assert_array_equal(w[7], ref.glorot_uniform(5, 8, (12, 3), 12, 3))
    assert np.all(w[1] == 0) and np.all(w[2] == 1) and np.all(w[5] == 1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_net_learns(dtype):
    g = rng(14)
    x = g.standard_normal((8, 7, 7, 2)).astype(dtype)
    y = g.integers(0, 3, 8)
    net = make_net(dtype)
    losses = [net.train_batch(x, y)[0] / 8 for _ in range(30)]
    assert losses[-1] < 0.5 * losses[0], losses
    assert net.steps == 30 and net.training_forwards == 30
    assert all(w.dtype == dtype for w in net.get_weights())
    out = net.predict(x)
    assert out.dtype == dtype and out.shape == (8, 3)
    loss_sum, correct = net.evaluate(np.concatenate([x, x]), np.concatenate([y, y]))
    assert 0 <= correct <= 16 and loss_sum > 0


@pytest.mark.parametrize("opt", [{"kind": "sgd", "learning_rate": 0.1, "momentum": 0.9},
                                 {"kind": "sgd", "learning_rate": 0.1, "nesterov": True,
                                  "momentum": 0.5},
                                 {"kind": "sgd"}])
def test_net_sgd_learns(opt):
    g = rng(15)
    x = g.standard_normal((8, 6))
    t = (g.random((8, 2)) > 0.5).astype(float)
    layers = [{"kind": "dense", "units": 8}, {"kind": "activation", "activation": "tanh"},
              {"kind": "dense", "units": 2}, {"kind": "activation", "activation": "sigmoid"}]
    net = make_net(layers=layers, optimizer=opt, input_shape=(6,),
                   loss={"kind": "binary_crossentropy", "from_logits": False})
    first = net.train_batch(x, t)[0]
    for _ in range(29):
        last = net.train_batch(x, t)[0]
    assert last < first


def test_net_gradients_fd():
    """Whole-net gradients (training mode, no dropout) against finite differences."""
    layers = [l for l in IMAGE_LAYERS if l["kind"] != "dropout"]
    g = rng(16)
    x = g.standard_normal((3, 7, 7, 2))
    t = g.uniform(0, 1, (3, 3))
    loss = {"kind": "categorical_crossentropy", "from_logits": True}
    net = make_net(layers=layers, loss=loss)
    w = net.get_weights()
    for i in (1, 2, 3):  # perturb biases / gamma / beta so nothing is trivially zero
        w[i] = w[i] + g.standard_normal(w[i].shape) * 0.3
    net.set_weights(w)
    net.compute_gradients(x, t)
    grads = net.get_gradients()
    params = [wt for layer in net.layers for wt, tr in zip(layer.weights, layer.trainable) if tr]

    def mean_loss():
        out = net.forward(x, training=True)
        return ref.categorical_crossentropy(out, t, True, grad=False)[0] / 3

    for p, gr in zip(params, grads):
        assert_close(gr, numgrad(mean_loss, p), rtol=1e-5, atol=1e-7)
    # dx through backward
    out = net.forward(x, training=True)
    r = g.standard_normal(out.shape)
    dx = net.backward(r)
    xx = x.copy()
    assert_close(dx, numgrad(lambda: np.sum(r * net.forward(xx, training=True)), xx),
                 rtol=1e-5, atol=1e-7)


def test_net_dropout_keys_follow_counter():
    layers = [{"kind": "flatten"}, {"kind": "dropout", "rate": 0.5}]
    net = ref.NumpyNet(layers, (2, 2, 3), 4, {"kind": "categorical_crossentropy"},
                       {"kind": "adam"}, seed=9)
    x = np.ones((2, 2, 2, 3))
    y0 = net.forward(x, training=True)
    y1 = net.forward(x, training=True)
    assert net.training_forwards == 2
    for t, y in ((0, y0), (1, y1)):
        key = ref.rng_key(ref.rng_key(9, 3), t)
        np.testing.assert_array_equal(y, ref.dropout_forward(x.reshape(2, -1), 0.5, key))
    assert not np.array_equal(y0, y1)
    np.testing.assert_array_equal(net.forward(x), x.reshape(2, -1))   # inference
    assert net.training_forwards == 2


def test_net_compute_then_apply_equals_train_batch():
    g = rng(17)
    x, y = g.standard_normal((4, 7, 7, 2)), g.integers(0, 3, (4, 1))
    a, b = make_net(), make_net()
    la = a.train_batch(x, y)
    lb = b.compute_gradients(x, y)
    assert b.steps == 0
    b.apply_gradients()
    assert la == lb and b.steps == 1
    for wa, wb in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_array_equal(wa, wb)


def test_set_weights_all_or_nothing():
    net = make_net()
    before = net.get_weights()
    bad = [w + 1 for w in before]
    bad[-2] = np.zeros((47, 3))                      # wrong shape, late in the list
    with pytest.raises(ValueError):
        net.set_weights(bad)
    for a, b in zip(before, net.get_weights()):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError):
        net.set_weights(before[:-1])
    good = [w + 1 for w in before]
    net.set_weights(good)
    for a, b in zip(good, net.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_net_rejects_bad_inputs():
    net = make_net()
    with pytest.raises(ValueError):
        net.train_batch(np.zeros((9, 7, 7, 2)), np.zeros(9, int))     # > max_batch
    with pytest.raises(ValueError):
        net.train_batch(np.zeros((2, 7, 6, 2)), np.zeros(2, int))
    with pytest.raises(ValueError):
        net.train_batch(np.zeros((2, 7, 7, 2)), np.array([0, 3]))     # label out of range
    image_out = ref.NumpyNet([{"kind": "conv2d", "units": 2, "kernel": 3}], (7, 7, 2), 4, SPARSE,
                             {"kind": "adam"})      # an image output: the loss at every pixel
    with pytest.raises(ValueError, match=r"targets must have 25 values per sample \(the "
                                         r"output's 25 positions\)"):
        image_out.compute_gradients(np.zeros((1, 7, 7, 2)), np.zeros(1))
    assert np.isfinite(image_out.compute_gradients(np.zeros((1, 7, 7, 2)),
                                                   np.zeros((1, 5, 5)))[0])


def test_inputs_never_modified():
    g = rng(18)
    x, y = g.standard_normal((6, 7, 7, 2)).astype(np.float32), g.integers(0, 3, 6)
    xc, yc = x.copy(), y.copy()
    net = make_net(np.float32)
    net.train_batch(x, y)
    net.evaluate(x, y)
    net.predict(x)
    out = net.forward(x, training=True)
    dy = np.ones_like(out)
    dyc = dy.copy()
    net.backward(dy)
    np.testing.assert_array_equal(x, xc)
    np.testing.assert_array_equal(y, yc)
    np.testing.assert_array_equal(dy, dyc)
    w = net.get_weights()
    wc = [a.copy() for a in w]
    net.set_weights(w)
    net.train_batch(x, y)
    for a, b in zip(w, wc):
        np.testing.assert_array_equal(a, b)
    # the ops themselves
    xx = g.standard_normal((2, 5, 5, 3))
    ww = g.standard_normal((3, 3, 3, 2))
    dd = g.standard_normal((2, 3, 3, 2))
    copies = [a.copy() for a in (xx, ww, dd)]
    ref.conv2d_forward(xx, ww, None, (2, 2), "same")
    ref.conv2d_backward(dd, xx, ww, (2, 2), "same")
    ref.max_pool2d_forward(xx, (2, 2), None, "same")
    ref.avg_pool2d_forward(xx, (2, 2), None, "same")
    ref.batchnorm_forward_train(xx, np.ones(3), np.zeros(3), np.zeros(3), np.ones(3))
    for a, b in zip((xx, ww, dd), copies):
        np.testing.assert_array_equal(a, b)


def test_predict_and_evaluate_chunking():
    g = rng(19)
    net = make_net()
    x, y = g.standard_normal((19, 7, 7, 2)), g.integers(0, 3, 19)
    out = net.predict(x)
    assert out.shape == (19, 3)
    np.testing.assert_allclose(out[8:16], net.forward(x[8:16]), rtol=1e-12)
    l, c = net.evaluate(x, y)
    l_direct, c_direct, _ = ref.sparse_categorical_crossentropy(out, y, True)
    assert_close(l, l_direct, rtol=1e-10)
    assert c == c_direct
    assert net.predict(x[:0]).shape == (0, 3)
    assert net.training_forwards == 0


def test_ops_keep_float32():
    g = rng(20)
    f32 = np.float32
    x = g.standard_normal((2, 6, 6, 3)).astype(f32)
    w = g.standard_normal((3, 3, 3, 4)).astype(f32)
    b = np.zeros(4, f32)
    y = ref.conv2d_forward(x, w, b, (2, 2), "same")
    outs = [y, *ref.conv2d_backward(y, x, w, (2, 2), "same")]
    ym, am = ref.max_pool2d_forward(x, (2, 2), None, "same")
    outs += [ym, ref.max_pool2d_backward(ym, am, x.shape, (2, 2), None, "same")]
    ya = ref.avg_pool2d_forward(x, (3, 3), (2, 2), "same")
    outs += [ya, ref.avg_pool2d_backward(ya, x.shape, (3, 3), (2, 2), "same")]
    c = np.ones(3, f32)
    bn = ref.batchnorm_forward_train(x, c, c * 0, c * 0, c)
    outs += list(bn) + list(ref.batchnorm_backward(x, x, c, bn[1], bn[2]))
    outs += [ref.batchnorm_forward_infer(x, c, c, c, c)]
    outs += [ref.dropout_forward(x, 0.3, ref.rng_key(1, 1))]
    v = x.reshape(2, -1)
    for act in ref.ACTIVATIONS:
        a = ref.activation_forward(v, act)
        outs += [a, ref.activation_backward(a, v, act, v)]
    for o in outs:
        assert o.dtype == np.float32
