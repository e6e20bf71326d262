// loss_rows.cuh: the per-row pieces of the losses and the softmax, one warp
// per sample row (lane l owns columns l, l + 32, ...), shared by loss.cu,
// activation.cu's softmax and dense_head.cu (the last dense layer, softmax
// and loss of a training step in two kernels), so that every path computes
// a row the same way, bit for bit. Semantics: docs/semantics.md and the
// cpu engine (csrc/cpu/loss.c).
#ifndef CNN_LOSS_ROWS_CUH
#define CNN_LOSS_ROWS_CUH

#include "cuda_common.cuh"

namespace { // internal linkage: every .cu that includes this has its own copy

struct loss_args {
    int kind, logits, n, k;
    int softmax;    // loss.cu: y holds the logits of a softmax layer
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

// The sum of v over the warp, in every lane (a fixed butterfly: the same
// bits every run); double, float or int.
template <typename T>
static __device__ __forceinline__ T warp_sum(T v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// v[j] of a row as stored
struct row_values {
    const float *v;
    __device__ __forceinline__ float operator()(int j) const { return v[j]; }
};

// The softmax of a row of logits x with max m and sum s: activation.cu's
// softmax_forward_kernel's expression, so the same bits
struct softmax_values {
    const float *x;
    float m, s;
    __device__ __forceinline__ float operator()(int j) const { return expf(x[j] - m) / s; }
};

// Index of the first maximum of v(0 .. k-1), k >= 1, to every lane of the
// warp.
template <typename V>
static __device__ __forceinline__ int warp_argmax_of(const V &v, int k, int lane)
{
    float best = 0.0f;
    int at = -1; // none yet
    for (int j = lane; j < k; j += 32) {
        const float u = v(j);
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

static __device__ __forceinline__ int warp_argmax(const float *v, int k, int lane)
{
    return warp_argmax_of(row_values{v}, k, lane);
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

static __device__ __forceinline__ float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1) {
        const float u = __shfl_xor_sync(0xffffffffu, v, o);
        v = u > v ? u : v;
    }
    return v;
}

// y (k) = softmax of x (k): the max, the sum of expf(x - max) in double,
// y_j = expf(x_j - max) / (float)sum. x and y may be the same row (each
// lane reads and writes its own columns only).
static __device__ __forceinline__ void softmax_row(const float *x, float *y, int k, int lane)
{
    float m = -INFINITY;
    for (int j = lane; j < k; j += 32) m = x[j] > m ? x[j] : m;
    m = warp_max(m);
    double sum = 0.0;
    for (int j = lane; j < k; j += 32) sum += (double)expf(x[j] - m);
    const float s = (float)warp_sum(sum);
    for (int j = lane; j < k; j += 32) y[j] = expf(x[j] - m) / s;
}

// dx (k) = the softmax's backward at its output y (k) for dy (k):
// dx_j = y_j (dy_j - sum_i dy_i y_i), the sum in double. dx may be dy.
static __device__ __forceinline__ void softmax_backward_row(const float *y, const float *dy,
                                                            float *dx, int k, int lane)
{
    double dot = 0.0;
    for (int j = lane; j < k; j += 32) dot += (double)dy[j] * (double)y[j];
    const float df = (float)warp_sum(dot);
    __syncwarp(); // every read of dy above happens before dx (maybe dy) is written
    for (int j = lane; j < k; j += 32) dx[j] = y[j] * (dy[j] - df);
}

} // namespace

#endif
