"""``cnncuda.keras.metrics``: cnncuda.metrics under Keras's name."""
from ..metrics import *  # noqa: F401,F403
from ..metrics import __all__  # noqa: F401
