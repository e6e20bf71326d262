"""fit called from a callback of another fit (fine-tuning on another set at
an epoch's end, or after a batch): the outer fit goes on with its own data,
as in Keras -- bit for bit what the same fits made one after another give."""
import pytest

from cnncuda.callbacks import Callback
from cnncuda.keras import layers, losses, models, optimizers
from conftest import assert_same_weights, engine_params, random_images

ENGINES = engine_params(("cpu", "omp")) + ["numpy"]


def make(device):
    model = models.Sequential([
        layers.Conv2D(4, 3, activation="relu", input_shape=(8, 8, 2)),
        layers.Dropout(0.2), layers.Flatten(), layers.Dense(3)], seed=7)
    model.compile(optimizer=optimizers.Adam(learning_rate=0.01), metrics=["accuracy"],
                  loss=losses.SparseCategoricalCrossentropy(from_logits=True), device=device)
    return model


def data(n, seed):
    return random_images(n, (8, 8, 2), 3, seed)


class FineTuneAtEpochEnd(Callback):
    def __init__(self, x, y, batch):
        super().__init__()
        self.x, self.y, self.batch = x, y, batch

    def on_epoch_end(self, epoch, logs=None):
        self.model.fit(self.x, self.y, batch_size=self.batch, epochs=1, verbose=0)


@pytest.mark.parametrize("device", ENGINES)
@pytest.mark.parametrize("n2, batch2", [(40, 8), (64, 8), (24, 8), (64, 32)],
                         ids=["same-size", "larger", "smaller", "larger-batch"])
def test_an_outer_fit_keeps_its_data_after_a_fit_in_its_callback(device, n2, batch2):
    """Three outer epochs on x (40 samples, batch 8), each followed by an
    inner fit on x2: the outer fit trains on x every epoch. Before, it
    trained on x2 from its second epoch on (bit for bit), or raised "order:
    expected shape (40,), got (64,)"; with an inner batch larger than the
    outer's, the network was rebuilt and the outer fit went on training
    the dropped one."""
    x, y = data(40, 1)
    x2, y2 = data(n2, 2)
    nested = make(device)
    history = nested.fit(x, y, batch_size=8, epochs=3, verbose=0,
                         callbacks=[FineTuneAtEpochEnd(x2, y2, batch2)])
    twin = make(device)
    losses_alone = []
    for _ in range(3):
        losses_alone += twin.fit(x, y, batch_size=8, epochs=1, verbose=0).history["loss"]
        twin.fit(x2, y2, batch_size=batch2, epochs=1, verbose=0)
    assert history.history["loss"] == losses_alone
    assert nested.optimizer.iterations == twin.optimizer.iterations
    assert_same_weights(nested, twin)


class FineTuneAfterBatch(Callback):
    def __init__(self, x, y):
        super().__init__()
        self.x, self.y, self.inner = x, y, 0

    def on_train_batch_end(self, batch, logs=None):
        if batch == 1:
            self.inner += 1
            self.model.fit(self.x, self.y, batch_size=8, epochs=1, shuffle=False, verbose=0)


@pytest.mark.parametrize("device", ENGINES)
def test_a_fit_after_a_batch_leaves_the_rest_of_the_epoch_on_the_outer_data(device):
    """An inner fit after the outer epoch's second batch: the outer epoch's
    remaining batches are those of its own order over its own data. The
    twin makes the same steps by hand: the outer order's first two batches,
    the inner epoch, then the rest of the outer order (train_batch on the
    same rows, with the dropout and step counters carried)."""
    x, y = data(40, 3)
    x2, y2 = data(24, 4)
    nested = make(device)
    callback = FineTuneAfterBatch(x2, y2)
    nested.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0, callbacks=[callback])
    assert callback.inner == 1
    twin = make(device)
    twin.fit(x[:16], y[:16], batch_size=8, epochs=1, shuffle=False, verbose=0)
    twin.fit(x2, y2, batch_size=8, epochs=1, shuffle=False, verbose=0)
    twin.fit(x[16:], y[16:], batch_size=8, epochs=1, shuffle=False, verbose=0)
    assert nested.optimizer.iterations == twin.optimizer.iterations == 5 + 3
    assert_same_weights(nested, twin)


class ValidationMatchesEvaluate(Callback):
    """At each epoch's end (before any other callback), the validation
    figures fit reports are evaluate's on the outer fit's validation data."""

    def __init__(self, xv, yv):
        super().__init__()
        self.xv, self.yv, self.checked = xv, yv, 0

    def on_epoch_end(self, epoch, logs=None):
        loss, accuracy = self.model.evaluate(self.xv, self.yv, batch_size=8, verbose=0)
        assert (logs["val_loss"], logs["val_accuracy"]) == (loss, accuracy), epoch
        self.checked += 1


class FineTuneWithValidation(Callback):
    def __init__(self, x, y, validation):
        super().__init__()
        self.x, self.y, self.validation = x, y, validation

    def on_epoch_end(self, epoch, logs=None):
        self.model.fit(self.x, self.y, batch_size=8, epochs=1, verbose=0,
                       validation_data=self.validation)


@pytest.mark.parametrize("device", ENGINES + engine_params(("cuda", "cudnn")))
@pytest.mark.parametrize("inner_validation", ["none", "same-size", "other-size"])
def test_an_outer_fit_keeps_its_validation_data(device, inner_validation):
    """The validation data stay on the engine between epochs: an inner fit
    with other validation data (or none) must not become the outer fit's."""
    x, y = data(40, 1)
    xv, yv = data(24, 3)
    x2, y2 = data(32, 2)
    inner = {"none": None, "same-size": data(24, 4), "other-size": data(16, 5)}[inner_validation]
    model = make(device)
    check = ValidationMatchesEvaluate(xv, yv)
    model.fit(x, y, batch_size=8, epochs=3, verbose=0, validation_data=(xv, yv),
              callbacks=[check, FineTuneWithValidation(x2, y2, inner)])
    assert check.checked == 3
