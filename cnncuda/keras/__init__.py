"""``cnncuda.keras``: the spellings of ``tensorflow.keras``.

    import cnncuda as tf
    from cnncuda.keras import datasets, layers, models

gives ``tf.keras.losses.SparseCategoricalCrossentropy``, ``models.Sequential``,
``layers.Conv2D`` and the rest, as a Keras script writes them. Each submodule
re-exports the cnncuda module of the same name.
"""
from . import (activations, backend, callbacks, datasets, initializers, layers, losses, metrics,
               mixed_precision, models, optimizers, preprocessing, regularizers, saving, utils)
from .layers import Input
from .models import Model, Sequential, load_model

__all__ = ["activations", "backend", "callbacks", "datasets", "initializers", "layers", "losses",
           "metrics", "mixed_precision", "models", "optimizers", "preprocessing", "regularizers",
           "saving", "utils", "Input", "Model",
           "Sequential", "load_model"]
