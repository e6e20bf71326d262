"""``keras.mixed_precision``: cnncuda.mixed_precision's policies and LossScaleOptimizer."""
from ..mixed_precision import (DTypePolicy, LossScaleOptimizer, Policy, dtype_policy,  # noqa: F401
                               global_policy, set_dtype_policy, set_global_policy)

__all__ = ["DTypePolicy", "LossScaleOptimizer", "Policy", "dtype_policy", "global_policy",
           "set_dtype_policy", "set_global_policy"]
