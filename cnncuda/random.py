"""``tf.random.set_seed`` for scripts that ``import cnncuda as tf``."""
from .utils import get_random_seed, set_random_seed

__all__ = ["set_seed", "get_seed"]


def set_seed(seed):
    """The seed of the models created from now on (see cnncuda.utils)."""
    set_random_seed(seed)


def get_seed():
    """The seed new models take when none is given."""
    return get_random_seed()
