"""TF32, opted into: make_net's precision='tf32' on the GPU engines, TensorFlow's
``config.experimental.enable_tensor_float_32_execution`` for models (CPU
engines ignore it; a model's network is rebuilt, weights and optimizer state
carried, when the setting changed), and the bench's ``--precision tf32``.

The CPU tests check the API, the plumbing (with stand-ins where a GPU would
be needed) and that CPU engines are untouched; the gpu-marked ones check on
the GPU that TF32 is used, stays close to float32, and that switching it off
gives float32's bits again."""
import json
import warnings

import numpy as np
import pytest

import cnncuda
import cnncuda as tf
from cnncuda import bench, config, distribute, models
from cnncuda.bench import cnncuda as bench_cnncuda
from cnncuda.bench.cnncuda import row_label, row_precision
from cnncuda.engine import make_net
from cnncuda.keras import layers, losses, optimizers
from cnncuda.seeds import seed_network, synthetic_data
from conftest import engine_params, require_tensor_cores

GPU_ENGINES = engine_params(("cuda", "cudnn"))


@pytest.fixture(autouse=True)
def tf32_off_afterwards():
    before = config.tensor_float_32_execution_enabled()
    yield
    config.enable_tensor_float_32_execution(before)


# -- the config API ------------------------------------------------------------------------


def test_tf32_is_off_by_default_and_toggles():
    assert config.tensor_float_32_execution_enabled() is False     # unlike TensorFlow
    experimental = tf.config.experimental
    experimental.enable_tensor_float_32_execution(True)
    assert experimental.tensor_float_32_execution_enabled() is True
    experimental.enable_tensor_float_32_execution(np.bool_(False))
    assert experimental.tensor_float_32_execution_enabled() is False
    experimental.enable_tensor_float_32_execution(np.bool_(True))
    assert experimental.tensor_float_32_execution_enabled() is True
    experimental.enable_tensor_float_32_execution(False)
    assert experimental.tensor_float_32_execution_enabled() is False


@pytest.mark.parametrize("value", [1, 0, "yes", None, 1.0, [True]])
def test_enable_takes_a_bool_only(value):
    config.enable_tensor_float_32_execution(True)
    with pytest.raises(TypeError, match=r"enabled: expected a bool \(True or False\), got %s"
                                        % repr(value).replace("[", r"\[").replace(".", r"\.")):
        config.enable_tensor_float_32_execution(value)
    assert config.tensor_float_32_execution_enabled() is True      # unchanged


def test_precision_for_gpu_engines_only():
    engines = ("cuda", "cudnn", "cuda:1", "cudnn:0", "cpu", "omp", "omp:4", "numpy")
    assert {config.precision_for(e) for e in engines} == {"float32"}
    config.enable_tensor_float_32_execution(True)
    assert [config.precision_for(e) for e in engines] == ["tf32"] * 4 + ["float32"] * 4
    assert config.precision_for(None) == "float32"


@pytest.mark.parametrize("engine", ["numpy", "cpu", "omp", "omp:2"])
def test_make_net_refuses_tf32_on_cpu_engines(engine):
    s = seed_network("tiny_mnist")
    name = engine.partition(":")[0]
    with pytest.raises(ValueError, match=r"^precision: 'tf32' is offered by the cuda and cudnn "
                                         r"engines only; the %s engine computes in float32$"
                                         % name):
        make_net(engine, s["layers"], s["input_shape"], 4, s["loss"], s["optimizer"],
                 precision="tf32")


# -- models --------------------------------------------------------------------------------


def small_model(device="cpu", seed=5):
    model = models.Sequential([
        layers.Conv2D(4, 3, activation="relu", input_shape=(8, 8, 2)), layers.MaxPooling2D(),
        layers.Flatten(), layers.Dense(16, activation="relu"), layers.Dense(3)], seed=seed)
    model.compile(optimizer=optimizers.Adam(learning_rate=0.01), metrics=["accuracy"],
                  loss=losses.SparseCategoricalCrossentropy(from_logits=True), device=device)
    return model


def small_data(n=48):
    rng = np.random.default_rng(2)
    return rng.random((n, 8, 8, 2)).astype(np.float32), rng.integers(0, 3, n)


def fit(model, epochs=1, batch_size=16):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)   # no "moments restart" warning
        return model.fit(*small_data(), batch_size=batch_size, epochs=epochs, verbose=0).history


def same_weights(a, b):
    return all(np.array_equal(x, y) for x, y in zip(a.get_weights(), b.get_weights(),
                                                    strict=True))


@pytest.mark.parametrize("device", ["cpu", "numpy", "omp:2"])
def test_a_model_on_a_cpu_engine_ignores_tf32(device):
    if device.startswith("omp") and "omp" not in cnncuda.devices():
        pytest.skip("the omp engine is not built")
    plain = small_model(device)
    expected = fit(plain, epochs=2)
    config.enable_tensor_float_32_execution(True)
    model = small_model(device)
    assert fit(model) == {k: v[:1] for k, v in expected.items()}
    net = model._net
    config.enable_tensor_float_32_execution(False)
    model.predict(small_data()[0], verbose=0)
    config.enable_tensor_float_32_execution(True)
    assert fit(model)["loss"] == expected["loss"][1:]
    assert model._net is net and model._net_precision == "float32"    # never rebuilt
    assert same_weights(model, plain)


def test_a_strategy_on_cpu_engines_ignores_tf32():
    x, y = small_data()
    trained = []
    for enabled in (True, False):
        config.enable_tensor_float_32_execution(enabled)
        with distribute.MirroredStrategy(devices=["cpu", "cpu"]).scope():
            model = small_model()
        model.fit(x, y, batch_size=16, epochs=1, verbose=0)
        assert [r.max_batch for r in model._net.replicas] == [8, 8]
        trained.append(model)
    assert same_weights(*trained)


@pytest.fixture
def cpu_as_tf32(monkeypatch):
    """Pretends that TF32 applies to every engine, and builds what the model
    asks for in TF32 as float32 on the cpu engine (the same bits): the calls
    are recorded, so the model's rebuilding is checked without a GPU."""
    calls = []

    def precision_for(engine, policy=None):
        return "tf32" if config.tensor_float_32_execution_enabled() else "float32"

    def recording(real):
        def build(device, *args, precision="float32", **kwargs):
            calls.append((device, precision))
            return real(device, *args, precision="float32", **kwargs)
        return build

    monkeypatch.setattr(config, "precision_for", precision_for)
    monkeypatch.setattr(models, "make_net", recording(models.make_net))
    monkeypatch.setattr(distribute.strategy, "make_net", recording(distribute.strategy.make_net))
    return calls


def test_a_change_of_setting_rebuilds_and_carries_the_state(cpu_as_tf32):
    """Toggled between fits, the network is rebuilt in the new precision,
    with the weights and Adam's moments and step: training goes on exactly
    as on a model that never changed (here both precisions are the cpu
    engine's float32, so the bits must match)."""
    calls = cpu_as_tf32
    steady = small_model()
    fit(steady, epochs=3)
    model = small_model()
    fit(model)
    assert calls[-1] == ("cpu", "float32")
    config.enable_tensor_float_32_execution(True)
    first = model._net
    model.predict(small_data()[0][:4], verbose=0)   # rebuilt in place, state carried
    assert calls[-1] == ("cpu", "tf32") and model._net is not first
    count = len(calls)
    model.predict(small_data()[0][:4], verbose=0)   # once only
    model.evaluate(*small_data(), verbose=0)
    assert len(calls) == count
    fit(model)
    assert len(calls) == count and model._net is not first
    assert model._net_precision == "tf32" and model.optimizer.iterations == 6
    config.enable_tensor_float_32_execution(False)
    fit(model)
    assert calls[-1] == ("cpu", "float32") and model._net_precision == "float32"
    assert model.optimizer.iterations == 9
    assert same_weights(model, steady)
    count = len(calls)
    fit(model)      # no change: no rebuild
    assert len(calls) == count


def test_a_network_built_before_training_is_rebuilt_too(cpu_as_tf32):
    calls = cpu_as_tf32
    config.enable_tensor_float_32_execution(True)
    model = small_model()
    model.predict(small_data()[0], verbose=0, batch_size=16)
    assert calls == [("cpu", "tf32")]
    config.enable_tensor_float_32_execution(False)
    fit(model)
    assert calls == [("cpu", "tf32"), ("cpu", "float32")]
    assert model._net_precision == "float32"


def test_a_strategy_gets_the_precision_of_its_engine(cpu_as_tf32):
    calls = cpu_as_tf32
    config.enable_tensor_float_32_execution(True)
    strategy = distribute.MirroredStrategy(devices=["cpu", "cpu"])
    assert strategy.engine == "cpu"
    with strategy.scope():
        model = small_model()
    model.fit(*small_data(), batch_size=16, epochs=1, verbose=0)
    assert calls == [("cpu", "tf32"), ("cpu", "tf32")]
    config.enable_tensor_float_32_execution(False)
    group = model._net
    model.predict(small_data()[0][:4], verbose=0)   # no collective call: no rebuild
    model.evaluate(*small_data(), batch_size=16, verbose=0)
    assert len(calls) == 2 and model._net is group and model._net_precision == "tf32"
    model.fit(*small_data(), batch_size=16, epochs=1, verbose=0)
    assert calls[2:] == [("cpu", "float32"), ("cpu", "float32")]
    assert model._net_precision == "float32"


# -- the bench -----------------------------------------------------------------------------


def test_bench_precision_labels_helpers():
    assert row_precision(True, "tf32") == "tf32" and row_precision(False, "tf32") == "float32"
    assert row_precision(True, "float32") == "float32"
    assert row_label("cuda", "tf32") == "cuda-tf32" and row_label("cuda", "float32") == "cuda"
    assert row_label("torch-cuda-graph", "tf32") == "torch-cuda-graph-tf32"
    assert row_precision(True, "fp16") == "fp16" and row_precision(False, "bf16") == "float32"
    assert row_label("cudnn", "bf16") == "cudnn-bf16"
    with pytest.raises(ValueError, match="precision: expected one of 'float32', 'tf32', 'bf16', "
                                         "'fp16', got 'half'"):
        row_precision(True, "half")


def test_bench_float32_rows_say_so_and_cpu_rows_ignore_tf32(capsys):
    kwargs = dict(models=["tiny_mnist"], engines=["cpu"], images=64, val_images=0,
                  data="synthetic", frameworks="none", verbose=0)
    plain = bench.run(**kwargs)
    table_plain = capsys.readouterr().out
    tf32 = bench.run(precision="tf32", **kwargs)
    table_tf32 = capsys.readouterr().out
    for rows in (plain, tf32):
        assert [(r["device"], r["precision"]) for r in rows] == [("cpu", "float32")]
    assert "tf32" not in table_plain and "tf32" not in table_tf32
    # the same training: the cpu engine has no TF32
    assert plain[0]["final_loss"] == tf32[0]["final_loss"]


@pytest.fixture
def gpu_stand_in(monkeypatch):
    """The bench thinks 'cuda' can run; its network is a cpu one, and the
    precision asked for is recorded."""
    calls = []
    real = bench_cnncuda.make_net

    def build(device, *args, precision="float32", **kwargs):
        calls.append((device, precision))
        return real("cpu", *args, **kwargs)
    monkeypatch.setattr(bench, "_why_not", lambda name: None)
    monkeypatch.setattr(bench_cnncuda, "make_net", build)
    return calls


@pytest.mark.parametrize("precision, label", [("float32", "cuda"), ("tf32", "cuda-tf32"),
                                              ("bf16", "cuda-bf16"), ("fp16", "cuda-fp16")])
def test_bench_gpu_rows_carry_the_precision(gpu_stand_in, capsys, precision, label):
    rows = bench.run(models=["tiny_mnist"], engines=["cpu", "cuda"], images=64, val_images=0,
                     data="synthetic", frameworks="none", verbose=0, precision=precision)
    assert gpu_stand_in == [("cpu", "float32"), ("cuda", precision)]
    assert [(r["device"], r["precision"]) for r in rows] == [("cpu", "float32"),
                                                            (label, precision)]
    assert rows[1]["speedup_vs_cpu"] > 0
    out = capsys.readouterr().out
    table = out[out.index("model "):]
    assert ("\n" + "tiny_mnist  %s " % label) in "\n" + table
    assert ("tf32: TF32 tensor cores allowed" in table) == (precision == "tf32")
    assert ("bf16, fp16: products on 16-bit tensor cores" in table) == \
        (precision in ("bf16", "fp16"))


def test_bench_command_line_precision(gpu_stand_in, tmp_path, capsys):
    path = tmp_path / "bench.json"
    assert bench.main(["--model", "tiny_mnist", "--device", "cpu", "--device", "cuda",
                       "--images", "64", "--val-images", "0", "--data", "synthetic",
                       "--frameworks", "none", "--verbose", "0", "--precision", "tf32",
                       "--json", str(path)]) == 0
    rows = json.loads(path.read_text())["rows"]
    assert [(r["device"], r["precision"]) for r in rows] == [("cpu", "float32"),
                                                            ("cuda-tf32", "tf32")]
    assert gpu_stand_in[-1] == ("cuda", "tf32")
    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        bench.main(["--precision", "half", "--frameworks", "none"])
    assert info.value.code == 2
    assert "argument --precision: invalid choice: 'half'" in capsys.readouterr().err


def test_bench_refuses_a_bad_precision(capsys):
    with pytest.raises(ValueError, match="precision: expected one of 'float32', 'tf32', 'bf16', "
                                         "'fp16', got 'half'"):
        bench.run(models=["tiny_mnist"], engines=["cpu"], images=32, frameworks="none",
                  precision="half")
    assert capsys.readouterr().out == ""


def test_bench_plot_counts_tf32_rows_as_gpu_rows():
    from cnncuda.bench.plot import _family
    assert _family({"device": "cuda-tf32", "framework": "cnncuda"}) == "gpu"
    assert _family({"device": "cudnn", "framework": "cnncuda"}) == "gpu"
    assert _family({"device": "omp:4", "framework": "cnncuda"}) == "host"


# -- on the GPU ----------------------------------------------------------------------------


def keras_cnn(seed=0):
    """The seed CIFAR CNN in Keras layers."""
    model = models.Sequential([
        layers.Conv2D(32, 3, activation="relu", input_shape=(32, 32, 3)), layers.MaxPooling2D(),
        layers.Conv2D(64, 3, activation="relu"), layers.MaxPooling2D(),
        layers.Conv2D(64, 3, activation="relu"), layers.Flatten(),
        layers.Dense(64, activation="relu"), layers.Dense(10)], seed=seed)
    return model


def compiled(engine, seed=0):
    model = keras_cnn(seed)
    model.compile(optimizer="adam", metrics=["accuracy"], device=engine,
                  loss=losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


# batch 512: the seed CNN's convolutions are then products of >= 2^27
# multiply-adds, the ones the cuda engine's wide SGEMM (and its TF32 path) takes
BATCH = 512


def cifar(n=4 * BATCH, seed=11):
    return synthetic_data("cifar10_cnn", n, seed=seed)


@pytest.mark.parametrize("engine", GPU_ENGINES)
def test_keras_model_in_tf32_tracks_float32(engine):
    """8 Adam steps at batch 512: each epoch's loss and the evaluated loss in
    TF32 within 2% of float32's, and the accuracy within 6 points; the two
    networks do differ (TF32 was used; checked on GPUs of compute capability
    8.0 only, skipped on older ones). Float32 keeps its precision.
    The accuracy of a network 8 steps from its start moves with small
    perturbations: on an H100 (2026-11-25) cudnn's evaluated accuracies
    were 0.807 (TF32) and 0.773 (float32) with losses within 2%."""
    x, y = cifar()
    strict = compiled(engine)
    h32 = strict.fit(x, y, batch_size=BATCH, epochs=2, shuffle=False, verbose=0).history
    assert strict._net_precision == "float32"
    config.enable_tensor_float_32_execution(True)
    fast = compiled(engine)
    htf = fast.fit(x, y, batch_size=BATCH, epochs=2, shuffle=False, verbose=0).history
    assert fast._net_precision == "tf32"
    np.testing.assert_allclose(htf["loss"], h32["loss"], rtol=2e-2)
    np.testing.assert_allclose(htf["accuracy"], h32["accuracy"], atol=6e-2)
    loss_tf, acc_tf = fast.evaluate(x, y, batch_size=BATCH, verbose=0)
    config.enable_tensor_float_32_execution(False)     # else strict evaluates a TF32 copy
    loss_32, acc_32 = strict.evaluate(x, y, batch_size=BATCH, verbose=0)
    assert strict._net_precision == "float32"
    np.testing.assert_allclose(loss_tf, loss_32, rtol=2e-2)
    assert abs(acc_tf - acc_32) <= 6e-2
    require_tensor_cores()
    assert not same_weights(fast, strict), "TF32 gave float32's bits: was it used?"


@pytest.mark.parametrize("engine", GPU_ENGINES)
def test_switched_off_tf32_gives_float32_bits(engine):
    """A network built while TF32 was on is rebuilt once it is off: the same
    steps then give the weights of a model that never saw TF32, bit for bit
    (and on again, TF32 bits that differ, on GPUs with TF32 tensor cores)."""
    x, y = cifar()
    plain = compiled(engine)
    plain.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
    config.enable_tensor_float_32_execution(True)
    model = compiled(engine)
    model.predict(x[:BATCH], batch_size=BATCH, verbose=0)      # built in TF32, not trained
    assert model._net_precision == "tf32"
    config.enable_tensor_float_32_execution(False)
    model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
    assert model._net_precision == "float32"
    assert same_weights(model, plain)
    config.enable_tensor_float_32_execution(True)
    other = compiled(engine)
    other.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
    require_tensor_cores()
    assert not same_weights(other, plain)


@pytest.mark.parametrize("engine", GPU_ENGINES)
def test_switching_mid_training_carries_weights_and_moments(engine, tmp_path):
    """TF32 on for epoch 1, off for epoch 2: epoch 2 is float32 from epoch
    1's weights and Adam state, the bits of a float32 model loaded from a
    save made after that TF32 epoch."""
    x, y = cifar()
    config.enable_tensor_float_32_execution(True)
    model = compiled(engine)
    model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
    model.save(tmp_path / "after_tf32")
    config.enable_tensor_float_32_execution(False)
    model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
    assert model._net_precision == "float32" and model.optimizer.iterations == 8
    loaded = models.load_model(tmp_path / "after_tf32", device=engine)
    loaded.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
    assert loaded._net_precision == "float32" and loaded.optimizer.iterations == 8
    assert same_weights(model, loaded)
