"""Elements of a Dataset: nested tuples and dicts of NumPy arrays (tf.data's
structures, without tensors; a list is converted to one array, as tf.data
converts it to one tensor). ``flatten`` and ``pack`` take an
element apart and put one back together in the same shape."""
import numpy as np

__all__ = ["flatten", "pack", "map_structure", "to_numpy"]


def flatten(element):
    """The arrays of `element` in a fixed order (dicts by sorted key)."""
    if isinstance(element, dict):
        return [a for key in sorted(element) for a in flatten(element[key])]
    if isinstance(element, tuple):
        return [a for part in element for a in flatten(part)]
    return [element]


def pack(like, flat):
    """An element shaped as `like` holding the arrays of `flat` (flatten's order)."""
    it = iter(flat)

    def build(node):
        if isinstance(node, dict):
            return {key: build(node[key]) for key in sorted(node)}
        if isinstance(node, tuple):
            return tuple(build(part) for part in node)
        return next(it)

    return build(like)


def map_structure(fn, element):
    return pack(element, [fn(a) for a in flatten(element)])


def to_numpy(element):
    """`element` with every leaf a NumPy array (scalars become 0-d arrays;
    strings and other objects stay as they are)."""
    def convert(a):
        if isinstance(a, np.ndarray):
            return a
        if isinstance(a, (bool, int, float, list, np.generic)) or hasattr(a, "__array__"):
            return np.asarray(a)
        return a
    if isinstance(element, dict):
        return {k: to_numpy(v) for k, v in element.items()}
    if isinstance(element, tuple):
        return tuple(to_numpy(v) for v in element)
    return convert(element)
