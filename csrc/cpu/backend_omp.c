/* backend_omp.c: the omp engine's table: the cpu engine's kernels on N
 * OpenMP threads of the host.
 *
 * Every kernel cuts its work into parts that never share an output
 * (images, planes, channels, rows, GEMM tiles), so each output is computed by
 * the same serial code whatever the thread count. The one reduction across
 * images, the convolution's filter gradient, is summed from partials over a
 * fixed cut of the batch (conv2d.c) in a fixed order: results are
 * bit-identical for every thread count. registry.c offers this table only
 * when the build has OpenMP. */
#include "cpu.h"

/* More threads than this is a mistake, not a machine. */
#define OMP_MAX_THREADS 1024

static cnn_status omp_ctx_create(cnn_ctx **out, int num_threads, int device)
{
    if (num_threads < 1 || num_threads > OMP_MAX_THREADS)
        return cnn_set_error(CNN_ERR_VALUE, "engine 'omp': threads must be in [1, %d], got %d",
                             OMP_MAX_THREADS, num_threads);
    (void)device;
    return cnn_cpu_ctx_create(&cnn_backend_omp, num_threads, 1, out);
}

const cnn_backend cnn_backend_omp = {
    .name = "omp",
    .ctx_create = omp_ctx_create,
    .conv2d_workspace = omp_conv2d_workspace, /* room for the partials: its own */
    CNN_CPU_ENTRIES
};
