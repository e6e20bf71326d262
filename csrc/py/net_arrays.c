/* net_arrays.c: the array arguments of the Net's methods, checked against
 * the network's shapes and loss (net_object.h). Values are checked where
 * the core does not check them itself. */
#include "net_object.h"

#include <string.h>

/* x as float32 of shape (n, *input_shape) with 1 <= n (<= limit when > 0),
 * converted and checked as the core converts set_data's samples. */
PyArrayObject *net_input_array(NetObject *self, PyObject *obj, long limit)
{
    cnn_host_array host;
    PyArrayObject *raw = cnn_as_samples(obj, "x", &host);
    if (!raw) return NULL;
    PyArrayObject *x = NULL;
    npy_intp want[4] = {-1, self->in_dims[0], self->in_dims[1], self->in_dims[2]};
    int rank = self->in_rank == 4 ? 4 : 2;
    if (cnn_check_shape(raw, "x", rank, want) < 0) goto done;
    npy_intp n = PyArray_DIMS(raw)[0];
    if (n < 1) {
        PyErr_SetString(PyExc_ValueError, "x: expected at least one sample, got an empty batch");
        goto done;
    }
    if (limit > 0 && n > limit) {
        PyErr_Format(PyExc_ValueError,
                     "x: expected a batch of at most %ld samples (the max_batch this network "
                     "was built for), got %ld",
                     limit, (long)n);
        goto done;
    }
    x = cnn_checked_float32(raw, &host);
done:
    Py_DECREF(raw);
    return x;
}

/* x as samples of shape (n, *input_shape) with 1 <= n, for the core to
 * convert and check as it uploads them (cnn_as_samples fills host). Errors
 * name `arg` and count flat indices from index0 (x a part of the user's
 * array, from its value index0 on). */
PyArrayObject *net_sample_array(NetObject *self, PyObject *obj, const char *arg,
                                   Py_ssize_t index0, cnn_host_array *host)
{
    if (index0 < 0) {
        PyErr_Format(PyExc_ValueError, "x_index0: expected an int >= 0, got %zd", index0);
        return NULL;
    }
    PyArrayObject *x = cnn_as_samples(obj, arg, host);
    if (!x) return NULL;
    host->index0 = (size_t)index0;
    npy_intp want[4] = {-1, self->in_dims[0], self->in_dims[1], self->in_dims[2]};
    if (cnn_check_shape(x, arg, self->in_rank == 4 ? 4 : 2, want) < 0) goto fail;
    if (PyArray_DIMS(x)[0] < 1) {
        PyErr_Format(PyExc_ValueError, "%s: expected at least one sample, got an empty batch",
                     arg);
        goto fail;
    }
    return x;
fail:
    Py_DECREF(x);
    return NULL;
}

/* Targets for n samples: *labels (int32) for sparse losses, *targets
 * (float32 (n, k)) otherwise; the other is set to NULL. An output of
 * several positions (an image) takes n samples of as many labels or rows of
 * k in Keras's order (any shape (n, ...) of that size: cnncuda/checks.py
 * checks Keras's). */
int net_target_arrays(NetObject *self, PyObject *obj, npy_intp n, PyArrayObject **labels,
                         PyArrayObject **targets)
{
    *labels = *targets = NULL;
    PyArrayObject *y = cnn_as_float32(obj, "y");
    if (!y) return -1;
    int k = self->n_classes;
    const npy_intp per = self->positions > 1 ? self->positions : 1;
    const int image = self->out_rank == 4; /* targets of any shape of the right size */
    if (image) {
        const npy_intp want = n * per * (self->loss_kind == CNN_LOSS_SPARSE_CE ? 1 : k);
        if (PyArray_NDIM(y) < 1 || PyArray_DIMS(y)[0] != n || PyArray_SIZE(y) != want) {
            char got[128];
            cnn_shape_text(got, sizeof got, PyArray_NDIM(y), PyArray_DIMS(y));
            PyErr_Format(PyExc_ValueError,
                         "y: expected %ld samples of %ld %s each (the output's %ld positions), "
                         "got shape %s",
                         (long)n, (long)(want / (n ? n : 1)),
                         self->loss_kind == CNN_LOSS_SPARSE_CE ? "labels" : "targets",
                         (long)per, got);
            goto fail;
        }
    }
    if (self->loss_kind == CNN_LOSS_SPARSE_CE) {
        int ok = image || (PyArray_NDIM(y) == 1 && PyArray_DIMS(y)[0] == n) ||
                 (PyArray_NDIM(y) == 2 && PyArray_DIMS(y)[0] == n && PyArray_DIMS(y)[1] == 1);
        if (!ok) {
            char got[128];
            cnn_shape_text(got, sizeof got, PyArray_NDIM(y), PyArray_DIMS(y));
            PyErr_Format(PyExc_ValueError, "y: expected shape (%ld,) or (%ld, 1), got %s",
                         (long)n, (long)n, got);
            goto fail;
        }
        /* labels must be integers in [0, k): read them from the original
         * object so float labels like 2.5 are refused, not truncated */
        PyArrayObject *raw = (PyArrayObject *)PyArray_FROM_OTF(obj, NPY_FLOAT64, NPY_ARRAY_IN_ARRAY | NPY_ARRAY_FORCECAST);
        if (!raw) goto fail;
        npy_intp dims[1] = {n * per};
        *labels = (PyArrayObject *)PyArray_SimpleNew(1, dims, NPY_INT32);
        if (!*labels) {
            Py_DECREF(raw);
            goto fail;
        }
        const double *src = PyArray_DATA(raw);
        int32_t *dst = PyArray_DATA(*labels);
        for (npy_intp i = 0; i < n * per; i++) {
            double v = src[i];
            if (!(v >= 0.0 && v < (double)k && v == (double)(long)v)) {
                char text[64];
                snprintf(text, sizeof text, "%.17g", v);
                PyErr_Format(PyExc_ValueError,
                             "y: expected integer class labels in [0, %d), got %s at index %ld",
                             k, text, (long)i);
                Py_DECREF(raw);
                goto fail;
            }
            dst[i] = (int32_t)v;
        }
        Py_DECREF(raw);
        Py_DECREF(y);
        return 0;
    }
    npy_intp want[2] = {n, k + (self->loss_weighted != 0)}; /* then the weight */
    if (image) {
        /* checked above: n samples of per rows of k, in order */
    } else if (k == 1 && !self->loss_weighted && PyArray_NDIM(y) == 1 &&
               PyArray_DIMS(y)[0] == n) {
        /* binary targets of shape (n,) for a one-unit output */
    } else if (cnn_check_shape(y, "y", 2, want) < 0) {
        goto fail;
    }
    if (cnn_check_finite(y, "y") < 0) goto fail;
    *targets = y;
    return 0;
fail:
    Py_XDECREF(*labels);
    *labels = NULL;
    Py_DECREF(y);
    return -1;
}

PyObject *net_new_output(NetObject *self, npy_intp n)
{
    npy_intp dims[4] = {n, self->out_dims[0], self->out_dims[1], self->out_dims[2]};
    return PyArray_SimpleNew(self->out_rank == 4 ? 4 : 2, dims, NPY_FLOAT32);
}

