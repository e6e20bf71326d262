"""One script per kind of Keras tutorial (written here, shaped like the
public ones: TensorFlow's image classification with augmentation, the
functional API's toy ResNet, overfit and underfit with regularizers, a
frozen base under a new head, an autoencoder, Chollet's binary classifier on
vectors, a one-hot classifier with initializers and other activations, the
"quickstart for experts" subclassed model trained with fit, Chollet's
ticket model of three inputs and two outputs, the mixed-precision guide's
model under mixed_float16, the imbalanced-data tutorial's classifier with
class weights and Precision/Recall/AUC over a Dataset), each
run with only its imports changed. Each runs on small data of the shapes
the tutorial uses, on the `cpu` engine and on the NumPy reference engine
(`numpy`), and the two Histories must agree: the same script, the same
seed, the same numbers within float32 rounding. (The basic classification
tutorial on real Fashion-MNIST is tests/keras/test_keras_fashion_mnist.py;
the CIFAR-10 CNN, test_keras_scripts.py.)"""
import numpy as np
import pytest

import cnncuda

IMAGE_AUGMENTATION = """\
import cnncuda as tf
from cnncuda import keras
from cnncuda.keras import layers
tf.keras.utils.set_random_seed(7)
num_classes = 5
data_augmentation = keras.Sequential([
    layers.RandomFlip("horizontal", input_shape=(24, 24, 3)),
    layers.RandomRotation(0.1),
    layers.RandomZoom(0.1),
])
model = keras.Sequential([
    data_augmentation,
    layers.Rescaling(1./255),
    layers.Conv2D(8, 3, padding='same', activation='relu'),
    layers.MaxPooling2D(),
    layers.Conv2D(16, 3, padding='same', activation='relu'),
    layers.MaxPooling2D(),
    layers.Dropout(0.2),
    layers.Flatten(),
    layers.Dense(32, activation='relu'),
    layers.Dense(num_classes, name="outputs")
])
model.compile(optimizer='adam',
              loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=['accuracy'])
history = model.fit(x_train, y_train, validation_data=(x_val, y_val), epochs=2,
                    batch_size=16, verbose=0)
probability_model = keras.Sequential([model, layers.Softmax()])
predictions = probability_model.predict(x_val, verbose=0)
"""

FUNCTIONAL_RESNET = """\
from cnncuda import keras
from cnncuda.keras import layers
keras.utils.set_random_seed(3)
inputs = keras.Input(shape=(16, 16, 3), name="img")
x = layers.Conv2D(8, 3, activation="relu")(inputs)
x = layers.Conv2D(16, 3, activation="relu")(x)
block_1_output = layers.MaxPooling2D(2)(x)
x = layers.Conv2D(16, 3, activation="relu", padding="same")(block_1_output)
x = layers.Conv2D(16, 3, activation="relu", padding="same")(x)
block_2_output = layers.Add()([x, block_1_output])
x = layers.Conv2D(16, 3, activation="relu")(block_2_output)
x = layers.GlobalAveragePooling2D()(x)
x = layers.Dense(32, activation="relu")(x)
x = layers.Dropout(0.5)(x)
outputs = layers.Dense(10)(x)
model = keras.Model(inputs, outputs, name="toy_resnet")
model.compile(optimizer=keras.optimizers.RMSprop(1e-3),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["acc"])
history = model.fit(x_train, y_train, batch_size=16, epochs=2, validation_split=0.2,
                    verbose=0)
"""

OVERFIT_UNDERFIT = """\
import cnncuda as tf
from cnncuda.keras import layers, regularizers
tf.keras.utils.set_random_seed(5)
model = tf.keras.Sequential([
    layers.Dense(64, activation='elu', kernel_regularizer=regularizers.l2(0.001),
                 input_shape=(features,)),
    layers.Dropout(0.5),
    layers.Dense(64, activation='elu', kernel_regularizer=regularizers.l2(0.001)),
    layers.Dropout(0.5),
    layers.Dense(1)
])
model.compile(optimizer=tf.keras.optimizers.Adam(learning_rate=0.001),
              loss=tf.keras.losses.BinaryCrossentropy(from_logits=True),
              metrics=['accuracy'])
history = model.fit(x_train, y_train, validation_data=(x_val, y_val), epochs=3,
                    batch_size=32, verbose=0,
                    callbacks=[tf.keras.callbacks.EarlyStopping(monitor='val_loss',
                                                                patience=5)])
"""

FROZEN_BASE = """\
from cnncuda import keras
from cnncuda.keras import layers
keras.utils.set_random_seed(11)
base_model = keras.Sequential([
    layers.Conv2D(8, 3, activation="relu", input_shape=(20, 20, 3)),
    layers.BatchNormalization(),
    layers.MaxPooling2D(),
    layers.Conv2D(16, 3, activation="relu"),
], name="base")
base_model.trainable = False
inputs = keras.Input(shape=(20, 20, 3))
x = layers.Rescaling(1.0 / 127.5, offset=-1)(inputs)
x = base_model(x)
x = layers.GlobalAveragePooling2D()(x)
x = layers.Dropout(0.2)(x)
outputs = layers.Dense(1)(x)
model = keras.Model(inputs, outputs)
frozen_before = [w.copy() for w in base_model.get_weights()]
model.compile(optimizer=keras.optimizers.Adam(),
              loss=keras.losses.BinaryCrossentropy(from_logits=True),
              metrics=["accuracy"])
history = model.fit(x_train, y_train, epochs=2, batch_size=16, verbose=0)
frozen_after = base_model.get_weights()
"""

AUTOENCODER = """\
from cnncuda import keras
from cnncuda.keras import layers
keras.utils.set_random_seed(2)
encoder_input = keras.Input(shape=(12, 12, 1), name="img")
x = layers.Conv2D(8, 3, activation="relu", padding="same")(encoder_input)
x = layers.MaxPooling2D(2)(x)
x = layers.Conv2D(4, 3, activation="relu", padding="same")(x)
x = layers.Flatten()(x)
encoder_output = layers.Dense(16, activation="relu")(x)
encoder = keras.Model(encoder_input, encoder_output, name="encoder")
x = layers.Dense(6 * 6 * 4, activation="relu")(encoder_output)
x = layers.Reshape((6, 6, 4))(x)
x = layers.UpSampling2D(2)(x)
x = layers.ZeroPadding2D(1)(x)
x = layers.Cropping2D(1)(x)
x = layers.Conv2D(1, 3, activation="sigmoid", padding="same")(x)
decoder_output = layers.Flatten()(x)    # the losses take (batch, values) outputs
autoencoder = keras.Model(encoder_input, decoder_output, name="autoencoder")
autoencoder.compile(optimizer="adam", loss="binary_crossentropy")
history = autoencoder.fit(x_train, x_train.reshape(len(x_train), -1), epochs=2,
                          batch_size=16, verbose=0)
codes = encoder.predict(x_train[:4], verbose=0)
model = autoencoder
"""

CHOLLET_BINARY = """\
from cnncuda import keras
from cnncuda.keras import layers
keras.utils.set_random_seed(1)
model = keras.Sequential([
    layers.Dense(16, activation="relu"),
    layers.Dense(16, activation="relu"),
    layers.Dense(1, activation="sigmoid")
])
model.compile(optimizer="rmsprop", loss="binary_crossentropy", metrics=["accuracy"])
history = model.fit(partial_x_train, partial_y_train, epochs=3, batch_size=64,
                    validation_data=(x_val, y_val), verbose=0)
"""

ONE_HOT = """\
import cnncuda as tf
from cnncuda.keras import layers, initializers
tf.keras.utils.set_random_seed(9)
y_train_1h = tf.keras.utils.to_categorical(y_train, 4)
model = tf.keras.Sequential([
    layers.Conv2D(6, 3, kernel_initializer="he_normal", use_bias=False,
                  input_shape=(10, 10, 2)),
    layers.BatchNormalization(),
    layers.LeakyReLU(negative_slope=0.1),
    layers.Conv2D(8, 3, kernel_initializer=initializers.HeUniform(seed=1)),
    layers.ELU(),
    layers.Flatten(),
    layers.Dense(16, activation="gelu", kernel_initializer="lecun_normal",
                 bias_initializer=initializers.Constant(0.1)),
    layers.PReLU(),
    layers.Dense(4, activation="softmax"),
])
model.compile(optimizer=tf.keras.optimizers.Nadam(learning_rate=0.002),
              loss="categorical_crossentropy", metrics=["accuracy"])
history = model.fit(x_train, y_train_1h, epochs=2, batch_size=20, verbose=0,
                    validation_split=0.25)
"""

SUBCLASSED_QUICKSTART = """\
import cnncuda as tf
from cnncuda.keras.layers import Dense, Flatten, Conv2D, Dropout
from cnncuda.keras import Model
tf.keras.utils.set_random_seed(11)
x_train, x_test = x_train / 255.0, x_test / 255.0
x_train = x_train[..., None].astype("float32")
x_test = x_test[..., None].astype("float32")

class MyModel(Model):
    def __init__(self):
        super().__init__()
        self.conv1 = Conv2D(8, 3, activation='relu')
        self.flatten = Flatten()
        self.d1 = Dense(32, activation='relu')
        self.dropout = Dropout(0.2)
        self.d2 = Dense(10)

    def call(self, x, training=False):
        x = self.conv1(x)
        x = self.flatten(x)
        x = self.d1(x)
        x = self.dropout(x, training=training)
        return self.d2(x)

model = MyModel()
loss_object = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
model.compile(optimizer=tf.keras.optimizers.Adam(), loss=loss_object, metrics=['accuracy'])
history = model.fit(x_train, y_train, epochs=2, batch_size=16,
                    validation_data=(x_test, y_test), verbose=0)
logits = model(x_test[:5])
logits_training = model(x_test[:5], training=True)
"""

TICKET_MULTI_OUTPUT = """\
import cnncuda as tf
from cnncuda import keras
from cnncuda.keras import layers
tf.keras.utils.set_random_seed(5)
vocabulary_size, num_tags, num_departments = 60, 8, 4
title = keras.Input(shape=(vocabulary_size,), name="title")
text_body = keras.Input(shape=(vocabulary_size,), name="text_body")
tags = keras.Input(shape=(num_tags,), name="tags")
features = layers.Concatenate()([title, text_body, tags])
features = layers.Dense(32, activation="relu")(features)
priority = layers.Dense(1, activation="sigmoid", name="priority")(features)
department = layers.Dense(num_departments, activation="softmax", name="department")(features)
model = keras.Model(inputs=[title, text_body, tags], outputs=[priority, department])
model.compile(optimizer="rmsprop",
              loss=["mean_squared_error", "categorical_crossentropy"],
              metrics=[["mean_absolute_error"], ["accuracy"]])
history = model.fit([title_data, text_body_data, tags_data],
                    [priority_data, department_data], epochs=2, batch_size=16, verbose=0,
                    validation_split=0.25)
results = model.evaluate([title_data, text_body_data, tags_data],
                         {"priority": priority_data, "department": department_data}, verbose=0)
priority_preds, department_preds = model.predict(
    {"title": title_data, "text_body": text_body_data, "tags": tags_data}, verbose=0)
"""

MIXED_PRECISION = """\
import cnncuda as tf
from cnncuda import keras
from cnncuda.keras import layers, mixed_precision
tf.keras.utils.set_random_seed(9)
mixed_precision.set_global_policy("mixed_float16")
inputs = keras.Input(shape=(64,), name="digits")
x = layers.Dense(48, activation="relu", name="dense_1")(inputs)
x = layers.Dense(48, activation="relu", name="dense_2")(x)
x = layers.Dense(10, name="dense_logits")(x)
outputs = layers.Activation("softmax", dtype="float32", name="predictions")(x)
model = keras.Model(inputs=inputs, outputs=outputs)
model.compile(loss="sparse_categorical_crossentropy", optimizer=keras.optimizers.RMSprop(),
              metrics=["accuracy"])
history = model.fit(x_train, y_train, batch_size=16, epochs=2, validation_split=0.2, verbose=0)
policy_name = model.layers[1].dtype_policy.name
compute_dtype = model.layers[1].compute_dtype
output_dtype = model.layers[-1].compute_dtype
loss_scale = float(model.optimizer.scale)
mixed_precision.set_global_policy("float32")
"""

IMBALANCED = """\
import numpy as np
import cnncuda as tf
from cnncuda import keras
tf.keras.utils.set_random_seed(13)
METRICS = [keras.metrics.BinaryAccuracy(name="accuracy"),
           keras.metrics.Precision(name="precision"),
           keras.metrics.Recall(name="recall"),
           keras.metrics.AUC(name="auc")]
neg, pos = np.bincount(train_labels.astype(int))
initial_bias = np.log([pos / neg])
model = keras.Sequential([
    keras.layers.Dense(16, activation="relu", input_shape=(train_features.shape[-1],)),
    keras.layers.Dropout(0.5),
    keras.layers.Dense(1, activation="sigmoid",
                       bias_initializer=keras.initializers.Constant(initial_bias)),
])
model.compile(optimizer=keras.optimizers.Adam(learning_rate=1e-3),
              loss=keras.losses.BinaryCrossentropy(), metrics=METRICS)
weight_for_0 = (1 / neg) * (len(train_labels) / 2.0)
weight_for_1 = (1 / pos) * (len(train_labels) / 2.0)
class_weight = {0: weight_for_0, 1: weight_for_1}
train_ds = tf.data.Dataset.from_tensor_slices((train_features, train_labels))
train_ds = train_ds.shuffle(64, seed=3).batch(16)
val_ds = tf.data.Dataset.from_tensor_slices((val_features, val_labels)).batch(16)
history = model.fit(train_ds, epochs=2, validation_data=val_ds, class_weight=class_weight,
                    verbose=0)
"""


def data():
    rng = np.random.default_rng(0)
    return {
        "IMAGE_AUGMENTATION": {"x_train": rng.integers(0, 256, (48, 24, 24, 3)).astype(np.float32),
                               "y_train": rng.integers(0, 5, 48),
                               "x_val": rng.integers(0, 256, (16, 24, 24, 3)).astype(np.float32),
                               "y_val": rng.integers(0, 5, 16)},
        "FUNCTIONAL_RESNET": {"x_train": rng.random((40, 16, 16, 3)).astype(np.float32),
                              "y_train": rng.integers(0, 10, 40)},
        "OVERFIT_UNDERFIT": {"features": 28,
                             "x_train": rng.standard_normal((96, 28)).astype(np.float32),
                             "y_train": rng.integers(0, 2, (96, 1)).astype(np.float32),
                             "x_val": rng.standard_normal((32, 28)).astype(np.float32),
                             "y_val": rng.integers(0, 2, (32, 1)).astype(np.float32)},
        "FROZEN_BASE": {"x_train": rng.integers(0, 256, (32, 20, 20, 3)).astype(np.float32),
                        "y_train": rng.integers(0, 2, (32, 1)).astype(np.float32)},
        "AUTOENCODER": {"x_train": rng.random((32, 12, 12, 1)).astype(np.float32)},
        "CHOLLET_BINARY": {"partial_x_train": (rng.random((128, 100)) < 0.1).astype(np.float32),
                           "partial_y_train": rng.integers(0, 2, 128).astype(np.float32),
                           "x_val": (rng.random((64, 100)) < 0.1).astype(np.float32),
                           "y_val": rng.integers(0, 2, 64).astype(np.float32)},
        "TICKET_MULTI_OUTPUT": {"title_data": rng.integers(0, 2, (48, 60)).astype(np.float32),
                                "text_body_data": rng.integers(0, 2, (48, 60)).astype(np.float32),
                                "tags_data": rng.integers(0, 2, (48, 8)).astype(np.float32),
                                "priority_data": rng.random((48, 1)).astype(np.float32),
                                "department_data": np.eye(4, dtype=np.float32)[
                                    rng.integers(0, 4, 48)]},
        "MIXED_PRECISION": {"x_train": rng.random((60, 64)).astype(np.float32),
                            "y_train": rng.integers(0, 10, 60)},
        "IMBALANCED": {"train_features": rng.standard_normal((96, 12)).astype(np.float32),
                       "train_labels": (rng.random(96) < 0.15).astype(np.float32),
                       "val_features": rng.standard_normal((32, 12)).astype(np.float32),
                       "val_labels": (rng.random(32) < 0.15).astype(np.float32)},
        "SUBCLASSED_QUICKSTART": {"x_train": rng.integers(0, 256, (48, 14, 14), dtype=np.uint8),
                                  "y_train": rng.integers(0, 10, 48),
                                  "x_test": rng.integers(0, 256, (16, 14, 14), dtype=np.uint8),
                                  "y_test": rng.integers(0, 10, 16)},
        "ONE_HOT": {"x_train": rng.standard_normal((40, 10, 10, 2)).astype(np.float32),
                    "y_train": rng.integers(0, 4, 40)},
    }


SCRIPTS = ["IMAGE_AUGMENTATION", "FUNCTIONAL_RESNET", "OVERFIT_UNDERFIT", "FROZEN_BASE",
           "AUTOENCODER", "CHOLLET_BINARY", "ONE_HOT", "SUBCLASSED_QUICKSTART",
           "TICKET_MULTI_OUTPUT", "MIXED_PRECISION", "IMBALANCED"]


def run(name, engine):
    scope = dict(data()[name])
    try:
        with cnncuda.device(engine):
            exec(compile(globals()[name], name.lower() + ".py", "exec"), scope)
    finally:        # a script that fails midway leaves no policy behind
        cnncuda.keras.mixed_precision.set_global_policy("float32")
    return scope


@pytest.mark.parametrize("name", SCRIPTS)
def test_the_tutorial_script_runs_as_on_the_reference(name):
    mine, ref = run(name, "cpu"), run(name, "numpy")
    history, expected = mine["history"].history, ref["history"].history
    assert history.keys() == expected.keys()
    for key in expected:
        np.testing.assert_allclose(history[key], expected[key], rtol=2e-4, atol=2e-5,
                                   err_msg="%s: %s" % (name, key))
    assert all(np.isfinite(v).all() for v in history.values())
    for a, b in zip(mine["model"].get_weights(), ref["model"].get_weights(), strict=True):
        np.testing.assert_allclose(a, b, rtol=2e-3, atol=2e-4)


def test_the_scripts_leave_what_the_tutorials_show():
    scope = run("IMAGE_AUGMENTATION", "cpu")
    np.testing.assert_allclose(scope["predictions"].sum(axis=1), 1, rtol=1e-5)
    scope = run("FROZEN_BASE", "cpu")
    assert all(np.array_equal(a, b) for a, b in zip(scope["frozen_before"],
                                                    scope["frozen_after"], strict=True))
    scope = run("AUTOENCODER", "cpu")
    assert scope["codes"].shape == (4, 16)
    scope = run("SUBCLASSED_QUICKSTART", "cpu")
    assert scope["logits"].shape == scope["logits_training"].shape == (5, 10)
    assert not np.array_equal(scope["logits"], scope["logits_training"])     # dropout on
    scope = run("TICKET_MULTI_OUTPUT", "cpu")
    assert sorted(scope["history"].history) == [
        "department_accuracy", "department_loss", "loss", "priority_loss",
        "priority_mean_absolute_error", "val_department_accuracy", "val_department_loss",
        "val_loss", "val_priority_loss", "val_priority_mean_absolute_error"]
    assert len(scope["results"]) == 5
    assert scope["priority_preds"].shape == (48, 1) and scope["department_preds"].shape == (48, 4)
    scope = run("MIXED_PRECISION", "cpu")
    assert (scope["policy_name"], scope["compute_dtype"], scope["output_dtype"]) == \
        ("mixed_float16", "float16", "float32")
    assert scope["loss_scale"] == 2.0 ** 15          # no overflow in 8 steps: no change
    scope = run("IMBALANCED", "cpu")
    assert {"precision", "recall", "auc", "val_auc"} <= set(scope["history"].history)
