"""Optimizer state handed out and taken back: a network rebuilt from another
one's weights and optimizer state continues exactly where it stopped."""
import numpy as np
import pytest

from cnncuda.engine import make_net
from cnncuda.seeds import seed_network, synthetic_data
from conftest import C_ENGINES

ENGINES = C_ENGINES + ["numpy"]
OPTIMIZERS = [{"kind": "adam"}, {"kind": "sgd", "learning_rate": 0.05, "momentum": 0.9},
              {"kind": "sgd", "learning_rate": 0.05}]


def build(engine, optimizer, batch=16):
    layers = [{"kind": "conv2d", "units": 4, "kernel": (3, 3)},
              {"kind": "activation", "activation": "relu"}, {"kind": "dropout", "rate": 0.3},
              {"kind": "flatten"}, {"kind": "dense", "units": 3}]
    return make_net(engine, layers, (6, 6, 2), batch,
                    {"kind": "sparse_categorical_crossentropy", "from_logits": True},
                    optimizer, seed=1)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("optimizer", OPTIMIZERS, ids=["adam", "sgd-momentum", "sgd"])
def test_rebuilt_net_continues_exactly(engine, optimizer):
    rng = np.random.default_rng(0)
    x = rng.random((64, 6, 6, 2)).astype(np.float32)
    y = rng.integers(0, 3, size=64)
    a = build(engine, optimizer)
    for s in range(2):
        a.train_batch(x[16 * s:16 * (s + 1)], y[16 * s:16 * (s + 1)])
    state = a.get_optimizer_state()
    assert state["steps"] == 2 and state["training_forwards"] == 2
    slots = {"adam": 2}.get(optimizer["kind"], 1 if optimizer.get("momentum") else 0)
    assert [len(s) for s in state["slots"]] == [slots] * 4
    b = build(engine, optimizer, batch=32)       # another batch size: another network
    b.set_weights(a.get_weights())
    b.set_optimizer_state(state)
    for s in range(2, 4):
        batch = slice(16 * s, 16 * (s + 1))
        assert a.train_batch(x[batch], y[batch]) == b.train_batch(x[batch], y[batch])
    for wa, wb in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_array_equal(wa, wb)


@pytest.mark.parametrize("engine", ENGINES)
def test_bad_optimizer_state_changes_nothing(engine):
    a = build(engine, {"kind": "adam"})
    good = a.get_optimizer_state()
    bad = {"steps": 3, "training_forwards": 3,
           "slots": [list(s) for s in good["slots"]]}
    bad["slots"][2] = [np.ones((4, 3)), np.ones((4, 3))]
    with pytest.raises(ValueError, match=r"state\['slots'\]\[2\]"):
        a.set_optimizer_state(bad)
    assert a.get_optimizer_state()["steps"] == 0
    with pytest.raises(ValueError):
        a.set_optimizer_state({"steps": -1, "training_forwards": 0, "slots": good["slots"]})


@pytest.mark.parametrize("engine", ENGINES)
def test_a_training_forward_taken_back_by_its_count(engine):
    """set_training_forwards puts back what a training forward outside a step
    moved (the host metrics' look at the step's outputs): the next forward
    draws the same dropout mask again, and the steps and Adam's arrays are
    those of before."""
    rng = np.random.default_rng(3)
    x = rng.random((16, 6, 6, 2)).astype(np.float32)
    y = rng.integers(0, 3, size=16)
    net = build(engine, {"kind": "adam"})
    net.train_batch(x, y)
    before = net.get_optimizer_state()
    first = net.forward(x, training=True)
    assert net.training_forwards == before["training_forwards"] + 1
    net.set_training_forwards(before["training_forwards"])
    after = net.get_optimizer_state()
    assert after["steps"] == before["steps"] == 1
    assert after["training_forwards"] == before["training_forwards"]
    for a, b in zip(sum(after["slots"], []), sum(before["slots"], [])):
        assert np.array_equal(a, b)
    assert np.array_equal(net.forward(x, training=True), first)
    other = net.forward(x, training=True)           # a count not taken back: another mask
    assert not np.array_equal(other, first)
    for bad in (-1, 2**70, 2.5, "3", None, True):
        with pytest.raises(ValueError, match="n: expected an int >= 0"):
            net.set_training_forwards(bad)
