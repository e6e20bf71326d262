/* errors.h: the binding's exceptions and the status -> exception mapping
 * (errors.c). Every other file of the binding includes this one; it
 * includes none of theirs. */
#ifndef CNN_PY_ERRORS_H
#define CNN_PY_ERRORS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "../cnn.h"

/* cnncuda.CudaError, cnncuda.EngineUnavailableError, cnncuda.CommError (all
 * RuntimeError subclasses): made by cnn_py_add_errors. */
extern PyObject *cnn_CudaError;
extern PyObject *cnn_EngineUnavailableError;
extern PyObject *cnn_CommError;

/* Makes the exception types and adds them to `module`; 0, or -1 with an
 * exception set. */
int cnn_py_add_errors(PyObject *module);

/* Raises the Python exception for `status` with the core's last message
 * (ValueError, MemoryError, CudaError, EngineUnavailableError, CommError,
 * RuntimeError for the rest); returns NULL. */
PyObject *cnn_raise_status(cnn_status status);

#endif
