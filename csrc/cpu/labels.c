/* labels.c: a sparse output's labels out of a packed float target row, for
 * the cpu and omp engines (a network of several outputs, csrc/net/
 * loss_parts.c): labels[i] = (int32) x[i], clamped into [0, k). One pass
 * in index order (a copy: no range split needed for its size). */
#include "cpu.h"

cnn_status cpu_labels_from_floats(cnn_ctx *ctx, long count, int k, const float *x,
                                  int32_t *labels)
{
    (void)ctx;
    if (count < 0 || k < 1)
        return cnn_set_error(CNN_ERR_VALUE, "labels_from_floats: bad shape: %ld labels of %d "
                             "classes", count, k);
    for (long i = 0; i < count; i++) {
        const float v = x[i];
        labels[i] = v >= (float)k ? k - 1 : (v > 0.0f ? (int32_t)v : 0);
    }
    return CNN_OK;
}
