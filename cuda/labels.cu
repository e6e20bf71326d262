// labels.cu: a sparse output's labels out of a packed float target row, for
// the cuda and cudnn engines (a network of several outputs, csrc/net/
// loss_parts.c): labels[i] = (int32) x[i], clamped into [0, k). One thread
// per label (grid-stride).
#include "cuda_common.cuh"
#include "cuda_ops.h"

__global__ void labels_from_floats_kernel(size_t count, int k, const float *x, int32_t *labels)
{
    cnn_kernel_begin();
    CNN_GRID_LOOP(i, count) {
        const float v = x[i];
        labels[i] = v >= (float)k ? k - 1 : (v > 0.0f ? (int32_t)v : 0);
    }
}

cnn_status cuda_labels_from_floats(cnn_ctx *ctx, long count, int k, const float *x,
                                   int32_t *labels)
{
    if (count < 0 || k < 1)
        return cnn_set_error(CNN_ERR_VALUE, "labels_from_floats: bad shape: %ld labels of %d "
                             "classes", count, k);
    if (count == 0) return CNN_OK;
    labels_from_floats_kernel<<<cnn_blocks((size_t)count, CNN_THREADS), CNN_THREADS, 0,
                                cnn_stream(ctx)>>>((size_t)count, k, x, labels);
    CNN_CUDA_LAUNCHED("labels_from_floats");
    return CNN_OK;
}
