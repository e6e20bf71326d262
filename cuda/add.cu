// add.cu: the sum of two tensors for the cuda and cudnn engines: an Add
// layer's forward (its inputs summed one after another), and the sum of the
// gradients of a layer output that several layers read (csrc/net/graph.c).
// One thread per element (grid-stride); y may be a or b: each element is
// read and written by one thread. The same bits as the cpu engine's.
#include "cuda_common.cuh"
#include "cuda_ops.h"

__global__ void add_kernel(size_t count, const float *a, const float *b, float *y)
{
    cnn_kernel_begin();
    CNN_GRID_LOOP(i, count) y[i] = __fadd_rn(a[i], b[i]);
}

// a, b (n, count) -> y (n, count)
cnn_status cuda_add(cnn_ctx *ctx, int n, int count, const float *a, const float *b, float *y)
{
    if (n < 0 || count < 0)
        return cnn_set_error(CNN_ERR_VALUE, "add: negative shape (%d, %d)", n, count);
    const size_t total = (size_t)n * count;
    if (total == 0) return CNN_OK;
    add_kernel<<<cnn_blocks(total, CNN_THREADS), CNN_THREADS, 0, cnn_stream(ctx)>>>(total, a, b,
                                                                                   y);
    CNN_CUDA_LAUNCHED("add");
    return CNN_OK;
}
