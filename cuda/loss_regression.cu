// loss_regression.cu: the regression losses (mean squared error, mean
// absolute error, Huber, mean squared logarithmic error, log-cosh, mean
// absolute percentage error), their accuracy count and gradient for the
// cuda and cudnn engines, as docs/semantics.md and the cpu engine
// (csrc/cpu/loss_regression.c); the elementwise terms are
// csrc/regression_math.h's. One warp per sample row (lane l owns columns l,
// l + 32, ...): a row's terms are summed in double by a warp butterfly, the
// row's loss is that sum over k; the rows' losses and correct counts are
// summed in double per warp, per block (warps in order) and over the blocks
// in block order by the last block (loss.cu's scheme, its meet block and
// ticket: the loss ops of a Net run one after another on its stream), then
// added to the device floats sums[0] and sums[1] once each: the same bits
// every run. The gradient is term' / (scale_n k), times the sample's weight
// with weighted rows (cnn_loss_desc.weighted). dy may be y itself: each
// element is read before its lane writes it, and the accuracy's reads of
// the row come before any write (__syncwarp).
#include "cuda_common.cuh"
#include "cuda_ops.h"
#include "loss_rows.cuh"
#include "loss_sums.cuh"
#include "regression_math.h"

#define REGRESSION_WARPS 8 // rows in flight per block

struct regression_args {
    int kind, n, k;
    float delta;
    float scale_nk; // (float)scale_n * (float)k
    int positions;  // rows per sample (cnn_loss_desc.positions)
    int weighted;   // target rows of k + 1: the last the sample's weight
};

__global__ void __launch_bounds__(REGRESSION_WARPS * 32)
    regression_loss_kernel(regression_args a, const float *y, const float *__restrict__ targets,
                           float *dy, float *sums, cnn_cuda_meet *meet)
{
    cnn_kernel_begin();
    __shared__ double part[2][REGRESSION_WARPS];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int k = a.k;
    double loss = 0.0, correct = 0.0; // this warp's rows; equal in every lane
    for (long long i = (long long)blockIdx.x * REGRESSION_WARPS + warp; i < a.n;
         i += (long long)gridDim.x * REGRESSION_WARPS) {
        const float *z = y + (size_t)i * k;
        const float *t = targets + (size_t)i * (k + a.weighted); // then the weight
        const float w = a.weighted ? t[k] : 1.0f;
        float *g = dy ? dy + (size_t)i * k : NULL;
        if (k == 1)
            correct += (z[0] > 0.5f ? 1.0f : 0.0f) == t[0] ? 1.0 : 0.0;
        else
            correct += warp_argmax(z, k, lane) == warp_argmax(t, k, lane) ? 1.0 : 0.0;
        __syncwarp();
        double row = 0.0;
        for (int j = lane; j < k; j += 32) {
            float dj;
            row += (double)cnn_regression_term(a.kind, a.delta, z[j], t[j], &dj);
            if (g) g[j] = (w * dj) / a.scale_nk;
        }
        loss += (double)w * (warp_sum(row) / (double)k);
    }
    loss_block_sums<REGRESSION_WARPS>(part, loss, correct, meet, a.positions, sums);
}

// y (n, k) against targets (n, k) -> sums[0] += the summed loss, sums[1] +=
// the correct count; dy (n, k) or NULL = the gradient of the mean loss over
// scale_n samples (backend_table.h: regression_loss_forward_backward).
cnn_status cuda_regression_loss_forward_backward(cnn_ctx *ctx, const cnn_loss_desc *d,
                                                 const float *y, const int32_t *labels,
                                                 const float *targets, int scale_n, float *dy,
                                                 float *sums)
{
    (void)labels;
    const int n = d->n, k = d->k, kind = d->kind;
    CNN_TRY(cnn_regression_loss_check(d, targets, scale_n, dy, sums));
    if (n == 0) return CNN_OK;
    regression_args a;
    a.kind = kind;
    a.n = n;
    a.k = k;
    a.delta = d->delta;
    a.scale_nk = (float)scale_n * (float)k;
    a.positions = d->positions;
    a.weighted = d->weighted != 0;
    unsigned blocks = cnn_blocks((size_t)n, REGRESSION_WARPS);
    if (blocks > CNN_LOSS_MAX_BLOCKS) blocks = CNN_LOSS_MAX_BLOCKS;
    regression_loss_kernel<<<blocks, REGRESSION_WARPS * 32, 0, cnn_stream(ctx)>>>(
        a, y, targets, dy, sums, cnn_meet(ctx));
    CNN_CUDA_LAUNCHED("regression_loss_forward_backward");
    return CNN_OK;
}
