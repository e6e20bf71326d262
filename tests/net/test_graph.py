"""Networks whose layers form a graph (csrc/net/graph.c): Add and
Concatenate layers reading several outputs, outputs read by several layers
(their gradients summed), the network's input read by several layers. On
every engine against the NumPy reference (float64): forward, input
gradient and weight gradients on odd sizes, and training; omp equals cpu
bit for bit; bad graphs are refused naming the layer."""
import numpy as np
import pytest

from cnncuda.engine import make_net
from conftest import conv, engine_params, relu, run_both

SPARSE_LOGITS = {"kind": "sparse_categorical_crossentropy", "from_logits": True}


def device(engine):
    return "omp:2" if engine == "omp" else engine


GRAPHS = {
    # conv -> relu -> conv -> batchnorm, plus the block's input, then a ReLU
    "residual": ((7, 9, 3), [
        conv(4, 3, padding="same"), relu(),                            # 0, 1
        conv(4, 3, padding="same"), {"kind": "batchnorm"},             # 2, 3
        {"kind": "add", "inputs": [3, 1]}, relu(),                     # 4, 5
        {"kind": "flatten"}, {"kind": "dense", "units": 3}]),
    # three branches of the input joined along the channels, odd sizes
    "inception": ((5, 7, 2), [
        conv(3, 1),                                                    # 0
        conv(2, 3, padding="same", inputs=[-1]),                       # 1
        {"kind": "maxpool", "kernel": (3, 3), "strides": (1, 1), "padding": "same",
         "inputs": [-1]},                                              # 2
        {"kind": "concatenate", "inputs": [0, 1, 2]},                  # 3: 7 channels
        {"kind": "avgpool", "kernel": (2, 2)}, {"kind": "flatten"},
        {"kind": "dense", "units": 3}]),
    # (N, F) rows: one output read by three layers, one of them twice
    "rows": ((11,), [
        {"kind": "dense", "units": 6}, {"kind": "activation", "activation": "tanh"},  # 0, 1
        {"kind": "dense", "units": 6},                                 # 2
        {"kind": "add", "inputs": [1, 2, 1]},                          # 3: x + f(x) + x
        {"kind": "dropout", "rate": 0.3},                              # 4
        {"kind": "dense", "units": 5, "inputs": [1]},                  # 5
        {"kind": "concatenate", "inputs": [4, 5]},                     # 6: 11 features
        {"kind": "activation", "activation": "sigmoid"},
        {"kind": "dense", "units": 3}]),
    # the layer kinds beside the first ones in a graph: rescaling, PReLU,
    # padding and cropping, an elementwise activation, a frozen batchnorm,
    # spatial dropout, upsampling, a regularized dense layer
    "other_kinds": ((6, 5, 2), [
        {"kind": "rescaling", "scale": 0.5, "offset": 0.1},            # 0
        conv(3, 3, padding="same"), {"kind": "prelu"},                 # 1, 2
        {"kind": "zero_padding2d", "padding": ((1, 0), (0, 1))},       # 3: 7x6
        {"kind": "cropping2d", "cropping": ((1, 0), (0, 1))},          # 4: 6x5
        {"kind": "activation", "activation": "elu", "inputs": [2]},    # 5
        {"kind": "add", "inputs": [4, 5]},                             # 6
        {"kind": "batchnorm", "trainable": False},                     # 7
        {"kind": "spatial_dropout2d", "rate": 0.25},                   # 8
        {"kind": "upsampling2d", "size": (2, 1), "inputs": [6]},       # 9: 12x5
        {"kind": "flatten", "inputs": [8]}, {"kind": "flatten", "inputs": [9]},  # 10, 11
        {"kind": "concatenate", "inputs": [10, 11]},                   # 12
        {"kind": "dense", "units": 3, "kernel_l2": 0.01}]),
    # the network's input read three times (its gradient summed: backward's dx)
    "input_thrice": ((3, 5, 3), [
        {"kind": "add", "inputs": [-1, -1]},                           # 0: 2x
        {"kind": "concatenate", "inputs": [0, -1]},                    # 1: 6 channels
        {"kind": "flatten"}, {"kind": "dense", "units": 3}]),
}


@pytest.mark.parametrize("name", sorted(GRAPHS))
@pytest.mark.parametrize("engine", engine_params())
def test_a_graph_agrees_with_the_reference(engine, name):
    shape, layers = GRAPHS[name]
    run_both(device(engine), layers, shape, 5, rtol=1e-4, atol=1e-4)


def train(dev, layers, shape, steps=4):
    net = make_net(dev, layers, shape, 8, SPARSE_LOGITS,
                   {"kind": "sgd", "learning_rate": 0.05, "momentum": 0.9}, seed=2)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8,) + shape).astype(np.float32)
    y = rng.integers(0, 3, 8)
    losses = [net.train_batch(x, y)[0] for _ in range(steps)]
    return losses, net.get_weights(), net.predict(x)


@pytest.mark.parametrize("name", sorted(GRAPHS))
@pytest.mark.parametrize("engine", engine_params())
def test_a_graph_trains_as_the_reference(engine, name):
    shape, layers = GRAPHS[name]
    ref = train("numpy", layers, shape)
    mine = train(device(engine), layers, shape)
    gpu = 10 if engine in ("cuda", "cudnn") else 1      # cuDNN's algorithms round otherwise
    np.testing.assert_allclose(mine[0], ref[0], rtol=1e-5 * gpu)
    for a, b in zip(mine[1], ref[1], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4 * gpu, atol=1e-5 * gpu)
    np.testing.assert_allclose(mine[2], ref[2], rtol=1e-4 * gpu, atol=1e-5 * gpu)


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_omp_is_cpu_bit_for_bit(name):
    shape, layers = GRAPHS[name]
    cpu, omp = train("cpu", layers, shape), train("omp:2", layers, shape)
    assert cpu[0] == omp[0]
    assert all(np.array_equal(a, b) for a, b in zip(cpu[1], omp[1], strict=True))
    assert np.array_equal(cpu[2], omp[2])


def test_a_graph_plans_no_fusion_and_names_its_steps():
    shape, layers = GRAPHS["residual"]
    net = make_net("cpu", layers, shape, 4, SPARSE_LOGITS, {"kind": "adam"})
    forward, backward = net.plan(), net.plan(backward=True)
    assert "add_4.forward" in forward and "activation_1.forward" in forward
    assert not any("+" in step for step in forward + backward)
    assert backward[-1] == "conv2d_0.backward_filter"
    assert "add_4.backward0" in backward and "add_4.backward1" in backward


@pytest.mark.parametrize("engine", ["numpy", "cpu"])
def test_bad_graphs_are_refused(engine):
    def make(layers, shape=(4, 4, 2)):
        return make_net(engine, layers, shape, 2, SPARSE_LOGITS, {"kind": "adam"})
    flat = [{"kind": "flatten"}, {"kind": "dense", "units": 2}]
    with pytest.raises(ValueError, match="layer 1"):
        make([conv(2, 1), conv(2, 1, inputs=[1])] + flat)            # reads itself
    with pytest.raises(ValueError, match="layer 1"):
        make([conv(2, 1), {"kind": "add", "inputs": [0]}] + flat)    # one input
    with pytest.raises(ValueError, match="layer 1"):
        make([conv(2, 1), conv(2, 1, inputs=[0, -1])] + flat)        # two into a conv
    with pytest.raises(ValueError, match="layer 0"):
        make([conv(2, 1), conv(3, 1, inputs=[-1])] + flat)           # layer 0 read by none
    with pytest.raises(ValueError, match="layer 1 \\(add\\)"):
        make([conv(3, 1), {"kind": "add", "inputs": [0, -1]}] + flat)   # 3 and 2 channels
    with pytest.raises(ValueError, match="layer 2 \\(concatenate\\)"):
        make([conv(3, 1), {"kind": "flatten", "inputs": [-1]},
              {"kind": "concatenate", "inputs": [0, 1]}] + flat[1:])   # an image and rows


# augmentation layers first, then a branch that also reads their input
AUGMENTED = ((8, 7, 3), [
    {"kind": "random_flip", "mode": "horizontal", "seed": 3},          # 0
    {"kind": "random_contrast", "low": (0.5, 0.5), "high": (1.5, 1.5), "seed": 4},  # 1
    conv(3, 3, padding="same"),                                        # 2
    {"kind": "add", "inputs": [1, 2]},                                 # 3
    {"kind": "add", "inputs": [3, -1]},                                # 4: the input again
    {"kind": "flatten"}, {"kind": "dense", "units": 3}])


@pytest.mark.parametrize("engine", engine_params())
def test_augmentation_before_a_graph_trains_as_the_reference(engine):
    """Below the augmentation layers no gradient is planned (the floor): the
    graph's backward stops there, and the input's gradient is refused."""
    shape, layers = AUGMENTED
    ref = train("numpy", layers, shape)
    mine = train(device(engine), layers, shape)
    gpu = 10 if engine in ("cuda", "cudnn") else 1
    np.testing.assert_allclose(mine[0], ref[0], rtol=1e-5 * gpu)
    for a, b in zip(mine[1], ref[1], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4 * gpu, atol=1e-5 * gpu)
    net = make_net(device(engine), layers, shape, 4, SPARSE_LOGITS, {"kind": "adam"})
    assert not any(step.startswith(("random", "add_3.backward0", "add_4.backward1"))
                   for step in net.plan(backward=True))
    x = np.zeros((4,) + shape, np.float32)
    net.forward(x, training=True)
    with pytest.raises(ValueError, match="augmentation"):
        net.backward(np.ones((4, 3), np.float32))
