"""``cnncuda.keras.optimizers``: cnncuda.optimizers under Keras's name."""
from ...optimizers import *  # noqa: F401,F403
from ...optimizers import __all__  # noqa: F401
from ...mixed_precision import LossScaleOptimizer  # noqa: F401,E402

__all__ = list(__all__) + ["LossScaleOptimizer"]
