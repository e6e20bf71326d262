"""``cnncuda.keras.activations``: cnncuda.activations under Keras's name."""
from ..activations import *  # noqa: F401,F403
from ..activations import __all__  # noqa: F401
