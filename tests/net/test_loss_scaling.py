"""Dynamic loss scaling (Keras's LossScaleOptimizer) in the engines, against a
NumPy statement of Keras 3's algorithm:

    S = initial_scale, good = 0
    each step: gradients g of (loss * S); finite = all(isfinite(g))
      finite:  apply g / S; good + 1 == growth ? (S *= 2, good = 0) : good += 1
      else:    skip the step (weights, optimizer state and iterations stay);
               S /= 2, good = 0

The statement runs on a twin network without scaling (the gradients it
applies are the unscaled ones: scaling by a power of two is exact, so the
weights must be the same bits on the CPU engines). An injected value that
overflows gives gradients that are not finite: the step is skipped and S
halves; after `growth` finite steps S doubles. The GPU engines run the
same, their recorded steps (train_range replays one CUDA graph) included.
"""
import numpy as np
import pytest

from cnncuda.engine import make_net
from conftest import engine_params

LAYERS = [{"kind": "dense", "units": 7}, {"kind": "activation", "activation": "relu"},
          {"kind": "dense", "units": 3}]
MSE = {"kind": "mean_squared_error"}
# the injected overflows warn in the NumPy reference (and its twin without scaling)
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
CPU_ENGINES = ["numpy", "cpu", "omp:2"]
ALL_ENGINES = ["numpy"] + engine_params(("cpu", "omp", "cuda", "cudnn"))
OPTIMIZERS = [{"kind": "adam"}, {"kind": "sgd", "momentum": 0.9}, {"kind": "sgd"},
              {"kind": "rmsprop", "momentum": 0.5, "centered": True}, {"kind": "adagrad"},
              {"kind": "adadelta"}, {"kind": "adamax"}, {"kind": "nadam"}, {"kind": "adamw"}]


def batches(count=10, bad=(4,), n=8, seed=0):
    """`count` batches of (x, y), x[0, 0] of the batches in `bad` a value
    whose square overflows float32 (the loss and gradients are not finite)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        x = rng.standard_normal((n, 5)).astype(np.float32)
        y = rng.standard_normal((n, 3)).astype(np.float32)
        if i in bad:
            x[0, 0] = np.float32(3e38)
        out.append((x, y))
    return out


def statement(engine, opt, data, scale, growth):
    """Keras's algorithm on a twin network without scaling: (after each
    step) the scale, the step count, and the weights and slots at the end."""
    twin = make_net(engine, LAYERS, (5,), 8, MSE, opt, seed=2)
    good, steps, trace = 0, 0, []
    for x, y in data:
        twin.compute_gradients(x, y)
        if all(np.all(np.isfinite(g)) for g in twin.get_gradients()):
            twin.apply_gradients()
            steps += 1
            if good + 1 == growth:
                scale, good = scale * 2.0, 0
            else:
                good += 1
        else:
            scale, good = scale / 2.0, 0
        trace.append((scale, steps))
    return trace, twin


def scaled(engine, opt, scale, growth):
    return make_net(engine, LAYERS, (5,), 8, MSE,
                    dict(opt, loss_scale=scale, loss_scale_growth_steps=growth), seed=2)


@pytest.mark.parametrize("engine", CPU_ENGINES)
@pytest.mark.parametrize("opt", OPTIMIZERS, ids=lambda o: o["kind"] + str(len(o)))
def test_train_batch_follows_the_statement(engine, opt):
    data = batches(10, bad=(4,))
    want, twin = statement(engine, opt, data, 2.0 ** 15, 3)
    net = scaled(engine, opt, 2.0 ** 15, 3)
    assert net.loss_scale == 2.0 ** 15 and net.steps == 0
    for (x, y), (scale, steps) in zip(data, want):
        net.train_batch(x, y)
        assert (net.loss_scale, net.steps) == (scale, steps)
    # a skip at step 5 (S halved), doublings after 3 finite steps in a row
    assert [s for s, _ in want] == [2.0 ** 15, 2.0 ** 15, 2.0 ** 16, 2.0 ** 16, 2.0 ** 15,
                                    2.0 ** 15, 2.0 ** 15, 2.0 ** 16, 2.0 ** 16, 2.0 ** 16]
    assert want[-1][1] == 9
    for a, b in zip(net.get_weights(), twin.get_weights()):
        np.testing.assert_array_equal(a, b)
    got, ref = net.get_optimizer_state(), twin.get_optimizer_state()
    assert got["steps"] == ref["steps"] == 9
    assert got["loss_scale"] == (2.0 ** 16, 2) and "loss_scale" not in ref
    for per_a, per_b in zip(got["slots"], ref["slots"]):
        for a, b in zip(per_a, per_b):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("engine", CPU_ENGINES)
def test_a_skipped_step_changes_nothing_but_the_scale(engine):
    net = scaled(engine, {"kind": "adam"}, 1024.0, 2000)
    (x, y), (xb, yb) = batches(2, bad=(1,))
    net.train_batch(x, y)
    before = net.get_weights(), net.get_optimizer_state()
    net.train_batch(xb, yb)
    after = net.get_weights(), net.get_optimizer_state()
    assert net.loss_scale == 512.0 and net.steps == 1
    for a, b in zip(before[0], after[0]):
        np.testing.assert_array_equal(a, b)
    for per_a, per_b in zip(before[1]["slots"], after[1]["slots"]):
        for a, b in zip(per_a, per_b):
            np.testing.assert_array_equal(a, b)
    assert after[1]["loss_scale"] == (512.0, 0)


@pytest.mark.parametrize("engine", ALL_ENGINES)
def test_recorded_training_steps_scale_and_skip(engine):
    """train_range (on a GPU: one recorded step replayed 11 times) with
    overflows in the first and sixth batches and growth every 2 finite
    steps: the scale halves at each skip and doubles after two good steps,
    all in the engine; the same trajectory and step count as the NumPy
    reference's train_batch steps, and the weights close."""
    data = batches(12, bad=(0, 5))
    x = np.concatenate([d[0] for d in data])
    y = np.concatenate([d[1] for d in data])
    ref = scaled("numpy", {"kind": "adam"}, 2.0 ** 100, 2)
    trace = []
    for xb, yb in data:
        ref.train_batch(xb, yb)
        trace.append((ref.loss_scale, ref.steps))
    assert [(int(np.log2(s)), n) for s, n in trace] == [
        (99, 0), (99, 1), (100, 2), (100, 3), (101, 4), (100, 4), (100, 5), (101, 6),
        (101, 7), (102, 8), (102, 9), (103, 10)]
    net = scaled(engine, {"kind": "adam"}, 2.0 ** 100, 2)
    net.set_data(x, y)
    net.set_order(np.arange(len(x)))
    net.train_range(0, len(x), 8)
    assert (net.loss_scale, net.steps) == trace[-1]
    assert net.get_optimizer_state()["loss_scale"] == (2.0 ** 103, 0)
    for a, b in zip(net.get_weights(), ref.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_loss_scale_state_is_checked_and_carried():
    net = scaled("cpu", {"kind": "sgd"}, 4.0, 5)
    assert net.get_loss_scale_state() == (4.0, 0)
    net.set_loss_scale_state((64.0, 3))
    assert net.loss_scale == 64.0 and net.get_loss_scale_state() == (64.0, 3)
    with pytest.raises(ValueError, match="good steps"):
        net.set_loss_scale_state((64.0, 5))
    with pytest.raises(ValueError, match="finite number > 0"):
        net.set_loss_scale_state((0.0, 0))
    plain = make_net("cpu", LAYERS, (5,), 8, MSE, {"kind": "sgd"})
    assert plain.loss_scale is None and plain.get_loss_scale_state() is None
    with pytest.raises(ValueError, match="built without dynamic loss scaling"):
        plain.set_loss_scale_state((2.0, 0))
    with pytest.raises(ValueError, match=r"optimizer\['loss_scale'\]: expected a finite number"):
        make_net("cpu", LAYERS, (5,), 8, MSE, {"kind": "sgd", "loss_scale": -1.0})
    with pytest.raises(ValueError, match=r"optimizer\['loss_scale_growth_steps'\]"):
        make_net("cpu", LAYERS, (5,), 8, MSE,
                 {"kind": "sgd", "loss_scale": 2.0, "loss_scale_growth_steps": 0})


@pytest.mark.parametrize("engine", CPU_ENGINES)
def test_without_scaling_nothing_changes(engine):
    """A network without loss scaling trains as before: the bits of one
    built with scale 1 and no overflow (scaling by 1 changes nothing)."""
    data = batches(4, bad=())
    plain = make_net(engine, LAYERS, (5,), 8, MSE, {"kind": "adam"}, seed=2)
    one = scaled(engine, {"kind": "adam"}, 1.0, 1000)
    for x, y in data:
        assert plain.train_batch(x, y) == one.train_batch(x, y)
    for a, b in zip(plain.get_weights(), one.get_weights()):
        np.testing.assert_array_equal(a, b)
