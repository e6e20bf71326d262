"""Bad input raises a clear exception naming the argument, the expected and
the given value, and leaves the network usable and unchanged."""
import numpy as np
import pytest

import cnncuda
from cnncuda import _C
from cnncuda.engine import make_net
from cnncuda.seeds import seed_network, synthetic_data
from conftest import C_ENGINES


def small_net(engine, loss="sparse_categorical_crossentropy", from_logits=True, units=3,
              max_batch=8, seed=0):
    layers = [{"kind": "conv2d", "units": 2, "kernel": (3, 3)},
              {"kind": "activation", "activation": "relu"},
              {"kind": "flatten"}, {"kind": "dense", "units": units}]
    return make_net(engine, layers, (5, 6, 2), max_batch, {"kind": loss, "from_logits": from_logits},
                    {"kind": "adam"}, seed=seed)


def good_batch(n=4):
    rng = np.random.default_rng(0)
    return rng.random((n, 5, 6, 2)).astype(np.float32), np.arange(n) % 3


def assert_unchanged_and_usable(engine, net, **kwargs):
    """The net's weights equal a fresh net's, and a step gives the fresh net's result."""
    fresh = small_net(engine, **kwargs)
    for a, b in zip(net.get_weights(), fresh.get_weights()):
        assert np.array_equal(a, b), "a failed call changed the weights"
    x, y = good_batch()
    if kwargs.get("loss", "sparse_categorical_crossentropy") != "sparse_categorical_crossentropy":
        y = np.eye(3, dtype=np.float32)[y]
    assert net.train_batch(x, y) == fresh.train_batch(x, y)
    for a, b in zip(net.get_weights(), fresh.get_weights()):
        assert np.array_equal(a, b)


BAD_X = [
    (np.ones((4, 5, 6, 2), complex), TypeError, r"x: expected a real numeric array.*complex"),
    (np.array([["a"]]), TypeError, r"x: expected a real numeric array"),
    (np.empty((4, 5, 6, 2), object), TypeError, r"x: expected a real numeric array"),
    (np.ones((4, 5, 6), np.float32), ValueError, r"x: expected shape \(None, 5, 6, 2\), got \(4, 5, 6\)"),
    (np.ones((4, 6, 5, 2), np.float32), ValueError, r"x: expected shape \(None, 5, 6, 2\), got \(4, 6, 5, 2\)"),
    (np.ones((0, 5, 6, 2), np.float32), ValueError, r"x: expected at least one sample, got an empty batch"),
    (np.ones((9, 5, 6, 2), np.float32), ValueError, r"x: expected a batch of at most 8 samples.*got 9"),
    (np.full((4, 5, 6, 2), np.nan, np.float32), ValueError, r"x: expected finite values, got NaN"),
    (np.full((4, 5, 6, 2), np.inf), ValueError, r"x: expected finite values, got infinity"),
    (np.full((4, 5, 6, 2), 1e300), ValueError,
     r"x: expected finite values, got 1e\+300 \(infinity in float32\) at flat index 0"),
    ("not an array", TypeError, r"x: expected a real numeric array"),
]


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
@pytest.mark.parametrize("engine", C_ENGINES)
@pytest.mark.parametrize("x,error,message", BAD_X)
def test_bad_x_raises_and_leaves_the_net_usable(engine, x, error, message):
    net = small_net(engine)
    y = np.zeros(len(x) if hasattr(x, "__len__") and not isinstance(x, str) else 1, np.int64)
    for call in (lambda: net.train_batch(x, y), lambda: net.compute_gradients(x, y),
                 lambda: net.forward(x)):
        with pytest.raises(error, match=message):
            call()
    if not (isinstance(x, np.ndarray) and x.ndim == 4 and len(x) > 8 and np.isfinite(x).all()):
        with pytest.raises(error, match=message):  # any n is fine for predict and evaluate
            net.predict(x)
    assert_unchanged_and_usable(engine, net)


BAD_LABELS = [
    (np.array([0, 1, 3, 0]), r"y: expected integer class labels in \[0, 3\), got 3 at index 2"),
    (np.array([0, -1, 2, 0]), r"got -1 at index 1"),
    (np.array([0, 1.5, 2, 0]), r"got 1.5 at index 1"),
    (np.array([0, np.nan, 2, 0]), r"got nan at index 1"),
    (np.array([0, 1, 2]), r"y: expected shape \(4,\) or \(4, 1\), got \(3,\)"),
    (np.zeros((4, 3)), r"y: expected shape \(4,\) or \(4, 1\), got \(4, 3\)"),
]


@pytest.mark.parametrize("engine", C_ENGINES)
@pytest.mark.parametrize("y,message", BAD_LABELS)
def test_bad_labels(engine, y, message):
    net = small_net(engine)
    x, _ = good_batch()
    for call in (net.train_batch, net.compute_gradients, net.evaluate):
        with pytest.raises(ValueError, match=message):
            call(x, y)
    assert_unchanged_and_usable(engine, net)


@pytest.mark.parametrize("engine", C_ENGINES)
def test_labels_of_shape_n_1_and_uint8_are_accepted(engine):
    x, y = good_batch()
    a, b = small_net(engine), small_net(engine)
    assert a.train_batch(x, y.reshape(-1, 1).astype(np.uint8)) == b.train_batch(x, y)


@pytest.mark.parametrize("engine", C_ENGINES)
@pytest.mark.parametrize("loss", ["categorical_crossentropy", "binary_crossentropy"])
def test_bad_targets(engine, loss):
    net = small_net(engine, loss=loss)
    x, _ = good_batch()
    with pytest.raises(ValueError, match=r"y: expected shape \(4, 3\), got \(4, 2\)"):
        net.train_batch(x, np.zeros((4, 2)))
    bad = np.zeros((4, 3))
    bad[1, 2] = np.inf
    with pytest.raises(ValueError, match=r"y: expected finite values, got infinity at flat index 5"):
        net.train_batch(x, bad)
    with pytest.raises(TypeError, match=r"y: expected a real numeric array"):
        net.train_batch(x, np.zeros((4, 3), complex))
    assert_unchanged_and_usable(engine, net, loss=loss)


@pytest.mark.parametrize("engine", C_ENGINES)
def test_set_weights_is_all_or_nothing(engine):
    net = small_net(engine)
    good = net.get_weights()
    wrong_shape = [w.copy() for w in good]
    wrong_shape[-1] = np.zeros(4, np.float32)
    with pytest.raises(ValueError, match=r"weights\[3\]: expected shape \(3,\), got \(4,\)"):
        net.set_weights([w + 1 for w in good[:-1]] + wrong_shape[-1:])
    with pytest.raises(ValueError, match=r"weights: expected a list of 4 arrays, got 3"):
        net.set_weights(good[:3])
    nan_then_bad = [w + 1 for w in good]           # NaN is taken (a diverged model's) ...
    nan_then_bad[2][0, 0] = np.nan
    nan_then_bad[3] = np.zeros(4, np.float32)      # ... but not with a bad shape after it
    with pytest.raises(ValueError, match=r"weights\[3\]: expected shape \(3,\), got \(4,\)"):
        net.set_weights(nan_then_bad)
    with pytest.raises(TypeError, match=r"weights\[0\]: expected a real numeric array"):
        net.set_weights([np.zeros((3, 3, 2, 2), complex)] + good[1:])
    assert_unchanged_and_usable(engine, net)
    # a good list round-trips, from float64 too
    net.set_weights([w.astype(np.float64) * 2 for w in good])
    for a, b in zip(net.get_weights(), good):
        assert np.array_equal(a, b * 2)


@pytest.mark.parametrize("engine", C_ENGINES)
def test_backward_errors(engine):
    net = small_net(engine)
    x, _ = good_batch()
    with pytest.raises(ValueError, match="backward needs a training forward"):
        net.backward(np.zeros((4, 3), np.float32))
    net.forward(x, training=True)
    with pytest.raises(ValueError, match=r"dy: expected the batch of the last training forward, 4"):
        net.backward(np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match=r"dy: expected shape \(None, 3\), got \(4, 2\)"):
        net.backward(np.zeros((4, 2), np.float32))
    net.forward(x)  # an inference forward replaces what backward needs
    with pytest.raises(ValueError, match="backward needs a training forward"):
        net.backward(np.zeros((4, 3), np.float32))


def test_unknown_and_unavailable_engines():
    spec = seed_network("tiny_mnist")
    args = (spec["layers"], spec["input_shape"], 4, spec["loss"], spec["optimizer"])
    with pytest.raises(ValueError, match=r"unknown engine 'gpu0': expected one of 'numpy', 'cpu'"):
        make_net("gpu0", *args)
    with pytest.raises(TypeError, match="device"):
        make_net(3, *args)
    for name in ("omp", "cuda", "cudnn"):
        if name not in cnncuda.devices():
            with pytest.raises(cnncuda.EngineUnavailableError, match=name):
                make_net(name, *args)


BAD_SPECS = [
    ([{"kind": "conv2d", "units": 2, "kernel": (7, 7)}], (5, 6, 2),
     r"layer 0 \(conv2d\): kernel 7x7 does not fit the 5x6 input with padding 'valid'"),
    ([{"kind": "dense", "units": 3}], (5, 6, 2),
     r"layer 0 \(dense\) expects a \(batch, features\) input.*add a Flatten"),
    ([{"kind": "flatten"}, {"kind": "conv2d", "units": 2, "kernel": 1}], (5, 6, 2),
     r"layer 1 \(conv2d\) expects an image input"),
    ([{"kind": "activation", "activation": "softmax"}], (5, 6, 2), r"softmax needs a \(batch, features\)"),
    ([{"kind": "activation", "activation": "hard_swish"}], (4,), r"layers\[0\]\['activation'\]: expected one of"),
    ([{"kind": "dropout", "rate": 1.0}], (4,), r"layer 0 \(dropout\): rate must be in \[0, 1\), got 1"),
    ([{"kind": "conv2d", "units": 0, "kernel": 1}], (5, 6, 2), r"filters must be >= 1, got 0"),
    ([{"kind": "conv2d", "units": 2, "kernel": 1, "strides": 0}], (5, 6, 2), r"strides 0x0"),
    ([{"kind": "conv2d", "units": 2, "kernel": 1, "padding": "full"}], (5, 6, 2),
     r"layers\[0\]\['padding'\]: expected 'valid' or 'same', got 'full'"),
    ([{"kind": "lstm"}], (4,), r"layers\[0\]\['kind'\]: expected one of"),
    ([], (4,), r"layers: expected a non-empty list"),
    ([{"kind": "flatten"}], (0, 3, 1), r"input_shape: expected"),
]


@pytest.mark.parametrize("engine", C_ENGINES)
@pytest.mark.parametrize("layers,shape,message", BAD_SPECS)
def test_bad_network_specs(engine, layers, shape, message):
    with pytest.raises(ValueError, match=message):
        make_net(engine, layers, shape, 4, {"kind": "binary_crossentropy"}, {"kind": "adam"})


@pytest.mark.parametrize("engine", C_ENGINES)
def test_bad_loss_and_optimizer(engine):
    layers = [{"kind": "dense", "units": 1}]
    with pytest.raises(ValueError, match=r"loss\['kind'\]: expected one of"):
        make_net(engine, layers, (3,), 4, {"kind": "mse"}, {"kind": "adam"})
    with pytest.raises(ValueError, match=r"optimizer\['kind'\]: expected one of adam, sgd, rmsprop, "
                                         r"adagrad, adadelta, adamax, nadam, adamw, got 'lamb'"):
        make_net(engine, layers, (3,), 4, {"kind": "binary_crossentropy"}, {"kind": "lamb"})
    with pytest.raises(ValueError, match=r"learning_rate must be a finite number >= 0, got -1"):
        make_net(engine, layers, (3,), 4, {"kind": "binary_crossentropy"},
                 {"kind": "adam", "learning_rate": -1})
    with pytest.raises(ValueError, match=r"max_batch must be >= 1, got 0"):
        make_net(engine, layers, (3,), 0, {"kind": "binary_crossentropy"}, {"kind": "adam"})
    net = make_net(engine, layers, (3,), 4, {"kind": "sparse_categorical_crossentropy"},
                   {"kind": "adam"})
    with pytest.raises(ValueError, match="categorical cross-entropy needs at least 2 outputs"):
        net.train_batch(np.zeros((2, 3)), np.zeros(2))
    image = make_net(engine, [{"kind": "conv2d", "units": 2, "kernel": 1}], (3, 3, 1), 4,
                     {"kind": "binary_crossentropy"}, {"kind": "adam"})
    # an image output takes the loss along its last axis at every pixel (Keras's)
    with pytest.raises(ValueError, match=r"y: expected 2 samples of 18 targets each \(the "
                                         r"output's 9 positions\), got shape \(2, 1\)"):
        image.train_batch(np.zeros((2, 3, 3, 1)), np.zeros((2, 1)))
    assert np.isfinite(image.train_batch(np.zeros((2, 3, 3, 1)), np.zeros((2, 3, 3, 2)))[0])
    assert image.forward(np.ones((2, 3, 3, 1))).shape == (2, 3, 3, 2)


@pytest.mark.parametrize("engine", C_ENGINES)
@pytest.mark.parametrize("name", ["cifar10_cnn", "tiny_mnist"])
def test_inputs_are_never_modified(engine, name):
    spec = seed_network(name)
    net = make_net(engine, spec["layers"], spec["input_shape"], 32, spec["loss"], spec["optimizer"])
    x, y = synthetic_data(name, 40)
    weights = [w * 0.5 for w in net.get_weights()]
    copies = [a.copy() for a in [x, y] + weights]
    net.set_weights(weights)
    net.train_batch(x[:32], y[:32])
    net.compute_gradients(x[:32], y[:32])
    out = net.forward(x[:32], training=True)
    net.backward(np.ones_like(out))
    net.evaluate(x, y)
    net.predict(x)
    for a, b in zip([x, y] + weights, copies):
        assert np.array_equal(a, b)


def test_build_info_and_devices():
    info = cnncuda.build_info()
    assert {"version", "features", "engines", "summary", "gemm"} <= set(info)
    assert "cpu" in info["features"] and "cpu" in info["engines"]
    assert info["gemm"] in ("avx2", "portable")
    assert cnncuda.devices()[:2] == ["numpy", "cpu"]
    assert isinstance(cnncuda.cuda_devices(), list)
    if "cuda-runtime" not in info["features"]:
        assert cnncuda.cuda_devices() == []


def test_cuda_compute_capabilities():
    """One (major, minor) pair of ints per device cuda_devices() names; none
    in a CPU-only build or without a GPU (here, usually)."""
    caps = cnncuda.cuda_compute_capabilities()
    assert isinstance(caps, list) and "cuda_compute_capabilities" in cnncuda.__all__
    names = cnncuda.cuda_devices()
    assert len(caps) == len(names)
    if not names:
        assert caps == []
    if "cuda-runtime" not in cnncuda.build_info()["features"]:
        assert caps == []
    for cap in caps:
        assert isinstance(cap, tuple) and len(cap) == 2, cap
        assert all(type(v) is int for v in cap), cap
        assert cap >= (3, 0), cap  # every GPU the CUDA runtime still supports
