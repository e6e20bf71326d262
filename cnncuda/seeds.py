"""The seed networks: the exact models of the experiments cnncuda re-runs.

Each entry gives the layer list of cnncuda.engine, the input shape, the loss,
the batch size and the size of the experiment's training set. Activations
that Keras writes as ``Conv2D(..., activation='relu')`` are their own layer
here, as the core runs them.
"""
import numpy as np

__all__ = ["SEEDS", "seed_network", "synthetic_data", "parameter_count"]


def _conv(units, k, padding="valid"):
    return {"kind": "conv2d", "units": units, "kernel": (k, k), "padding": padding}


def _act(name):
    return {"kind": "activation", "activation": name}


def _dense(units):
    return {"kind": "dense", "units": units}


MAXPOOL2 = {"kind": "maxpool", "kernel": (2, 2)}
AVGPOOL2 = {"kind": "avgpool", "kernel": (2, 2)}
FLATTEN = {"kind": "flatten"}
ADAM = {"kind": "adam", "learning_rate": 1e-3, "beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-7}

SEEDS = {
    # Experiment 1: the Keras CIFAR-10 CNN (122,570 parameters).
    "cifar10_cnn": {
        "layers": [_conv(32, 3), _act("relu"), MAXPOOL2, _conv(64, 3), _act("relu"), MAXPOOL2,
                   _conv(64, 3), _act("relu"), FLATTEN, _dense(64), _act("relu"), _dense(10)],
        "input_shape": (32, 32, 3),
        "loss": {"kind": "sparse_categorical_crossentropy", "from_logits": True},
        "batch_size": 32,
        "train_images": 50000,
        "classes": 10,
    },
    # Experiment 3: LeNet-5 on 28x28 digits.
    "lenet5": {
        "layers": [_conv(6, 5, "same"), _act("relu"), AVGPOOL2, _conv(16, 5), _act("relu"),
                   AVGPOOL2, FLATTEN, _dense(120), _act("relu"), _dense(84), _act("relu"),
                   _dense(10)],
        "input_shape": (28, 28, 1),
        "loss": {"kind": "sparse_categorical_crossentropy", "from_logits": True},
        "batch_size": 32,
        "train_images": 60000,
        "classes": 10,
    },
    # Experiment 4: one convolution and pooling, then a dense softmax.
    "tiny_mnist": {
        "layers": [_conv(8, 3), MAXPOOL2, FLATTEN, _dense(10), _act("softmax")],
        "input_shape": (28, 28, 1),
        "loss": {"kind": "categorical_crossentropy", "from_logits": False},
        "batch_size": 32,
        "train_images": 60000,
        "classes": 10,
    },
    # Experiment 2: an Imagenette-style CNN (10 classes of ImageNet at
    # 160x160): three Conv-BatchNorm-ReLU-MaxPool blocks, Dense(128),
    # Dropout(0.5), Dense(10, softmax); 5,403,530 parameters.
    "imagenette_cnn": {
        "layers": [
            _conv(32, 3), {"kind": "batchnorm"}, _act("relu"), MAXPOOL2,
            _conv(64, 3), {"kind": "batchnorm"}, _act("relu"), MAXPOOL2,
            _conv(128, 3), {"kind": "batchnorm"}, _act("relu"), MAXPOOL2,
            FLATTEN, _dense(128), _act("relu"), {"kind": "dropout", "rate": 0.5},
            _dense(10), _act("softmax")],
        "input_shape": (160, 160, 3),
        "loss": {"kind": "categorical_crossentropy", "from_logits": False},
        "batch_size": 32,
        "train_images": 9469,
        "classes": 10,
    },
    # Experiment 3: the binary classifier on 100x100x3 images.
    "binary_100": {
        "layers": [_conv(32, 3), _act("relu"), MAXPOOL2, _conv(32, 3), _act("relu"), MAXPOOL2,
                   FLATTEN, _dense(64), _act("relu"), _dense(1), _act("sigmoid")],
        "input_shape": (100, 100, 3),
        "loss": {"kind": "binary_crossentropy", "from_logits": False},
        "batch_size": 64,
        "train_images": 2000,
        "classes": 2,
    },
}


def seed_network(name):
    """A copy of seed `name` with Adam at Keras's defaults as its optimizer."""
    if name not in SEEDS:
        raise ValueError("model: expected one of %s, got %r" % (", ".join(SEEDS), name))
    seed = {k: (list(v) if k == "layers" else v) for k, v in SEEDS[name].items()}
    seed["optimizer"] = dict(ADAM)
    return seed


def synthetic_data(name, n, seed=0):
    """(x, y) of `n` synthetic samples for seed `name`: float32 images in [0, 1]
    (NHWC) made of a class template plus noise, so they can be learned, and
    labels in the form the seed's loss takes (int labels for sparse, one-hot
    for categorical, (n, 1) 0/1 for binary)."""
    s = SEEDS[name]
    rng = np.random.default_rng(seed)
    classes = s["classes"]
    templates = rng.random((classes,) + tuple(s["input_shape"]), dtype=np.float32)
    labels = rng.integers(0, classes, size=n)
    noise = rng.random((n,) + tuple(s["input_shape"]), dtype=np.float32)
    x = (0.75 * templates[labels] + 0.25 * noise).astype(np.float32)
    kind = s["loss"]["kind"]
    if kind == "sparse_categorical_crossentropy":
        y = labels.astype(np.int64)
    elif kind == "categorical_crossentropy":
        y = np.eye(classes, dtype=np.float32)[labels]
    else:
        y = labels.reshape(n, 1).astype(np.float32)
    return x, y


def parameter_count(net):
    """Trainable parameters of a built network (any engine)."""
    return sum(int(g.size) for g in net.get_gradients())
