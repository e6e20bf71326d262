"""The build's CNNCUDA_* switches, read by setup.py through this file:
CNNCUDA_CUDA (a boolean, on: compile the CUDA engines where nvcc is found)
and CNNCUDA_CUDA_ARCH (the GPU architectures; its text is parsed by
archs.py). Booleans take 1/0/on/off/true/false in any case; anything else is
an error naming the variable (as cnncuda/switches.py does for the Python
layer and csrc/switches.c for the engine)."""

__all__ = ["cuda_wanted", "cuda_arch"]

_TRUE = ("1", "on", "true")
_FALSE = ("0", "off", "false")


def _boolean(environ, name, default):
    value = environ.get(name, "").strip()
    if not value:
        return default
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise SystemExit("%s: expected 1, 0, on, off, true or false, got %r" % (name, value))


def cuda_wanted(environ):
    """CNNCUDA_CUDA (on): off forces a CPU-only build."""
    return _boolean(environ, "CNNCUDA_CUDA", True)


def cuda_arch(environ):
    """CNNCUDA_CUDA_ARCH's text, stripped ('' when unset)."""
    return environ.get("CNNCUDA_CUDA_ARCH", "").strip()
