"""``cnncuda.keras.saving``: Keras 3's saving entry points (load_model,
save_model) and its registry of custom classes
(``register_keras_serializable``: a subclassed model's class found again
when its .keras file loads)."""
from ..models import load_model
from ..registration import (get_custom_objects, get_registered_name, get_registered_object,
                            register_keras_serializable)

__all__ = ["load_model", "save_model", "register_keras_serializable", "get_registered_name",
           "get_registered_object", "get_custom_objects"]


def save_model(model, filepath, overwrite=True, **kwargs):
    """``model.save(filepath, overwrite=overwrite, ...)``, as Keras's."""
    return model.save(filepath, overwrite=overwrite, **kwargs)
