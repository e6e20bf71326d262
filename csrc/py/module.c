/* module.c: the cnncuda._C module: build and device queries, the engine's
 * switches, the RNG (for the reference's cross-check), and the types (Net,
 * Comm) and exceptions (errors.c) it holds. */
#define CNN_BINDING_MODULE
#include "binding.h"
#include "../switches.h"

#include "../cpu/gemm.h"

PyObject *cnn_py_sgemm(PyObject *self, PyObject *args, PyObject *kwds); /* gemm_check.c */

static PyObject *py_compiled_features(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    return PyUnicode_FromString(cnn_build_features());
}

static PyObject *py_build_summary(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    return PyUnicode_FromString(cnn_build_summary());
}

static PyObject *py_engine_status(PyObject *self, PyObject *arg)
{
    (void)self;
    const char *name = PyUnicode_AsUTF8(arg);
    if (!name) return NULL;
    cnn_status st;
    const cnn_backend *be = cnn_backend_find(name, &st);
    if (be) Py_RETURN_NONE;
    return PyUnicode_FromString(cnn_last_error());
}

static PyObject *py_cuda_devices(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    int count = cnn_cuda_device_count();
    PyObject *list = PyList_New(0);
    for (int i = 0; list && i < count; i++) {
        char name[256];
        if (cnn_cuda_device_name(i, name, sizeof name) != 0) snprintf(name, sizeof name, "?");
        PyObject *s = PyUnicode_FromString(name);
        if (!s || PyList_Append(list, s) < 0) Py_CLEAR(list);
        Py_XDECREF(s);
    }
    return list;
}

/* [(major, minor), ...]: the compute capability of each CUDA device visible
 * now, in cuda_devices()'s order; empty in a CPU-only build or without a GPU. */
static PyObject *py_cuda_compute_capabilities(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    int count = cnn_cuda_device_count();
    PyObject *list = PyList_New(0);
    for (int i = 0; list && i < count; i++) {
        int major = 0, minor = 0;
        cnn_cuda_device_capability(i, &major, &minor); /* (0, 0) where it fails */
        PyObject *t = Py_BuildValue("(ii)", major, minor);
        if (!t || PyList_Append(list, t) < 0) Py_CLEAR(list);
        Py_XDECREF(t);
    }
    return list;
}

/* {"driver": "13.0", "runtime": "13.0", "cudnn": "9.14.0", "cublas": "13.1.0"}:
 * what this build links and this machine has; empty in a CPU-only build. */
static PyObject *py_cuda_versions(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    long v[4];
    cnn_gpu_library_versions(v);
    PyObject *d = PyDict_New();
    char buf[64];
    const char *keys[4] = {"driver", "runtime", "cudnn", "cublas"};
    for (int i = 0; d && i < 4; i++) {
        if (!v[i]) continue;
        if (i < 2)
            snprintf(buf, sizeof buf, "%ld.%ld", v[i] / 1000, (v[i] % 1000) / 10);
        else
            snprintf(buf, sizeof buf, "%ld.%ld.%ld", v[i] / 10000, (v[i] % 10000) / 100,
                     v[i] % 100);
        PyObject *s = PyUnicode_FromString(buf);
        if (!s || PyDict_SetItemString(d, keys[i], s) < 0) Py_CLEAR(d);
        Py_XDECREF(s);
    }
    return d;
}

/* (free, total) bytes of the current GPU's memory, or None without one. */
static PyObject *py_cuda_memory(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    size_t free_bytes = 0, total_bytes = 0;
    if (cnn_cuda_memory(&free_bytes, &total_bytes) != 0) Py_RETURN_NONE;
    return Py_BuildValue("(nn)", (Py_ssize_t)free_bytes, (Py_ssize_t)total_bytes);
}

static PyObject *py_live_nets(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    return PyLong_FromLong(cnn_py_live_nets());
}

static PyObject *py_release_all_nets(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    return PyLong_FromLong(cnn_py_release_all_nets());
}

static PyObject *py_gemm_path(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    int path = cnn_gemm_path();
    return PyUnicode_FromString(path == CNN_GEMM_AVX512 ? "avx512"
                                : path == CNN_GEMM_AVX2 ? "avx2" : "portable");
}

static PyObject *py_gemm_avx2_supported(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    return PyBool_FromLong(cnn_gemm_avx2_supported());
}

static PyObject *py_gemm_avx512_supported(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    return PyBool_FromLong(cnn_gemm_avx512_supported());
}

/* switches() -> {name: value}: the engine's switches as they read now
 * (csrc/switches.c); ValueError for a value it refuses. */
static PyObject *py_switches(PyObject *self, PyObject *noargs)
{
    cnn_switches s;
    cnn_status st = cnn_switches_read(&s);
    if (st != CNN_OK) return cnn_raise_status(st);
    PyObject *out = PyDict_New();
    for (int i = 0; out && i < cnn_switches_count(); ++i) {
        PyObject *v = PyLong_FromLong(cnn_switches_value(&s, i));
        if (!v || PyDict_SetItemString(out, cnn_switches_name(i), v) < 0) Py_CLEAR(out);
        Py_XDECREF(v);
    }
    return out;
}

static PyObject *py_rng_key(PyObject *self, PyObject *args)
{
    (void)self;
    unsigned long long seed, stream;
    if (!PyArg_ParseTuple(args, "KK", &seed, &stream)) return NULL;
    return PyLong_FromUnsignedLongLong(cnn_rng_key(seed, stream));
}

static PyObject *py_rng_uniform(PyObject *self, PyObject *args)
{
    (void)self;
    unsigned long long key;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "Kn", &key, &n)) return NULL;
    if (n < 0) {
        PyErr_Format(PyExc_ValueError, "n: expected >= 0, got %zd", n);
        return NULL;
    }
    npy_intp dims[1] = {n};
    PyObject *a = PyArray_SimpleNew(1, dims, NPY_FLOAT32);
    if (!a) return NULL;
    float *p = PyArray_DATA((PyArrayObject *)a);
    for (Py_ssize_t i = 0; i < n; i++) p[i] = cnn_uniform(key, (uint64_t)i);
    return a;
}

static PyMethodDef module_methods[] = {
    {"compiled_features", py_compiled_features, METH_NOARGS,
     "What the build compiled in, space separated."},
    {"build_summary", py_build_summary, METH_NOARGS, "What setup.py found, one line."},
    {"engine_status", py_engine_status, METH_O,
     "engine_status(name) -> None when the engine can run here, else the reason."},
    {"cuda_devices", py_cuda_devices, METH_NOARGS, "Names of the CUDA devices visible now."},
    {"cuda_compute_capabilities", py_cuda_compute_capabilities, METH_NOARGS,
     "(major, minor) compute capability of each CUDA device visible now, e.g. [(7, 5)] "
     "for a T4 ([] without a CUDA build or GPU); TF32 needs (8, 0) or later."},
    {"cuda_versions", py_cuda_versions, METH_NOARGS,
     "Versions of the CUDA driver, runtime, cuDNN and cuBLAS ({} without CUDA)."},
    {"cuda_memory", py_cuda_memory, METH_NOARGS,
     "(free, total) bytes of the current GPU's memory, or None without a GPU."},
    {"live_nets", py_live_nets, METH_NOARGS,
     "How many Nets hold a core network now (made, not yet freed)."},
    {"release_all_nets", py_release_all_nets, METH_NOARGS,
     "Frees the engine memory of every Net not running a call (cnncuda calls it at "
     "interpreter exit); a released Net raises RuntimeError. Returns how many."},
    {"gemm_path", py_gemm_path, METH_NOARGS, "The CPU GEMM micro-kernel in use."},
    {"gemm_avx2_supported", py_gemm_avx2_supported, METH_NOARGS,
     "Whether this CPU can run the AVX2/FMA GEMM micro-kernel."},
    {"gemm_avx512_supported", py_gemm_avx512_supported, METH_NOARGS,
     "Whether this CPU can run the AVX-512 GEMM micro-kernel."},
    {"sgemm", (PyCFunction)(void (*)(void))cnn_py_sgemm, METH_VARARGS | METH_KEYWORDS,
     "sgemm(a, b, c, trans_a=False, trans_b=False, alpha=1, beta=0, path=None) -> new c."},
    {"switches", py_switches, METH_NOARGS,
     "switches() -> {name: value}: the engine's CNNCUDA_* switches as they read now."},
    {"rng_key", py_rng_key, METH_VARARGS, "rng_key(seed, stream) -> key (the core's RNG)."},
    {"rng_uniform", py_rng_uniform, METH_VARARGS,
     "rng_uniform(key, n) -> float32 array of uniform(key, 0..n-1)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "cnncuda._C", "The C core of cnncuda.", -1, module_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__C(void)
{
    import_array();
    if (PyType_Ready(&cnn_NetType) < 0 || PyType_Ready(&cnn_CommType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (!m) return NULL;
    if (PyModule_AddFunctions(m, cnn_comm_functions) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    if (cnn_py_add_errors(m) < 0 ||
        PyModule_AddObjectRef(m, "Net", (PyObject *)&cnn_NetType) < 0 ||
        PyModule_AddObjectRef(m, "Comm", (PyObject *)&cnn_CommType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
