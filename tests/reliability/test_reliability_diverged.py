"""A diverged model (NaN or infinite weights and optimizer state): as in
Keras, it saves, and what save wrote load reads back; set_weights takes what
get_weights gave; and a ModelCheckpoint with save_best_only never takes a
NaN loss for the best."""
import numpy as np
import pytest

from cnncuda.keras import callbacks, layers, losses, models, optimizers
from conftest import engine_params, random_images, same_arrays

ENGINES = engine_params(("cpu", "omp")) + ["numpy"]


def make(device):
    model = models.Sequential([
        layers.Conv2D(3, 3, input_shape=(6, 6, 2)), layers.BatchNormalization(),
        layers.Flatten(), layers.Dense(4)], seed=2)
    model.compile(optimizer=optimizers.Adam(learning_rate=0.01), device=device,
                  loss=losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def data(n=32):
    return random_images(n, (6, 6, 2), 4)


def poison(model):
    """NaN in the first kernel, infinity in a moving variance (set_weights
    refused both before)."""
    weights = model.get_weights()
    weights[0][0, 0, 0, 0] = np.nan
    weights[5][1] = np.inf
    model.set_weights(weights)
    return weights


def same(a, b):
    return same_arrays(a, b, equal_nan=True)


@pytest.mark.parametrize("device", ENGINES)
def test_set_weights_takes_what_get_weights_gives(device):
    model = make(device)
    weights = poison(model)
    assert same(model.get_weights(), weights)
    model.set_weights(model.get_weights())
    assert same(model.get_weights(), weights)


@pytest.mark.parametrize("device", ENGINES)
def test_a_diverged_model_saves_and_loads_back(tmp_path, device):
    """The weights and Adam's moments turn NaN in a step; save writes them,
    load_model reads them back (before: "expected finite values, got NaN",
    after the good file had been replaced), and both go on alike."""
    x, y = data()
    model = make(device)
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    poison(model)
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    assert any(np.isnan(w).any() for w in model.get_weights())
    state = model._optimizer_state()
    assert any(np.isnan(a).any() for per in state["slots"] for a in per)
    model.save(tmp_path / "m")
    loaded = models.load_model(tmp_path / "m", device=device)
    assert same(loaded.get_weights(), model.get_weights())
    loaded_state = loaded._optimizer_state()
    assert same([a for per in loaded_state["slots"] for a in per],
                [a for per in state["slots"] for a in per])
    model.save_weights(tmp_path / "w")
    fresh = make(device)
    fresh.load_weights(tmp_path / "w")
    assert same(fresh.get_weights(), model.get_weights())
    assert np.array_equal(loaded.predict(x, verbose=0), model.predict(x, verbose=0),
                          equal_nan=True)


class PoisonAt(callbacks.Callback):
    def __init__(self, epoch):
        super().__init__()
        self.epoch = epoch

    def on_epoch_end(self, epoch, logs=None):
        if epoch == self.epoch:
            poison(self.model)


@pytest.mark.parametrize("device", ENGINES)
def test_save_best_only_never_takes_a_nan_loss(tmp_path, device):
    """The loss turns NaN from the second epoch on: the best checkpoint stays
    the first epoch's (it loads, with that epoch's finite weights), while a
    checkpoint of every epoch holds the NaN model, which loads too."""
    x, y = data()
    model = make(device)
    first = {}
    keep = callbacks.LambdaCallback(
        on_epoch_end=lambda epoch, logs: first.setdefault("w", model.get_weights()))
    best = callbacks.ModelCheckpoint(str(tmp_path / "best"), monitor="loss",
                                     save_best_only=True)
    every = callbacks.ModelCheckpoint(str(tmp_path / "last"), monitor="loss")
    history = model.fit(x, y, batch_size=8, epochs=3, verbose=0,
                        callbacks=[keep, best, PoisonAt(0), every])
    assert np.isfinite(history.history["loss"][0])
    assert np.isnan(history.history["loss"][1:]).all()
    assert same(models.load_model(tmp_path / "best").get_weights(), first["w"])
    assert same(models.load_model(tmp_path / "last").get_weights(), model.get_weights())
