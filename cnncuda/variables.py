"""The objects of ``model.weights``, ``model.trainable_weights`` and
``model.non_trainable_weights``: one per weight array, in get_weights order,
as Keras 3's variables are listed.

A Variable does not hold the values: the model's engine network does. It
names a layer of the model and one of that layer's weights, and each read
(``numpy()``, ``value``, ``np.asarray(v)``) copies the current values from
the engine, each write (``assign``, ``assign_add``, ``assign_sub``) goes
through ``model.set_weights``, which checks every shape before anything
changes. So a Variable taken before training shows the trained values
after it, as Keras's does. Unlike a TensorFlow variable it is not a tensor:
arithmetic works on ``v.numpy()``.
"""
import numpy as np

__all__ = ["Variable"]


class Variable:
    """A model's weight: ``name`` ('kernel', 'bias', 'gamma', 'beta',
    'moving_mean', 'moving_variance'), ``path`` ('sequential/dense/kernel'),
    ``shape``, ``dtype`` ('float32'), ``trainable``; ``numpy()`` and
    ``assign(value)``."""

    def __init__(self, model, layer, name, shape, trainable):
        self._model, self._layer = model, layer
        self.name = name
        self.shape = tuple(shape)
        self.trainable = bool(trainable)
        self.dtype = "float32"

    @property
    def path(self):
        return "%s/%s/%s" % (self._model.name, self._layer.name, self.name)

    @property
    def ndim(self):
        return len(self.shape)

    def _index(self):
        """This weight's place in the model's get_weights list now."""
        if not any(leaf is self._layer for leaf in self._model._leaves()):
            raise ValueError("variable %s: its layer %s is no longer in model %s"
                             % (self.name, self._layer.name, self._model.name))
        for i, (layer, name, _, _) in enumerate(self._model._weight_specs()):
            if layer is self._layer and name == self.name:
                return i
        raise ValueError("variable %s: layer %s has no such weight now"
                         % (self.name, self._layer.name))

    def numpy(self):
        """A copy of the current values (float32)."""
        return self._model.get_weights()[self._index()]

    @property
    def value(self):
        return self.numpy()

    def __array__(self, dtype=None, copy=None):
        values = self.numpy()
        return values if dtype is None else values.astype(dtype)

    def assign(self, value):
        """Sets the values (an array of this shape); returns the variable."""
        array = np.asarray(value)
        if array.dtype.kind not in "biuf":
            raise TypeError("value: expected a real numeric array for %s, got dtype %s"
                            % (self.path, array.dtype))
        if array.shape != self.shape:
            raise ValueError("value: expected shape %s for %s, got %s"
                             % (self.shape, self.path, array.shape))
        i = self._index()
        weights = self._model.get_weights()
        weights[i] = array.astype(np.float32)
        self._model.set_weights(weights)
        return self

    def assign_add(self, value):
        return self.assign(self.numpy() + np.asarray(value, np.float32))

    def assign_sub(self, value):
        return self.assign(self.numpy() - np.asarray(value, np.float32))

    def __repr__(self):
        return "<Variable path=%s, shape=%s, dtype=%s, value=%s>" % (
            self.path, self.shape, self.dtype, self.numpy())
