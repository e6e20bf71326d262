"""The JAX rows: the same network as our engines (from the same initial
weights it trains to the same loss sums and weights), and its row in a run.
Skipped where jax is not installed."""
import numpy as np
import pytest

pytest.importorskip("jax")

from cnncuda import bench  # noqa: E402
from cnncuda.bench_data import bench_data  # noqa: E402
from cnncuda.bench_jax import JaxRunner  # noqa: E402
from cnncuda.engine import make_net  # noqa: E402
from cnncuda.seeds import seed_network  # noqa: E402


# lenet5: 'same' convolution, average pooling, sparse loss from logits;
# tiny_mnist: max pooling, softmax, categorical loss from probabilities;
# binary_100: sigmoid, binary loss from probabilities
@pytest.mark.parametrize("model", ["lenet5", "tiny_mnist", "binary_100"])
def test_jax_trains_as_the_cpu_engine_does(model):
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


def test_jax_row_in_a_run():
    rows = bench.run(models=["tiny_mnist"], engines=["cpu"], images=64, val_images=16,
                     data="synthetic", frameworks="jax", verbose=0)
    assert [r["device"] for r in rows] == ["cpu", "jax-cpu"]
    row = rows[1]
    assert row["framework"] == "jax" and row["seconds_per_epoch"] > 0 and row["timer"] == "wall"
    assert row["speedup_vs_cpu"] > 0 and 0 <= row["val_accuracy"] <= 1
    assert any("XLA" in note for note in row["notes"])


def test_jax_weights_are_checked():
    data = bench_data("tiny_mnist", images=8, val_images=0, data="synthetic")
    with pytest.raises(ValueError, match=r"weights: expected an array of shape \(3, 3, 1, 8\)"):
        JaxRunner("tiny_mnist", data, 4, weights=[np.zeros((3, 3, 1, 9))])
