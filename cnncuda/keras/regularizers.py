"""``cnncuda.keras.regularizers``: cnncuda.regularizers under Keras's name."""
from ..regularizers import *  # noqa: F401,F403
from ..regularizers import __all__  # noqa: F401
