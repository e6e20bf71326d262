"""copy.deepcopy(model) and pickle, as Keras 3 models allow: through the
model file format, the copy independent of the original and training on
exactly as the original would."""
import copy
import pickle

import numpy as np
import pytest

from cnncuda.keras import layers, losses, models, optimizers
from conftest import engine_params, random_images
from conftest import same_arrays as same

ENGINES = engine_params(("cpu", "omp")) + ["numpy"]
COPIES = {"deepcopy": copy.deepcopy, "pickle": lambda m: pickle.loads(pickle.dumps(m)),
          "copy": copy.copy}


def make(device):
    model = models.Sequential([
        layers.Conv2D(3, 3, input_shape=(6, 6, 2)), layers.BatchNormalization(),
        layers.Dropout(0.3), layers.Flatten(), layers.Dense(4)], name="original", seed=5)
    model.compile(optimizer=optimizers.Adam(learning_rate=0.01), metrics=["accuracy"],
                  loss=losses.SparseCategoricalCrossentropy(from_logits=True), device=device)
    return model


def data():
    return random_images(48, (6, 6, 2), 4, seed=1)


@pytest.mark.parametrize("device", ENGINES)
@pytest.mark.parametrize("how", list(COPIES))
def test_a_copy_of_a_trained_model_trains_on_alike_and_apart(device, how):
    """Before: TypeError (cannot pickle cnncuda._C.Net)."""
    x, y = data()
    model = make(device)
    model.fit(x, y, batch_size=8, epochs=2, verbose=0)
    twin = COPIES[how](model)
    assert twin is not model and twin.name == "original" and twin.device == model.device
    assert [l.name for l in twin.layers] == [l.name for l in model.layers]
    assert twin.optimizer.get_config() == model.optimizer.get_config()
    assert twin.optimizer.iterations == model.optimizer.iterations == 12
    assert same(twin.get_weights(), model.get_weights())
    assert np.array_equal(twin.predict(x, verbose=0), model.predict(x, verbose=0))
    before = model.get_weights()
    twin.fit(x, y, batch_size=8, epochs=1, verbose=0)          # the copy alone trains
    assert same(model.get_weights(), before) and model.optimizer.iterations == 12
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)         # then the original: the same
    assert same(twin.get_weights(), model.get_weights())


@pytest.mark.parametrize("how", list(COPIES))
def test_models_not_built_or_not_compiled_copy_too(how):
    unbuilt = models.Sequential([layers.Dense(3), layers.Dense(2)], seed=2)
    twin = COPIES[how](unbuilt)
    assert not twin.built and [type(l) for l in twin.layers] == [layers.Dense, layers.Dense]
    twin.build((None, 4))
    unbuilt.build((None, 4))
    assert same(twin.get_weights(), unbuilt.get_weights())          # the seed's
    plain = models.Sequential([layers.Dense(3, input_shape=(4,))], seed=3)
    twin = COPIES[how](plain)
    assert twin.loss is None and same(twin.get_weights(), plain.get_weights())
