"""Losses, accuracy and optimizers on every C engine against the reference.

A loss is observed through a bias-free Dense layer fed the identity matrix:
its output is its kernel W, so the kernel's gradient is exactly the loss's
gradient with respect to the network output, for any output values we set
(logits, or probabilities for the from-probabilities forms).
Tolerance: rtol 1e-5, atol 1e-6 (float32 against float64).
"""
import numpy as np
import pytest

from cnncuda import reference as ref
from cnncuda.engine import make_net
from conftest import ADAM, C_ENGINES, assert_close

LOSSES = ["sparse_categorical_crossentropy", "categorical_crossentropy", "binary_crossentropy"]


def outputs_and_targets(kind, from_logits, n, k, rng):
    if from_logits:
        y = rng.standard_normal((n, k)) * 3
    elif kind == "binary_crossentropy":
        y = rng.random((n, k))
        y[0, 0] = 1e-9          # clipped: no gradient there
    else:
        y = rng.random((n, k)) + 0.05
        y /= y.sum(axis=1, keepdims=True)
    if kind == "sparse_categorical_crossentropy":
        t = rng.integers(0, k, size=n)
    elif kind == "categorical_crossentropy":
        t = np.eye(k)[rng.integers(0, k, size=n)]
        t[1] = rng.random(k)    # soft targets too
    else:
        t = (rng.random((n, k)) > 0.5).astype(np.float64)
        t[2, 0] = 0.3           # a soft binary target
    return y.astype(np.float32), t


@pytest.mark.parametrize("engine", C_ENGINES)
@pytest.mark.parametrize("kind", LOSSES)
@pytest.mark.parametrize("from_logits", [True, False])
@pytest.mark.parametrize("k", [1, 2, 10])
def test_loss_value_gradient_and_accuracy(engine, kind, from_logits, k):
    if kind != "binary_crossentropy" and k == 1:
        pytest.skip("categorical losses need two or more classes")
    n = 6
    rng = np.random.default_rng(k)
    y, t = outputs_and_targets(kind, from_logits, n, k, rng)
    loss = {"kind": kind, "from_logits": from_logits}
    net = make_net(engine, [{"kind": "dense", "units": k, "use_bias": False}], (n,), n, loss, ADAM)
    net.set_weights([y])
    loss_sum, correct = net.compute_gradients(np.eye(n, dtype=np.float32), t)
    want_sum, want_correct, want_grad = ref.loss_forward_backward(
        kind, y.astype(np.float64), t, from_logits)
    assert_close(loss_sum, want_sum, 1e-5, 1e-6, "loss sum")
    assert_close(correct, want_correct, 0, 1e-6, "correct")
    assert_close(net.get_gradients()[0], want_grad, 1e-5, 1e-6, "gradient")
    # evaluate gives the same sums without a gradient
    e_sum, e_correct = net.evaluate(np.eye(n, dtype=np.float32), t)
    assert_close(e_sum, want_sum, 1e-5, 1e-6, "evaluate loss")
    assert_close(e_correct, want_correct, 0, 1e-6, "evaluate correct")


@pytest.mark.parametrize("engine", C_ENGINES)
def test_loss_is_stable_for_extreme_logits(engine):
    n, k = 2, 3
    y = np.array([[1000.0, -1000.0, 0.0], [-80.0, 80.0, 79.0]], np.float32)
    loss = {"kind": "sparse_categorical_crossentropy", "from_logits": True}
    net = make_net(engine, [{"kind": "dense", "units": k, "use_bias": False}], (n,), n, loss, ADAM)
    net.set_weights([y])
    loss_sum, correct = net.compute_gradients(np.eye(n, dtype=np.float32), np.array([1, 2]))
    assert np.isfinite(loss_sum) and abs(loss_sum - (2000.0 + 1.3132617)) < 1e-2
    assert correct == 0.0
    assert np.all(np.isfinite(net.get_gradients()[0]))


def optimizer_net(engine, optimizer, seed=5):
    layers = [{"kind": "dense", "units": 4}, {"kind": "activation", "activation": "tanh"},
              {"kind": "dense", "units": 3}]
    loss = {"kind": "sparse_categorical_crossentropy", "from_logits": True}
    return make_net(engine, layers, (6,), 8, loss, optimizer, seed=seed)


OPTIMIZERS = [
    {"kind": "adam"},
    {"kind": "adam", "learning_rate": 0.01, "beta_1": 0.8, "beta_2": 0.99, "epsilon": 1e-4},
    {"kind": "sgd", "learning_rate": 0.1},
    {"kind": "sgd", "learning_rate": 0.05, "momentum": 0.9},
    {"kind": "sgd", "learning_rate": 0.05, "momentum": 0.9, "nesterov": True},
]


@pytest.mark.parametrize("engine", C_ENGINES)
@pytest.mark.parametrize("optimizer", OPTIMIZERS, ids=lambda o: "-".join(map(str, o.values())))
def test_optimizer_steps_match_reference_formula(engine, optimizer):
    """Three steps: the weights follow Keras's update from the engine's own gradients."""
    net = optimizer_net(engine, optimizer)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 6)).astype(np.float32)
    labels = rng.integers(0, 3, size=8)
    weights = [w.astype(np.float64) for w in net.get_weights()]
    kind = optimizer["kind"]
    settings = {k: v for k, v in optimizer.items() if k != "kind"}
    slots = [[np.zeros_like(w), np.zeros_like(w)] for w in weights]
    for step in range(1, 4):
        net.compute_gradients(x, labels)
        grads = net.get_gradients()
        net.apply_gradients()
        for w, g, (m, v) in zip(weights, grads, slots):
            if kind == "adam":
                ref.adam_step(w, g.astype(np.float64), m, v, step, **settings)
            else:
                ref.sgd_step(w, g.astype(np.float64), m, **settings)
        for i, (a, b) in enumerate(zip(net.get_weights(), weights)):
            assert_close(a, b, 1e-5, 1e-6, "weight %d after step %d" % (i, step))
    assert net.steps == 3


@pytest.mark.parametrize("engine", C_ENGINES)
def test_train_batch_is_compute_then_apply(engine):
    a = optimizer_net(engine, {"kind": "adam"})
    b = optimizer_net(engine, {"kind": "adam"})
    x = np.random.default_rng(1).standard_normal((8, 6)).astype(np.float32)
    y = np.arange(8) % 3
    for _ in range(3):
        la = a.train_batch(x, y)
        lb = b.compute_gradients(x, y)
        b.apply_gradients()
        assert la == lb
    for wa, wb in zip(a.get_weights(), b.get_weights()):
        assert np.array_equal(wa, wb)
