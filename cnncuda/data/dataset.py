"""``cnncuda.data.Dataset``: tf.data's pipelines over NumPy arrays.

    ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(1000).batch(32)
    ds = ds.map(lambda x, y: (x / 255.0, y)).prefetch(tf.data.AUTOTUNE)
    model.fit(ds, epochs=5)

A Dataset is a recipe: each iteration (each epoch of fit) runs it again from
its source, so shuffle draws a new order every epoch (unless
reshuffle_each_iteration=False) and map runs again. Elements are NumPy
arrays, or tuples and dicts of them (structure.py). Shuffling is
reproducible: with a seed the orders are the same every run; without one the
seed is drawn from NumPy's global generator when the pipeline is built, which
``cnncuda.utils.set_random_seed`` (``tf.keras.utils.set_random_seed``) seeds.
"""
import itertools
import queue
import threading

import numpy as np

from ..checks import positive_int
from .structure import flatten, pack, to_numpy

__all__ = ["Dataset", "AUTOTUNE", "INFINITE", "UNKNOWN"]

AUTOTUNE = -1
INFINITE = -1     # cardinality() of an endless dataset (tf.data.INFINITE_CARDINALITY)
UNKNOWN = -2      # cardinality() not known without iterating (tf.data.UNKNOWN_CARDINALITY)


def _count(value, arg, allow_all=False):
    """An int >= 0 (or -1 meaning 'all' where allowed)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError("%s: expected an int, got %r" % (arg, value))
    value = int(value)
    if value < 0 and not (allow_all and value == -1):
        raise ValueError("%s: expected an int >= 0%s, got %d"
                         % (arg, " or -1" if allow_all else "", value))
    return value


class Dataset:
    """A re-iterable pipeline of elements (see the module's docstring).
    Build one with a ``from_*`` constructor or ``range``, then chain methods;
    each method returns a new Dataset and leaves this one as it is."""

    def __init__(self, make_iterator, cardinality, spec_of=None):
        self._make = make_iterator
        self._cardinality = cardinality
        self._spec_of = spec_of

    # -- sources -------------------------------------------------------------

    @staticmethod
    def from_tensor_slices(tensors):
        """One element per row of `tensors` (an array, or a tuple or dict of
        arrays with as many rows)."""
        tensors = to_numpy(tensors)
        leaves = flatten(tensors)
        if not leaves or any(not isinstance(a, np.ndarray) or a.ndim == 0 for a in leaves):
            raise ValueError("tensors: expected arrays with a first axis to slice, got %r"
                             % (tensors,))
        n = len(leaves[0])
        for a in leaves[1:]:
            if len(a) != n:
                raise ValueError("tensors: expected the same number of rows in every "
                                 "component, got %d and %d" % (n, len(a)))

        def make():
            for i in range(n):
                yield pack(tensors, [a[i] for a in leaves])
        return Dataset(make, n)

    @staticmethod
    def from_tensors(tensors):
        """One element: `tensors` whole."""
        tensors = to_numpy(tensors)
        return Dataset(lambda: iter([tensors]), 1)

    @staticmethod
    def from_generator(generator, output_types=None, output_shapes=None, args=None,
                       output_signature=None):
        """The elements a new call of ``generator(*args)`` yields, each
        epoch. output_types / output_shapes / output_signature are accepted
        as tf spells them; each element is converted to NumPy arrays (and
        cast to output_types' or output_signature's dtypes where given)."""
        if not callable(generator):
            raise TypeError("generator: expected a callable that returns an iterator (a "
                            "generator function), got %r" % (generator,))
        dtypes = _signature_dtypes(output_signature if output_signature is not None
                                   else output_types)
        call_args = tuple(args) if args is not None else ()

        def make():
            for element in generator(*call_args):
                element = to_numpy(element)
                if dtypes is not None:
                    flat = flatten(element)
                    wanted = flatten(dtypes) if isinstance(dtypes, (tuple, dict)) else [dtypes]
                    if len(wanted) == len(flat):
                        element = pack(element, [np.asarray(a, dtype=d) if d is not None else a
                                                 for a, d in zip(flat, wanted)])
                yield element
        return Dataset(make, UNKNOWN)

    @staticmethod
    def range(*args, dtype=np.int64):
        """range(stop), range(start, stop[, step]) as Python's, int64 elements."""
        r = range(*args)
        return Dataset(lambda: (np.asarray(v, dtype=dtype) for v in r), len(r))

    @staticmethod
    def zip(*datasets):
        """Tuples of one element of each dataset, as long as the shortest."""
        if len(datasets) == 1 and isinstance(datasets[0], (tuple, list)):
            datasets = tuple(datasets[0])
        for i, d in enumerate(datasets):
            if not isinstance(d, Dataset):
                raise TypeError("datasets[%d]: expected a Dataset, got %r" % (i, d))
        counts = [d._cardinality for d in datasets]
        known = [c for c in counts if c >= 0]
        card = min(known) if known else (INFINITE if all(c == INFINITE for c in counts)
                                         else UNKNOWN)
        if UNKNOWN in counts and card != 0:
            card = UNKNOWN
        return Dataset(lambda: zip(*(iter(d) for d in datasets)), card)

    # -- iteration -----------------------------------------------------------

    def __iter__(self):
        return iter(self._make())

    def as_numpy_iterator(self):
        return iter(self)

    def cardinality(self):
        """The number of elements, INFINITE (-1) or UNKNOWN (-2)."""
        return self._cardinality

    def __len__(self):
        if self._cardinality == INFINITE:
            raise TypeError("The dataset is infinite.")
        if self._cardinality == UNKNOWN:
            raise TypeError("The dataset length is unknown.")
        return self._cardinality

    def __repr__(self):
        card = {INFINITE: "infinite", UNKNOWN: "unknown"}.get(self._cardinality,
                                                              self._cardinality)
        return "<Dataset cardinality=%s>" % card

    # -- transformations -------------------------------------------------------

    def batch(self, batch_size, drop_remainder=False, num_parallel_calls=None,
              deterministic=None):
        """Consecutive elements stacked into batches of `batch_size` rows
        (the last one smaller unless drop_remainder)."""
        batch_size = positive_int(batch_size, "batch_size")
        source = self

        def make():
            it = iter(source)
            while True:
                rows = list(itertools.islice(it, batch_size))
                if not rows or (drop_remainder and len(rows) < batch_size):
                    return
                flats = [flatten(r) for r in rows]
                yield pack(rows[0], [np.stack(parts) for parts in zip(*flats)])
        card = self._cardinality
        if card >= 0:
            card = card // batch_size if drop_remainder else -(-card // batch_size)
        return Dataset(make, card)

    def unbatch(self):
        """Each element's rows as elements of their own (batch's inverse)."""
        source = self

        def make():
            for element in source:
                flat = flatten(element)
                for i in range(len(flat[0]) if flat else 0):
                    yield pack(element, [a[i] for a in flat])
        return Dataset(make, UNKNOWN if self._cardinality != INFINITE else INFINITE)

    def shuffle(self, buffer_size, seed=None, reshuffle_each_iteration=True):
        """tf.data's shuffle: a buffer of `buffer_size` elements, each output
        drawn at random from it and replaced by the next input (a buffer at
        least as large as the dataset shuffles it uniformly)."""
        buffer_size = positive_int(buffer_size, "buffer_size")
        if seed is None:
            seed = int(np.random.randint(0, 2 ** 31 - 1))
        source, iteration = self, itertools.count()

        def make():
            epoch = next(iteration) if reshuffle_each_iteration else 0
            rng = np.random.default_rng([int(seed), epoch])
            buffer = []
            for element in source:
                if len(buffer) < buffer_size:
                    buffer.append(element)
                    continue
                i = int(rng.integers(len(buffer)))
                yield buffer[i]
                buffer[i] = element
            while buffer:
                i = int(rng.integers(len(buffer)))
                buffer[i], buffer[-1] = buffer[-1], buffer[i]
                yield buffer.pop()
        return Dataset(make, self._cardinality)

    def map(self, map_func, num_parallel_calls=None, deterministic=None, name=None):
        """map_func over every element; a tuple element is passed as separate
        arguments (map_func(x, y)), as tf.data passes it."""
        if not callable(map_func):
            raise TypeError("map_func: expected a callable, got %r" % (map_func,))
        source = self

        def make():
            for element in source:
                out = map_func(*element) if isinstance(element, tuple) else map_func(element)
                yield to_numpy(out)
        return Dataset(make, self._cardinality)

    def filter(self, predicate):
        """The elements for which predicate(element) is true."""
        source = self

        def make():
            for element in source:
                keep = predicate(*element) if isinstance(element, tuple) else predicate(element)
                if bool(np.asarray(keep)):
                    yield element
        return Dataset(make, UNKNOWN if self._cardinality != INFINITE else INFINITE)

    def repeat(self, count=None):
        """The dataset `count` times over (None or -1: without end)."""
        count = -1 if count is None else _count(count, "count", allow_all=True)
        source = self

        def make():
            for _ in (itertools.count() if count == -1 else range(count)):
                yield from source
        card = self._cardinality
        if count == -1:
            card = 0 if card == 0 else INFINITE
        elif card >= 0:
            card *= count
        return Dataset(make, card)

    def take(self, count):
        """The first `count` elements (-1: all)."""
        count = _count(count, "count", allow_all=True)
        source = self
        make = (lambda: iter(source)) if count == -1 else \
            (lambda: itertools.islice(iter(source), count))
        card = self._cardinality
        if count != -1:
            card = count if card == INFINITE else (min(card, count) if card >= 0 else UNKNOWN)
        return Dataset(make, card)

    def skip(self, count):
        """All but the first `count` elements (-1: none)."""
        count = _count(count, "count", allow_all=True)
        source = self
        if count == -1:
            return Dataset(lambda: iter(()), 0)
        card = self._cardinality
        if card >= 0:
            card = max(0, card - count)
        return Dataset(lambda: itertools.islice(iter(source), count, None), card)

    def cache(self, filename=""):
        """Elements kept in memory after the first complete iteration and
        replayed from there (a filename is refused: no file cache here)."""
        if filename:
            raise ValueError("filename: only the in-memory cache ('') is offered, got %r"
                             % (filename,))
        source, kept = self, {}

        def make():
            if "elements" in kept:
                return iter(kept["elements"])
            return _filling(source, kept)
        return Dataset(make, self._cardinality)

    def prefetch(self, buffer_size):
        """Elements produced ahead by a background thread, up to `buffer_size`
        of them (AUTOTUNE: 2), while the consumer (fit's engine) works."""
        size = 2 if buffer_size in (None, AUTOTUNE) else positive_int(buffer_size,
                                                                      "buffer_size")
        source = self
        return Dataset(lambda: _prefetched(source, size), self._cardinality)


def _filling(source, kept):
    elements = []
    for element in source:
        elements.append(element)
        yield element
    kept["elements"] = elements


_DONE = object()


def _prefetched(source, size):
    """Iterates `source` in a daemon thread into a queue of `size`; an error
    there is raised here, in order. Closing the generator (an epoch cut
    short) stops the thread at its next element."""
    q = queue.Queue(maxsize=size)
    stop = threading.Event()

    def produce():
        try:
            for element in source:
                while not stop.is_set():
                    try:
                        q.put((element, None), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put((_DONE, None))
        except BaseException as error:  # handed to the consumer
            q.put((_DONE, error))

    thread = threading.Thread(target=produce, daemon=True, name="cnncuda-prefetch")
    thread.start()
    try:
        while True:
            element, error = q.get()
            if element is _DONE:
                if error is not None:
                    raise error
                return
            yield element
    finally:
        stop.set()


def _signature_dtypes(signature):
    """The dtypes of output_types or output_signature (TensorSpec-like
    objects with a .dtype, dtypes, or tuples / dicts of them), or None."""
    if signature is None:
        return None
    if isinstance(signature, tuple):
        return tuple(_signature_dtypes(s) for s in signature)
    if isinstance(signature, dict):
        return {k: _signature_dtypes(v) for k, v in signature.items()}
    dtype = signature if isinstance(signature, (type, str, np.dtype)) else \
        getattr(signature, "dtype", signature)
    try:
        return np.dtype(getattr(dtype, "as_numpy_dtype", dtype))
    except TypeError:
        return None
