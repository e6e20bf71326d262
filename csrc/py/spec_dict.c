/* spec_dict.c: reading values from the Net(...) arguments' dicts, each error
 * naming the layer and the key (spec_dict.h). */
#include "spec_dict.h"

#include <limits.h>
#include <math.h>
#include <string.h>

/* v as a C int: 0, or -1 when v is not an int (no error set), -2 when it is
 * one outside [INT_MIN, INT_MAX] (no error set): a huge Python int must be
 * refused, not cut to its low 32 bits. */
int spec_c_int(PyObject *v, int *out)
{
    int overflow = 0;
    long x = PyLong_AsLongAndOverflow(v, &overflow);
    if (x == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    if (overflow || x < INT_MIN || x > INT_MAX) return -2;
    *out = (int)x;
    return 0;
}

void spec_int_range_error(int layer, const char *key, PyObject *v)
{
    PyErr_Format(PyExc_ValueError, "layers[%d]['%s']: expected an int in [%d, %d], got %R",
                 layer, key, INT_MIN, INT_MAX, v);
}

/* Reads dict[key] as an int (default when missing); -1 with an error set. */
int spec_dict_int(PyObject *d, const char *key, int deflt, int *out, int layer)
{
    PyObject *v = PyDict_GetItemString(d, key);
    if (!v) {
        *out = deflt;
        return 0;
    }
    if (PyBool_Check(v)) {
        *out = v == Py_True;
        return 0;
    }
    int r = spec_c_int(v, out);
    if (r == -1) {
        PyErr_Format(PyExc_TypeError, "layers[%d]['%s']: expected an int, got %R", layer, key, v);
        return -1;
    }
    if (r == -2) {
        spec_int_range_error(layer, key, v);
        return -1;
    }
    return 0;
}

int spec_dict_float(PyObject *d, const char *key, double deflt, double *out, const char *where)
{
    PyObject *v = PyDict_GetItemString(d, key);
    if (!v) {
        *out = deflt;
        return 0;
    }
    double x = PyFloat_AsDouble(v);
    if (x == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s['%s']: expected a number, got %R", where, key, v);
        return -1;
    }
    *out = x;
    return 0;
}

/* dict[key] as a pair of ints (an int n means (n, n)). */
int spec_dict_pair(PyObject *d, const char *key, int deflt0, int deflt1, int *a, int *b,
                     int layer)
{
    PyObject *v = PyDict_GetItemString(d, key);
    if (!v || v == Py_None) {
        *a = deflt0;
        *b = deflt1;
        return 0;
    }
    int r = -1;
    if (PyLong_Check(v)) {
        r = spec_c_int(v, a);
        *b = *a;
    } else if (PySequence_Check(v) && PySequence_Size(v) == 2) {
        PyObject *x = PySequence_GetItem(v, 0), *y = PySequence_GetItem(v, 1);
        if (x && y) {
            int ra = spec_c_int(x, a), rb = spec_c_int(y, b);
            r = (ra == -1 || rb == -1) ? -1 : (ra == -2 || rb == -2) ? -2 : 0;
        }
        Py_XDECREF(x);
        Py_XDECREF(y);
    }
    PyErr_Clear(); /* a failed PySequence_Size or GetItem: reported below */
    if (r == 0) return 0;
    if (r == -2) {
        spec_int_range_error(layer, key, v);
        return -1;
    }
    PyErr_Format(PyExc_TypeError, "layers[%d]['%s']: expected an int or a pair of ints, got %R",
                 layer, key, v);
    return -1;
}

int spec_name_index(PyObject *v, const char *const *names, int count)
{
    if (!v || !PyUnicode_Check(v)) return -1;
    for (int i = 0; i < count; i++)
        if (PyUnicode_CompareWithASCIIString(v, names[i]) == 0) return i;
    return -1;
}
