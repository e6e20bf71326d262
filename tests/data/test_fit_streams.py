"""fit, evaluate and predict over a Dataset, a generator and a Sequence: the
weights and History of fit over the same batches as arrays, bit for bit."""
import threading

import numpy as np
import pytest

import cnncuda as tf
from cnncuda.seeds import synthetic_data
from conftest import engine_params

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


# -- the overlap: the stream read on a producer thread (data/prefetch.py) ----

def feed_fit(m, x, overlap, epochs=1, callbacks=(), validation_data=None, shuffle=True,
             steps_per_epoch=None, validation_steps=None, stats=None):
    """model.fit over a stream, with the overlap on or off (feed.fit's flag)."""
    from cnncuda.data import feed
    return feed.fit(m, x, epochs, 0, list(callbacks), validation_data, shuffle, 0,
                    steps_per_epoch, validation_steps, None, 1, overlap=overlap, stats=stats)


def feed_threads():
    return [t for t in threading.enumerate() if t.name == "cnncuda-feed"]


class EveryBatch(tf.keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.seen = []

    def on_train_batch_end(self, batch, logs=None):
        self.seen.append((batch, logs["loss"]))


def _cases():
    x, y = synthetic_data("lenet5", 90)

    def dataset():
        return tf.data.Dataset.from_tensor_slices((x, y)).shuffle(90, seed=4).batch(8), {
            "validation_data": tf.data.Dataset.from_tensor_slices((x[:30], y[:30])).batch(7),
            "epochs": 2}

    def generator():
        def gen():
            while True:
                for i in range(0, 90, 9):
                    yield x[i:i + 9], y[i:i + 9]
        return gen(), {"steps_per_epoch": 7, "epochs": 3}

    def sequence():
        return Batches(x, y, 8), {"epochs": 2}

    def schedule():       # the rate changes inside what would be one block
        return tf.data.Dataset.from_tensor_slices((x, y)).batch(5).repeat(2), {"epochs": 1}

    def per_batch():
        return tf.data.Dataset.from_tensor_slices((x, y)).batch(8), {
            "callbacks": [EveryBatch()], "epochs": 1}
    return {"dataset": dataset, "generator": generator, "sequence": sequence,
            "schedule": schedule, "per_batch": per_batch}


@pytest.mark.parametrize("case", sorted(_cases()))
def test_the_overlap_gives_the_one_thread_loops_results(case):
    """The same batches in the same order: weights, optimizer steps,
    History and what a batch callback sees, bit for bit."""
    runs = []
    for overlap in (False, True):
        stream, kwargs = _cases()[case]()
        m = model("cpu")
        if case == "schedule":
            m.compile(optimizer=tf.keras.optimizers.SGD(
                tf.keras.optimizers.schedules.PiecewiseConstantDecay([7, 20], [0.1, 0.01, 0.001])),
                loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                metrics=["accuracy"])
        h = feed_fit(m, stream, overlap, **kwargs)
        seen = kwargs["callbacks"][0].seen if "callbacks" in kwargs else None
        runs.append((m, h.history, seen))
    (a, ha, sa), (b, hb, sb) = runs
    assert same_weights(a, b) and a.optimizer.iterations == b.optimizer.iterations > 0
    assert ha == hb and sa == sb
    if case == "schedule":
        plain = model("cpu")       # the schedule's rates, as fit over arrays takes them
        plain.compile(optimizer=tf.keras.optimizers.SGD(
            tf.keras.optimizers.schedules.PiecewiseConstantDecay([7, 20], [0.1, 0.01, 0.001])),
            loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        x, y = synthetic_data("lenet5", 90)
        plain.fit(np.concatenate([x, x]), np.concatenate([y, y]), batch_size=5, shuffle=False,
                  verbose=0)
        assert same_weights(a, plain)
    assert not feed_threads()


def test_evaluate_and_predict_with_and_without_the_overlap():
    from cnncuda.data import feed
    x, y = synthetic_data("lenet5", 50)
    m = model("cpu")
    m.fit(x, y, epochs=1, verbose=0)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(9)
    got = [feed.evaluate(m, ds, 0, None, [], True, overlap=o) for o in (False, True)]
    assert got[0] == got[1]
    outs = [feed.predict(m, tf.data.Dataset.from_tensor_slices(x).batch(9), 0, None, [],
                         overlap=o) for o in (False, True)]
    assert np.array_equal(outs[0], outs[1]) and np.array_equal(outs[0], m.predict(x, verbose=0))
    assert not feed_threads()


def test_a_generator_is_read_on_one_thread_only():
    """Not thread-safe: the producer's thread alone calls next(), over every
    epoch and the validation passes; the thread is gone when fit returns."""
    x, y = synthetic_data("lenet5", 40)
    readers = []

    def gen():
        while True:
            for i in range(0, 40, 8):
                readers.append(threading.get_ident())
                yield x[i:i + 8], y[i:i + 8]

    def val():
        while True:
            readers.append(threading.get_ident())
            yield x[:8], y[:8]
    m = model("cpu")
    feed_fit(m, gen(), True, epochs=3, steps_per_epoch=4, validation_data=val(),
             validation_steps=2)
    assert len(set(readers)) == 1 and readers[0] != threading.get_ident()
    assert m.optimizer.iterations == 12 and not feed_threads()


def test_the_stream_is_read_while_the_engine_and_the_callbacks_run():
    """Double buffering: while batch 0 trains (here: its callback waits),
    the producer has read the next ones; without the overlap, nothing is."""
    x, y = synthetic_data("lenet5", 48)
    for overlap in (True, False):
        ahead = threading.Event()

        def gen():
            for i in range(6):
                if i == 2:
                    ahead.set()
                yield x[8 * i:8 * i + 8], y[8 * i:8 * i + 8]
        waited = []

        class Wait(tf.keras.callbacks.Callback):
            def on_train_batch_end(self, batch, logs=None):
                if batch == 0:
                    waited.append(ahead.wait(10.0 if overlap else 0.2))
        m = model("cpu")
        feed_fit(m, gen(), overlap, callbacks=[Wait()])
        assert waited == [overlap] and m.optimizer.iterations == 6


@pytest.mark.parametrize("error", [ValueError, KeyboardInterrupt])
def test_an_error_of_the_stream_comes_out_where_it_would(error):
    """After the batches before it trained (the one-thread loop holds the
    last batch back to join it with the next: 4 of 5), with the stream's
    traceback."""
    x, y = synthetic_data("lenet5", 40)

    def broken():
        for i in range(5):
            yield x[8 * i:8 * i + 8], y[8 * i:8 * i + 8]
        raise error("batch 5 is broken")
    results = []
    for overlap in (False, True):
        m, seen = model("cpu"), EveryBatch()
        with pytest.raises(error, match="batch 5 is broken") as caught:
            feed_fit(m, broken(), overlap, callbacks=[seen])
        assert any(entry.name == "broken" for entry in caught.traceback)
        results.append((m, [b for b, _ in seen.seen]))
    (a, sa), (b, sb) = results
    assert sa == sb == [0, 1, 2, 3] and same_weights(a, b)
    assert a.optimizer.iterations == 4 and not feed_threads()


@pytest.mark.parametrize("how", ["stop_training", "KeyboardInterrupt"])
def test_a_fit_left_early_stops_its_producer(how):
    """stop_training or an exception in a callback: the producer ends with
    fit, and the generator is the caller's again (read a few batches ahead)."""
    x, y = synthetic_data("lenet5", 40)
    count = [0]

    def gen():
        while True:
            count[0] += 1
            yield x[:8], y[:8]

    class Leave(tf.keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if batch == 1:
                if how == "stop_training":
                    self.model.stop_training = True
                else:
                    raise KeyboardInterrupt
    g = gen()
    m = model("cpu")
    if how == "stop_training":
        feed_fit(m, g, True, epochs=5, steps_per_epoch=50, callbacks=[Leave()])
    else:
        with pytest.raises(KeyboardInterrupt):
            feed_fit(m, g, True, epochs=5, steps_per_epoch=50, callbacks=[Leave()])
    assert m.optimizer.iterations == 2 and not feed_threads()
    read = count[0]
    # trained, two queued, one waiting to be queued, one being made when fit
    # stopped, and the batch the blocks hold back to join with the next
    assert 2 <= read <= 2 + 2 + 1 + 1 + 1
    next(g)
    assert count[0] == read + 1


def test_feed_stats_add_up():
    from cnncuda.data.feed import FeedStats
    x, y = synthetic_data("lenet5", 64)
    stats = FeedStats()
    m = model("cpu")
    feed_fit(m, tf.data.Dataset.from_tensor_slices((x, y)).batch(8), True, epochs=2,
             stats=stats)
    assert stats.samples == 128 and stats.blocks >= 2
    assert 0 < stats.upload < stats.engine and stats.wait >= 0
    assert "FeedStats(engine=" in repr(stats)


@pytest.mark.parametrize("engine", engine_params() + ["numpy"])
def test_the_overlap_on_every_engine(engine):
    """On the GPU engines too: each block's upload and steps beside the
    producer give the one-thread loop's bits, and the engine's sums."""
    from cnncuda.data import feed
    x, y = synthetic_data("lenet5", 96)
    results = []
    with tf.device(engine):
        for overlap in (False, True):
            m = model(engine)
            ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(96, seed=2).batch(16)
            val = tf.data.Dataset.from_tensor_slices((x[:32], y[:32])).batch(16)
            h = feed_fit(m, ds, overlap, epochs=2, validation_data=val)
            outputs = feed.predict(m, tf.data.Dataset.from_tensor_slices(x).batch(16), 0, None,
                                   [], overlap=overlap)
            results.append((m, h.history, outputs))
    (a, ha, oa), (b, hb, ob) = results
    assert ha == hb and same_weights(a, b) and np.array_equal(oa, ob)
    assert a.optimizer.iterations == 12 and not feed_threads()


def test_blocks_hold_at_most_the_block_bytes(monkeypatch):
    """Data larger than the device goes in blocks of bounded size (here two
    batches' worth), with the bits of one block per epoch."""
    from cnncuda.data import feed
    x, y = synthetic_data("lenet5", 80)
    batch_bytes = 8 * 28 * 28 * 4
    runs = []
    for cap in (1 << 40, 2 * batch_bytes):
        monkeypatch.setattr(feed, "_BLOCK_BYTES", cap)
        stats = feed.FeedStats()
        m = model("cpu")
        h = feed_fit(m, tf.data.Dataset.from_tensor_slices((x, y)).batch(8), True, epochs=2,
                     stats=stats)
        runs.append((m, h.history, stats.blocks))
    (a, ha, blocks_a), (b, hb, blocks_b) = runs
    assert blocks_b >= 10 and blocks_a >= 1        # 20 batches, at most 2 a block
    assert ha == hb and same_weights(a, b)
    blocks = list(feed._blocks(((x[i:i + 8], y[i:i + 8], None) for i in range(0, 80, 8)),
                               feed.StepChunker(1.0, 100)))
    assert all(4 * xs.size <= 2 * batch_bytes for xs, _, _, _, _ in blocks)
    monkeypatch.setattr(feed, "_BLOCK_BYTES", batch_bytes // 2)     # a batch alone is larger
    assert [c for _, _, _, _, c in feed._blocks(((x[i:i + 8], y[i:i + 8], None)
                                                 for i in range(0, 24, 8)),
                                                feed.StepChunker(1.0, 100))] == [1, 1, 1]


def test_a_stream_that_calls_its_own_model_is_refused_clearly():
    """The stream is read on fit's producer thread while the model trains:
    a generator that asks the model it feeds gets a RuntimeError saying so
    (another model, a copy, is fine)."""
    x, y = synthetic_data("lenet5", 32)
    m, other = model("cpu"), model("cpu")
    m.fit(x[:8], y[:8], verbose=0)

    def labelled_by(teacher):
        for i in range(0, 32, 8):
            yield x[i:i + 8], np.argmax(teacher.predict(x[i:i + 8], verbose=0), axis=1)
    with pytest.raises(RuntimeError, match="predict\\(\\) was called by the stream that fit"):
        m.fit(labelled_by(m), verbose=0)
    assert m.optimizer.iterations == 1 and not feed_threads()
    m.fit(labelled_by(other), verbose=0)
    assert m.optimizer.iterations == 1 + 4
