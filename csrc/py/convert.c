/* convert.c: NumPy arrays in, checked once, as float32 C-contiguous. */
#include "binding.h"

#include <math.h>
#include <stdio.h>

PyArrayObject *cnn_as_float32(PyObject *obj, const char *arg)
{
    PyArrayObject *any = (PyArrayObject *)PyArray_FROMANY(obj, NPY_NOTYPE, 0, 0, 0);
    if (!any) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s: expected a numeric array, got %.100s", arg,
                     Py_TYPE(obj)->tp_name);
        return NULL;
    }
    char kind = PyArray_DESCR(any)->kind;
    if (kind != 'f' && kind != 'i' && kind != 'u' && kind != 'b') {
        PyObject *name = PyObject_Str((PyObject *)PyArray_DESCR(any));
        PyErr_Format(PyExc_TypeError,
                     "%s: expected a real numeric array (float or integer), got dtype %S", arg,
                     name ? name : Py_None);
        Py_XDECREF(name);
        Py_DECREF(any);
        return NULL;
    }
    PyArrayObject *out = (PyArrayObject *)PyArray_FROM_OTF(
        (PyObject *)any, NPY_FLOAT32, NPY_ARRAY_IN_ARRAY | NPY_ARRAY_FORCECAST);
    Py_DECREF(any);
    return out;
}

void cnn_shape_text(char *buf, size_t len, int rank, const npy_intp *dims)
{
    size_t used = 0;
    used += (size_t)snprintf(buf + used, len - used, "(");
    for (int i = 0; i < rank && used < len; i++) {
        if (dims[i] < 0)
            used += (size_t)snprintf(buf + used, len - used, "%sNone", i ? ", " : "");
        else
            used += (size_t)snprintf(buf + used, len - used, "%s%ld", i ? ", " : "",
                                     (long)dims[i]);
    }
    if (used < len) snprintf(buf + used, len - used, rank == 1 ? ",)" : ")");
}

int cnn_check_shape(PyArrayObject *a, const char *arg, int rank, const npy_intp *dims)
{
    int ok = PyArray_NDIM(a) == rank;
    for (int i = 0; ok && i < rank; i++)
        if (dims[i] >= 0 && PyArray_DIMS(a)[i] != dims[i]) ok = 0;
    if (ok) return 0;
    char want[128], got[128];
    cnn_shape_text(want, sizeof want, rank, dims);
    cnn_shape_text(got, sizeof got, PyArray_NDIM(a), PyArray_DIMS(a));
    PyErr_Format(PyExc_ValueError, "%s: expected shape %s, got %s", arg, want, got);
    return -1;
}

int cnn_check_finite(PyArrayObject *a, const char *arg)
{
    const float *p = (const float *)PyArray_DATA(a);
    npy_intp n = PyArray_SIZE(a);
    for (npy_intp i = 0; i < n; i++) {
        if (!isfinite(p[i])) {
            PyErr_Format(PyExc_ValueError,
                         "%s: expected finite values, got %s at flat index %ld", arg,
                         isnan(p[i]) ? "NaN" : "infinity", (long)i);
            return -1;
        }
    }
    return 0;
}
