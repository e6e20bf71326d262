"""``cnncuda.keras.optimizers``: cnncuda.optimizers under Keras's name."""
from ...optimizers import *  # noqa: F401,F403
from ...optimizers import __all__  # noqa: F401
