"""cnncuda.data.Dataset against hand-computed expectations (tf.data's
semantics), odd sizes included."""
import numpy as np
import pytest

import cnncuda as tf
from cnncuda.data import Dataset


def values(ds):
    out = []
    for e in ds:
        out.append(tuple(a.tolist() for a in e) if isinstance(e, tuple) else e.tolist())
    return out


def test_slices_tuples_and_dicts():
    x, y = np.arange(12).reshape(6, 2), np.arange(6) * 10
    assert values(Dataset.from_tensor_slices((x, y)).take(2)) == [([0, 1], 0), ([2, 3], 10)]
    d = list(Dataset.from_tensor_slices({"a": np.arange(3), "b": np.ones(3)}))
    assert [e["a"].item() for e in d] == [0, 1, 2] and set(d[0]) == {"a", "b"}
    assert values(Dataset.from_tensor_slices([[1, 2], [3, 4]])) == [[1, 2], [3, 4]]
    with pytest.raises(ValueError, match="same number of rows"):
        Dataset.from_tensor_slices((np.arange(3), np.arange(4)))
    assert values(Dataset.from_tensors(np.arange(3))) == [[0, 1, 2]]


def test_batch_unbatch_and_cardinality():
    ds = Dataset.range(10)
    assert [b.tolist() for b in ds.batch(4)] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert [b.tolist() for b in ds.batch(4, drop_remainder=True)] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert ds.batch(4).cardinality() == 3 and ds.batch(4, drop_remainder=True).cardinality() == 2
    assert values(ds.batch(3).unbatch()) == list(range(10))
    assert len(ds.batch(3)) == 4
    assert ds.repeat().cardinality() == tf.data.INFINITE_CARDINALITY
    assert ds.filter(lambda v: v > 3).cardinality() == tf.data.UNKNOWN_CARDINALITY
    with pytest.raises(TypeError, match="infinite"):
        len(ds.repeat())
    with pytest.raises(ValueError, match="batch_size: expected"):
        ds.batch(0)


def test_take_skip_repeat_map_filter_zip():
    ds = Dataset.range(5)
    assert values(ds.skip(2)) == [2, 3, 4] and values(ds.take(2)) == [0, 1]
    assert values(ds.take(-1)) == [0, 1, 2, 3, 4] and values(ds.skip(-1)) == []
    assert values(ds.repeat(2)) == [0, 1, 2, 3, 4] * 2 and ds.repeat(2).cardinality() == 10
    assert values(ds.repeat().take(7)) == [0, 1, 2, 3, 4, 0, 1]
    pairs = Dataset.zip((ds, ds.map(lambda v: v * v)))
    assert values(pairs) == [(i, i * i) for i in range(5)]
    assert values(pairs.map(lambda a, b: a + b)) == [i + i * i for i in range(5)]
    assert values(pairs.filter(lambda a, b: b % 2 == 0)) == [(0, 0), (2, 4), (4, 16)]
    assert values(Dataset.range(1, 8, 3)) == [1, 4, 7]


def test_shuffle_is_a_buffer_and_reproducible():
    ds = Dataset.range(20)
    a = values(ds.shuffle(20, seed=4))
    assert sorted(a) == list(range(20)) and a != list(range(20))
    again = ds.shuffle(20, seed=4)
    first, second = values(again), values(again)
    assert first == a and second != first                 # reshuffled each iteration
    fixed = ds.shuffle(20, seed=4, reshuffle_each_iteration=False)
    assert values(fixed) == values(fixed)
    # a buffer of 1 keeps the order; a buffer of 2 moves an element at most
    # one place forward
    assert values(ds.shuffle(1, seed=0)) == list(range(20))
    small = values(ds.shuffle(2, seed=1))
    assert all(v <= i + 1 for i, v in enumerate(small))
    tf.keras.utils.set_random_seed(7)
    u = values(ds.shuffle(20))
    tf.keras.utils.set_random_seed(7)
    assert values(ds.shuffle(20)) == u


def test_from_generator_cache_prefetch():
    calls = []

    def gen(n):
        calls.append(n)
        for i in range(n):
            yield i, float(i)

    ds = Dataset.from_generator(gen, args=(3,), output_types=(np.int32, np.float32))
    got = list(ds)
    assert [(a.item(), b.item()) for a, b in got] == [(0, 0.0), (1, 1.0), (2, 2.0)]
    assert got[0][0].dtype == np.int32 and got[0][1].dtype == np.float32
    cached = ds.cache()
    assert values(cached) == values(cached) and len(calls) == 2   # the second run replays
    assert values(Dataset.range(50).prefetch(tf.data.AUTOTUNE)) == list(range(50))
    assert tf.data.experimental.AUTOTUNE == tf.data.AUTOTUNE


def test_prefetch_passes_errors_on():
    def broken():
        yield 1
        raise RuntimeError("the source failed")
    with pytest.raises(RuntimeError, match="the source failed"):
        list(Dataset.from_generator(broken).prefetch(2))
