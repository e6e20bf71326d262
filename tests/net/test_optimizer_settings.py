"""Optimizer hyperparameters set after compile (``model.optimizer.learning_rate
= ...``): as in Keras, training uses the new value from its next step, on
every engine -- a GPU engine's recorded step included, which reads them from
device memory (the cuda and cudnn cases here run with ``pytest -m gpu``)."""
import numpy as np
import pytest

from cnncuda import saving
from cnncuda.callbacks import Callback
from cnncuda.engine import make_net
from cnncuda.keras import layers, losses, models, optimizers
from conftest import C_ENGINES, random_images
from conftest import same_arrays as same

ENGINES = C_ENGINES + ["numpy"]


def make(device, optimizer):
    model = models.Sequential([
        layers.Conv2D(4, 3, activation="relu", input_shape=(8, 8, 2)),
        layers.Dropout(0.2), layers.Flatten(), layers.Dense(3)], seed=3)
    model.compile(optimizer=optimizer, metrics=["accuracy"], device=device,
                  loss=losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def data(n=64, seed=0):
    return random_images(n, (8, 8, 2), 3, seed)


MAKERS = {"adam": lambda: optimizers.Adam(learning_rate=0.01),
          "sgd": lambda: optimizers.SGD(learning_rate=0.05),
          "sgd-momentum": lambda: optimizers.SGD(learning_rate=0.05, momentum=0.9)}


@pytest.mark.parametrize("device", ENGINES)
@pytest.mark.parametrize("kind", list(MAKERS))
def test_a_learning_rate_of_zero_set_after_a_fit_stops_the_weights(device, kind):
    """Before, the network kept the learning rate of its build: the weights
    went on moving with learning_rate = 0.0."""
    x, y = data()
    model = make(device, MAKERS[kind]())
    model.fit(x, y, batch_size=16, epochs=1, verbose=0)
    model.optimizer.learning_rate = 0.0
    if kind == "sgd-momentum":
        model.optimizer.momentum = 0.0       # else the velocity alone moves them on
    before = model.get_weights()
    model.fit(x, y, batch_size=16, epochs=2, verbose=0)
    assert model.optimizer.iterations == 12
    trainable = [i for i, spec in enumerate(model._weight_specs()) if spec[3]]
    after = model.get_weights()
    assert all(np.array_equal(before[i], after[i]) for i in trainable)
    model.optimizer.learning_rate = 0.01
    model.fit(x, y, batch_size=16, epochs=1, verbose=0)
    assert not same(after, model.get_weights())


class SetAtEpochEnd(Callback):
    def __init__(self, changes):
        super().__init__()
        self.changes = changes

    def on_epoch_end(self, epoch, logs=None):
        if epoch == 0:
            for name, value in self.changes.items():
                setattr(self.model.optimizer, name, value)


CHANGES = [("adam", {"learning_rate": 0.03}),
           ("adam", {"beta_1": 0.5, "beta_2": 0.9, "epsilon": 1e-3}),
           ("sgd", {"learning_rate": 0.2}),
           ("sgd-momentum", {"learning_rate": 0.01, "momentum": 0.5}),
           ("sgd-momentum", {"nesterov": True})]


@pytest.mark.parametrize("device", ENGINES)
@pytest.mark.parametrize("kind, changes", CHANGES,
                         ids=["adam-lr", "adam-betas-epsilon", "sgd-lr", "momentum-lr",
                              "nesterov"])
def test_values_set_in_a_callback_train_as_if_compiled_with_them(device, kind, changes,
                                                                 tmp_path):
    """A callback changes hyperparameters after the first of three epochs.
    The twin: the model saved after that epoch, its file's compile settings
    rewritten to the new values, loaded and trained for the two other
    epochs. Bit for bit the same."""
    x, y = data()
    model = make(device, MAKERS[kind]())
    model.fit(x, y, batch_size=16, epochs=3, verbose=0, callbacks=[SetAtEpochEnd(changes)])
    first = make(device, MAKERS[kind]())
    first.fit(x, y, batch_size=16, epochs=1, verbose=0)
    path = str(tmp_path / "m.cnn")
    first.save(path)
    header, weights, slots = saving.read_model_file(path)
    header["compile"]["optimizer"]["config"].update(changes)
    saving.write_model_file(path, header, weights, slots)
    twin = models.load_model(path, device=device)
    assert twin.optimizer.get_config() == dict(MAKERS[kind]().get_config(), **changes)
    twin.fit(x, y, batch_size=16, epochs=2, verbose=0)
    assert model.optimizer.iterations == twin.optimizer.iterations == 12
    assert same(model.get_weights(), twin.get_weights())


@pytest.mark.parametrize("device", ENGINES)
def test_bad_values_are_refused_when_set_and_momentum_cannot_appear(device):
    x, y = data()
    model = make(device, optimizers.SGD(learning_rate=0.05))
    model.fit(x, y, batch_size=16, epochs=1, verbose=0)
    opt = model.optimizer
    with pytest.raises(ValueError, match="learning_rate: expected a number in"):
        opt.learning_rate = -1.0
    with pytest.raises(TypeError, match="learning_rate: expected a number, got 'x'"):
        opt.learning_rate = "x"
    with pytest.raises(TypeError, match="nesterov: expected True or False"):
        opt.nesterov = 1
    assert opt.learning_rate == 0.05
    opt.momentum = 0.9
    before = model.get_weights()
    with pytest.raises(ValueError, match="compiled with momentum 0"):
        model.fit(x, y, batch_size=16, epochs=1, verbose=0)
    assert same(before, model.get_weights()) and opt.iterations == 4
    opt.momentum = 0.0
    model.fit(x, y, batch_size=16, epochs=1, verbose=0)
    assert opt.iterations == 8


@pytest.mark.parametrize("engine", ENGINES)
def test_the_nets_set_optimizer_checks_what_it_gets(engine):
    """The binding (and the reference's) set_optimizer: the same kind only;
    values in range; no momentum where the net keeps no velocity; a refused
    call changes nothing."""
    layer = [{"kind": "dense", "units": 3}]
    loss = {"kind": "sparse_categorical_crossentropy", "from_logits": True}
    net = make_net(engine, layer, (4,), 8, loss, {"kind": "sgd", "learning_rate": 0.1}, seed=0)
    for bad, message in [({"kind": "adam"}, "built for sgd"),
                         ({"kind": "sgd", "learning_rate": -1.0}, "learning_rate"),
                         ({"kind": "sgd", "learning_rate": float("nan")}, "learning_rate"),
                         ({"kind": "sgd", "momentum": 0.5}, "without momentum")]:
        with pytest.raises(ValueError, match=message):
            net.set_optimizer(bad)
    x, y = np.ones((8, 4), np.float32), np.zeros(8, np.int64)
    w = net.get_weights()
    net.train_batch(x, y)
    step = [a - b for a, b in zip(net.get_weights(), w)]
    net.set_optimizer({"kind": "sgd", "learning_rate": 0.0})
    w = net.get_weights()
    net.train_batch(x, y)
    assert same(w, net.get_weights())
    assert any(np.any(s != 0) for s in step)


@pytest.mark.parametrize("device", ENGINES)
def test_a_layer_setting_changed_after_the_build_is_used(device):
    """Dropout's rate set to 0 after a fit: the next fit trains without
    dropout, as a model built with rate 0 (the weights and the optimizer's
    state carried); before, the network kept the rate of its build."""
    x, y = data()
    model = make(device, optimizers.Adam(learning_rate=0.01))
    model.fit(x, y, batch_size=16, epochs=1, verbose=0)
    model.layers[1].rate = 0.0
    plain = models.Sequential([
        layers.Conv2D(4, 3, activation="relu", input_shape=(8, 8, 2)),
        layers.Dropout(0.0), layers.Flatten(), layers.Dense(3)], seed=3)
    plain.compile(optimizer=optimizers.Adam(learning_rate=0.01), metrics=["accuracy"],
                  device=device, loss=losses.SparseCategoricalCrossentropy(from_logits=True))
    plain.set_weights(model.get_weights())
    plain._get_net(None, "weights").set_optimizer_state(model._optimizer_state())
    plain._shuffle_rng.bit_generator.state = model._shuffle_rng.bit_generator.state
    model.fit(x, y, batch_size=16, epochs=1, verbose=0)
    plain.fit(x, y, batch_size=16, epochs=1, verbose=0)
    assert same(model.get_weights(), plain.get_weights())
    assert model.optimizer.iterations == 8
