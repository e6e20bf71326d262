"""Whole networks: the seed networks train on the C engines, track the
reference's losses, start from the reference's weights, and learn a real
data set (Fashion-MNIST) when it is installed."""
import numpy as np
import pytest

import cnncuda
from cnncuda import _C
from cnncuda import reference as ref
from cnncuda.datasets import fashion_mnist
from cnncuda.engine import make_net
from cnncuda.seeds import SEEDS, parameter_count, seed_network, synthetic_data
from conftest import C_ENGINES, build_seed_net


def build(engine, name, seed=0, batch=None):
    return build_seed_net(engine, name, batch, seed)


def test_rng_matches_reference():
    for seed, stream in [(0, 0), (1, 7), (2**63 + 5, 123456789)]:
        key = _C.rng_key(seed, stream)
        assert key == int(ref.rng_key(seed, stream))
        assert np.array_equal(_C.rng_uniform(key, 1000), ref.uniform(key, np.arange(1000)))


@pytest.mark.parametrize("engine", C_ENGINES)
@pytest.mark.parametrize("name", sorted(SEEDS))
def test_seed_networks_start_from_the_reference_weights(engine, name):
    for seed in (0, 42):
        a = build(engine, name, seed).get_weights()
        b = build("numpy", name, seed).get_weights()
        assert len(a) == len(b)
        for wa, wb in zip(a, b):
            assert wa.dtype == np.float32 and np.array_equal(wa, wb)
    c = build(engine, name, 1).get_weights()
    assert not np.array_equal(c[0], a[0]), "another seed gives other weights"


def test_seed_cnn_has_122570_parameters():
    assert parameter_count(build("cpu", "cifar10_cnn")) == 122570
    assert parameter_count(build("numpy", "cifar10_cnn")) == 122570
    assert parameter_count(build("cpu", "imagenette_cnn")) == 5403530


@pytest.mark.parametrize("engine", C_ENGINES)
def test_cifar10_cnn_20_steps_track_the_reference(engine):
    """20 Adam steps at batch 32: the float32 engine's losses stay within 1%
    of the float64 reference's, and each weight's distance to the reference's
    stays under 5% of how far training moved it. (Rounding differences grow
    over many Adam steps; the op tests are the strict checks.)"""
    s = seed_network("cifar10_cnn")
    net = build(engine, "cifar10_cnn")
    reference = ref.NumpyNet(s["layers"], s["input_shape"], 32, s["loss"], s["optimizer"],
                             seed=0, dtype=np.float64)
    start = net.get_weights()
    x, y = synthetic_data("cifar10_cnn", 20 * 32, seed=1)
    ours, theirs = [], []
    for step in range(20):
        batch = slice(32 * step, 32 * (step + 1))
        ours.append(net.train_batch(x[batch], y[batch])[0] / 32)
        theirs.append(reference.train_batch(x[batch].astype(np.float64), y[batch])[0] / 32)
    np.testing.assert_allclose(ours, theirs, rtol=1e-2)
    assert ours[-1] < ours[0], "the loss falls"
    for i, (a, b, w0) in enumerate(zip(net.get_weights(), reference.get_weights(), start)):
        moved = np.linalg.norm(b - w0)
        assert moved > 0
        assert np.linalg.norm(a - b) < 0.05 * moved, "weight %d" % i


@pytest.mark.parametrize("engine", C_ENGINES)
@pytest.mark.parametrize("name,steps", [("cifar10_cnn", 50), ("lenet5", 80), ("tiny_mnist", 50),
                                        ("binary_100", 30)])
def test_seed_networks_learn(engine, name, steps):
    """Each seed network fits its synthetic task: training loss falls by a third
    and accuracy on held-out samples beats chance clearly."""
    net = build(engine, name)
    batch = SEEDS[name]["batch_size"]
    x, y = synthetic_data(name, steps * batch + 256, seed=2)
    losses = []
    for step in range(steps):
        part = slice(step * batch, (step + 1) * batch)
        losses.append(net.train_batch(x[part], y[part])[0] / batch)
    assert np.mean(losses[-3:]) < 0.67 * np.mean(losses[:3]), losses
    loss_sum, correct = net.evaluate(x[-256:], y[-256:])
    chance = 1.0 / SEEDS[name]["classes"]
    assert correct / 256 > chance + 0.25
    predictions = net.predict(x[-256:])
    assert predictions.shape == (256,) + tuple(net.output_shape)


def test_threads_of_engine_name():
    args = ([{"kind": "flatten"}], (3,), 1, {"kind": "binary_crossentropy"}, {"kind": "adam"})
    with pytest.raises(ValueError, match="device: expected 'name:threads' with threads >= 1"):
        make_net("cpu:0", *args)
    with pytest.raises(ValueError, match="the cpu engine takes no thread count"):
        make_net("cpu:2", *args)


@pytest.mark.skipif(fashion_mnist.find() is None,
                    reason="Fashion-MNIST not installed (Debian package dataset-fashion-mnist)")
@pytest.mark.parametrize("engine", C_ENGINES)
def test_fashion_mnist_is_learned(engine):
    """LeNet-5 on 12,000 real Fashion-MNIST images, one epoch at batch 32:
    at least 75% accuracy on 2,000 test images (Keras reaches about 80% here)."""
    (x, y), (xt, yt) = fashion_mnist.load_data()
    x = (x[:12000] / 255.0).astype(np.float32)[..., None]
    xt = (xt[:2000] / 255.0).astype(np.float32)[..., None]
    net = build(engine, "lenet5")
    order = np.random.default_rng(0).permutation(len(x))
    for s in range(0, len(x), 32):
        idx = order[s:s + 32]
        net.train_batch(x[idx], y[idx])
    loss_sum, correct = net.evaluate(xt, yt[:2000])
    assert correct / 2000 >= 0.75, correct / 2000


def test_fashion_mnist_loader_rejects_bad_files(tmp_path):
    bad = tmp_path / "x.idx"
    bad.write_bytes(b"\x00\x00\x08\x01\x00\x00\x00\x05abc")
    with pytest.raises(ValueError, match="expected 5 bytes"):
        fashion_mnist.read_idx(str(bad))
    bad.write_bytes(b"\x01\x02")
    with pytest.raises(ValueError, match="IDX"):
        fashion_mnist.read_idx(str(bad))
