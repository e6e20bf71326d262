"""Hypothesis pieces shared by the fuzz tests (test_fuzz_*.py): the settings,
the clean exceptions, a hang guard, arrays of every NumPy dtype and layout,
and a model of what the binding's argument checks must say about them."""
import faulthandler
import os
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck
from hypothesis import strategies as st

import cnncuda

HANG_SECONDS = 600
CLEAN = (TypeError, ValueError, MemoryError, cnncuda.EngineUnavailableError)
FUZZ = dict(deadline=None, database=None, print_blob=True,
            derandomize=os.environ.get("CI", "").lower() == "true",
            suppress_health_check=list(HealthCheck))


@pytest.fixture(autouse=True)
def hang_guard():
    faulthandler.dump_traceback_later(HANG_SECONDS, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


def quiet_cast(a, dtype):
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.asarray(a).astype(dtype)


def scale_of(a):
    return 1.0 + float(np.max(np.abs(a))) if np.size(a) else 1.0


NUMERIC = [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
           np.uint64, np.float16, np.float32, np.float64, np.longdouble, ">f4", ">f8", ">i4",
           "<u8"]
OTHER = [np.complex64, np.complex128, np.clongdouble, object, "U4", "S4", "M8[s]", "m8[s]",
         [("a", "<f4")], "V4"]
LAYOUTS = ["C", "C", "F", "strided", "reversed", "readonly", "broadcast", "byteswapped", "list"]


@st.composite
def arrays(draw, shape, values="normal", classes=2):
    """An array meant to have `shape` (sometimes mutated), of any dtype and layout."""
    shape = list(shape)
    r = draw(st.integers(0, 9))
    if r == 0 and shape:
        shape[draw(st.integers(0, len(shape) - 1))] = draw(st.sampled_from([0, 1, 2, 7]))
    elif r == 1 and shape:
        shape.pop(draw(st.integers(0, len(shape) - 1)))
    elif r == 2:
        shape.insert(draw(st.integers(0, len(shape))), draw(st.sampled_from([1, 2])))
    dtype = np.dtype(draw(st.sampled_from(NUMERIC * 3 + OTHER)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if values == "labels":
        base = rng.integers(0, classes, shape).astype(np.float64)
        if draw(st.integers(0, 4)) == 0 and base.size:
            base.flat[int(rng.integers(base.size))] = draw(
                st.sampled_from([-1, classes, 1.5, np.nan, 2**40, np.inf]))
    elif values == "order":
        size = int(np.prod(shape))
        base = np.resize(rng.permutation(max(size, 1)), shape).astype(np.float64)
        if draw(st.integers(0, 4)) == 0 and np.size(base):
            base.flat[int(rng.integers(np.size(base)))] = draw(st.sampled_from([-1, 10**6, 2**40]))
    else:
        base = rng.standard_normal(shape) * draw(st.sampled_from([1.0, 1.0, 1e-3, 1e4, 1e30]))
        if values == "unit":
            base = rng.random(shape)
        special = draw(st.sampled_from([None] * 5 + [np.nan, np.inf, -np.inf, 1e300, 7e4]))
        if special is not None and base.size:
            base.flat[int(rng.integers(base.size))] = special
    kind = dtype.kind
    if kind in "biuf":
        a = quiet_cast(base, dtype)
    elif kind == "c":
        a = quiet_cast(base, dtype) + 1j
    elif kind == "O":
        a = quiet_cast(base, object)
    elif kind in "US":
        a = quiet_cast(np.round(base, 2), dtype)
    else:
        a = np.zeros(shape, dtype)
    a = np.asarray(a)
    layout = draw(st.sampled_from(LAYOUTS))
    if layout == "F":
        a = np.asfortranarray(a)
    elif layout == "strided" and a.ndim:
        a = np.repeat(a, 2, axis=-1)[..., ::2]
    elif layout == "reversed" and a.ndim:
        a = a[::-1].copy()[::-1]
    elif layout == "readonly":
        a = a.copy()
        a.flags.writeable = False
    elif layout == "broadcast" and a.ndim and a.size:
        a = np.broadcast_to(a[tuple(slice(0, 1) for _ in a.shape)], a.shape)
    elif layout == "byteswapped" and kind in "iuf" and dtype.itemsize > 1:
        a = a.astype(dtype.newbyteorder())
    elif layout == "list" and kind in "biuf" and a.ndim:
        a = a.tolist()
    return a


def x_verdict(x, in_shape, limit, values=True):
    """The exception the binding must raise for x, or x as clean float32
    (its values not checked unless `values`: whole arrays of samples are
    checked by the engine as it uploads them, after the targets)."""
    a = np.asarray(x)
    if a.dtype.kind not in "biuf":
        return TypeError
    if a.ndim != len(in_shape) + 1 or a.shape[1:] != tuple(in_shape):
        return ValueError
    if a.shape[0] < 1 or (limit and a.shape[0] > limit):
        return ValueError
    f = np.ascontiguousarray(quiet_cast(a, np.float32))
    return f if not values or np.isfinite(f).all() else ValueError


def y_verdict(y, n, loss_kind, k):
    a = np.asarray(y)
    if a.dtype.kind not in "biuf":
        return TypeError
    if loss_kind == "sparse_categorical_crossentropy":
        if a.shape not in ((n,), (n, 1)):
            return ValueError
        v = quiet_cast(a, np.float64).reshape(-1)
        ok = np.isfinite(v) & (v >= 0) & (v < k) & (v == np.floor(v))
        return v.astype(np.int64) if ok.all() else ValueError
    if not (a.shape == (n, k) or (k == 1 and a.shape == (n,))):
        return ValueError
    f = np.ascontiguousarray(quiet_cast(a, np.float32)).reshape(n, k)
    return f if np.isfinite(f).all() else ValueError
