"""NVIDIA's management library (NVML) through ctypes: the GPU's name, the
driver's version and the energy counter, for the bench's GPU rows.

Nothing here is needed: where libnvidia-ml.so.1 is not found, or the GPU does
not report a value (``nvmlDeviceGetTotalEnergyConsumption`` needs a Volta or
newer GPU), the answer is None and the bench leaves the column empty.

The GPU is the one CUDA calls device 0: the first entry of
CUDA_VISIBLE_DEVICES (an index or a GPU-UUID) when it is set, else NVML's
index 0.
"""
import atexit
import ctypes
import os

__all__ = ["Nvml", "nvml"]

_SUCCESS = 0


class Nvml:
    """One GPU through NVML. ``error`` says why it is not available (None when
    it is)."""

    def __init__(self, library="libnvidia-ml.so.1", visible=None):
        self.error = None
        self._lib = None
        self._handle = ctypes.c_void_p()
        try:
            lib = ctypes.CDLL(library)
        except OSError as err:
            self.error = "NVML not found (%s)" % err
            return
        try:
            rc = lib.nvmlInit_v2()
        except AttributeError:
            self.error = "%s has no nvmlInit_v2" % library
            return
        if rc != _SUCCESS:
            self.error = "nvmlInit_v2 failed (NVML error %d)" % rc
            return
        self._lib = lib
        atexit.register(self.shutdown)
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "") if visible is None else visible
        first = visible.split(",")[0].strip()
        if first.startswith("GPU-"):
            rc = lib.nvmlDeviceGetHandleByUUID(first.encode(), ctypes.byref(self._handle))
        else:
            index = int(first) if first.isdigit() else 0
            rc = lib.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(index),
                                                   ctypes.byref(self._handle))
        if rc != _SUCCESS:
            self.error = "no NVML handle for GPU %r (NVML error %d)" % (first or "0", rc)
            self.shutdown()

    @property
    def available(self):
        return self._lib is not None

    def shutdown(self):
        if self._lib is not None:
            self._lib.nvmlShutdown()
            self._lib = None

    def _call(self, name, *args):
        if self._lib is None:
            return False
        try:
            return getattr(self._lib, name)(*args) == _SUCCESS
        except AttributeError:  # an older driver's library
            return False

    def _string(self, name, with_handle=True, size=96):
        buf = ctypes.create_string_buffer(size)
        args = ((self._handle,) if with_handle else ()) + (buf, ctypes.c_uint(size))
        return buf.value.decode(errors="replace") if self._call(name, *args) else None

    def energy_mj(self):
        """The GPU's energy counter in millijoules since the driver loaded, or None."""
        value = ctypes.c_ulonglong()
        ok = self._call("nvmlDeviceGetTotalEnergyConsumption", self._handle, ctypes.byref(value))
        return int(value.value) if ok else None

    def name(self):
        return self._string("nvmlDeviceGetName")

    def driver_version(self):
        return self._string("nvmlSystemGetDriverVersion", with_handle=False)

    def cuda_driver_version(self):
        """The CUDA version the driver supports, as '13.0', or None."""
        value = ctypes.c_int()
        if not self._call("nvmlSystemGetCudaDriverVersion_v2", ctypes.byref(value)):
            return None
        return "%d.%d" % (value.value // 1000, value.value % 1000 // 10)


_instance = []


def nvml():
    """The process's Nvml, made on first use."""
    if not _instance:
        _instance.append(Nvml())
    return _instance[0]
