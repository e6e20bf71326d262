"""``cnncuda.keras.callbacks``: cnncuda.callbacks under Keras's name."""
from ..callbacks import *  # noqa: F401,F403
from ..callbacks import __all__  # noqa: F401
