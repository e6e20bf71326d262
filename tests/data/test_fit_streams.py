"""fit, evaluate and predict over a Dataset, a generator and a Sequence: the
weights and History of fit over the same batches as arrays, bit for bit."""
import numpy as np
import pytest

import cnncuda as tf
from cnncuda.seeds import synthetic_data

ENGINES = ["cpu", "omp:2"]


def model(engine):
    """A small CNN; the engine comes from the caller's tf.device scope."""
    m = tf.keras.Sequential([
        tf.keras.layers.Conv2D(4, 3, activation="relu", input_shape=(28, 28, 1)),
        tf.keras.layers.MaxPooling2D(), tf.keras.layers.Flatten(), tf.keras.layers.Dense(10)],
        seed=3)
    m.compile(optimizer="adam", metrics=["accuracy"],
              loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return m


def same_weights(a, b):
    return all(np.array_equal(u, v) for u, v in zip(a.get_weights(), b.get_weights()))


@pytest.mark.parametrize("engine", ENGINES)
def test_a_dataset_trains_as_the_arrays(engine):
    x, y = synthetic_data("lenet5", 50)
    with tf.device(engine):
        a = model(engine)
        ha = a.fit(x, y, batch_size=7, epochs=2, shuffle=False, verbose=0)
        b = model(engine)
        hb = b.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(7).prefetch(2), epochs=2,
                   verbose=0)
    assert ha.history == hb.history
    assert same_weights(a, b)
    assert a.optimizer.iterations == b.optimizer.iterations == 16
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(16)
    assert np.allclose(b.evaluate(ds, verbose=0), a.evaluate(x, y, verbose=0), rtol=1e-6)
    assert np.array_equal(b.predict(tf.data.Dataset.from_tensor_slices(x).batch(16), verbose=0),
                          a.predict(x, verbose=0))


def test_validation_data_as_a_dataset_and_as_arrays():
    x, y = synthetic_data("lenet5", 40)
    val = tf.data.Dataset.from_tensor_slices((x[:20], y[:20])).batch(8)
    a = model("cpu")
    ha = a.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(8), validation_data=val,
               epochs=1, verbose=0)
    b = model("cpu")
    hb = b.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(8),
               validation_data=(x[:20], y[:20]), epochs=1, verbose=0)
    assert set(ha.history) == {"loss", "accuracy", "val_loss", "val_accuracy"}
    assert ha.history["val_accuracy"] == hb.history["val_accuracy"]
    assert np.isclose(ha.history["val_loss"][0], hb.history["val_loss"][0], rtol=1e-6)


def test_a_generator_is_one_stream():
    x, y = synthetic_data("lenet5", 50)

    def gen():
        for i in range(0, 50, 10):
            yield x[i:i + 10], y[i:i + 10]
    a = model("cpu")
    a.fit(gen(), epochs=1, verbose=0)
    b = model("cpu")
    b.fit(x, y, batch_size=10, shuffle=False, epochs=1, verbose=0)
    assert same_weights(a, b)
    g = gen()
    c = model("cpu")
    with pytest.warns(UserWarning, match="ran out of data"):
        h = c.fit(g, steps_per_epoch=3, epochs=3, verbose=0)
    assert len(h.history["loss"]) == 2 and c.optimizer.iterations == 5


class Batches(tf.keras.utils.Sequence):
    def __init__(self, x, y, batch):
        super().__init__()
        self.x, self.y, self.batch, self.ends = x, y, batch, 0

    def __len__(self):
        return -(-len(self.x) // self.batch)

    def __getitem__(self, i):
        s = slice(i * self.batch, (i + 1) * self.batch)
        return self.x[s], self.y[s]

    def on_epoch_end(self):
        self.ends += 1


def test_a_sequence_in_order_and_shuffled():
    x, y = synthetic_data("lenet5", 45)
    seq = Batches(x, y, 8)
    a = model("cpu")
    a.fit(seq, epochs=2, shuffle=False, verbose=0)
    b = model("cpu")
    b.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    assert seq.ends == 2 and same_weights(a, b)
    c = model("cpu")
    c.fit(seq, epochs=1, verbose=0)                       # batches in a shuffled order
    assert not same_weights(c, model("cpu")) and c.optimizer.iterations == 6


def test_steps_per_epoch_over_a_repeated_dataset_and_the_bar(capsys):
    x, y = synthetic_data("lenet5", 30)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(10).repeat()
    m = model("cpu")
    h = m.fit(ds, steps_per_epoch=4, epochs=2, verbose=2)
    assert m.optimizer.iterations == 8 and len(h.history["loss"]) == 2
    assert "4/4 - " in capsys.readouterr().out
    with pytest.raises(ValueError, match="steps_per_epoch: expected the number of batches"):
        m.fit(ds, epochs=1, verbose=0)
    m.fit(tf.data.Dataset.from_generator(lambda: ((x[i:i + 10], y[i:i + 10])
                                                  for i in range(0, 30, 10))), epochs=2, verbose=1)
    out = capsys.readouterr().out
    assert "3/Unknown" in out and "3/3 [" in out        # known from the second epoch on


def test_array_arguments_are_refused_with_a_stream():
    x, y = synthetic_data("lenet5", 20)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(5)
    m = model("cpu")
    with pytest.raises(ValueError, match="batch_size: expected None when x is a Dataset"):
        m.fit(ds, batch_size=5, verbose=0)
    with pytest.raises(ValueError, match="y: expected None when x is a Dataset"):
        m.fit(ds, y, verbose=0)
    with pytest.raises(ValueError, match="validation_split: expected 0.0 when x is a Dataset"):
        m.fit(ds, validation_split=0.2, verbose=0)
    with pytest.raises(ValueError, match="expected batches \\(x, y\\) to train"):
        m.fit(tf.data.Dataset.from_tensor_slices(x).batch(5), verbose=0)
    assert m.optimizer.iterations == 0


def test_a_callback_sees_every_batch():
    x, y = synthetic_data("lenet5", 30)
    seen = []

    class Batch(tf.keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            seen.append((batch, round(logs["loss"], 6)))
    m = model("cpu")
    m.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(7), epochs=1, verbose=0,
          callbacks=[Batch()])
    assert [b for b, _ in seen] == [0, 1, 2, 3, 4]


def test_a_stream_builds_an_unbuilt_model():
    """evaluate and predict over a Dataset build a model that has no input
    shape yet from its first batch, as fit does (evaluate asked for the
    network before any batch had arrived)."""
    x, y = synthetic_data("lenet5", 20)
    for call in ("evaluate", "predict"):
        m = tf.keras.Sequential([tf.keras.layers.Flatten(), tf.keras.layers.Dense(10)], seed=1)
        m.compile(optimizer="adam", metrics=["accuracy"],
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        data = (x, y) if call == "evaluate" else x
        out = getattr(m, call)(tf.data.Dataset.from_tensor_slices(data).batch(8), verbose=0)
        assert m.built and np.all(np.isfinite(out))
