"""The edges of a training step of train_range: the resident images kept
NCHW and gathered with their labels in one op that also moves the counters
on (cnn.h gather_batch), the loss sums added in a fixed order (no float
atomics on the GPU), and on the cuda engine the last softmax layer run inside
the loss (softmax_loss_forward_backward; CNNCUDA_FUSE_SOFTMAX=0 runs them
apart). Every engine runs these; the GPU engines carry the gpu marker."""
import numpy as np
import pytest

from cnncuda import reference as ref
from cnncuda.engine import make_net
from cnncuda.seeds import seed_network, synthetic_data
from conftest import ADAM, C_ENGINES, assert_close, engine_params, train_seed_epochs

ENGINES = C_ENGINES + ["numpy"]

# two-channel images (NHWC != NCHW), dropout on images and features (its
# masks are keyed by the forward counter the gather moves on), a softmax
# with categorical cross-entropy from probabilities (fused on cuda)
DROPOUT_SOFTMAX = [
    {"kind": "conv2d", "units": 4, "kernel": (3, 3), "padding": "same"},
    {"kind": "activation", "activation": "relu"},
    {"kind": "dropout", "rate": 0.25},
    {"kind": "maxpool", "kernel": (2, 2)},
    {"kind": "flatten"},
    {"kind": "dense", "units": 9},
    {"kind": "dropout", "rate": 0.5},
    {"kind": "dense", "units": 5},
    {"kind": "activation", "activation": "softmax"},
]
SHAPE = (7, 6, 2)
CCE = {"kind": "categorical_crossentropy", "from_logits": False}
SPARSE_PROBS = {"kind": "sparse_categorical_crossentropy", "from_logits": False}


def images(n, shape, seed):
    return np.random.default_rng(seed).standard_normal((n,) + shape).astype(np.float32)


def targets_for(loss, labels, k):
    if loss["kind"] == "sparse_categorical_crossentropy":
        return labels.astype(np.int32)
    return np.eye(k, dtype=np.float32)[labels]


def model(name):
    """(layers, input shape, loss, x, y) of a seed or of DROPOUT_SOFTMAX."""
    if name == "dropout_softmax":
        n = 45
        labels = np.random.default_rng(7).integers(0, 5, n)
        return DROPOUT_SOFTMAX, SHAPE, CCE, images(n, SHAPE, 3), targets_for(CCE, labels, 5)
    s = seed_network(name)
    x, y = synthetic_data(name, 45, seed=2)
    return s["layers"], s["input_shape"], s["loss"], x, y


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", ["cifar10_cnn", "tiny_mnist", "dropout_softmax"])
def test_resident_steps_equal_fed_steps(engine, name):
    """An epoch of train_range (a replayed step on the GPU engines, and a
    partial last batch that gathers the order's last rows) against
    train_batch on the same rows: the same bits, step by step at the
    epoch's end. cifar10_cnn's 3 channels and dropout_softmax's 2 make the
    resident NCHW copy differ from the user's NHWC rows."""
    layers, shape, loss, x, y = model(name)
    n = len(x)
    order = np.random.default_rng(5).permutation(n)
    order[-1], order[np.argmax(order == n - 1)] = n - 1, order[-1]  # the last row, last
    resident = make_net(engine, layers, shape, 8, loss, ADAM, seed=4)
    fed = make_net(engine, layers, shape, 8, loss, ADAM, seed=4)
    resident.set_data(x, y)
    resident.set_order(order)
    resident.train_range(0, 32, 8)  # 4 steps: recorded and replayed on the GPU engines
    want = 0.0
    for at in range(0, 32, 8):
        want += fed.train_batch(x[order[at:at + 8]], y[order[at:at + 8]])[0]
    assert_close(resident.read_sums(reset=True)[0], want, 1e-5, 0, "loss sum of 4 steps")
    for at, count in ((32, 8), (40, 5)):  # the last full batch, then the partial one
        resident.train_range(at, count, 8)
        got = resident.read_sums(reset=True)
        idx = order[at:at + count]
        assert got == fed.train_batch(x[idx], y[idx]), "step at %d" % at
    for i, (a, b) in enumerate(zip(resident.get_weights(), fed.get_weights())):
        np.testing.assert_array_equal(a, b, err_msg="weight %d" % i)
    assert resident.steps == fed.steps == 6
    assert resident.training_forwards == fed.training_forwards == 6


LABEL_DTYPES = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
                np.uint64, np.float32, np.float64]


@pytest.mark.parametrize("engine", ENGINES)
def test_labels_of_every_dtype_train_alike(engine):
    """Sparse labels in every dtype the binding takes, as (n,) or (n, 1),
    and one-hot targets in float32 or float64: the same weights as int32
    labels."""
    s = seed_network("lenet5")
    x, y = synthetic_data("lenet5", 40, seed=1)
    order = np.random.default_rng(2).permutation(40)

    def run(labels, layers=s["layers"], loss=s["loss"]):
        net = make_net(engine, layers, s["input_shape"], 16, loss, ADAM, seed=1)
        net.set_data(x, labels)
        net.set_order(order)
        net.train_range(0, 40, 16)  # 16, 16, 8
        return net.read_sums(), net.get_weights()

    sums, weights = run(y.astype(np.int32))
    for dtype in LABEL_DTYPES:
        for labels in (y.astype(dtype), y.astype(dtype).reshape(-1, 1)):
            got_sums, got = run(labels)
            assert got_sums == sums, dtype
            for a, b in zip(got, weights):
                np.testing.assert_array_equal(a, b, err_msg=str(dtype))
    # softmax + categorical targets from probabilities: float64 targets = float32 ones
    layers = s["layers"] + [{"kind": "activation", "activation": "softmax"}]
    onehot = np.eye(10)[y]
    sums32, w32 = run(onehot.astype(np.float32), layers, CCE)
    sums64, w64 = run(onehot.astype(np.float64), layers, CCE)
    assert sums32 == sums64
    for a, b in zip(w32, w64):
        np.testing.assert_array_equal(a, b)


def train_sums(engine, name, batch, monkeypatch, graphs=True, images_n=300, epochs=2):
    monkeypatch.setenv("CNNCUDA_GRAPHS", "1" if graphs else "0")
    return train_seed_epochs(engine, name, batch, images_n, net_seed=9, data_seed=3,
                             epochs=epochs)


@pytest.mark.parametrize("engine", C_ENGINES)
@pytest.mark.parametrize("name,batch", [("tiny_mnist", 33), ("tiny_mnist", 136),
                                        ("cifar10_cnn", 7), ("lenet5", 300)])
def test_loss_sums_same_bits_every_run(engine, name, batch, monkeypatch):
    """The running loss and accuracy sums of whole epochs: the same bits run
    to run, and replayed or one kernel at a time. Batches of 136 and 300
    rows take 17 and 38 blocks of the GPU's loss kernel (8 rows a block),
    whose sums the last block adds in block order; 33 and 7 leave a partial
    last batch (300 % 33, 300 % 7)."""
    first, w_first = train_sums(engine, name, batch, monkeypatch)
    again, w_again = train_sums(engine, name, batch, monkeypatch)
    eager, w_eager = train_sums(engine, name, batch, monkeypatch, graphs=False)
    assert first == again == eager
    for a, b, c in zip(w_first, w_again, w_eager):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)


def softmax_outputs_and_targets(kind, n, k, rng):
    """Logits (n, k) with a row whose softmax is clipped at the top (a
    dominant logit: q = 1 in float32) and one clipped at the bottom at its
    target (q < 1e-7), and targets (soft ones too for categorical)."""
    z = (rng.standard_normal((n, k)) * 3).astype(np.float32)
    labels = rng.integers(0, k, size=n)
    if n > 1:
        z[0, labels[0]] = 40.0                # right and certain: no gradient at all
        z[1, :] = 0.0
        z[1, labels[1]] = -30.0               # its target's q is clipped
    if kind == "sparse_categorical_crossentropy":
        return z, labels
    t = np.eye(k)[labels]
    if n > 2:
        t[2] = rng.random(k)                  # a soft target
    return z, t


@pytest.mark.parametrize("engine", C_ENGINES)
@pytest.mark.parametrize("kind", ["sparse_categorical_crossentropy", "categorical_crossentropy"])
@pytest.mark.parametrize("n", [1, 7, 33])
@pytest.mark.parametrize("k", [2, 3, 10, 37])
def test_softmax_loss_matches_reference(engine, kind, n, k, monkeypatch):
    """A softmax as the last layer, the loss from probabilities: observed
    through a bias-free Dense layer fed the identity (its kernel is the
    softmax's input, its kernel's gradient the gradient there; cf.
    test_losses_and_optimizers.py). Against the reference's softmax, loss
    and both backwards in float64: rtol 1e-5, atol 1e-6. On cuda the fused
    kernel against the two ops apart: the same loss and correct count (the
    same softmax bits, the same loss expression), the gradient close."""
    rng = np.random.default_rng(100 * n + k)
    z, t = softmax_outputs_and_targets(kind, n, k, rng)
    loss = {"kind": kind, "from_logits": False}
    layers = [{"kind": "dense", "units": k, "use_bias": False},
              {"kind": "activation", "activation": "softmax"}]
    eye = np.eye(n, dtype=np.float32)
    results = {}
    for fused in ("1", "0"):
        monkeypatch.setenv("CNNCUDA_FUSE_SOFTMAX", fused)
        net = make_net(engine, layers, (n,), n, loss, ADAM)
        net.set_weights([z])
        sums = net.compute_gradients(eye, t)
        results[fused] = sums, net.get_gradients()[0], net.forward(eye, training=False)
    y = ref.activation_forward(z.astype(np.float64), "softmax")
    want_sum, want_correct, dy = ref.loss_forward_backward(kind, y, t, from_logits=False)
    want_grad = ref.activation_backward(y, dy, "softmax")
    (loss_sum, correct), grad, out = results["1"]
    assert_close(loss_sum, want_sum, 1e-5, 1e-6, "loss sum")
    assert correct == want_correct
    assert_close(grad, want_grad, 1e-5, 1e-6, "gradient")
    assert_close(out, y, 1e-6, 1e-7, "softmax output")
    if n > 1:
        assert np.all(grad[0] == 0.0), "a clipped certain row has no gradient"
    (plain_sum, plain_correct), plain_grad, _ = results["0"]
    assert correct == plain_correct
    if kind == "sparse_categorical_crossentropy":
        assert loss_sum == plain_sum
    else:
        assert_close(loss_sum, plain_sum, 1e-6, 0, "loss sum, fused or not")
    assert_close(grad, plain_grad, 1e-5, 1e-7, "gradient, fused or not")


@pytest.mark.parametrize("engine", engine_params(("cuda", "cudnn")))
@pytest.mark.parametrize("name,batch,count", [("tiny_mnist", 8, 1), ("tiny_mnist", 33, 31),
                                              ("dropout_softmax", 8, 5), ("cifar10_cnn", 40, 13)])
def test_gpu_partial_batch_gradients_match_the_cpu_engine(engine, name, batch, count):
    """A range of one partial batch (count < batch rows, the order's last)
    from the same weights: the loss sums within rtol 1e-5 and the gradients
    within rtol 1e-4 (atol 1e-6) of the cpu engine's, as
    test_gpu_training.py's one-step test."""
    layers, shape, loss, x, y = model(name)
    order = np.random.default_rng(6).permutation(len(x))
    start = len(x) - count
    nets = {}
    for e in (engine, "cpu"):
        net = make_net(e, layers, shape, batch, loss, ADAM, seed=8)
        net.set_data(x, y)
        net.set_order(order)
        net.train_range(start, count, batch)
        nets[e] = net
    gpu, cpu = nets[engine], nets["cpu"]
    np.testing.assert_allclose(gpu.read_sums(), cpu.read_sums(), rtol=1e-5)
    for i, (a, b) in enumerate(zip(gpu.get_gradients(), cpu.get_gradients())):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6, err_msg="gradient %d" % i)


FLATTEN_NETS = {
    # conv output (3, 3, 5) flattened into a dense layer: the kernel's rows permuted
    "conv_flatten_dense": [{"kind": "conv2d", "units": 5, "kernel": (3, 3)},
                           {"kind": "activation", "activation": "relu"},
                           {"kind": "flatten"}, {"kind": "dense", "units": 4}],
    # the input itself flattened (3 channels): the dense layer reads net->x
    "flatten_first": [{"kind": "flatten"}, {"kind": "dense", "units": 6},
                      {"kind": "activation", "activation": "tanh"}, {"kind": "dense", "units": 4}],
    # a Flatten before dropout keeps its transpose (the masks are NHWC-numbered)
    "flatten_dropout": [{"kind": "conv2d", "units": 3, "kernel": (2, 2)}, {"kind": "flatten"},
                        {"kind": "dropout", "rate": 0.3}, {"kind": "dense", "units": 4}],
}


@pytest.mark.parametrize("engine", C_ENGINES)
@pytest.mark.parametrize("name", sorted(FLATTEN_NETS))
def test_flatten_before_dense_is_free(engine, name, monkeypatch):
    """A Flatten before a Dense layer is no op (the dense kernel's rows kept
    in NCHW order, exchanged in Keras's) against the transposing Flatten
    (CNNCUDA_FUSE_FLATTEN=0): weights, optimizer state and gradients in
    Keras's layout within rounding (the dense product sums its inputs in
    another order), the input gradient too, and set/get round trips exact."""
    shape = (5, 5, 3)
    rng = np.random.default_rng(11)
    x = rng.standard_normal((6,) + shape).astype(np.float32)
    y = rng.integers(0, 4, 6).astype(np.int32)
    out = {}
    for fuse in ("1", "0"):
        monkeypatch.setenv("CNNCUDA_FUSE_FLATTEN", fuse)
        net = make_net(engine, FLATTEN_NETS[name], shape, 6,
                       {"kind": "sparse_categorical_crossentropy", "from_logits": True}, ADAM,
                       seed=2)
        weights = [rng.standard_normal(w.shape).astype(np.float32) for w in net.get_weights()]
        net.set_weights(weights)
        for a, b in zip(net.get_weights(), weights):
            assert np.array_equal(a, b), "set_weights then get_weights"
        for _ in range(2):
            net.train_batch(x, y)
        state = net.get_optimizer_state()
        net.set_optimizer_state(state)
        for slots, again in zip(state["slots"], net.get_optimizer_state()["slots"]):
            for a, b in zip(slots, again):
                assert np.array_equal(a, b), "optimizer state round trip"
        loss = net.compute_gradients(x, y)
        grads = net.get_gradients()
        net.forward(x, training=True)
        dx = net.backward(np.ones((6, 4), np.float32))
        out[fuse] = loss, grads, state, dx, net.get_weights()
        rng = np.random.default_rng(11)  # the same draws for the second net
        rng.standard_normal((6,) + shape)
        rng.integers(0, 4, 6)
    (l1, g1, s1, dx1, w1), (l0, g0, s0, dx0, w0) = out["1"], out["0"]
    assert_close(l1[0], l0[0], 1e-5, 1e-6, "loss")
    for i, (a, b) in enumerate(zip(g1, g0)):
        assert_close(a, b, 1e-4, 1e-5, "gradient %d" % i)
    for i, (a, b) in enumerate(zip(w1, w0)):
        assert_close(a, b, 1e-4, 1e-5, "weight %d" % i)
    for slots_a, slots_b in zip(s1["slots"], s0["slots"]):
        for a, b in zip(slots_a, slots_b):
            assert_close(a, b, 1e-3, 1e-6, "optimizer slot")
    assert_close(dx1, dx0, 1e-4, 1e-5, "input gradient")
