"""``cnncuda.keras.models``: cnncuda.models under Keras's name."""
from ..models import *  # noqa: F401,F403
from ..models import __all__  # noqa: F401
