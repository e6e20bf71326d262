// loss.cu: losses, accuracy and the loss gradient for the cuda engine, as
// docs/semantics.md and the cpu engine (csrc/cpu/loss.c). y (n, k) holds
// logits or probabilities. One warp per sample row (lane l owns columns l,
// l + 32, ...): row reductions (max, argmax, sums) are warp shuffles, sums
// in double as the cpu engine; per-sample losses and correct counts are
// summed in double per warp, per block (warps in order), and over the
// blocks in block order by the last block to finish (cnn_last_block: the
// others' sums wait in the context's meet block), which adds them to the
// device floats sums[0] and sums[1] as the cpu engine does: the same bits
// every run, no float atomics. The gradient is that of the mean loss over
// scale_n samples. dy may be y itself: every row is reduced before it is
// written (__syncwarp orders the reads before the writes).
//
// softmax_loss: the same kernel from the logits x of a network's last
// softmax layer: each row's softmax is formed as activation.cu's (the same
// bits), written to y, and the loss taken of it as above (the same bits
// again: the same q = y / sum(y), the same clip and logs); the gradient with
// respect to x is the loss's and the softmax's backward in one expression.
// With q the clipped-or-not q, U the sum of t_j over the unclipped j:
//   dx_j = (U q_j - [q_j unclipped] t_j) / scale_n
// (the softmax's backward y_j (dy_j - sum_i dy_i y_i) of the loss's
// gradient dy_j = (g_j + U) / (sum(y) scale_n), g_j = -t_j / q_j where q_j is
// unclipped and 0 elsewhere: sum_i dy_i y_i = 0 exactly, and y_j / sum(y) =
// q_j). Without clipping that is (softmax * sum(t) - t) / scale_n, the
// from-logits gradient; the float results differ from the two kernels'
// chain in rounding only (tests/test_step_edges.py).
//
// Sparse labels outside [0, k) cannot be reported from the device without a
// synchronisation: such a sample is skipped (it adds nothing to the loss or
// the correct count, and its gradient row is zero). The binding checks the
// labels before they reach the engine; the cpu engine reports them.
#include "cuda_common.cuh"
#include "cuda_ops.h"
#include "loss_rows.cuh"
#include "loss_sums.cuh"

#define LOSS_WARPS 8 // rows in flight per block

// Sparse (t NULL, one-hot of label) or categorical CE of the softmax of the
// logit row x (k) from probabilities; writes the softmax to yr (k) and the
// gradient with respect to x to g (k) when not NULL (see the top). Returns
// the loss; adds to *correct. Every lane returns the same values. Lane l
// reads and writes only columns l, l + 32, ..., so g may be x.
static __device__ __forceinline__ double softmax_categorical_row(const loss_args &a,
                                                                const float *x, const float *t,
                                                                int label, float *yr, float *g,
                                                                double *correct, int lane)
{
    const int k = a.k;
    // the softmax, as softmax_forward_kernel
    float m = -INFINITY;
    for (int j = lane; j < k; j += 32) m = x[j] > m ? x[j] : m;
    m = warp_max(m);
    double es = 0.0;
    for (int j = lane; j < k; j += 32) es += (double)expf(x[j] - m);
    const softmax_values p{x, m, (float)warp_sum(es)};
    // the loss of y = p, as categorical_row's probabilities branch
    const int want = t ? warp_argmax(t, k, lane) : label;
    if (warp_argmax_of(p, k, lane) == want) *correct += 1.0;
    double u = 0.0;
    for (int j = lane; j < k; j += 32) u += (double)p(j);
    const float sy = (float)warp_sum(u);
    double loss = 0.0, kept = 0.0; // kept: U, the sum of t_j over the unclipped q_j
    for (int j = lane; j < k; j += 32) {
        const float pj = p(j), q = pj / sy;
        if (yr) yr[j] = pj;
        const float tj = t ? t[j] : (j == label ? 1.0f : 0.0f);
        if (t)
            loss -= (double)tj * (double)logf(clip_prob(q));
        else if (j == label)
            loss = -(double)logf(clip_prob(q));
        if (unclipped(q)) kept += (double)tj;
    }
    loss = warp_sum(loss); // sparse: one lane's value, the others 0
    if (g) {
        const float uf = (float)warp_sum(kept);
        for (int j = lane; j < k; j += 32) {
            const float q = p(j) / sy;
            const float tj = t ? t[j] : (j == label ? 1.0f : 0.0f);
            const float own = unclipped(q) ? tj : 0.0f;
            g[j] = __fsub_rn(__fmul_rn(uf, q), own) / a.scale;
        }
    }
    return loss;
}

// Binary CE of row z (k) against t (k): the mean over k of the elementwise
// losses; element j's gradient depends on z[j] and t[j] only.
static __device__ __forceinline__ double binary_row(const loss_args &a, const float *z,
                                                    const float *t, float w, float *g,
                                                    double *correct, int lane)
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
            gj = __fmul_rn(w, sigmoid_f(v) - tj) / a.scale_nk;
        } else {
            const float p = clip_prob(v);
            loss -= (double)__fadd_rn(__fmul_rn(tj, logf(p)), __fmul_rn(1.0f - tj, logf(1.0f - p)));
            gj = unclipped(v) ? __fmul_rn(w, -tj / p + (1.0f - tj) / (1.0f - p)) / a.scale_nk
                              : 0.0f;
        }
        if (g) g[j] = gj;
    }
    hits = warp_sum(hits);
    loss = warp_sum(loss);
    *correct += (double)hits / (double)k;
    return (double)w * (loss / (double)k);
}

// y (n, k), labels (n) or targets (n, k) -> dy (n, k) or NULL; sums (2)
// accumulated. One warp per row, grid-stride over rows. a.softmax: y holds
// the logits of a softmax layer whose output goes to y_out (n, k) (or
// NULL), and dy is the gradient with respect to the logits.
__global__ void __launch_bounds__(LOSS_WARPS * 32)
    loss_kernel(loss_args a, const float *y, float *y_out, const int32_t *__restrict__ labels,
                const float *__restrict__ targets, float *dy, float *sums, cnn_cuda_meet *meet,
                int positions, int weighted)
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
        // weighted (binary): rows of k targets and the sample's weight
        const float *t = a.kind == CNN_LOSS_SPARSE_CE ? NULL : targets + (size_t)i * (k + weighted);
        int label = 0;
        if (a.kind == CNN_LOSS_SPARSE_CE) {
            label = labels[i];
            if (label < 0 || label >= k) { // skipped: see the top of the file
                if (a.softmax && y_out) { // the softmax's output is still written
                    double none = 0.0;
                    softmax_categorical_row(a, z, NULL, 0, y_out + (size_t)i * k, NULL, &none,
                                            lane);
                }
                if (g)
                    for (int j = lane; j < k; j += 32) g[j] = 0.0f;
                continue;
            }
        }
        if (a.softmax)
            loss += softmax_categorical_row(a, z, t, label, y_out ? y_out + (size_t)i * k : NULL,
                                            g, &correct, lane);
        else if (a.kind == CNN_LOSS_BINARY_CE)
            loss += binary_row(a, z, t, weighted ? t[k] : 1.0f, g, &correct, lane);
        else
            loss += categorical_row(a, z, t, label, g, &correct, lane);
    }
    loss_block_sums<LOSS_WARPS>(part, loss, correct, meet, positions, sums);
}

static cnn_status check_loss(const cnn_loss_desc *d, const int32_t *labels, const float *targets,
                             int scale_n, const float *dy, const float *sums)
{
    const int n = d->n, k = d->k, kind = d->kind;
    if (kind != CNN_LOSS_SPARSE_CE && kind != CNN_LOSS_CATEGORICAL_CE &&
        kind != CNN_LOSS_BINARY_CE)
        return cnn_set_error(CNN_ERR_VALUE, "loss: unknown loss kind %d", kind);
    if (n < 0 || k < 1)
        return cnn_set_error(CNN_ERR_VALUE, "loss: bad shape (n %d, k %d)", n, k);
    if (d->weighted && kind != CNN_LOSS_BINARY_CE)
        return cnn_set_error(CNN_ERR_VALUE, "loss: weighted rows for the binary cross-entropy "
                             "only, got loss kind %d", kind);
    if (dy && scale_n < 1)
        return cnn_set_error(CNN_ERR_VALUE, "loss: scale_n %d must be positive", scale_n);
    if (!sums) return cnn_set_error(CNN_ERR_VALUE, "loss: no sums buffer");
    if (kind == CNN_LOSS_SPARSE_CE) {
        if (!labels) return cnn_set_error(CNN_ERR_VALUE, "loss: sparse loss without labels");
    } else if (!targets) {
        return cnn_set_error(CNN_ERR_VALUE, "loss: loss kind %d without targets", kind);
    }
    return CNN_OK;
}

static cnn_status launch_loss(cnn_ctx *ctx, const cnn_loss_desc *d, int softmax, const float *y,
                              float *y_out, const int32_t *labels, const float *targets,
                              int scale_n, float *dy, float *sums)
{
    if (d->n == 0) return CNN_OK;
    loss_args a;
    a.kind = d->kind;
    a.logits = d->from_logits != 0;
    a.softmax = softmax;
    a.n = d->n;
    a.k = d->k;
    a.scale = (float)scale_n;
    a.scale_nk = (float)scale_n * (float)d->k;
    unsigned blocks = cnn_blocks((size_t)d->n, LOSS_WARPS);
    if (blocks > CNN_LOSS_MAX_BLOCKS) blocks = CNN_LOSS_MAX_BLOCKS;
    loss_kernel<<<blocks, LOSS_WARPS * 32, 0, cnn_stream(ctx)>>>(a, y, y_out, labels, targets, dy,
                                                                sums, cnn_meet(ctx),
                                                                d->positions,
                                                                d->weighted != 0);
    CNN_CUDA_LAUNCHED(softmax ? "softmax_loss_forward_backward" : "loss_forward_backward");
    return CNN_OK;
}

// y (n, k), labels (n) for sparse or targets (n, k) otherwise -> sums[0] +=
// the summed loss, sums[1] += the correct count; dy (n, k) or NULL = the
// gradient of the mean loss over scale_n samples.
cnn_status cuda_loss_forward_backward(cnn_ctx *ctx, const cnn_loss_desc *d, const float *y,
                                      const int32_t *labels, const float *targets, int scale_n,
                                      float *dy, float *sums)
{
    CNN_TRY(check_loss(d, labels, targets, scale_n, dy, sums));
    return launch_loss(ctx, d, 0, y, NULL, labels, targets, scale_n, dy, sums);
}

// x (n, k) the logits of a last softmax layer -> y (n, k) its output, the
// loss of y from probabilities added to sums as above, dx (n, k) or NULL the
// gradient with respect to x (see the top of the file)
cnn_status cuda_softmax_loss_forward_backward(cnn_ctx *ctx, const cnn_loss_desc *d,
                                              const float *x, float *y, const int32_t *labels,
                                              const float *targets, int scale_n, float *dx,
                                              float *sums)
{
    CNN_TRY(check_loss(d, labels, targets, scale_n, dx, sums));
    if (d->kind == CNN_LOSS_BINARY_CE || d->from_logits)
        return cnn_set_error(CNN_ERR_VALUE,
                             "softmax_loss: a sparse or categorical cross-entropy from "
                             "probabilities only, got loss kind %d from_logits %d",
                             d->kind, d->from_logits);
    return launch_loss(ctx, d, 1, x, y, labels, targets, scale_n, dx, sums);
}
