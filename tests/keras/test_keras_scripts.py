"""The users' Keras scripts (the project's EXPERIMENTS: the CIFAR-10 CNN and
the binary classifier on 100x100x3 images) run with only their imports
changed, on small data of the right shapes, and print Keras's lines."""
import re

import numpy as np
import pytest

import cnncuda
from cnncuda import config
from cnncuda.datasets import cifar10

GPU_RUNS = any(e in cnncuda.devices() for e in ("cuda", "cudnn"))

# Experiment 1 as the users wrote it (the GPU version), imports changed.
CIFAR_GPU_SCRIPT = """\
import cnncuda as tf
from cnncuda.keras import datasets, layers, models
import time
(train_images, train_labels), (test_images, test_labels) = datasets.cifar10.load_data()
train_images, test_images = train_images / 255.0, test_images / 255.0
model = models.Sequential([
    layers.Conv2D(32, (3, 3), activation='relu', input_shape=(32, 32, 3)),
    layers.MaxPooling2D((2, 2)),
    layers.Conv2D(64, (3, 3), activation='relu'),
    layers.MaxPooling2D((2, 2)),
    layers.Conv2D(64, (3, 3), activation='relu'),
    layers.Flatten(),
    layers.Dense(64, activation='relu'),
    layers.Dense(10)
])
model.compile(optimizer='adam',
              loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=['accuracy'])
physical_devices = tf.config.experimental.list_physical_devices('GPU')
assert len(physical_devices) > 0, "No GPU available!"
start_time = time.time()
with tf.device('/GPU:0'):
    model.fit(train_images, train_labels, epochs=15,
              validation_data=(test_images, test_labels))
end_time = time.time()
print(f'Training Time: {end_time - start_time} seconds')
"""

# The sequential (CPU) version: the same script without the device check and block.
CIFAR_CPU_SCRIPT = """\
import cnncuda as tf
from cnncuda.keras import datasets, layers, models
import time
(train_images, train_labels), (test_images, test_labels) = datasets.cifar10.load_data()
train_images, test_images = train_images / 255.0, test_images / 255.0
model = models.Sequential([
    layers.Conv2D(32, (3, 3), activation='relu', input_shape=(32, 32, 3)),
    layers.MaxPooling2D((2, 2)),
    layers.Conv2D(64, (3, 3), activation='relu'),
    layers.MaxPooling2D((2, 2)),
    layers.Conv2D(64, (3, 3), activation='relu'),
    layers.Flatten(),
    layers.Dense(64, activation='relu'),
    layers.Dense(10)
])
model.compile(optimizer='adam',
              loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=['accuracy'])
start_time = time.time()
model.fit(train_images, train_labels, epochs=15,
          validation_data=(test_images, test_labels))
end_time = time.time()
print(f'Training Time: {end_time - start_time} seconds')
"""

# Experiment 3's binary classifier, imports changed; X_train and Y_train are theirs.
BINARY_SCRIPT = """\
import cnncuda as tf
from cnncuda.keras.models import Sequential
from cnncuda.keras.layers import Conv2D, MaxPooling2D, Dense, Flatten
tf.config.threading.set_intra_op_parallelism_threads(4)
model = Sequential()
model.add(Conv2D(32, (3,3), activation='relu', input_shape=(100, 100, 3)))
model.add(MaxPooling2D((2,2)))
model.add(Conv2D(32, (3,3), activation='relu'))
model.add(MaxPooling2D((2,2)))
model.add(Flatten())
model.add(Dense(64, activation='relu'))
model.add(Dense(1, activation='sigmoid'))
model.compile(loss='binary_crossentropy', optimizer='adam', metrics=['accuracy'])
model.fit(X_train, Y_train, epochs=5, batch_size=64, verbose=2)
"""

# Keras writes a value as %.4f, or as %.4e when it is at most 1e-3 (0.0000e+00).
VALUE = r"\d+\.\d{4}(e[+-]\d\d)?"
EPOCH_LINE = (r"2/2 \[==============================\] - \d+s \d+(ms|us)/step - accuracy: {v} - "
              r"loss: {v} - val_accuracy: {v} - val_loss: {v}").format(v=VALUE)


@pytest.fixture
def small_cifar(monkeypatch):
    """load_data returns 64 training and 32 test images of Keras's CIFAR-10
    shapes and dtypes (uint8 images, (N, 1) uint8 labels)."""
    rng = np.random.default_rng(0)
    train = (rng.integers(0, 256, (64, 32, 32, 3), dtype=np.uint8),
             rng.integers(0, 10, (64, 1)).astype(np.uint8))
    test = (rng.integers(0, 256, (32, 32, 32, 3), dtype=np.uint8),
            rng.integers(0, 10, (32, 1)).astype(np.uint8))
    monkeypatch.setattr(cifar10, "load_data", lambda: (train, test))


@pytest.fixture
def restore_threads():
    before = config.get_intra_op_parallelism_threads()
    yield
    config.set_intra_op_parallelism_threads(before)


def check_cifar_output(out):
    lines = out.rstrip("\n").split("\n")
    assert len(lines) == 31, out
    for epoch in range(15):
        assert lines[2 * epoch] == "Epoch %d/15" % (epoch + 1)
        assert re.fullmatch(EPOCH_LINE, lines[2 * epoch + 1]), lines[2 * epoch + 1]
    assert re.fullmatch(r"Training Time: \d+\.\d+ seconds", lines[30])


def test_cifar10_script_sequential_version(small_cifar, capsys):
    scope = {}
    exec(compile(CIFAR_CPU_SCRIPT, "cifar10_cnn.py", "exec"), scope)
    check_cifar_output(capsys.readouterr().out)
    history = scope["model"].history.history
    assert list(history) == ["accuracy", "loss", "val_accuracy", "val_loss"]
    assert history["loss"][-1] < history["loss"][0]
    assert scope["model"]._net_device == cnncuda.config.resolve_device()


@pytest.mark.skipif(GPU_RUNS, reason="a GPU engine can run here; the gpu test runs the script")
def test_cifar10_gpu_script_without_a_gpu_stops_at_its_assert(small_cifar):
    with pytest.raises(AssertionError, match="No GPU available!"):
        exec(compile(CIFAR_GPU_SCRIPT, "cifar10_cnn_gpu.py", "exec"), {})


@pytest.mark.gpu
@pytest.mark.skipif(not GPU_RUNS, reason="no GPU engine can run here")
def test_cifar10_gpu_script(small_cifar, capsys):
    scope = {}
    exec(compile(CIFAR_GPU_SCRIPT, "cifar10_cnn_gpu.py", "exec"), scope)
    check_cifar_output(capsys.readouterr().out)
    assert scope["model"]._net_device in ("cuda", "cudnn")


def test_binary_script(capsys, restore_threads):
    rng = np.random.default_rng(1)
    scope = {"X_train": rng.random((96, 100, 100, 3)),
             "Y_train": rng.integers(0, 2, (96, 1)).astype(np.float32)}
    if GPU_RUNS:             # Keras's default: the GPU, whatever the CPU thread count
        exec(compile(BINARY_SCRIPT, "binary.py", "exec"), scope)
        assert scope["model"]._net_device in ("cuda", "cudnn")
    elif "omp" in cnncuda.devices():
        exec(compile(BINARY_SCRIPT, "binary.py", "exec"), scope)
        assert scope["model"]._net_device == "omp:4"
    else:
        with pytest.warns(RuntimeWarning, match="4 intra-op threads .* 'cpu' engine"):
            exec(compile(BINARY_SCRIPT, "binary.py", "exec"), scope)
        assert scope["model"]._net_device == "cpu"
    lines = capsys.readouterr().out.rstrip("\n").split("\n")
    assert len(lines) == 10
    for epoch in range(5):
        assert lines[2 * epoch] == "Epoch %d/5" % (epoch + 1)
        assert re.fullmatch(r"2/2 - \d+s - accuracy: {v} - loss: {v} - \d+m?s/epoch - "
                            r"\d+(ms|us|s)/step".format(v=VALUE), lines[2 * epoch + 1]), lines[2 * epoch + 1]
