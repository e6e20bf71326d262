/* gemm_check.c: cnncuda._C.sgemm(...), the CPU GEMM exposed for its tests
 * and benchmarks (it is not an op of the backend table). */
#include "binding.h"

#include <stdlib.h>

#include "../cpu/gemm.h"

PyObject *cnn_py_sgemm(PyObject *self, PyObject *args, PyObject *kwds)
{
    (void)self;
    static char *kwlist[] = {"a", "b", "c", "trans_a", "trans_b", "alpha", "beta", "path", NULL};
    PyObject *ao, *bo, *co;
    int trans_a = 0, trans_b = 0;
    double alpha = 1.0, beta = 0.0;
    const char *path = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO|ppdds", kwlist, &ao, &bo, &co, &trans_a,
                                     &trans_b, &alpha, &beta, &path))
        return NULL;
    int want = -1;
    if (path) {
        if (strcmp(path, "portable") == 0) want = CNN_GEMM_PORTABLE;
        else if (strcmp(path, "avx2") == 0) want = CNN_GEMM_AVX2;
        else if (strcmp(path, "avx512") == 0) want = CNN_GEMM_AVX512;
        else {
            PyErr_Format(PyExc_ValueError,
                         "path: expected 'portable', 'avx2' or 'avx512', got '%s'", path);
            return NULL;
        }
        if ((want == CNN_GEMM_AVX2 && !cnn_gemm_avx2_supported()) ||
            (want == CNN_GEMM_AVX512 && !cnn_gemm_avx512_supported())) {
            PyErr_Format(PyExc_ValueError, "path: '%s' is not supported by this CPU", path);
            return NULL;
        }
    }
    PyArrayObject *a = cnn_as_float32(ao, "a"), *b = cnn_as_float32(bo, "b"), *c_in = NULL;
    PyObject *c = NULL;
    float *pack_a = NULL, *pack_b = NULL;
    if (!a || !b) goto done;
    c_in = cnn_as_float32(co, "c");
    if (!c_in) goto done;
    if (PyArray_NDIM(a) != 2 || PyArray_NDIM(b) != 2 || PyArray_NDIM(c_in) != 2) {
        PyErr_SetString(PyExc_ValueError, "a, b, c: expected 2-D arrays");
        goto done;
    }
    int m = (int)PyArray_DIMS(c_in)[0], n = (int)PyArray_DIMS(c_in)[1];
    int k = (int)PyArray_DIMS(a)[trans_a ? 0 : 1];
    if (PyArray_DIMS(a)[trans_a ? 1 : 0] != m || PyArray_DIMS(b)[trans_b ? 1 : 0] != k ||
        PyArray_DIMS(b)[trans_b ? 0 : 1] != n) {
        PyErr_SetString(PyExc_ValueError, "a, b, c: shapes do not agree for op(a) op(b) -> c");
        goto done;
    }
    c = PyArray_NewCopy(c_in, NPY_CORDER);
    if (!c) goto done;
    if (posix_memalign((void **)&pack_a, 64, cnn_gemm_pack_a_floats() * sizeof(float)) ||
        posix_memalign((void **)&pack_b, 64, cnn_gemm_pack_b_floats() * sizeof(float))) {
        Py_CLEAR(c);
        PyErr_NoMemory();
        goto done;
    }
    cnn_gemm_pack pack = {pack_a, pack_b};
    int lda = (int)PyArray_DIMS(a)[1], ldb = (int)PyArray_DIMS(b)[1];
    const float *ap = PyArray_DATA(a), *bp = PyArray_DATA(b);
    float *cp = PyArray_DATA((PyArrayObject *)c);
    int previous = cnn_gemm_path();
    if (want >= 0) cnn_gemm_set_path(want);
    Py_BEGIN_ALLOW_THREADS
    cnn_sgemm(&pack, trans_a, trans_b, m, n, k, (float)alpha, ap, lda, bp, ldb, (float)beta, cp,
              n);
    Py_END_ALLOW_THREADS
    cnn_gemm_set_path(previous);
done:
    free(pack_a);
    free(pack_b);
    Py_XDECREF(a);
    Py_XDECREF(b);
    Py_XDECREF(c_in);
    return c;
}
