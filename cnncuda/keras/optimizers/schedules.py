"""``cnncuda.keras.optimizers.schedules``: cnncuda.schedules under Keras's name."""
from ...schedules import *  # noqa: F401,F403
from ...schedules import __all__  # noqa: F401
