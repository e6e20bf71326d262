"""GPU engines against the sequential cpu engine on whole training runs."""
import numpy as np
import pytest

from cnncuda.engine import make_net
from cnncuda.seeds import seed_network, synthetic_data
from conftest import build_seed_net, engine_params, require_tensor_cores

GPU_ENGINES = engine_params(("cuda", "cudnn"))


def build(engine, name, batch):
    return build_seed_net(engine, name, batch)


SEED_NAMES = ["cifar10_cnn", "lenet5", "tiny_mnist", "binary_100", "imagenette_cnn"]
# steps per network: 50, fewer where the cpu engine's side is slow (the
# Imagenette model takes about a second a step there)
STEPS = {"binary_100": 20, "imagenette_cnn": 20}


@pytest.mark.parametrize("engine", GPU_ENGINES)
@pytest.mark.parametrize("name", SEED_NAMES)
def test_one_step_gradients_match_the_cpu_engine(engine, name):
    """From the same weights on the same batch: the loss within rtol 1e-5 and
    every gradient within rtol 1e-4 (atol 1e-6) of the cpu engine's, for our
    own kernels. Compared as a whole instead (the largest difference within
    2e-3 of the largest gradient of the network): the cudnn engine, whose
    algorithms (Winograd, FFT, implicit GEMM) round differently, and the
    Imagenette model, whose gradients behind batch normalization are small
    differences of large terms (a conv bias there has a true gradient of 0,
    so what both engines give is rounding noise)."""
    batch = seed_network(name)["batch_size"]
    gpu, cpu = build(engine, name, batch), build("cpu", name, batch)
    x, y = synthetic_data(name, batch, seed=4)
    lg, cg = gpu.compute_gradients(x, y), cpu.compute_gradients(x, y)
    np.testing.assert_allclose(lg, cg, rtol=1e-5)
    theirs = cpu.get_gradients()
    scale = max(float(np.max(np.abs(g))) for g in theirs)
    for i, (a, b) in enumerate(zip(gpu.get_gradients(), theirs)):
        if engine == "cudnn" or name == "imagenette_cnn":
            assert np.max(np.abs(a - b)) <= 2e-3 * scale, "gradient %d" % i
        else:
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6, err_msg="gradient %d" % i)


@pytest.mark.parametrize("engine", GPU_ENGINES)
@pytest.mark.parametrize("name", SEED_NAMES)
def test_50_steps_track_the_cpu_engine(engine, name):
    """50 Adam steps from the same weights on the same batches: every step's
    loss within 5% of the cpu engine's and the mean loss of the last 10 steps
    within 3%. (Both engines are float32 but round differently; Adam's
    normalised steps and ReLU switching amplify those differences over many
    steps, so the weights themselves drift apart by several percent of how
    far they moved; the one-step test above is the strict one.)"""
    batch = seed_network(name)["batch_size"]
    gpu, cpu = build(engine, name, batch), build("cpu", name, batch)
    start = cpu.get_weights()
    for a, b in zip(gpu.get_weights(), start):
        assert np.array_equal(a, b), "bit-identical initial weights"
    steps = STEPS.get(name, 50)
    x, y = synthetic_data(name, steps * batch, seed=5)
    ours, theirs = [], []
    for s in range(steps):
        part = slice(s * batch, (s + 1) * batch)
        ours.append(gpu.train_batch(x[part], y[part])[0] / batch)
        theirs.append(cpu.train_batch(x[part], y[part])[0] / batch)
    np.testing.assert_allclose(ours, theirs, rtol=5e-2)
    np.testing.assert_allclose(np.mean(ours[-10:]), np.mean(theirs[-10:]), rtol=3e-2)


@pytest.mark.parametrize("engine", GPU_ENGINES)
def test_resident_epoch_matches_the_cpu_engine(engine):
    """fit's path (data on the GPU, batches gathered there, sums kept there)."""
    x, y = synthetic_data("cifar10_cnn", 320, seed=6)
    order = np.random.default_rng(1).permutation(320)
    sums = []
    for e in (engine, "cpu"):
        net = build(e, "cifar10_cnn", 32)
        net.set_data(x, y)
        net.set_order(order)
        net.train_range(0, 320, 32)
        sums.append(net.read_sums())
    np.testing.assert_allclose(sums[0], sums[1], rtol=2e-3)


@pytest.mark.parametrize("engine", GPU_ENGINES)
def test_out_of_memory_is_a_memory_error_and_the_engine_stays_usable(engine):
    # 25 layers of 1.6e9 weights (each under the 2**31 per-layer cap): 4.0e10
    # parameters, 160 GB for the weights alone, more than any one GPU here has
    layers = [{"kind": "dense", "units": 40_000}] * 25
    with pytest.raises(MemoryError, match=r"could not allocate \d{12} bytes"):
        make_net(engine, layers, (40_000,), 8, {"kind": "sparse_categorical_crossentropy"},
                 {"kind": "adam"})
    net = build(engine, "tiny_mnist", 32)
    x, y = synthetic_data("tiny_mnist", 32)
    assert np.isfinite(net.train_batch(x, y)[0])


@pytest.mark.parametrize("engine", GPU_ENGINES)
def test_tf32_is_opt_in_and_close(engine):
    """precision='tf32' lets cuDNN and cuBLAS (cudnn) or the engine's own SGEMM
    (cuda: mma.sync on its large products) use TF32 tensor cores. At batch
    512, where the seed CNN's convolutions are the cuda engine's large
    products: the loss within 1e-2 of strict float32's (the correct count
    within 1% of the batch) and every gradient
    within 2e-2 of the largest of its array; TF32 does change the bits (on
    GPUs of compute capability 8.0 only, skipped on older ones, where TF32
    computes in float32); and float32 stays the default (the same bits as
    precision='float32')."""
    s = seed_network("cifar10_cnn")
    batch = 512
    x, y = synthetic_data("cifar10_cnn", batch, seed=7)

    def net(**kwargs):
        return make_net(engine, s["layers"], s["input_shape"], batch, s["loss"], s["optimizer"],
                        **kwargs)
    default, strict, fast = net(), net(precision="float32"), net(precision="tf32")
    a, b = strict.compute_gradients(x, y), fast.compute_gradients(x, y)
    np.testing.assert_allclose(b[0], a[0], rtol=1e-2)      # the loss sums
    assert abs(b[1] - a[1]) <= 0.01 * batch                 # near-ties may flip a few argmaxes
    assert default.compute_gradients(x, y) == a
    ga, gb = strict.get_gradients(), fast.get_gradients()
    for i, (g32, gtf) in enumerate(zip(ga, gb)):
        assert np.max(np.abs(gtf - g32)) <= 2e-2 * np.max(np.abs(g32)) + 1e-7, "gradient %d" % i
    for g32, gdef in zip(ga, default.get_gradients()):
        assert np.array_equal(g32, gdef)
    require_tensor_cores()
    assert any(not np.array_equal(g32, gtf) for g32, gtf in zip(ga, gb)), \
        "TF32 gave float32's bits: was it used?"


def test_tf32_is_refused_where_it_does_not_exist():
    s = seed_network("tiny_mnist")
    for engine in ("cpu", "numpy", "omp"):
        with pytest.raises(ValueError, match="precision: 'tf32' is offered by the cuda and cudnn "
                                             "engines only; the %s engine computes in float32"
                                             % engine):
            make_net(engine, s["layers"], s["input_shape"], 4, s["loss"], s["optimizer"],
                     precision="tf32")
    with pytest.raises(ValueError, match="precision: expected one of 'float32', 'tf32', 'bf16', "
                                         "'fp16', got 'half'"):
        make_net("cpu", s["layers"], s["input_shape"], 4, s["loss"], s["optimizer"],
                 precision="half")
    with pytest.raises(ValueError, match="precision: 'bf16' is offered by the cuda and cudnn "
                                         "engines only; the cpu engine computes in float32"):
        make_net("cpu", s["layers"], s["input_shape"], 4, s["loss"], s["optimizer"],
                 precision="bf16")
