"""``cnncuda.keras.backend``: clear_session."""
from ..utils import reset_names

__all__ = ["clear_session"]


def clear_session():
    """Restarts the automatic layer and model names (conv2d, conv2d_1, ...)."""
    reset_names()
