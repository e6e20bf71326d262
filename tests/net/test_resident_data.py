"""Training from data resident on the engine (what fit uses): the same
result as feeding the same batches one by one, sums kept on the engine."""
import numpy as np
import pytest

from cnncuda.seeds import synthetic_data
from conftest import C_ENGINES, build_seed_net

ENGINES = C_ENGINES + ["numpy"]


def build(engine, name):
    return build_seed_net(engine, name, 32, seed=3)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", ["tiny_mnist", "lenet5"])
def test_train_range_equals_train_batch(engine, name):
    x, y = synthetic_data(name, 100, seed=1)
    order = np.random.default_rng(0).permutation(100)
    resident, fed = build(engine, name), build(engine, name)
    resident.set_data(x, y)
    resident.set_order(order)
    resident.train_range(0, 64, 32)       # two steps
    resident.train_range(64, 36, 32)      # 32 and then 4 samples
    loss_sum, correct = resident.read_sums()
    want = [0.0, 0.0]
    for at in range(0, 100, 32):
        idx = order[at:at + 32]
        l, c = fed.train_batch(x[idx], y[idx])
        want = [want[0] + l, want[1] + c]
    np.testing.assert_allclose([loss_sum, correct], want, rtol=1e-5)
    for a, b in zip(resident.get_weights(), fed.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert resident.read_sums() == (0.0, 0.0), "read_sums resets"


@pytest.mark.parametrize("engine", ENGINES)
def test_resident_data_errors(engine):
    net = build(engine, "tiny_mnist")
    x, y = synthetic_data("tiny_mnist", 10)
    with pytest.raises(ValueError, match="set_data first"):
        net.set_order(np.arange(10))
    with pytest.raises(ValueError, match="set_data and set_order"):
        net.train_range(0, 10, 5)
    net.set_data(x, y)
    with pytest.raises(ValueError, match=r"order: expected"):
        net.set_order(np.arange(9))
    with pytest.raises(ValueError, match=r"order: expected indices in \[0, 10\)"):
        net.set_order(np.arange(1, 11))
    net.set_order(np.arange(10)[::-1])
    with pytest.raises(ValueError):
        net.train_range(5, 6, 5)          # past the end
    with pytest.raises(ValueError):
        net.train_range(0, 10, 33)        # batch above max_batch
    net.train_range(0, 10, 5)
    assert net.read_sums()[0] > 0


@pytest.mark.parametrize("engine", ENGINES)
def test_ranges_in_any_order_gather_their_rows(engine):
    """Each range starts where it says, whatever ran before it: a later part
    of the order first, then an earlier one, then one after the optimizer
    state was set again (which rewrites the engine's counters)."""
    name = "tiny_mnist"
    x, y = synthetic_data(name, 96, seed=4)
    order = np.random.default_rng(1).permutation(96)
    resident, fed = build(engine, name), build(engine, name)
    resident.set_data(x, y)
    resident.set_order(order)
    ranges = [(64, 32), (0, 32), (32, 32)]
    for i, (start, count) in enumerate(ranges):
        if i == 2:
            resident.set_optimizer_state(resident.get_optimizer_state())
            fed.set_optimizer_state(fed.get_optimizer_state())
        resident.train_range(start, count, 16)
        for at in range(start, start + count, 16):
            idx = order[at:at + 16]
            fed.train_batch(x[idx], y[idx])
    for a, b in zip(resident.get_weights(), fed.get_weights()):
        np.testing.assert_array_equal(a, b)
