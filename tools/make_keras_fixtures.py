"""Writes the Keras-made model files that tests/data/test_keras_files.py
loads without Keras installed: a small CNN with every layer kind cnncuda
reads, trained two epochs by Keras 3 (JAX backend, CPU) on fixed data, saved
as .keras and .h5, with the inputs and Keras's predictions beside them.

    KERAS_BACKEND=jax python tools/make_keras_fixtures.py tests/data/keras_files
"""
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import keras  # noqa: E402
import numpy as np  # noqa: E402


def main(folder):
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(0)
    x = rng.random((32, 12, 12, 2), dtype=np.float32)
    y = rng.integers(0, 3, 32)
    keras.utils.set_random_seed(1)
    model = keras.Sequential([
        keras.Input((12, 12, 2)),
        keras.layers.Conv2D(4, 3, padding="same", activation="relu"),
        keras.layers.BatchNormalization(),
        keras.layers.MaxPooling2D(2),
        keras.layers.Conv2D(6, 3),
        keras.layers.ReLU(),
        keras.layers.AveragePooling2D(2),
        keras.layers.Flatten(),
        keras.layers.Dropout(0.25),
        keras.layers.Dense(8, activation="tanh"),
        keras.layers.Dense(3),
        keras.layers.Activation("softmax")])
    model.compile(optimizer=keras.optimizers.Adam(0.01), metrics=["accuracy"],
                  loss=keras.losses.SparseCategoricalCrossentropy())
    model.fit(x, y, epochs=2, batch_size=8, verbose=0)
    model.save(os.path.join(folder, "keras_cnn.keras"))
    model.save(os.path.join(folder, "keras_cnn.h5"))
    np.save(os.path.join(folder, "inputs.npy"), x[:6])
    np.save(os.path.join(folder, "keras_predictions.npy"), model.predict(x[:6], verbose=0))
    print("Keras %s, backend %s: written to %s" % (keras.__version__, keras.backend.backend(),
                                                   folder))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/data/keras_files")
