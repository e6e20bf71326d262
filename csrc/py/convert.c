/* convert.c: NumPy arrays in, checked once, as float32 C-contiguous. */
#include "binding.h"

#include <math.h>
#include <stdio.h>

/* obj as a NumPy array of a real numeric dtype (a new reference), or NULL
 * with TypeError naming arg. */
static PyArrayObject *real_array(PyObject *obj, const char *arg)
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
    return any;
}

PyArrayObject *cnn_as_float32(PyObject *obj, const char *arg)
{
    PyArrayObject *any = real_array(obj, arg);
    if (!any) return NULL;
    PyArrayObject *out = (PyArrayObject *)PyArray_FROM_OTF(
        (PyObject *)any, NPY_FLOAT32, NPY_ARRAY_IN_ARRAY | NPY_ARRAY_FORCECAST);
    Py_DECREF(any);
    return out;
}

PyArrayObject *cnn_as_samples(PyObject *obj, const char *arg, cnn_host_array *host)
{
    PyArrayObject *any = real_array(obj, arg);
    if (!any) return NULL;
    const char kind = PyArray_DESCR(any)->kind;
    int type = PyArray_TYPE(any);
    if (type != NPY_FLOAT32 && type != NPY_FLOAT64 && type != NPY_UINT8)
        type = kind == 'f' && PyArray_ITEMSIZE(any) > 4 ? NPY_FLOAT64 : NPY_FLOAT32;
    /* no copy where `any` is already of that type, native, aligned and
     * C-contiguous (a read-only or memory-mapped array included) */
    PyArrayObject *out = (PyArrayObject *)PyArray_FROM_OTF(
        (PyObject *)any, type, NPY_ARRAY_IN_ARRAY | NPY_ARRAY_FORCECAST);
    Py_DECREF(any);
    if (!out) return NULL;
    host->data = PyArray_DATA(out);
    host->dtype = type == NPY_FLOAT64 ? CNN_DTYPE_F64 : type == NPY_UINT8 ? CNN_DTYPE_U8
                                                                           : CNN_DTYPE_F32;
    host->arg = arg;
    host->index0 = 0;
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
    const cnn_host_array host = {PyArray_DATA(a), CNN_DTYPE_F32, arg, 0};
    float scratch[1024];
    const size_t n = (size_t)PyArray_SIZE(a);
    for (size_t at = 0; at < n; at += 1024) {
        const int64_t bad = cnn_to_float32(scratch, &host, at, n - at < 1024 ? n - at : 1024);
        if (bad >= 0) {
            cnn_raise_status(cnn_refuse_value(&host, (size_t)bad));
            return -1;
        }
    }
    return 0;
}

PyArrayObject *cnn_checked_float32(PyArrayObject *raw, const cnn_host_array *host)
{
    if (host->dtype == CNN_DTYPE_F32) {
        if (cnn_check_finite(raw, host->arg) < 0) return NULL;
        Py_INCREF(raw);
        return raw;
    }
    PyArrayObject *out = (PyArrayObject *)PyArray_SimpleNew(PyArray_NDIM(raw), PyArray_DIMS(raw),
                                                            NPY_FLOAT32);
    if (!out) return NULL;
    const int64_t bad = cnn_to_float32(PyArray_DATA(out), host, 0, (size_t)PyArray_SIZE(raw));
    if (bad >= 0) {
        cnn_raise_status(cnn_refuse_value(host, (size_t)bad));
        Py_DECREF(out);
        return NULL;
    }
    return out;
}
