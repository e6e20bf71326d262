/* errors.c: the binding's exceptions and cnn_raise_status (errors.h). */
#include "errors.h"

PyObject *cnn_CudaError;
PyObject *cnn_EngineUnavailableError;
PyObject *cnn_CommError;

PyObject *cnn_raise_status(cnn_status status)
{
    const char *msg = cnn_last_error();
    switch (status) {
    case CNN_ERR_VALUE: PyErr_SetString(PyExc_ValueError, msg); break;
    case CNN_ERR_MEMORY: PyErr_SetString(PyExc_MemoryError, msg); break;
    case CNN_ERR_DEVICE: PyErr_SetString(cnn_CudaError, msg); break;
    case CNN_ERR_UNAVAILABLE: PyErr_SetString(cnn_EngineUnavailableError, msg); break;
    case CNN_ERR_COMM: PyErr_SetString(cnn_CommError, msg); break;
    default: PyErr_SetString(PyExc_RuntimeError, msg); break;
    }
    return NULL;
}

int cnn_py_add_errors(PyObject *module)
{
    cnn_CudaError = PyErr_NewExceptionWithDoc(
        "cnncuda.CudaError", "A CUDA, cuDNN, cuBLAS or NCCL call failed.", PyExc_RuntimeError,
        NULL);
    cnn_EngineUnavailableError = PyErr_NewExceptionWithDoc(
        "cnncuda.EngineUnavailableError",
        "The engine asked for was not compiled in or cannot run on this machine.",
        PyExc_RuntimeError, NULL);
    cnn_CommError = PyErr_NewExceptionWithDoc(
        "cnncuda.CommError",
        "A data-parallel group failed: a peer failed, left or did not answer in time.",
        PyExc_RuntimeError, NULL);
    if (!cnn_CudaError || !cnn_EngineUnavailableError || !cnn_CommError ||
        PyModule_AddObjectRef(module, "CudaError", cnn_CudaError) < 0 ||
        PyModule_AddObjectRef(module, "EngineUnavailableError", cnn_EngineUnavailableError) < 0 ||
        PyModule_AddObjectRef(module, "CommError", cnn_CommError) < 0)
        return -1;
    return 0;
}
