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

#define LOSS_WARPS 8 // rows in flight per block

struct loss_args {
    int kind, logits, n, k;
    float scale;    // (float)scale_n
    float scale_nk; // (float)scale_n * (float)k, binary
};

static __device__ __forceinline__ float clip_prob(float v)
{
    const float lo = CNN_PROB_EPS, hi = 1.0f - CNN_PROB_EPS;
    return v < lo ? lo : (v > hi ? hi : v);
}

// Not clipped: clip(v) == v, so the gradient flows.
static __device__ __forceinline__ bool unclipped(float v)
{
    return v >= CNN_PROB_EPS && v <= 1.0f - CNN_PROB_EPS;
}

static __device__ __forceinline__ float sigmoid_f(float v)
{
    if (v >= 0.0f) return 1.0f / (1.0f + expf(-v));
    const float e = expf(v);
    return e / (1.0f + e);
}

static __device__ __forceinline__ double warp_sum(double v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

static __device__ __forceinline__ int warp_sum_int(int v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Index of the first maximum of v[0, k), k >= 1, to every lane of the warp.
static __device__ __forceinline__ int warp_argmax(const float *v, int k, int lane)
{
    float best = 0.0f;
    int at = -1; // none yet
    for (int j = lane; j < k; j += 32) {
        const float u = v[j];
        if (at < 0 || u > best) {
            best = u;
            at = j;
        }
    }
    for (int o = 16; o > 0; o >>= 1) {
        const float ob = __shfl_xor_sync(0xffffffffu, best, o);
        const int oa = __shfl_xor_sync(0xffffffffu, at, o);
        // the larger value wins, the smaller index on a tie
        if (oa >= 0 && (at < 0 || ob > best || (ob == best && oa < at))) {
            best = ob;
            at = oa;
        }
    }
    return at;
}

// Sparse (t NULL, one-hot of label) or categorical CE of row z (k); writes
// the gradient row g (k) when not NULL. Returns the loss; adds to *correct.
// Every lane returns the same values.
static __device__ __forceinline__ double categorical_row(const loss_args &a, const float *z,
                                                        const float *t, int label, float *g,
                                                        double *correct, int lane)
{
    const int k = a.k;
    double loss;
    if (a.logits) {
        const int at = warp_argmax(z, k, lane);
        const float m = z[at];
        double s = 0.0;
        for (int j = lane; j < k; j += 32) s += (double)expf(z[j] - m);
        s = warp_sum(s);
        const double log_s = log(s);
        const int want = t ? warp_argmax(t, k, lane) : label;
        if (at == want) *correct += 1.0;
        if (t) {
            // sum_j t_j (lse - z_j) = sum(t) lse - sum(t z)
            double l = 0.0;
            for (int j = lane; j < k; j += 32) l += (double)t[j] * (log_s + ((double)m - z[j]));
            loss = warp_sum(l);
        } else {
            loss = log_s + ((double)m - z[label]);
        }
        if (g) {
            const float sf = (float)s;
            float st = 1.0f;
            if (t) {
                double u = 0.0;
                for (int j = lane; j < k; j += 32) u += (double)t[j];
                st = (float)warp_sum(u);
            }
            __syncwarp(); // every read of z above happens before g (maybe z) is written
            for (int j = lane; j < k; j += 32) {
                const float p = expf(z[j] - m) / sf;
                const float tj = t ? t[j] : (j == label ? 1.0f : 0.0f);
                g[j] = __fsub_rn(__fmul_rn(p, st), tj) / a.scale;
            }
        }
        return loss;
    }
    // probabilities: q = y / sum(y), clipped inside the log
    const int want = t ? warp_argmax(t, k, lane) : label;
    if (warp_argmax(z, k, lane) == want) *correct += 1.0;
    double u = 0.0;
    for (int j = lane; j < k; j += 32) u += (double)z[j];
    const float sy = (float)warp_sum(u);
    double sgq = 0.0; // sum_j g_j q_j with g_j = -t_j / q_j where q_j is unclipped
    if (t) {
        double l = 0.0;
        for (int j = lane; j < k; j += 32) {
            const float q = z[j] / sy;
            l -= (double)t[j] * (double)logf(clip_prob(q));
            if (unclipped(q)) sgq += (double)((-t[j] / q) * q);
        }
        loss = warp_sum(l);
        sgq = warp_sum(sgq);
    } else {
        const float q = z[label] / sy;
        loss = -(double)logf(clip_prob(q));
        if (unclipped(q)) sgq = (double)((-1.0f / q) * q);
    }
    if (g) {
        const float sgqf = (float)sgq;
        __syncwarp(); // every read of z above happens before g (maybe z) is written
        for (int j = lane; j < k; j += 32) {
            const float q = z[j] / sy;
            const float tj = t ? t[j] : (j == label ? 1.0f : 0.0f);
            const float gj = (unclipped(q) && tj != 0.0f) ? -tj / q : 0.0f;
            g[j] = ((gj - sgqf) / sy) / a.scale;
        }
    }
    return loss;
}

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
