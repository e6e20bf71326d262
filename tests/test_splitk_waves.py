"""CNNCUDA_SPLITK_WAVES: how many blocks per SM the cuda engine's split-K
aims at (gemm.cu plan_slices; default 2). Every value gives the reference's
gradients (the slices change only the order of the sums); a bad value is a
ValueError naming the variable."""
import numpy as np
import pytest

from cnncuda.engine import make_net
from cnncuda.seeds import seed_network, synthetic_data
from conftest import engine_params

GPU = engine_params(("cuda", "cudnn"))


def gradients(engine, name, batch):
    s = seed_network(name)
    net = make_net(engine, s["layers"], s["input_shape"], batch, s["loss"], s["optimizer"], seed=0)
    x, y = synthetic_data(name, batch, seed=2)
    sums = net.compute_gradients(x, y)
    return sums, net.get_gradients()


@pytest.mark.parametrize("waves", ["0.5", "1", "3"])
@pytest.mark.parametrize("name,batch", [("cifar10_cnn", 32), ("lenet5", 33), ("tiny_mnist", 7)])
@pytest.mark.parametrize("engine", GPU)
def test_every_target_gives_the_reference_gradients(engine, name, batch, waves, monkeypatch):
    monkeypatch.setenv("CNNCUDA_SPLITK_WAVES", waves)
    sums, got = gradients(engine, name, batch)
    monkeypatch.delenv("CNNCUDA_SPLITK_WAVES")
    ref_sums, ref = gradients("cpu", name, batch)
    np.testing.assert_allclose(sums, ref_sums, rtol=1e-5)
    scale = max(float(np.max(np.abs(g))) for g in ref)
    for i, (a, b) in enumerate(zip(got, ref)):
        assert np.max(np.abs(a - b)) <= 2e-3 * scale, "gradient %d" % i


@pytest.mark.parametrize("value", ["0", "-1", "17", "two", "1x"])
@pytest.mark.parametrize("engine", GPU)
def test_bad_target_is_refused(engine, value, monkeypatch):
    monkeypatch.setenv("CNNCUDA_SPLITK_WAVES", value)
    s = seed_network("tiny_mnist")
    with pytest.raises(ValueError,
                       match=r"CNNCUDA_SPLITK_WAVES: expected a number in \(0, 16\], got '%s'"
                       % value):
        make_net(engine, s["layers"], s["input_shape"], 8, s["loss"], s["optimizer"])
