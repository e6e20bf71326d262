// elementwise.cu: the activations from CNN_ACT_ELU on (cnn.h), forward and
// backward, for the cuda and cudnn engines: one thread per element
// (grid-stride), the formulas csrc/activation_math.h's, which the cpu
// engine shares (the device's expf, erfcf, ... may differ from the host's in
// the last bits). x and y (dy and dx) may be the same buffer: every element
// is read and written by one thread.
#include "activation_math.h"
#include "cuda_common.cuh"
#include "cuda_ops.h"

__global__ void eltwise_forward_kernel(cnn_act_desc d, size_t count, const float *x, float *y)
{
    cnn_kernel_begin();
    CNN_GRID_LOOP(i, count) y[i] = cnn_act_value(&d, x[i]);
}

__global__ void eltwise_backward_kernel(cnn_act_desc d, size_t count, const float *x,
                                        const float *y, const float *dy, float *dx)
{
    cnn_kernel_begin();
    CNN_GRID_LOOP(i, count) dx[i] = cnn_act_grad(&d, x[i], y[i], dy[i]);
}

static cnn_status check(const char *what, const cnn_act_desc *d, long count)
{
    if (count < 0) return cnn_set_error(CNN_ERR_VALUE, "%s: negative count %ld", what, count);
    if (d->act < CNN_ACT_ELU || d->act >= CNN_ACT_KINDS)
        return cnn_set_error(CNN_ERR_VALUE,
                             "%s: activation %d is not one of the elementwise ones (%d to %d)",
                             what, d->act, (int)CNN_ACT_ELU, (int)CNN_ACT_KINDS - 1);
    return CNN_OK;
}

cnn_status cuda_elementwise_forward(cnn_ctx *ctx, const cnn_act_desc *d, long count,
                                    const float *x, float *y)
{
    CNN_TRY(check("elementwise_forward", d, count));
    if (!count) return CNN_OK;
    eltwise_forward_kernel<<<cnn_blocks((size_t)count, CNN_THREADS), CNN_THREADS, 0,
                             cnn_stream(ctx)>>>(*d, (size_t)count, x, y);
    CNN_CUDA_LAUNCHED("elementwise_forward");
    return CNN_OK;
}

cnn_status cuda_elementwise_backward(cnn_ctx *ctx, const cnn_act_desc *d, long count,
                                     const float *x, const float *y, const float *dy, float *dx)
{
    CNN_TRY(check("elementwise_backward", d, count));
    if (!count) return CNN_OK;
    eltwise_backward_kernel<<<cnn_blocks((size_t)count, CNN_THREADS), CNN_THREADS, 0,
                              cnn_stream(ctx)>>>(*d, (size_t)count, x, y, dy, dx);
    CNN_CUDA_LAUNCHED("elementwise_backward");
    return CNN_OK;
}
