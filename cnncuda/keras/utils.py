"""``cnncuda.keras.utils``: set_random_seed and to_categorical."""
from ..utils import set_random_seed, to_categorical  # noqa: F401

__all__ = ["set_random_seed", "to_categorical"]
