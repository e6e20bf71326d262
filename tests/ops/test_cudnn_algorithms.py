"""How the cudnn engine chooses its convolution algorithms (CNNCUDA_CUDNN_ALGO):
measured by default (the fastest deterministic one, timed once per shape and
kept for the process), the heuristics' choice on request, non-deterministic
algorithms allowed on request. Every mode must give the cpu engine's
gradients, and the default must give the same bits for the same seed."""
import numpy as np
import pytest

from cnncuda.seeds import synthetic_data
from conftest import build_seed_net, engine_params, run_both
from test_ops import CONV_CASES

CUDNN = engine_params(("cudnn",))


def build(engine, batch, name="cifar10_cnn"):
    return build_seed_net(engine, name, batch)


def assert_gradients_match(engine, batch, seed):
    """One step of the seed CNN at `batch` on `engine` and on cpu: the same
    loss, and every gradient within 2e-3 of the largest (as
    test_gpu_training compares the cudnn engine)."""
    gpu, cpu = build(engine, batch), build("cpu", batch)
    x, y = synthetic_data("cifar10_cnn", batch, seed=seed)
    np.testing.assert_allclose(gpu.compute_gradients(x, y), cpu.compute_gradients(x, y),
                               rtol=1e-5)
    theirs = cpu.get_gradients()
    scale = max(float(np.max(np.abs(g))) for g in theirs)
    for i, (a, b) in enumerate(zip(gpu.get_gradients(), theirs)):
        assert np.max(np.abs(a - b)) <= 2e-3 * scale, "gradient %d" % i


@pytest.mark.parametrize("engine", CUDNN)
@pytest.mark.parametrize("mode", ["measured", "heuristic", "nondeterministic"])
def test_every_mode_gives_the_cpu_engines_gradients(engine, mode, monkeypatch):
    """One step at batch 96 (a shape no other test measures first), compared
    as test_gpu_training compares the cudnn engine: within 2e-3 of the
    largest gradient."""
    monkeypatch.setenv("CNNCUDA_CUDNN_ALGO", mode)
    assert_gradients_match(engine, 96, seed=11)


@pytest.mark.parametrize("engine", CUDNN)
@pytest.mark.parametrize("mode", ["measured", "heuristic"])
def test_the_same_seed_gives_the_same_bits(engine, mode, monkeypatch):
    """Two networks of one process, trained alike through fit's path (the
    first step measures, the second is recorded, the rest replayed): the
    same weights bit for bit, however noisy the timings were."""
    monkeypatch.setenv("CNNCUDA_CUDNN_ALGO", mode)
    x, y = synthetic_data("cifar10_cnn", 5 * 80, seed=12)
    weights = []
    for _ in range(2):
        net = build(engine, 80)
        net.set_data(x, y)
        net.set_order(np.arange(len(y)))
        net.train_range(0, len(y), 80)
        net.read_sums()
        weights.append(net.get_weights())
    for u, v in zip(*weights):
        np.testing.assert_array_equal(u, v)


@pytest.mark.parametrize("engine", CUDNN)
def test_an_unknown_mode_is_a_value_error(engine, monkeypatch):
    monkeypatch.setenv("CNNCUDA_CUDNN_ALGO", "fastest")
    with pytest.raises(ValueError, match="CNNCUDA_CUDNN_ALGO: expected 'measured', 'heuristic' "
                                         "or 'nondeterministic', got 'fastest'"):
        build(engine, 8)


@pytest.mark.parametrize("engine", CUDNN)
def test_an_unknown_own_wgrad_setting_is_a_value_error(engine, monkeypatch):
    monkeypatch.setenv("CNNCUDA_CUDNN_OWN_WGRAD", "yes")
    with pytest.raises(ValueError, match="CNNCUDA_CUDNN_OWN_WGRAD: expected 1, 0, on, off, "
                                         "true or false, got 'yes'"):
        build(engine, 8)


@pytest.mark.parametrize("engine", CUDNN)
@pytest.mark.parametrize("shape,filters,kernel,strides,padding", CONV_CASES)
def test_our_filter_gradient_matches_the_reference(engine, shape, filters, kernel, strides,
                                                   padding, monkeypatch):
    """CNNCUDA_CUDNN_OWN_WGRAD=1: every backward filter through our im2col and
    split-K SGEMM (the measured choice's own candidate), bias nonzero."""
    monkeypatch.setenv("CNNCUDA_CUDNN_OWN_WGRAD", "1")
    layers = [{"kind": "conv2d", "units": filters, "kernel": kernel, "strides": strides,
               "padding": padding}]
    net, _ = run_both(engine, layers, shape, n=3, rtol=1e-4, atol=1e-4)
    rng = np.random.default_rng(0)
    w = [a + rng.standard_normal(a.shape).astype(np.float32) for a in net.get_weights()]
    run_both(engine, layers, shape, n=3, rtol=1e-4, atol=1e-4, weights=w)


@pytest.mark.parametrize("engine", CUDNN)
@pytest.mark.parametrize("own", ["0", "1"])
def test_the_filter_gradient_at_batch_512_either_way(engine, own, monkeypatch):
    """The seed CNN's shapes at batch 512, our backward filter forced on and
    off: the cpu engine's gradients (as test_gpu_training compares them)."""
    monkeypatch.setenv("CNNCUDA_CUDNN_OWN_WGRAD", own)
    assert_gradients_match(engine, 512, seed=13)
