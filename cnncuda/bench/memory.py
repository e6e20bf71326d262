"""Peak host memory of this process over a stretch of work (one bench row).

On Linux the kernel's high-water mark of resident memory (``VmHWM`` in
/proc/self/status) can be reset (writing 5 to /proc/self/clear_refs), so a
row's peak is the process's largest resident size while that row ran --
everything the process held, the data sets included. Elsewhere the peak is
the process's lifetime maximum (``getrusage``), and says so.
"""
import re
import sys

__all__ = ["HostPeak"]

_STATUS = "/proc/self/status"
_CLEAR_REFS = "/proc/self/clear_refs"


def _vm_hwm(path=_STATUS):
    try:
        with open(path) as f:
            match = re.search(r"^VmHWM:\s+(\d+)\s+kB", f.read(), re.M)
    except OSError:
        return None
    return int(match.group(1)) * 1024 if match else None


def _lifetime_max():
    try:
        import resource
    except ImportError:  # Windows
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, KiB on Linux


class HostPeak:
    """``start()`` before the work, ``bytes()`` after it: the peak resident
    bytes in between (None where nothing can say), and ``kind``: 'host peak
    RSS' when the mark was reset at start, 'host peak RSS (process
    lifetime)' otherwise."""

    def __init__(self, status=_STATUS, clear_refs=_CLEAR_REFS):
        self._status, self._clear_refs = status, clear_refs
        self.kind = None

    def start(self):
        try:
            with open(self._clear_refs, "w") as f:
                f.write("5")
            reset = _vm_hwm(self._status) is not None
        except OSError:
            reset = False
        self.kind = "host peak RSS" if reset else "host peak RSS (process lifetime)"
        return self

    def bytes(self):
        if self.kind is None:
            raise RuntimeError("HostPeak.bytes() needs start() first")
        if self.kind == "host peak RSS":
            return _vm_hwm(self._status)
        return _lifetime_max()
