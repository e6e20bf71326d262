// loss.cu: losses, accuracy and the loss gradient for the cuda engine, as
// docs/semantics.md and the cpu engine (csrc/cpu/loss.c). y (n, k) holds
// logits or probabilities. One warp per sample row (lane l owns columns l,
// l + 32, ...): row reductions (max, argmax, sums) are warp shuffles, sums
// in double as the cpu engine; per-sample losses and correct counts are
// summed in double per block and added to the device floats sums[0] and
// sums[1] with one atomicAdd per block (so the float sums may differ from
// the cpu engine's single addition in the last bits, and between runs).
// The gradient is that of the mean loss over scale_n samples. dy may be y
// itself: every row is reduced before it is written (__syncwarp orders the
// reads before the writes).
//
// Sparse labels outside [0, k) cannot be reported from the device without a
// synchronisation: such a sample is skipped (it adds nothing to the loss or
// the correct count, and its gradient row is zero). The binding checks the
// labels before they reach the engine; the cpu engine reports them.
#include "cuda_common.cuh"
#include "cuda_ops.h"
#include "loss_rows.cuh"

#define LOSS_WARPS 8 // rows in flight per block

// Binary CE of row z (k) against t (k): the mean over k of the elementwise
// losses; element j's gradient depends on z[j] and t[j] only.
static __device__ __forceinline__ double binary_row(const loss_args &a, const float *z,
                                                    const float *t, float *g, double *correct,
                                                    int lane)
{
    const int k = a.k;
    double loss = 0.0;
    int hits = 0;
    const float thr = a.logits ? 0.0f : 0.5f;
    for (int j = lane; j < k; j += 32) {
        const float v = z[j], tj = t[j];
        hits += (v > thr) == (tj > 0.5f);
        float gj;
        if (a.logits) {
            const float pos = v > 0.0f ? v : 0.0f;
            loss += (double)__fadd_rn(__fsub_rn(pos, __fmul_rn(v, tj)), log1pf(expf(-fabsf(v))));
            gj = (sigmoid_f(v) - tj) / a.scale_nk;
        } else {
            const float p = clip_prob(v);
            loss -= (double)__fadd_rn(__fmul_rn(tj, logf(p)), __fmul_rn(1.0f - tj, logf(1.0f - p)));
            gj = unclipped(v) ? (-tj / p + (1.0f - tj) / (1.0f - p)) / a.scale_nk : 0.0f;
        }
        if (g) g[j] = gj;
    }
    hits = warp_sum_int(hits);
    loss = warp_sum(loss);
    *correct += (double)hits / (double)k;
    return loss / (double)k;
}

// y (n, k), labels (n) or targets (n, k) -> dy (n, k) or NULL; sums (2)
// accumulated. One warp per row, grid-stride over rows.
__global__ void __launch_bounds__(LOSS_WARPS * 32)
    loss_kernel(loss_args a, const float *y, const int32_t *__restrict__ labels,
                const float *__restrict__ targets, float *dy, float *sums)
{
    cnn_kernel_begin();
    __shared__ double part[2][LOSS_WARPS];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int k = a.k;
    double loss = 0.0, correct = 0.0; // this warp's rows; equal in every lane
    for (long long i = (long long)blockIdx.x * LOSS_WARPS + warp; i < a.n;
         i += (long long)gridDim.x * LOSS_WARPS) {
        const float *z = y + (size_t)i * k;
        float *g = dy ? dy + (size_t)i * k : NULL;
        if (a.kind == CNN_LOSS_SPARSE_CE) {
            const int label = labels[i];
            if (label < 0 || label >= k) { // skipped: see the top of the file
                if (g)
                    for (int j = lane; j < k; j += 32) g[j] = 0.0f;
                continue;
            }
            loss += categorical_row(a, z, NULL, label, g, &correct, lane);
        } else if (a.kind == CNN_LOSS_CATEGORICAL_CE) {
            loss += categorical_row(a, z, targets + (size_t)i * k, 0, g, &correct, lane);
        } else {
            loss += binary_row(a, z, targets + (size_t)i * k, g, &correct, lane);
        }
    }
    if (lane == 0) {
        part[0][warp] = loss;
        part[1][warp] = correct;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        double l = 0.0, c = 0.0;
        for (int w = 0; w < LOSS_WARPS; ++w) {
            l += part[0][w];
            c += part[1][w];
        }
        atomicAdd(&sums[0], (float)l);
        atomicAdd(&sums[1], (float)c);
    }
}

// y (n, k), labels (n) for sparse or targets (n, k) otherwise -> sums[0] +=
// the summed loss, sums[1] += the correct count; dy (n, k) or NULL = the
// gradient of the mean loss over scale_n samples.
cnn_status cuda_loss_forward_backward(cnn_ctx *ctx, const cnn_loss_desc *d, const float *y,
                                      const int32_t *labels, const float *targets, int scale_n,
                                      float *dy, float *sums)
{
    const int n = d->n, k = d->k, kind = d->kind;
    if (kind != CNN_LOSS_SPARSE_CE && kind != CNN_LOSS_CATEGORICAL_CE &&
        kind != CNN_LOSS_BINARY_CE)
        return cnn_set_error(CNN_ERR_VALUE, "loss: unknown loss kind %d", kind);
    if (n < 0 || k < 1)
        return cnn_set_error(CNN_ERR_VALUE, "loss: bad shape (n %d, k %d)", n, k);
    if (dy && scale_n < 1)
        return cnn_set_error(CNN_ERR_VALUE, "loss: scale_n %d must be positive", scale_n);
    if (!sums) return cnn_set_error(CNN_ERR_VALUE, "loss: no sums buffer");
    if (kind == CNN_LOSS_SPARSE_CE) {
        if (!labels) return cnn_set_error(CNN_ERR_VALUE, "loss: sparse loss without labels");
    } else if (!targets) {
        return cnn_set_error(CNN_ERR_VALUE, "loss: loss kind %d without targets", kind);
    }
    if (n == 0) return CNN_OK;
    loss_args a;
    a.kind = kind;
    a.logits = d->from_logits != 0;
    a.n = n;
    a.k = k;
    a.scale = (float)scale_n;
    a.scale_nk = (float)scale_n * (float)k;
    const unsigned blocks = cnn_blocks((size_t)n, LOSS_WARPS);
    loss_kernel<<<blocks, LOSS_WARPS * 32, 0, cnn_stream(ctx)>>>(a, y, labels, targets, dy, sums);
    CNN_CUDA_LAUNCHED("loss_forward_backward");
    return CNN_OK;
}
