"""``cnncuda.keras.layers``: cnncuda.layers under Keras's name."""
from ..layers import *  # noqa: F401,F403
from ..layers import __all__  # noqa: F401
