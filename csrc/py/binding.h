/* binding.h: shared pieces of the CPython binding (cnncuda._C).
 *
 * Who uses whom (no circle): module.c (the module: build and device
 * queries, the RNG, the switches) uses the Net and Comm types; net_*.c (the
 * Net type, net_object.h) use comm_type.c's group bookkeeping; every file
 * uses errors.c (the exceptions) and convert.c (array checks). */
#ifndef CNN_BINDING_H
#define CNN_BINDING_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#ifndef CNN_BINDING_MODULE
#define NO_IMPORT_ARRAY
#endif
#define PY_ARRAY_UNIQUE_SYMBOL cnncuda_ARRAY_API
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#include "../cnn.h"
#include "errors.h"

/* convert.c */
/* A float32, C-contiguous, aligned array from `obj` (a new reference), or
 * NULL with TypeError naming `arg` when obj is not a real numeric array. */
PyArrayObject *cnn_as_float32(PyObject *obj, const char *arg);
/* The samples of `obj` as the core converts them (cnn_host_array, filled
 * in, naming `arg`): the array itself where it is float32, float64 or uint8,
 * native, aligned and C-contiguous, else a copy in one of those (NumPy's
 * cast: float64 for floats wider than 4 bytes, float32 for the rest). A new
 * reference (it holds host->data), or NULL with TypeError naming arg. Values
 * are not checked here: the core checks them as it converts. */
PyArrayObject *cnn_as_samples(PyObject *obj, const char *arg, cnn_host_array *host);
/* ValueError unless `a` has exactly `rank` dims equal to dims (-1 = any). */
int cnn_check_shape(PyArrayObject *a, const char *arg, int rank, const npy_intp *dims);
/* ValueError naming `arg` and the first bad index if a (float32) holds NaN
 * or Inf. */
int cnn_check_finite(PyArrayObject *a, const char *arg);
/* raw, an array of cnn_as_samples's described by host, as float32 (the
 * core's conversion, so the bits set_data uploads), its values checked as
 * the core checks them (a value that overflows float32 named as such). A
 * new reference (raw itself where it is float32), or NULL with ValueError. */
PyArrayObject *cnn_checked_float32(PyArrayObject *raw, const cnn_host_array *host);
/* "(None, 32, 32, 3)" style text of a shape, into buf. */
void cnn_shape_text(char *buf, size_t len, int rank, const npy_intp *dims);

/* net_type.c (the Net's own pieces: net_object.h) */
extern PyTypeObject cnn_NetType;

/* comm_type.c */
struct cnn_comm;
extern PyTypeObject cnn_CommType;
extern PyMethodDef cnn_comm_functions[];
/* The communicator of a Comm object, or NULL with TypeError (or
 * RuntimeError for one handed over). */
struct cnn_comm *cnn_comm_of(PyObject *obj);
/* Counts a Net joining (+1) or leaving (-1) a group through Comm obj. */
void cnn_comm_use(PyObject *obj, int delta);

/* How many Nets hold a core network now (net_type.c). */
long cnn_py_live_nets(void);
/* Frees the core network of every Net not running a call (at interpreter
 * exit: the engines' memory and library handles go back before the CUDA
 * runtime is torn down, whoever still holds the Python objects); returns how
 * many. A released Net raises RuntimeError when used. */
long cnn_py_release_all_nets(void);

#endif
