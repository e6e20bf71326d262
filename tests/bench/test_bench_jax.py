"""The JAX rows: the same network as our engines (from the same initial
weights it trains to the same loss sums and weights), and its row in a run.
Skipped where jax is not installed.

The checks run in a child process: importing jax registers new NumPy scalar
types (ml_dtypes), which other tests of the suite, counting NumPy's kinds,
must not see."""
import importlib.util
import multiprocessing

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("jax") is None,
                                reason="jax is not installed")


@pytest.fixture(scope="module")
def child():
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        yield pool


def check_same_training(model):
    from cnncuda.bench.data import bench_data
    from cnncuda.bench.jax import JaxRunner
    from cnncuda.engine import make_net
    from cnncuda.seeds import seed_network
    spec = seed_network(model)
    batch = 32
    data = bench_data(model, images=40, val_images=16, data="synthetic")  # a partial last batch
    net = make_net("cpu", spec["layers"], spec["input_shape"], batch, spec["loss"],
                   spec["optimizer"], seed=0)
    runner = JaxRunner(model, data, batch, weights=net.get_weights())
    order = np.random.default_rng(1).permutation(40)
    seconds, timer, wall = runner.epoch(order=order)
    assert timer == "wall" and seconds == wall > 0
    net.set_data(data.x, data.y)
    net.set_order(order)
    net.train_range(0, 40, batch)
    ours = net.read_sums()
    np.testing.assert_allclose(runner.sums(), ours, rtol=2e-5)
    for theirs, mine in zip(runner.get_weights(), net.get_weights()):
        np.testing.assert_allclose(theirs, mine, rtol=0, atol=2e-3 * np.abs(mine).max() + 1e-6)
    np.testing.assert_allclose(runner.evaluate(data.x_val, data.y_val),
                               net.evaluate(data.x_val, data.y_val), rtol=1e-4)
    assert runner.parameters() == sum(w.size for w in net.get_gradients())


def check_row_in_a_run():
    from cnncuda import bench
    rows = bench.run(models=["tiny_mnist"], engines=["cpu"], images=64, val_images=16,
                     data="synthetic", frameworks="jax", verbose=0)
    assert [r["device"] for r in rows] == ["cpu", "jax-%s" % rows[1]["device"][4:]]
    row = rows[1]
    assert row["framework"] == "jax" and row["seconds_per_epoch"] > 0 and row["timer"] == "wall"
    assert row["speedup_vs_cpu"] > 0 and 0 <= row["val_accuracy"] <= 1
    assert row["notes"]  # the wall clock on a GPU, XLA's threads on the CPU


def check_tf32_row():
    """--precision tf32: on a GPU, JAX's default matmul precision (TF32
    allowed) and a -tf32 label; on the CPU, HIGHEST and the float32 row."""
    import jax
    from cnncuda import bench
    rows = bench.run(models=["tiny_mnist"], engines=["cpu"], images=64, val_images=0,
                     data="synthetic", frameworks="jax", verbose=0, precision="tf32")
    row = rows[1]
    if jax.default_backend() in ("gpu", "cuda", "rocm"):
        assert (row["device"], row["precision"]) == ("jax-gpu-tf32", "tf32")
        assert jax.config.jax_default_matmul_precision is None
    else:
        assert (row["device"], row["precision"]) == ("jax-%s" % jax.default_backend(), "float32")
        assert jax.config.jax_default_matmul_precision == "highest"
    rows = bench.run(models=["tiny_mnist"], engines=["cpu"], images=64, val_images=0,
                     data="synthetic", frameworks="jax", verbose=0)
    assert rows[1]["precision"] == "float32" and not rows[1]["device"].endswith("-tf32")
    assert jax.config.jax_default_matmul_precision == "highest"


def check_weights_are_checked():
    from cnncuda.bench.data import bench_data
    from cnncuda.bench.jax import JaxRunner
    data = bench_data("tiny_mnist", images=8, val_images=0, data="synthetic")
    with pytest.raises(ValueError, match=r"weights: expected an array of shape \(3, 3, 1, 8\)"):
        JaxRunner("tiny_mnist", data, 4, weights=[np.zeros((3, 3, 1, 9))])


# lenet5: 'same' convolution, average pooling, sparse loss from logits;
# tiny_mnist: max pooling, softmax, categorical loss from probabilities;
# binary_100: sigmoid, binary loss from probabilities
@pytest.mark.keras3
@pytest.mark.parametrize("model", ["lenet5", "tiny_mnist", "binary_100"])
def test_jax_trains_as_the_cpu_engine_does(child, model):
    child.apply(check_same_training, (model,))


@pytest.mark.keras3
def test_jax_row_in_a_run(child):
    child.apply(check_row_in_a_run)


@pytest.mark.keras3
def test_jax_tf32_row(child):
    child.apply(check_tf32_row)


@pytest.mark.keras3
def test_jax_weights_are_checked(child):
    child.apply(check_weights_are_checked)


def test_jax_stays_out_of_this_process():
    import sys
    assert "jax" not in sys.modules
