"""Regularizers and frozen layers in a data-parallel group: two cpu replicas
train as one network (the penalty's gradient added once to the summed
gradient, its loss counted once over the group's rows; frozen weights
unchanged on every replica)."""
import numpy as np

from cnncuda import distribute, engine
from conftest import check_agreement

LAYERS = [{"kind": "conv2d", "units": 4, "kernel": (3, 3), "kernel_l2": 0.05, "bias_l1": 0.02,
           "trainable": False},
          {"kind": "batchnorm", "trainable": False},
          {"kind": "activation", "activation": "relu"}, {"kind": "flatten"},
          {"kind": "dense", "units": 8, "kernel_l1": 0.01, "kernel_l2": 0.02, "bias_l2": 0.1},
          {"kind": "activation", "activation": "relu"},
          {"kind": "dense", "units": 3}]
LOSS = {"kind": "sparse_categorical_crossentropy", "from_logits": True}


def test_two_replicas_track_one_network_with_penalties_and_frozen_layers():
    batch, steps = 16, 20
    rng = np.random.default_rng(3)
    x = rng.standard_normal((batch * steps, 8, 7, 2)).astype("f4")
    y = rng.integers(0, 3, len(x))
    order = rng.permutation(len(x)).astype(np.int32)
    one = engine.make_net("cpu", LAYERS, (8, 7, 2), batch, LOSS, {"kind": "adam"}, seed=4)
    group = distribute.MirroredStrategy(devices=["cpu", "cpu"]).make_group(
        LAYERS, (8, 7, 2), batch, LOSS, {"kind": "adam"}, seed=4)
    w = one.get_weights()
    w[1] = w[1] + 0.05                                   # nonzero biases
    w[7] = w[7] + 0.05
    one.set_weights(w)
    group.set_weights(w)
    check_agreement(one, group, x, y, order, batch, steps, first_rtol=1e-6)
    for net in [one] + list(group.replicas):
        after = net.get_weights()
        for i in range(6):                               # the frozen conv and batchnorm
            assert np.array_equal(after[i], w[i]), i
