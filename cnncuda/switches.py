"""The Python layer's CNNCUDA_* switches, read here and nowhere else in the
package (the engine's are read by csrc/switches.c, ``cnncuda._C.switches()``;
the build's by build_tools/switches.py; README's table lists all three).

A boolean switch takes 1/0/on/off/true/false in any case; unset or empty
means its default; anything else is a ValueError naming the variable, what it
accepts and what it was given."""
import os

__all__ = ["boolean", "system_libs", "data_dir", "fashion_mnist_dir", "port"]

_TRUE = ("1", "on", "true")
_FALSE = ("0", "off", "false")


def boolean(name, default, environ=None):
    """The boolean switch `name` from `environ` (os.environ by default)."""
    value = (os.environ if environ is None else environ).get(name, "").strip()
    if not value:
        return default
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise ValueError("%s: expected 1, 0, on, off, true or false, got %r" % (name, value))


def system_libs():
    """CNNCUDA_SYSTEM_LIBS (off): load cuBLAS, cuDNN and NCCL from the system
    rather than from the environment's PyTorch or JAX wheels (_preload.py)."""
    return boolean("CNNCUDA_SYSTEM_LIBS", False)


def data_dir():
    """CNNCUDA_DATA: the datasets' folder, else ~/.cnncuda/datasets."""
    return os.environ.get("CNNCUDA_DATA") or os.path.join(os.path.expanduser("~"), ".cnncuda",
                                                          "datasets")


def fashion_mnist_dir():
    """CNNCUDA_FASHION_MNIST: a folder holding Fashion-MNIST's four files, or
    None."""
    return os.environ.get("CNNCUDA_FASHION_MNIST") or None


def port(environ):
    """CNNCUDA_PORT in `environ`: the rendezvous port of a multi-process
    group, overriding MASTER_PORT; None when unset."""
    value = environ.get("CNNCUDA_PORT")
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        number = 0
    if not 1 <= number <= 65535:
        raise ValueError("CNNCUDA_PORT: expected a port number from 1 to 65535, got %r" % value)
    return number
