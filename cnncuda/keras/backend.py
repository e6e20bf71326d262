"""``cnncuda.keras.backend``: clear_session."""
import gc

from ..utils import reset_names

__all__ = ["clear_session"]


def clear_session(free_memory=True):
    """Restarts the automatic layer and model names (conv2d, conv2d_1, ...),
    as Keras's does; with free_memory (the default) it also runs Python's
    garbage collector, so that the engine networks of models no longer
    referenced are released now. Models still referenced keep their
    networks. The default seed (utils.set_random_seed) is not changed."""
    reset_names()
    if free_memory:
        gc.collect()
