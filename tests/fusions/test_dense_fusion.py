"""Dense layers with the activation after them, on every engine against the
NumPy reference, and on the cuda engine with the dense fusions on and off.

The cuda engine fuses around its dense layers (cnn.h: dense_forward_relu,
activation_backward_bias, dense_loss_head's db_below):
- a ReLU after a dense layer is applied by the forward GEMM as it stores y
  (after the bias; in the split-K sum where the product is split; without a
  bias it stays a pass of its own, dense.cu says why);
- a dense layer's bias gradient is summed in the launch of the backward of
  the activation after it (ReLU, sigmoid, tanh, softmax; the softmax's over
  more than 64 rows falls back to two launches), or, where the training head
  (dense_head.cu) runs that activation's backward (the ReLU before the last
  dense layer) or the layer below the head is the dense layer itself, by the
  head's backward kernel: no column-sums launch of its own.
The other engines run the layers apart. Fused, the bits must be those of the
layers run apart (CNNCUDA_FUSE_DENSE=0, or CNNCUDA_FUSE=0 for every fusion,
read when a Net is made); and every engine stays within the op tests'
tolerance of the reference (the bias gradients especially: column sums of the
activation's input gradient).

Odd unit counts (1, 7, 65, 130: one, part of one, and several 32-column
blocks of the fused backward; the head's db_below blocks take 1 to 8
columns), batches of 1, 7 and 33 rows (and 70: more than the fused
softmax's 64 rows; 225 to 2048 through the head: more than its 224-row
passes), dense layers with and without a bias, the activation inside the
network and as its output, networks where the training head applies
(LeNet-5's and CIFAR's tails) and where it does not (a last layer of more
than 64 units, a binary crossentropy).
"""
import numpy as np
import pytest

from cnncuda.engine import make_net
from conftest import ADAM, C_ENGINES, SPARSE_LOGITS, engine_params, run_both, train_seed_epochs

CUDA = engine_params(("cuda",))  # the fused entries are the cuda engine's alone
ACTIVATIONS = ["relu", "sigmoid", "tanh", "softmax", "linear"]

CATEGORICAL_PROBS = {"kind": "categorical_crossentropy", "from_logits": False}
BINARY = {"kind": "binary_crossentropy", "from_logits": False}


def dense(units, use_bias=True):
    return {"kind": "dense", "units": units, "use_bias": use_bias}


def act(name):
    return {"kind": "activation", "activation": name}


@pytest.mark.parametrize("engine", C_ENGINES)
@pytest.mark.parametrize("units", [1, 7, 65, 130])
@pytest.mark.parametrize("n", [1, 7, 33])
@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("use_bias", [True, False])
def test_dense_then_activation_against_reference(engine, units, n, activation, use_bias):
    # dense + activation + dense through a backward from a given dy (no
    # head): the activation's backward gives the first layer's bias gradient
    # on the cuda engine; gradient 1 is that bias
    layers = [dense(units, use_bias), act(activation), dense(4)]
    net, _ = run_both(engine, layers, (19,), n=n, rtol=1e-4, atol=1e-4)
    # larger weights and nonzero biases: more ReLUs off, sigmoids and tanhs
    # saturating
    rng = np.random.default_rng(5)
    w = [a + rng.standard_normal(a.shape).astype(np.float32) for a in net.get_weights()]
    run_both(engine, layers, (19,), n=n, rtol=1e-4, atol=1e-4, weights=w)


@pytest.mark.parametrize("engine", C_ENGINES)
@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("units,n", [(65, 33), (130, 7), (1100, 5)])
def test_activation_as_the_output_against_reference(engine, activation, units, n):
    # the activation is the network's output (dy from the test); 1100
    # columns: more than the fused softmax block's 1024 threads
    layers = [dense(units), act(activation)]
    run_both(engine, layers, (11,), n=n, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("engine", C_ENGINES)
@pytest.mark.parametrize("n", [64, 65, 70])
def test_softmax_bias_gradient_around_its_one_block_limit(engine, n):
    # the cuda engine's fused softmax backward takes at most 64 rows in one
    # block; more run the softmax backward and the column sums apart
    layers = [dense(9), act("softmax"), dense(3)]
    run_both(engine, layers, (6,), n=n, rtol=1e-4, atol=1e-4)


# Training steps (train_pass: the head where plan_head takes it). Name ->
# (input shape, layers, loss). Where the head applies: LeNet-5's dense tail
# (Dense(120) + ReLU fused both ways; Dense(84)'s ReLU backward in the head,
# its bias gradient the head's db_below), CIFAR's (1024 -> 64: a split-K
# forward whose ReLU is applied in the slices' sum; the head's db_below), a
# dense layer right below the head (db_below without a ReLU), a dense layer
# without a bias below the head's ReLU (no db_below), a dropout between a
# ReLU and the head, sigmoid and tanh below the head. Where it does not: a
# last dense layer of 65 units, a softmax of 70 classes fused into the loss
# (its dense layer's bias gradient stays a column sum), a binary
# crossentropy (sigmoid's backward gives the last dense layer's db).
STEPS = {
    "lenet_tail": ((400,), [dense(120), act("relu"), dense(84), act("relu"), dense(10)],
                   SPARSE_LOGITS),
    "cifar_tail": ((1024,), [dense(64), act("relu"), dense(10)], SPARSE_LOGITS),
    "dense_below_head": ((23,), [dense(37), dense(10), act("softmax")], CATEGORICAL_PROBS),
    "no_bias_below_head": ((1024,), [dense(64, False), act("relu"), dense(10, False), act("relu"),
                                     dense(3)], SPARSE_LOGITS),
    "dropout_below_head": ((23,), [dense(30), act("relu"), {"kind": "dropout", "rate": 0.25},
                                   dense(7), act("sigmoid"), dense(5), act("tanh"), dense(6)],
                           SPARSE_LOGITS),
    "no_head_wide": ((19,), [dense(130), act("relu"), dense(65, False), act("relu"), dense(7),
                             act("tanh"), dense(33), act("softmax"), dense(65)], SPARSE_LOGITS),
    "no_head_softmax_loss": ((19,), [dense(40), act("relu"), dense(70), act("softmax")],
                             CATEGORICAL_PROBS),
    "no_head_binary": ((23,), [dense(64), act("relu"), dense(1), act("sigmoid")], BINARY),
}


def targets(loss, n, k, rng):
    if loss["kind"] == "sparse_categorical_crossentropy":
        return rng.integers(0, k, n).astype(np.int32)
    if loss["kind"] == "binary_crossentropy":
        return (rng.random((n, k)) < 0.5).astype(np.float32)
    return np.eye(k, dtype=np.float32)[rng.integers(0, k, n)]


def out_units(layers):
    return [s for s in layers if s["kind"] == "dense"][-1]["units"]


def step_gradients(engine, name, n, seed=3):
    shape, layers, loss = STEPS[name]
    net = make_net(engine, layers, shape, max(n, 1), loss, ADAM, seed=7)
    rng = np.random.default_rng(seed)
    # larger weights and nonzero biases (they start at zero): ReLUs off in
    # places, every bias added
    w = [a + 0.5 * rng.standard_normal(a.shape).astype(np.float32) for a in net.get_weights()]
    net.set_weights(w)
    x = rng.standard_normal((n,) + shape).astype(np.float32)
    y = targets(loss, n, out_units(layers), rng)
    sums = net.compute_gradients(x, y)
    return sums, net.get_gradients()


@pytest.mark.parametrize("engine", C_ENGINES)
@pytest.mark.parametrize("name", sorted(STEPS))
@pytest.mark.parametrize("n", [1, 7, 33, 70])
def test_training_step_gradients_against_reference(engine, name, n):
    """compute_gradients (the head where it applies, the fused bias
    gradients below it) against the numpy engine."""
    sums, got = step_gradients(engine, name, n)
    ref_sums, ref = step_gradients("numpy", name, n)
    np.testing.assert_allclose(sums, ref_sums, rtol=1e-4, atol=1e-4)
    assert len(got) == len(ref)
    for i, (a, b) in enumerate(zip(got, ref)):
        scale = max(float(np.max(np.abs(b))), 1e-3)
        assert np.max(np.abs(a - b)) <= 1e-4 * scale + 1e-6, "gradient %d of %s" % (i, name)


def train(device, name, fuse, n, monkeypatch, max_batch=70):
    """3 train_batch steps, the gradients, predict, and a user backward's
    input gradient (every layer's backward, no head) with the dense fusions
    `fuse`: "1" on, "dense0" CNNCUDA_FUSE_DENSE=0, "all0" CNNCUDA_FUSE=0."""
    monkeypatch.setenv("CNNCUDA_FUSE", "0" if fuse == "all0" else "1")
    monkeypatch.setenv("CNNCUDA_FUSE_DENSE", "0" if fuse == "dense0" else "1")
    shape, layers, loss = STEPS[name]
    net = make_net(device, layers, shape, max_batch, loss, ADAM, seed=3)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n,) + shape).astype(np.float32)
    y = targets(loss, n, out_units(layers), rng)
    for _ in range(3):
        net.train_batch(x, y)
    grads = net.get_gradients()
    net.forward(x, training=True)
    dx = net.backward(rng.standard_normal((n, out_units(layers))).astype(np.float32))
    return net.get_weights() + grads + [net.predict(x), dx]


@pytest.mark.parametrize("engine", CUDA)
@pytest.mark.parametrize("name", sorted(STEPS))
@pytest.mark.parametrize("n", [1, 7, 32, 33, 64, 70])
def test_gpu_dense_fusion_same_bits(monkeypatch, engine, name, n):
    """Fused (the ReLU in the dense GEMM's store, the bias gradient in the
    activation's backward or the head's) gives the bits of the layers run
    apart, through the head and not; and two fused runs give the same bits
    (deterministic)."""
    fused = train(engine, name, "1", n, monkeypatch)
    again = train(engine, name, "1", n, monkeypatch)
    dense_apart = train(engine, name, "dense0", n, monkeypatch)
    all_apart = train(engine, name, "all0", n, monkeypatch)
    assert len(fused) == len(dense_apart) == len(all_apart)
    for i, (a, b, c, d) in enumerate(zip(fused, again, dense_apart, all_apart)):
        assert a.tobytes() == b.tobytes(), "array %d differs between two fused runs" % i
        assert a.tobytes() == c.tobytes(), "array %d differs fused and CNNCUDA_FUSE_DENSE=0" % i
        assert a.tobytes() == d.tobytes(), "array %d differs fused and CNNCUDA_FUSE=0" % i


@pytest.mark.parametrize("engine", CUDA)
@pytest.mark.parametrize("name", ["cifar_tail", "dense_below_head", "lenet_tail",
                                  "no_bias_below_head"])
@pytest.mark.parametrize("n", [224, 225, 449, 1031, 2048])
def test_gpu_head_db_below_same_bits_at_large_batches(monkeypatch, engine, name, n):
    """The head's db_below at large batches (its 224-row passes: one whole,
    one and a row, two and a row, several) is still the bits of the column
    sums run apart, and its dx those of the ReLU's backward run apart: the
    same arrays as test_gpu_dense_fusion_same_bits, on the default SGEMM."""
    fused = train(engine, name, "1", n, monkeypatch, max_batch=n)
    dense_apart = train(engine, name, "dense0", n, monkeypatch, max_batch=n)
    all_apart = train(engine, name, "all0", n, monkeypatch, max_batch=n)
    for i, (a, c, d) in enumerate(zip(fused, dense_apart, all_apart)):
        assert a.tobytes() == c.tobytes(), "array %d differs fused and CNNCUDA_FUSE_DENSE=0" % i
        assert a.tobytes() == d.tobytes(), "array %d differs fused and CNNCUDA_FUSE=0" % i


@pytest.mark.parametrize("engine", CUDA)
@pytest.mark.parametrize("name", sorted(STEPS))
def test_gpu_dense_fusion_recorded_steps(monkeypatch, engine, name):
    """train_range's recorded steps (and their early launch) with the fused
    dense entries: the bits of the same epoch with the dense fusions off,
    one kernel at a time."""
    shape, layers, loss = STEPS[name]
    rng = np.random.default_rng(4)
    x = rng.standard_normal((96,) + shape).astype(np.float32)
    y = targets(loss, 96, out_units(layers), rng)

    def epoch(fuse, graphs):
        monkeypatch.setenv("CNNCUDA_FUSE_DENSE", "1" if fuse else "0")
        monkeypatch.setenv("CNNCUDA_GRAPHS", "1" if graphs else "0")
        net = make_net(engine, layers, shape, 32, loss, ADAM, seed=5)
        net.set_data(x, y)
        net.set_order(np.arange(96)[::-1].copy())
        net.train_range(0, 96, 32)
        return [np.asarray(net.read_sums(reset=True), dtype=np.float64)] + net.get_weights()

    recorded = epoch(True, True)
    eager = epoch(False, False)
    for i, (a, b) in enumerate(zip(recorded, eager)):
        assert a.tobytes() == b.tobytes(), "array %d differs" % i


@pytest.mark.parametrize("engine", CUDA)
@pytest.mark.parametrize("model", ["lenet5", "cifar10_cnn", "binary_100"])
def test_gpu_seed_networks_same_bits_fused_or_not(monkeypatch, engine, model):
    """The seeds whose dense layers fuse: LeNet-5 (the head and two fused
    dense layers), CIFAR-10 (the head and one), binary_100 (no head: a
    binary crossentropy). Two epochs of train_range, recorded: the loss sums
    and weights of the dense fusions on and off, bit for bit, and on equal
    to the same run one kernel at a time."""
    def run(fuse, graphs=True):
        monkeypatch.setenv("CNNCUDA_FUSE_DENSE", "1" if fuse else "0")
        monkeypatch.setenv("CNNCUDA_GRAPHS", "1" if graphs else "0")
        return train_seed_epochs(engine, model, 32, 256, net_seed=2, data_seed=4)

    s1, w1 = run(True)
    s0, w0 = run(False)
    s2, w2 = run(True, graphs=False)
    assert s1 == s0 == s2
    for i, (a, b, c) in enumerate(zip(w1, w0, w2)):
        assert a.tobytes() == b.tobytes(), "weight %d differs fused and apart" % i
        assert a.tobytes() == c.tobytes(), "weight %d differs recorded and eager" % i


@pytest.mark.parametrize("engine", CUDA)
@pytest.mark.parametrize("model,per_step", [("lenet5", 2), ("cifar10_cnn", 1), ("tiny_mnist", 0)])
def test_gpu_fused_steps_launch_no_column_sums(monkeypatch, engine, model, per_step):
    """The launches the dense fusions remove, counted by the PyTorch profiler
    (CUPTI sees every kernel in the process) over two steps run one kernel
    at a time: the seed's `per_step` column_sums and ReLU act_forward
    launches (LeNet-5: Dense(120)'s and Dense(84)'s; CIFAR-10: Dense(64)'s;
    tiny MNIST: none) with CNNCUDA_FUSE_DENSE=0, none fused, where a ReLU or
    the head's backward kernel sums the bias gradient instead."""
    pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile
    from cnncuda.seeds import seed_network, synthetic_data

    def counts(fuse):
        monkeypatch.setenv("CNNCUDA_FUSE_DENSE", fuse)
        monkeypatch.setenv("CNNCUDA_GRAPHS", "0")
        s = seed_network(model)
        net = make_net(engine, s["layers"], s["input_shape"], 32, s["loss"], s["optimizer"])
        x, y = synthetic_data(model, 64)
        net.set_data(x, y)
        net.set_order(np.arange(64))
        net.train_range(0, 64, 32)  # warm: the first steps of a batch size
        net.read_sums()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            net.train_range(0, 64, 32)
            net.read_sums()
        found = {"column_sums_kernel": 0, "act_forward_kernel": 0, "act_backward_bias_kernel": 0}
        for e in prof.key_averages():
            for name in found:
                if name in e.key:
                    found[name] += e.count
        return found

    fused, apart = counts("1"), counts("0")
    assert apart["column_sums_kernel"] == 2 * per_step, apart
    assert apart["act_forward_kernel"] == 2 * per_step, apart
    assert apart["act_backward_bias_kernel"] == 0, apart
    assert fused["column_sums_kernel"] == 0, fused
    assert fused["act_forward_kernel"] == 0, fused
    # LeNet-5's Dense(120) ReLU backward sums its db; the others' dense
    # layers below the head have theirs summed by the head
    assert fused["act_backward_bias_kernel"] == (2 if model == "lenet5" else 0), fused
