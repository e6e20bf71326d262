// step_backward_phases.cuh: the phases of the seed CIFAR-10 CNN's training
// backward at any batch n (1 <= n <= stepfwd::MAX_BATCH), NCHW, from the
// loss through every layer's weight and data gradients, then Adam over all
// the weights (step_backward.cu; issue #28). The forward's saved tensors
// are step_forward_phases.cuh's outputs (p1 and arg1, p2 and arg2, a3, h1,
// probs); its sizes are used here.
//
//   head    dz = (probs - onehot(label)) / n (sparse CE, mean over the batch);
//           dw5 = h1^T dz, db5 = sum dz; gh1 = dz w5^T masked by h1 > 0
//   dense1  dw4 = a3^T gh1, db4 = sum gh1; g3 = gh1 w4^T masked by a3 > 0
//           (a3's shape, NCHW-flattened: conv3's pre-activation gradient)
//   conv3   dw3, db3 from g3 and p2; gp2 = conv3's data gradient masked by
//           p2 > 0 (pool2's backward sends it to conv2's output at arg2, and
//           conv2's ReLU passes it where the pooled value is > 0): gp2 is
//           conv2's pre-activation gradient at arg2, zero elsewhere, kept in
//           the pooled shape (n,64,6,6) with arg2 (no 13x13 plane)
//   conv2   dw2, db2 from gp2, arg2 and p1 (a pooled gradient meets the
//           input patch at its argmax); gp1 (n,32,15,15) = conv2's data
//           gradient at p1's positions masked by p1 > 0 (the same for pool1
//           and conv1's ReLU)
//   conv1   dw1, db1 from gp1, arg1 and x (no data gradient)
//   adam    Keras's Adam over the 10 weight tensors in one launch, the step
//           count's lr_t = lr sqrt(1 - beta_2^t) / (1 - beta_1^t) given:
//           m += (g - m)(1 - beta_1); v += (g^2 - v)(1 - beta_2);
//           p -= lr_t m / (sqrt(v) + epsilon)   (cuda/adam.cu's order)
//
// A phase is one kernel of STEP_THREADS threads a block with two kinds of
// work items: weight-gradient items (a slice of the weights, each held in a
// register by its thread and summed over the whole batch there: no split-K
// pass, no atomics, the same bits run to run) first, then data-gradient
// items (an image and a slice of its channels). Every sum runs in a fixed
// order. No column matrices. Version 1 of step_backward.cu launches a
// kernel per phase and Adam (step_backward_separate, step_adam); version 2
// puts Adam in the phases (step_backward_adam_fused, below). The host
// emulation (dev/emu/run_step_backward.sh) runs both on the host.
#ifndef DEV_CUDA_STEP_BACKWARD_PHASES_CUH
#define DEV_CUDA_STEP_BACKWARD_PHASES_CUH

#include <cstddef>
#include <cstdint>

#include "step_forward_phases.cuh"

namespace stepbwd {

using namespace stepfwd; // the sizes, STEP_THREADS, MAX_BATCH

// The backward's tensors on the device. Inputs: the forward's saved tensors,
// the labels and the weights the data gradients need. gh1, g3, gp2, gp1:
// written by one phase, read by the next. The weight gradients: outputs.
struct BwdNet {
    int n;
    const float *x, *p1;
    const int32_t *arg1;
    const float *p2;
    const int32_t *arg2;
    const float *a3, *h1, *probs;
    const int32_t *labels;
    const float *w2, *w3, *w4, *w5;
    float *gh1, *g3, *gp2, *gp1;
    float *dw1, *db1, *dw2, *db2, *dw3, *db3, *dw4, *db4, *dw5, *db5;
};

// ---- items per phase: weight items first, then data items
constexpr int DW4_ROWS = 4;                            // dense1: rows of dw4 an item (256 outputs)
constexpr int DX4_ROWS = 16, DX4_PAD = D1 + 1;         // dense1: inputs of g3 an item (all images)
constexpr int ITEMS_DW4 = D_IN / DW4_ROWS, ITEMS_DX4 = D_IN / DX4_ROWS;
constexpr int W3_CS = 16;                              // conv3: channels a weight item
constexpr int ITEMS_DW3 = F3 * (F2 / W3_CS);           // (filter, 16 channels)
constexpr int X3_CS = 8;                               // conv3: channels a data item
constexpr int W2_CS = 16;                              // conv2: channels a weight item
constexpr int ITEMS_DW2 = F2 * (F1 / W2_CS);           // (filter, 16 channels)
constexpr int X2_CS = 8;                               // conv2: channels a data item
constexpr int ITEMS_DW1 = F1 * C0;                     // conv1: (filter, channel)
constexpr int W1_SLICES = 28;                          // conv1: position slices an item
// images staged in shared memory at a time by a weight item (one wait for
// global memory and two barriers per group, not per image)
constexpr int B3_IMGS = 8, B2_IMGS = 3, B1_IMGS = 8;
constexpr int B3_IMG = H3 * H3 + W3_CS * Q2 * Q2;            // floats an image, conv3's weight item
constexpr int B2_IMG = 2 * Q2 * Q2 + W2_CS * Q1 * Q1;        // conv2's (gradients, argmax, p1)
constexpr int B1_IMG = 2 * Q1 * Q1 + H0 * H0;                // conv1's (gradients, argmax, x)
__host__ __device__ inline int items_bhead(int) { return 1; }
__host__ __device__ inline int items_bdense1(int) { return ITEMS_DW4 + ITEMS_DX4; }
__host__ __device__ inline int items_bconv3(int n) { return ITEMS_DW3 + n * (F2 / X3_CS); }
__host__ __device__ inline int items_bconv2(int n) { return ITEMS_DW2 + n * (F1 / X2_CS); }
__host__ __device__ inline int items_bconv1(int) { return ITEMS_DW1; }

// shared memory, in floats (an int32 takes a float's slot)
constexpr int SMEM_BHEAD = MAX_BATCH * D2;
constexpr int SMEM_BDENSE1 = DX4_ROWS * DX4_PAD;
constexpr int SMEM_BCONV3 = cmax(B3_IMGS * B3_IMG, D_IN + F3 * X3_CS * 9);
constexpr int SMEM_BCONV2 = cmax(B2_IMGS * B2_IMG, 2 * F2 * Q2 * Q2 + F2 * X2_CS * 9);
constexpr int SMEM_BCONV1 = B1_IMGS * B1_IMG + W1_SLICES * 9;
static_assert(SMEM_BHEAD * 4 <= 48 * 1024 && SMEM_BCONV3 * 4 <= 48 * 1024 && SMEM_BCONV2 * 4 <= 48 * 1024 &&
                  SMEM_BCONV1 * 4 <= 48 * 1024,
              "static shared memory");
static_assert(W3_CS * 9 <= STEP_THREADS && W2_CS * 9 <= STEP_THREADS && W1_SLICES * 9 < STEP_THREADS &&
                  DW4_ROWS * D1 == STEP_THREADS,
              "a weight item's outputs a thread each");

// ---- Adam over the 10 weight tensors (w1, b1, ..., w5, b5) in one launch:
// a thread an element; tensor k holds elements off[k] .. off[k+1] - 1.
constexpr int N_PARAMS = 10;
struct AdamNet {
    float *w[N_PARAMS], *m[N_PARAMS], *v[N_PARAMS];
    const float *g[N_PARAMS];
    int off[N_PARAMS + 1];
    float lr_t, beta_1, beta_2, epsilon; // lr_t: the step count's (host, from float64)
};
__host__ __device__ inline int params_total(const AdamNet &a) { return a.off[N_PARAMS]; }

__device__ inline void adam_element(const AdamNet &a, int e)
{
    int k = 0;
    while (k + 1 < N_PARAMS && e >= a.off[k + 1]) ++k;
    const int j = e - a.off[k];
    const float g = a.g[k][j];
    // rounded operations (no contraction into fma), as cuda/adam.cu
    const float mi = __fadd_rn(a.m[k][j], __fmul_rn(__fsub_rn(g, a.m[k][j]), __fsub_rn(1.0f, a.beta_1)));
    const float vi =
        __fadd_rn(a.v[k][j], __fmul_rn(__fsub_rn(__fmul_rn(g, g), a.v[k][j]), __fsub_rn(1.0f, a.beta_2)));
    a.m[k][j] = mi;
    a.v[k][j] = vi;
    a.w[k][j] = __fsub_rn(a.w[k][j], __fdiv_rn(__fmul_rn(mi, a.lr_t), __fadd_rn(sqrtf(vi), a.epsilon)));
}

// ---- head: one block for the batch. dz in shared memory, then dw5 and db5
// (a thread an output, the images in order), then gh1 (a thread an output,
// the classes in order).
__device__ inline void phase_bhead(const BwdNet &p, int item, float *sm)
{
    (void)item;
    const int n = p.n, t = threadIdx.x;
    const float inv_n = 1.0f / (float)n;
    for (int o = t; o < n * D2; o += blockDim.x) {
        const int i = o / D2, j = o % D2;
        sm[o] = (p.probs[o] - (j == p.labels[i] ? 1.0f : 0.0f)) * inv_n;
    }
    __syncthreads();
    for (int o = t; o < D1 * D2 + D2; o += blockDim.x) {
        float acc = 0.0f;
        if (o < D1 * D2) {
            const int k = o / D2, j = o % D2;
            for (int i = 0; i < n; ++i) acc = fmaf(p.h1[(size_t)i * D1 + k], sm[i * D2 + j], acc);
            p.dw5[o] = acc;
        } else {
            const int j = o - D1 * D2;
            for (int i = 0; i < n; ++i) acc += sm[i * D2 + j];
            p.db5[j] = acc;
        }
    }
    for (int o = t; o < n * D1; o += blockDim.x) {
        const int i = o / D1, k = o % D1;
        float acc = 0.0f;
        for (int j = 0; j < D2; ++j) acc = fmaf(sm[i * D2 + j], p.w5[k * D2 + j], acc);
        p.gh1[o] = p.h1[o] > 0.0f ? acc : 0.0f;
    }
    __syncthreads();
}

// ---- dense1. Weight item (rows k0..k0+3 of dw4): thread t the output
// (k0 + t / 64, t % 64) over the images in order (gh1 read coalesced, a3
// the same address for a warp); item 0's first 64 threads also db4. Data
// item (inputs k0..k0+15 of every image): w4's 16 rows in shared memory
// (rows padded to 65 floats: the 16 rows a warp reads are in different
// banks), a thread an output (image, input) over the 64 units in order,
// masked by a3 > 0.
__device__ inline void phase_bdense1(const BwdNet &p, int item, float *sm)
{
    const int n = p.n, t = threadIdx.x;
    if (item < ITEMS_DW4) {
        const int k = item * DW4_ROWS + t / D1, j = t % D1;
        float acc = 0.0f;
        for (int i = 0; i < n; ++i) acc = fmaf(p.a3[(size_t)i * D_IN + k], p.gh1[(size_t)i * D1 + j], acc);
        p.dw4[(size_t)k * D1 + j] = acc;
        if (item == 0 && t < D1) {
            float b = 0.0f;
            for (int i = 0; i < n; ++i) b += p.gh1[(size_t)i * D1 + t];
            p.db4[t] = b;
        }
        return; // no shared memory used: nothing to wait for
    }
    const int k0 = (item - ITEMS_DW4) * DX4_ROWS;
    for (int e = t; e < DX4_ROWS * D1; e += blockDim.x)
        sm[(e / D1) * DX4_PAD + e % D1] = p.w4[(size_t)k0 * D1 + e];
    __syncthreads();
    for (int o = t; o < n * DX4_ROWS; o += blockDim.x) {
        const int i = o / DX4_ROWS, kk = o % DX4_ROWS;
        const float *g = p.gh1 + (size_t)i * D1;
        float acc = 0.0f;
        for (int j = 0; j < D1; ++j) acc = fmaf(g[j], sm[kk * DX4_PAD + j], acc);
        const size_t at = (size_t)i * D_IN + k0 + kk;
        p.g3[at] = p.a3[at] > 0.0f ? acc : 0.0f;
    }
    __syncthreads();
}

// An argmax (row * w + column in the conv's output plane w wide) as the
// offset of its 3x3 input patch's corner in an input plane xw wide.
__device__ inline int patch_at(int a, int w, int xw) { return (a / w) * xw + a % w; }

// ---- conv3. Weight item (filter f, channels c0..c0+15): thread t < 144
// the tap (c0 + t / 9, t % 9) of dw3, over the images in order, B3_IMGS
// images at a time staged in shared memory (an image's 16 gradients of f
// and its 16 channels of p2);
// item (f, 0)'s thread 255 db3[f]. Data item (image i, channels c0..c0+7):
// g3[i] and w3[:, c0..c0+7] in shared memory; a thread an output of the
// 8 x 6 x 6, the sum over the filters, then the taps, in order; masked by
// p2 > 0.
__device__ inline void phase_bconv3(const BwdNet &p, int item, float *sm)
{
    const int n = p.n, t = threadIdx.x;
    if (item < ITEMS_DW3) {
        const int f = item / (F2 / W3_CS), c0 = (item % (F2 / W3_CS)) * W3_CS;
        const int cl = t / 9, ki = t % 9 / 3, kj = t % 3;
        const bool bias = c0 == 0 && t == STEP_THREADS - 1;
        float acc = 0.0f, b = 0.0f;
        for (int i0 = 0; i0 < n; i0 += B3_IMGS) {
            const int nb = min(B3_IMGS, n - i0);
            for (int e = t; e < nb * B3_IMG; e += blockDim.x) {
                const int bi = e / B3_IMG, r = e % B3_IMG, i = i0 + bi;
                sm[e] = r < H3 * H3 ? p.g3[((size_t)i * F3 + f) * H3 * H3 + r]
                                    : p.p2[((size_t)i * F2 + c0) * Q2 * Q2 + r - H3 * H3];
            }
            __syncthreads();
            for (int bi = 0; bi < nb; ++bi) {
                const float *gs = sm + bi * B3_IMG, *xs = gs + H3 * H3;
                if (t < W3_CS * 9)
                    for (int r = 0; r < H3; ++r)
                        for (int s = 0; s < H3; ++s)
                            acc = fmaf(gs[r * H3 + s], xs[cl * Q2 * Q2 + (r + ki) * Q2 + s + kj], acc);
                if (bias)
                    for (int q = 0; q < H3 * H3; ++q) b += gs[q];
            }
            __syncthreads();
        }
        if (t < W3_CS * 9) p.dw3[((size_t)f * F2 + c0 + cl) * 9 + t % 9] = acc;
        if (bias) p.db3[f] = b;
        return;
    }
    const int di = item - ITEMS_DW3, i = di / (F2 / X3_CS), c0 = (di % (F2 / X3_CS)) * X3_CS;
    float *gs = sm, *ws = sm + D_IN;
    for (int e = t; e < D_IN; e += blockDim.x) gs[e] = p.g3[(size_t)i * D_IN + e];
    for (int e = t; e < F3 * X3_CS * 9; e += blockDim.x) {
        const int f = e / (X3_CS * 9), rest = e % (X3_CS * 9); // rest = cl * 9 + tap
        ws[e] = p.w3[((size_t)f * F2 + c0) * 9 + rest];
    }
    __syncthreads();
    for (int o = t; o < X3_CS * Q2 * Q2; o += blockDim.x) {
        const int cl = o / (Q2 * Q2), y = o / Q2 % Q2, x = o % Q2;
        float acc = 0.0f;
        for (int f = 0; f < F3; ++f)
            for (int ki = 0; ki < 3; ++ki) {
                const int r = y - ki;
                if (r < 0 || r >= H3) continue;
                for (int kj = 0; kj < 3; ++kj) {
                    const int s = x - kj;
                    if (s < 0 || s >= H3) continue;
                    acc = fmaf(gs[f * H3 * H3 + r * H3 + s], ws[(f * X3_CS + cl) * 9 + ki * 3 + kj], acc);
                }
            }
        const size_t at = ((size_t)i * F2 + c0 + cl) * Q2 * Q2 + y * Q2 + x;
        p.gp2[at] = p.p2[at] > 0.0f ? acc : 0.0f;
    }
    __syncthreads();
}

// ---- conv2. Weight item (filter f, channels c0..c0+15): thread t < 144
// the tap (c0 + t / 9, t % 9) of dw2 over the images in order, B2_IMGS at a
// time staged in shared memory (an image's 36 pooled gradients of f, their
// argmax and its 16 channels of p1): a pooled gradient meets the input at its argmax's
// conv2 position (row a / 13, column a % 13) shifted by the tap; item
// (f, 0)'s thread 255 db2[f]. Data item (image i, channels c0..c0+7): gp2[i],
// arg2[i] (row and column packed) and w2[:, c0..c0+7] (tap-major) in shared
// memory; thread t < 225 the position t of the 15 x 15 for all 8 channels
// (8 accumulators): over the filters in order, for each the (at most 2 x 2)
// pooled positions whose window reaches it, the tap where the argmax puts
// it (one check for 8 multiply-adds); masked by p1 > 0.
__device__ inline void phase_bconv2(const BwdNet &p, int item, float *sm)
{
    const int n = p.n, t = threadIdx.x;
    constexpr int PQ = Q2 * Q2;
    if (item < ITEMS_DW2) {
        const int f = item / (F1 / W2_CS), c0 = (item % (F1 / W2_CS)) * W2_CS;
        const int cl = t / 9, ki = t % 9 / 3, kj = t % 3;
        const bool bias = c0 == 0 && t == STEP_THREADS - 1;
        float acc = 0.0f, b = 0.0f;
        for (int i0 = 0; i0 < n; i0 += B2_IMGS) {
            const int nb = min(B2_IMGS, n - i0);
            for (int e = t; e < nb * B2_IMG; e += blockDim.x) {
                const int bi = e / B2_IMG, r = e % B2_IMG, i = i0 + bi;
                float *img = sm + bi * B2_IMG;
                if (r < PQ)
                    img[r] = p.gp2[((size_t)i * F2 + f) * PQ + r];
                else if (r < 2 * PQ)
                    reinterpret_cast<int *>(img)[r] = patch_at(p.arg2[((size_t)i * F2 + f) * PQ + r - PQ], H2, Q1);
                else
                    img[r] = p.p1[((size_t)i * F1 + c0) * Q1 * Q1 + r - 2 * PQ];
            }
            __syncthreads();
            for (int bi = 0; bi < nb; ++bi) {
                const float *gs = sm + bi * B2_IMG, *xs = gs + 2 * PQ;
                const int *as = reinterpret_cast<const int *>(gs + PQ);
                if (t < W2_CS * 9)
                    for (int q = 0; q < PQ; ++q) {
                        acc = fmaf(gs[q], xs[cl * Q1 * Q1 + as[q] + ki * Q1 + kj], acc);
                    }
                if (bias)
                    for (int q = 0; q < PQ; ++q) b += gs[q];
            }
            __syncthreads();
        }
        if (t < W2_CS * 9) p.dw2[((size_t)f * F1 + c0 + cl) * 9 + t % 9] = acc;
        if (bias) p.db2[f] = b;
        return;
    }
    const int di = item - ITEMS_DW2, i = di / (F1 / X2_CS), c0 = (di % (F1 / X2_CS)) * X2_CS;
    float *gs = sm, *ws = sm + 2 * F2 * PQ;
    int *as = reinterpret_cast<int *>(sm + F2 * PQ);
    for (int e = t; e < F2 * PQ; e += blockDim.x) {
        gs[e] = p.gp2[(size_t)i * F2 * PQ + e];
        const int a = p.arg2[(size_t)i * F2 * PQ + e];
        as[e] = (a / H2) * 16 + a % H2; // row and column in 4 bits each
    }
    // the weights tap-major: ws[(f * 9 + tap) * 8 + cl], a tap's 8 channels in two 16-byte loads
    for (int e = t; e < F2 * X2_CS * 9; e += blockDim.x) {
        const int f = e / (X2_CS * 9), cl = e % (X2_CS * 9) / 9, tap = e % 9;
        ws[(f * 9 + tap) * X2_CS + cl] = p.w2[((size_t)f * F1 + c0) * 9 + e % (X2_CS * 9)];
    }
    __syncthreads();
    static_assert(X2_CS == 8 && Q1 * Q1 <= STEP_THREADS, "conv2's data item: a thread a position, 8 channels");
    if (t < Q1 * Q1) {
        const int y = t / Q1, x = t % Q1;
        // pooled rows r whose conv rows 2r, 2r+1 reach input row y (y - 2 <= 2r + 1, 2r <= y)
        const int rlo = y >= 2 ? (y - 2) / 2 : 0, rhi = min(Q2 - 1, y / 2);
        const int slo = x >= 2 ? (x - 2) / 2 : 0, shi = min(Q2 - 1, x / 2);
        float acc[X2_CS];
        for (int cl = 0; cl < X2_CS; ++cl) acc[cl] = 0.0f;
        for (int f = 0; f < F2; ++f)
            for (int r = rlo; r <= rhi; ++r)
                for (int s = slo; s <= shi; ++s) {
                    const int q = f * PQ + r * Q2 + s, a = as[q];
                    const int dy = y - (a >> 4), dx = x - (a & 15);
                    if (dy < 0 || dy > 2 || dx < 0 || dx > 2) continue;
                    const float gv = gs[q];
                    const float *wt = ws + (f * 9 + dy * 3 + dx) * X2_CS;
                    const float4 wa = *reinterpret_cast<const float4 *>(wt);
                    const float4 wb = *reinterpret_cast<const float4 *>(wt + 4);
                    acc[0] = fmaf(gv, wa.x, acc[0]), acc[1] = fmaf(gv, wa.y, acc[1]);
                    acc[2] = fmaf(gv, wa.z, acc[2]), acc[3] = fmaf(gv, wa.w, acc[3]);
                    acc[4] = fmaf(gv, wb.x, acc[4]), acc[5] = fmaf(gv, wb.y, acc[5]);
                    acc[6] = fmaf(gv, wb.z, acc[6]), acc[7] = fmaf(gv, wb.w, acc[7]);
                }
        for (int cl = 0; cl < X2_CS; ++cl) {
            const size_t at = ((size_t)i * F1 + c0 + cl) * Q1 * Q1 + t;
            p.gp1[at] = p.p1[at] > 0.0f ? acc[cl] : 0.0f;
        }
    }
    __syncthreads();
}

// ---- conv1. Item (filter f, input channel c): thread t < 252 the tap t % 9
// over the pooled positions q = t / 9, t / 9 + 28, ... of every image in
// order (B1_IMGS images at a time staged in shared memory: an image's 225
// pooled gradients of f, their argmax and x's channel c); then the first 9
// threads add the 28 slices in order; item (f, 0)'s thread 255 db1[f]. With adam (version 2),
// the thread that writes a gradient of w1 or b1 then applies Adam to that
// weight (conv1 has no data gradient: nothing else reads w1).
__device__ inline void phase_bconv1(const BwdNet &p, int item, float *sm, const AdamNet *adam = nullptr)
{
    const int n = p.n, t = threadIdx.x, f = item / C0, c = item % C0;
    constexpr int PQ = Q1 * Q1;
    float *part = sm + B1_IMGS * B1_IMG;
    const int sl = t / 9, ki = t % 9 / 3, kj = t % 3;
    const bool bias = c == 0 && t == STEP_THREADS - 1;
    float acc = 0.0f, b = 0.0f;
    for (int i0 = 0; i0 < n; i0 += B1_IMGS) {
        const int nb = min(B1_IMGS, n - i0);
        for (int e = t; e < nb * B1_IMG; e += blockDim.x) {
            const int bi = e / B1_IMG, r = e % B1_IMG, i = i0 + bi;
            float *img = sm + bi * B1_IMG;
            if (r < PQ)
                img[r] = p.gp1[((size_t)i * F1 + f) * PQ + r];
            else if (r < 2 * PQ)
                reinterpret_cast<int *>(img)[r] = patch_at(p.arg1[((size_t)i * F1 + f) * PQ + r - PQ], H1, H0);
            else
                img[r] = p.x[((size_t)i * C0 + c) * H0 * H0 + r - 2 * PQ];
        }
        __syncthreads();
        for (int bi = 0; bi < nb; ++bi) {
            const float *gs = sm + bi * B1_IMG, *xs = gs + 2 * PQ;
            const int *as = reinterpret_cast<const int *>(gs + PQ);
            if (t < W1_SLICES * 9)
                for (int q = sl; q < PQ; q += W1_SLICES) {
                    acc = fmaf(gs[q], xs[as[q] + ki * H0 + kj], acc);
                }
            if (bias)
                for (int q = 0; q < PQ; ++q) b += gs[q];
        }
        __syncthreads();
    }
    if (t < W1_SLICES * 9) part[t] = acc;
    __syncthreads();
    if (t < 9) {
        float s = 0.0f;
        for (int q = 0; q < W1_SLICES; ++q) s += part[q * 9 + t];
        p.dw1[((size_t)f * C0 + c) * 9 + t] = s;
        if (adam) adam_element(*adam, adam->off[0] + (f * C0 + c) * 9 + t); // reads the dw1 just written
    }
    if (bias) {
        p.db1[f] = b;
        if (adam) adam_element(*adam, adam->off[1] + f);
    }
    __syncthreads();
}

// ---- a kernel per phase, a block per item
__global__ void __launch_bounds__(STEP_THREADS) bwd_head_kernel(BwdNet p)
{
    __shared__ float4 sm4[(SMEM_BHEAD + 3) / 4];
    phase_bhead(p, blockIdx.x, reinterpret_cast<float *>(sm4));
}
__global__ void __launch_bounds__(STEP_THREADS) bwd_dense1_kernel(BwdNet p)
{
    __shared__ float4 sm4[(SMEM_BDENSE1 + 3) / 4];
    phase_bdense1(p, blockIdx.x, reinterpret_cast<float *>(sm4));
}
__global__ void __launch_bounds__(STEP_THREADS) bwd_conv3_kernel(BwdNet p)
{
    __shared__ float4 sm4[(SMEM_BCONV3 + 3) / 4];
    phase_bconv3(p, blockIdx.x, reinterpret_cast<float *>(sm4));
}
__global__ void __launch_bounds__(STEP_THREADS) bwd_conv2_kernel(BwdNet p)
{
    __shared__ float4 sm4[(SMEM_BCONV2 + 3) / 4];
    phase_bconv2(p, blockIdx.x, reinterpret_cast<float *>(sm4));
}
__global__ void __launch_bounds__(STEP_THREADS) bwd_conv1_kernel(BwdNet p)
{
    __shared__ float4 sm4[(SMEM_BCONV1 + 3) / 4];
    phase_bconv1(p, blockIdx.x, reinterpret_cast<float *>(sm4));
}
__global__ void __launch_bounds__(STEP_THREADS) adam_kernel(AdamNet a)
{
    const int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e < params_total(a)) adam_element(a, e);
}

inline int adam_blocks(const AdamNet &a) { return (params_total(a) + STEP_THREADS - 1) / STEP_THREADS; }

// ---- version 2: Adam in the phases. A layer's weights may change only
// after its data gradient (which reads them) is done, so Adam for dense2's
// weights runs as extra blocks of dense1's kernel, dense1's in conv3's,
// conv3's in conv2's, conv2's in conv1's, and conv1's in conv1's weight
// items themselves (phase_bconv1). The extra blocks follow the phase's
// items: block items + b takes the elements off[k0] + b * 256 ... of the
// tensors k0 .. k1 - 1 (AdamNet's numbering: w1, b1, ..., w5, b5).
constexpr int PH_DENSE1 = 1, PH_CONV3 = 2, PH_CONV2 = 3, PH_CONV1 = 4;
__host__ __device__ inline int adam_range_blocks(const AdamNet &a, int k0, int k1)
{
    return (a.off[k1] - a.off[k0] + STEP_THREADS - 1) / STEP_THREADS;
}
template <int PH>
__global__ void __launch_bounds__(STEP_THREADS) bwd_phase_adam_kernel(BwdNet p, AdamNet a, int k0, int k1)
{
    constexpr int SMEM = PH == PH_DENSE1 ? SMEM_BDENSE1
                       : PH == PH_CONV3  ? SMEM_BCONV3
                       : PH == PH_CONV2  ? SMEM_BCONV2
                                         : SMEM_BCONV1;
    __shared__ float4 sm4[(SMEM + 3) / 4];
    float *sm = reinterpret_cast<float *>(sm4);
    const int items = PH == PH_DENSE1 ? items_bdense1(p.n)
                    : PH == PH_CONV3  ? items_bconv3(p.n)
                    : PH == PH_CONV2  ? items_bconv2(p.n)
                                      : items_bconv1(p.n);
    const int item = blockIdx.x;
    if (item < items) {
        if (PH == PH_DENSE1) phase_bdense1(p, item, sm);
        if (PH == PH_CONV3) phase_bconv3(p, item, sm);
        if (PH == PH_CONV2) phase_bconv2(p, item, sm);
        if (PH == PH_CONV1) phase_bconv1(p, item, sm, &a);
        return;
    }
    const int e = a.off[k0] + (item - items) * STEP_THREADS + threadIdx.x;
    if (e < a.off[k1]) adam_element(a, e);
}

// Version 2's launches from the head (from = 0) or after it (1).
inline void step_backward_adam_fused(const BwdNet &p, const AdamNet &a, cudaStream_t st, int from = 0)
{
    if (from <= 0) bwd_head_kernel<<<items_bhead(p.n), STEP_THREADS, 0, st>>>(p);
    const int b5 = adam_range_blocks(a, 8, 10), b4 = adam_range_blocks(a, 6, 8), b3 = adam_range_blocks(a, 4, 6),
              b2 = adam_range_blocks(a, 2, 4);
    bwd_phase_adam_kernel<PH_DENSE1><<<items_bdense1(p.n) + b5, STEP_THREADS, 0, st>>>(p, a, 8, 10);
    bwd_phase_adam_kernel<PH_CONV3><<<items_bconv3(p.n) + b4, STEP_THREADS, 0, st>>>(p, a, 6, 8);
    bwd_phase_adam_kernel<PH_CONV2><<<items_bconv2(p.n) + b3, STEP_THREADS, 0, st>>>(p, a, 4, 6);
    bwd_phase_adam_kernel<PH_CONV1><<<items_bconv1(p.n) + b2, STEP_THREADS, 0, st>>>(p, a, 2, 4);
}

// The backward's launches on stream st, the head first (1 <= p.n <=
// MAX_BATCH; the caller checks the launches' errors); from = 1 starts at
// dense1 (the check's integer inputs put their own gh1 between the two).
inline void step_backward_separate(const BwdNet &p, cudaStream_t st, int from = 0)
{
    if (from <= 0) bwd_head_kernel<<<items_bhead(p.n), STEP_THREADS, 0, st>>>(p);
    if (from <= 1) {
        bwd_dense1_kernel<<<items_bdense1(p.n), STEP_THREADS, 0, st>>>(p);
        bwd_conv3_kernel<<<items_bconv3(p.n), STEP_THREADS, 0, st>>>(p);
        bwd_conv2_kernel<<<items_bconv2(p.n), STEP_THREADS, 0, st>>>(p);
        bwd_conv1_kernel<<<items_bconv1(p.n), STEP_THREADS, 0, st>>>(p);
    }
}
inline void step_adam(const AdamNet &a, cudaStream_t st)
{
    adam_kernel<<<adam_blocks(a), STEP_THREADS, 0, st>>>(a);
}
inline void step_head_only(const BwdNet &p, cudaStream_t st)
{
    bwd_head_kernel<<<items_bhead(p.n), STEP_THREADS, 0, st>>>(p);
}

} // namespace stepbwd

#endif
