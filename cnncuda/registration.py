"""Keras's registry of custom classes (``keras.saving.
register_keras_serializable``): a subclassed model's class registered under
``package>Name`` is found again when a .keras file naming it loads, without
custom_objects, as in Keras 3."""

__all__ = ["register_keras_serializable", "get_registered_name", "get_registered_object",
           "get_custom_objects", "registered_name", "class_named"]

_REGISTERED = {}        # "package>Name" -> class
_NAMES = {}             # class -> "package>Name"


def register_keras_serializable(package="Custom", name=None):
    """Keras's decorator: registers the class under ``package>name`` (name:
    the class's name by default)."""
    if not isinstance(package, str) or not package:
        raise TypeError("package: expected a non-empty str, got %r" % (package,))

    def decorator(cls):
        key = "%s>%s" % (package, name if name is not None else cls.__name__)
        if not hasattr(cls, "get_config"):
            raise ValueError("Cannot register a class that does not have a get_config() method.")
        if key in _REGISTERED and _REGISTERED[key] is not cls:
            # Keras replaces it too (a class defined again, as in a notebook)
            _NAMES.pop(_REGISTERED[key], None)
        _REGISTERED[key] = cls
        _NAMES[cls] = key
        return cls
    return decorator


def get_registered_name(obj):
    """``package>Name`` of a registered class (or of an object's class), else
    its name, as Keras's."""
    cls = obj if isinstance(obj, type) else type(obj)
    return _NAMES.get(cls, cls.__name__)


registered_name = get_registered_name


def get_registered_object(name, custom_objects=None, module_objects=None):
    """The class registered (or in custom_objects / module_objects) under
    `name`, else None."""
    for table in (custom_objects, _REGISTERED, module_objects):
        if table and name in table:
            return table[name]
    return None


def get_custom_objects():
    """The registry ({registered name: class}; Keras's global dict)."""
    return _REGISTERED


def class_named(class_name, registered, classes):
    """The class a Keras config names: custom_objects by its registered name
    or class name, else the registry."""
    classes = classes or {}
    for key in (registered, class_name):
        if key and key in classes:
            return classes[key]
    if registered and registered in _REGISTERED:
        return _REGISTERED[registered]
    matches = [cls for key, cls in _REGISTERED.items() if key.split(">")[-1] == class_name]
    return matches[0] if len(matches) == 1 else None
