/* registry.c: engine name -> backend table. The only file that knows what
 * the build compiled in (the CNNCUDA_HAVE_* macros come from setup.py). */
#include <string.h>

#include "cnn.h"
#include "comm.h"
#include "cpu/cpu.h"

#if defined(CNNCUDA_HAVE_CUDNN) && defined(CNNCUDA_HAVE_CUBLAS)
#define CNNCUDA_HAVE_CUDNN_ENGINE 1
extern const cnn_backend cnn_backend_cudnn; /* cuda/backend_cudnn.cu */
void cnn_cudnn_library_versions(long *cudnn, long *cublas);
#endif
#ifdef CNNCUDA_HAVE_CUDA
extern const cnn_backend cnn_backend_cuda; /* cuda/backend_cuda.cu */
int cnn_cuda_runtime_device_count(void); /* cuda/device.cu */
int cnn_cuda_runtime_device_name(int index, char *buf, int len);
int cnn_cuda_runtime_device_capability(int index, int *major, int *minor);
void cnn_cuda_runtime_versions(int *driver, int *runtime);
int cnn_cuda_runtime_memory(size_t *free_bytes, size_t *total_bytes);
#endif

/* Every engine name the project knows, with whether this build has it. */
static const struct {
    const char *name;
    const cnn_backend *table;
    int needs_gpu;
} engines[] = {
    {"numpy", NULL, 0}, /* the NumPy reference runs in Python, never here */
    {"cpu", &cnn_backend_cpu, 0},
#ifdef CNNCUDA_HAVE_OPENMP
    {"omp", &cnn_backend_omp, 0}, /* csrc/cpu/backend_omp.c */
#else
    {"omp", NULL, 0},
#endif
#ifdef CNNCUDA_HAVE_CUDA
    {"cuda", &cnn_backend_cuda, 1},
#else
    {"cuda", NULL, 1},
#endif
#ifdef CNNCUDA_HAVE_CUDNN_ENGINE
    {"cudnn", &cnn_backend_cudnn, 1},
#else
    {"cudnn", NULL, 1},
#endif
};

const cnn_backend *cnn_backend_find(const char *name, cnn_status *status)
{
    for (size_t i = 0; i < sizeof engines / sizeof engines[0]; i++) {
        if (strcmp(name, engines[i].name) != 0) continue;
        if (strcmp(name, "numpy") == 0) {
            *status = cnn_set_error(CNN_ERR_VALUE,
                                    "engine 'numpy' is the NumPy reference and runs in Python "
                                    "(cnncuda.engine.make_net), not in the C core");
            return NULL;
        }
        if (engines[i].table && engines[i].needs_gpu && cnn_cuda_device_count() < 1) {
            *status = cnn_set_error(CNN_ERR_UNAVAILABLE,
                                    "engine '%s' needs a CUDA GPU and none was found on this "
                                    "machine",
                                    name);
            return NULL;
        }
        if (engines[i].table) {
            *status = CNN_OK;
            return engines[i].table;
        }
        *status = cnn_set_error(CNN_ERR_UNAVAILABLE,
                                "engine '%s' is not available in this build of cnncuda "
                                "(compiled in: %s)",
                                name, cnn_build_features());
        return NULL;
    }
    *status = cnn_set_error(CNN_ERR_VALUE,
                            "unknown engine '%s': expected one of 'numpy', 'cpu', 'omp', "
                            "'cuda', 'cudnn'",
                            name);
    return NULL;
}

/* Data parallel over GPUs: NCCL (cuda/comm_nccl.cu) where it was found. */
#ifdef CNNCUDA_HAVE_NCCL
int cnn_comm_nccl_available(void) { return 1; }
#else
int cnn_comm_nccl_available(void) { return 0; }

cnn_status cnn_comm_nccl_create(cnn_comm *control, int device, double timeout_s,
                                cnn_comm **out)
{
    (void)control;
    (void)device;
    (void)timeout_s;
    *out = NULL;
    return cnn_set_error(CNN_ERR_UNAVAILABLE,
                         "data parallel over GPUs needs NCCL, which this build of cnncuda "
                         "lacks (compiled in: %s)",
                         cnn_build_features());
}
#endif

const char *cnn_build_features(void)
{
    return "cpu"
#ifdef CNNCUDA_HAVE_OPENMP
           " openmp"
#endif
#ifdef CNNCUDA_HAVE_CUDA
           " cuda-runtime"
#endif
#ifdef CNNCUDA_HAVE_CUBLAS
           " cublas"
#endif
#ifdef CNNCUDA_HAVE_CUDNN
           " cudnn"
#endif
#ifdef CNNCUDA_HAVE_NCCL
           " nccl"
#endif
        ;
}

int cnn_cuda_device_count(void)
{
#ifdef CNNCUDA_HAVE_CUDA
    return cnn_cuda_runtime_device_count();
#else
    return 0;
#endif
}

int cnn_cuda_device_name(int index, char *buf, int len)
{
#ifdef CNNCUDA_HAVE_CUDA
    return cnn_cuda_runtime_device_name(index, buf, len);
#else
    (void)index;
    if (len > 0) buf[0] = '\0';
    return -1;
#endif
}

int cnn_cuda_device_capability(int index, int *major, int *minor)
{
#ifdef CNNCUDA_HAVE_CUDA
    return cnn_cuda_runtime_device_capability(index, major, minor);
#else
    (void)index;
    *major = *minor = 0;
    return -1;
#endif
}

const char *cnn_build_summary(void)
{
#ifdef CNNCUDA_BUILD_SUMMARY
    return CNNCUDA_BUILD_SUMMARY;
#else
    return "";
#endif
}

int cnn_cuda_memory(size_t *free_bytes, size_t *total_bytes)
{
#ifdef CNNCUDA_HAVE_CUDA
    if (cnn_cuda_device_count() < 1) return -1;
    return cnn_cuda_runtime_memory(free_bytes, total_bytes);
#else
    *free_bytes = *total_bytes = 0;
    return -1;
#endif
}

void cnn_gpu_library_versions(long v[4])
{
    v[0] = v[1] = v[2] = v[3] = 0;
#ifdef CNNCUDA_HAVE_CUDA
    int driver = 0, runtime = 0;
    cnn_cuda_runtime_versions(&driver, &runtime);
    v[0] = driver;
    v[1] = runtime;
#endif
#ifdef CNNCUDA_HAVE_CUDNN_ENGINE
    cnn_cudnn_library_versions(&v[2], &v[3]);
#endif
}
