/* backend_cpu.c: the cpu engine's table and context. Host memory, one
 * thread. The memory entries are shared with the omp table (backend_omp.c). */
#define _POSIX_C_SOURCE 200112L
#include <stdlib.h>
#include <string.h>

#include "cpu.h"

static void *aligned_alloc64(size_t bytes)
{
    void *p = NULL;
    if (bytes == 0) bytes = 64;
    if (posix_memalign(&p, 64, bytes) != 0) return NULL;
    return p;
}

/* One thread whatever is asked: the cpu engine never enters a parallel
 * region (every kernel's loop runs as one part on the calling thread). */
static cnn_status cpu_ctx_create(cnn_ctx **out, int num_threads, int device)
{
    (void)num_threads;
    (void)device;
    return cnn_cpu_ctx_create(&cnn_backend_cpu, 1, 0, out);
}

cnn_status cpu_alloc(cnn_ctx *ctx, void **p, size_t bytes)
{
    (void)ctx;
    *p = aligned_alloc64(bytes);
    if (!*p)
        return cnn_set_error(CNN_ERR_MEMORY, "out of host memory: could not allocate %zu bytes",
                             bytes);
    return CNN_OK;
}

void cpu_free(cnn_ctx *ctx, void *p)
{
    (void)ctx;
    free(p);
}

cnn_status cpu_copy(cnn_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    (void)ctx;
    if (bytes) memcpy(dst, src, bytes);
    return CNN_OK;
}

cnn_status cpu_zero(cnn_ctx *ctx, void *p, size_t bytes)
{
    (void)ctx;
    if (bytes) memset(p, 0, bytes);
    return CNN_OK;
}

cnn_status cpu_synchronize(cnn_ctx *ctx)
{
    (void)ctx;
    return CNN_OK;
}

const cnn_fused_ops cnn_cpu_fused = {
    .conv2d_forward_relu = cpu_conv2d_forward_relu,
    .pool_backward_relu = cpu_pool_backward_relu,
};

const cnn_backend cnn_backend_cpu = {
    .name = "cpu",
    .ctx_create = cpu_ctx_create,
    .conv2d_workspace = cpu_conv2d_workspace,
    CNN_CPU_ENTRIES
};
