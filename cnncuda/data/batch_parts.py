"""The parts of a stream's batch as Keras 3 reads them: an element is
``x``, ``(x,)``, ``(x, y)`` or ``(x, y, sample_weight)`` (a list counts as
a tuple; Keras's unpack_x_y_sample_weight), and x is an array, or for a
model of several inputs a tuple or list of arrays in the order of its
inputs or a dict keyed by the Inputs' names (the rules of fit's array x).

feed.py joins consecutive batches of one size and structure into a block
(``join``); the model checks and packs a block's x as it does an array x.
"""
import numpy as np

__all__ = ["split", "rows", "signature", "join", "join_targets", "contiguous", "nbytes"]


def split(element, arg):
    """(x, y, sample_weight) of one element, y and sample_weight None where
    it has none (Keras 3's rule)."""
    if isinstance(element, list):
        element = tuple(element)
    if not isinstance(element, tuple):
        return element, None, None
    if len(element) == 1:
        return element[0], None, None
    if len(element) == 2:
        return element[0], element[1], None
    if len(element) == 3:
        return element
    raise ValueError("%s: expected batches x, (x,), (x, y) or (x, y, sample_weight), got a "
                     "tuple of %d" % (arg, len(element)))


def _leaves(x):
    if isinstance(x, dict):
        return [x[key] for key in sorted(x, key=str)]
    if isinstance(x, (tuple, list)):
        return list(x)
    return [x]


def _arrays(x):
    """x with every input an array."""
    if isinstance(x, dict):
        return {key: np.asarray(value) for key, value in x.items()}
    if isinstance(x, (tuple, list)):
        return type(x)(np.asarray(value) for value in x)
    return np.asarray(x)


def rows(x):
    """The samples of a batch's x (of its first input)."""
    leaves = _leaves(x)
    if not leaves:
        return 0
    first = np.asarray(leaves[0])
    return len(first) if first.ndim else 1


def signature(x, y, w):
    """What two batches must share to be joined: x's structure (its keys or
    its number of inputs) and which of y and w they have."""
    if isinstance(x, dict):
        shape = ("dict", tuple(sorted(map(str, x))))
    elif isinstance(x, (tuple, list)):
        shape = (type(x).__name__, len(x))
    else:
        shape = ("array",)
    return shape, y is None, w is None


def join(parts):
    """One (x, y, w) of the batches `parts` (same signature), their samples
    in order; their arrays converted with np.asarray."""
    if len(parts) == 1:
        x, y, w = parts[0]
        return _arrays(x), None if y is None else join_targets([y]), None if w is None \
            else np.asarray(w)
    xs = [p[0] for p in parts]
    first = xs[0]
    if isinstance(first, dict):
        x = {key: np.concatenate([np.asarray(b[key]) for b in xs]) for key in first}
    elif isinstance(first, (tuple, list)):
        x = type(first)(np.concatenate([np.asarray(b[k]) for b in xs])
                        for k in range(len(first)))
    else:
        x = np.concatenate([np.asarray(b) for b in xs])
    y = None if parts[0][1] is None else join_targets([p[1] for p in parts])
    w = None if parts[0][2] is None else np.concatenate([np.asarray(p[2]) for p in parts])
    return x, y, w


def join_targets(ys):
    """The targets of consecutive batches joined: arrays, or for a model of
    several outputs a list (or tuple) of arrays or a dict of them, joined
    output by output (training._data packs them)."""
    first = ys[0]
    if isinstance(first, dict):
        return {key: join_targets([y[key] for y in ys]) for key in first}
    if isinstance(first, (list, tuple)) and first and \
            all(isinstance(one, np.ndarray) for one in first):
        return [join_targets([y[j] for y in ys]) for j in range(len(first))]
    return np.concatenate([np.asarray(y) for y in ys]) if len(ys) > 1 else np.asarray(first)


def contiguous(x):
    """x with every input C-contiguous (as the engine uploads them)."""
    if isinstance(x, dict):
        return {key: np.ascontiguousarray(value) for key, value in x.items()}
    if isinstance(x, (tuple, list)):
        return type(x)(np.ascontiguousarray(value) for value in x)
    return np.ascontiguousarray(x)


def nbytes(x):
    """The bytes of x's samples as float32."""
    return sum(4 * np.asarray(leaf).size for leaf in _leaves(x))
