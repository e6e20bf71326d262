"""``cnncuda.keras.initializers``: cnncuda.initializers under Keras's name."""
from ..initializers import *  # noqa: F401,F403
from ..initializers import __all__  # noqa: F401
