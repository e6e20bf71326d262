// step_forward_phases.cuh: the phases of the seed CIFAR-10 CNN's training
// forward at any batch n, NCHW, as block-wide __device__ functions of one
// work item each (step_forward.cu; issue #28):
//
//   conv1 (3->32, 3x3 valid) + bias + ReLU + max pool 2x2   x (n,3,32,32) -> p1 (n,32,15,15), arg1
//   conv2 (32->64) + bias + ReLU + max pool 2x2              p1 -> p2 (n,64,6,6), arg2
//   conv3 (64->64) + bias + ReLU                             p2 -> a3 (n,64,4,4)
//   dense1 (1024->64, a3 flattened in NCHW order) + ReLU     a3 -> h1 (n,64)
//   dense2 (64->10) + softmax + sparse cross-entropy         h1 -> logits, probs (n,10),
//                                                               loss (n), loss_sum (1)
//
// Every phase runs on blocks of STEP_THREADS threads; phase_X(p, item, sm)
// does work item `item` (0 <= item < items_X(n)) with the block's shared
// memory sm (at least SMEM_X floats), starting and ending with the block in
// step (a __syncthreads at the end: the next item reuses sm). Version 1 of
// step_forward.cu launches one kernel per phase (a block per item: the
// kernels and their launcher are here); versions 2 and 3 loop each block
// over the items of every phase inside one persistent kernel, with a grid
// barrier between phases. The host emulation (dev/emu/run_step_forward.sh)
// runs version 1's kernels on the host.
//
// A pooled output is the first maximum (row-major over the 2x2 window) of
// the ReLU'd convolution outputs, as the engine's ReLU then max pool gives;
// its argmax is the position in the convolution's output plane
// (row * width + column). Intermediates are read through plain pointers (no
// __restrict__, no read-only cache): in the persistent kernel another block
// wrote them in the same launch.
#ifndef DEV_CUDA_STEP_FORWARD_PHASES_CUH
#define DEV_CUDA_STEP_FORWARD_PHASES_CUH

#include <cstddef>
#include <cstdint>

namespace stepfwd {

constexpr int STEP_THREADS = 256;
constexpr int MAX_BATCH = 1024; // the head's loss sum holds the batch's losses in shared memory

// the seed network's sizes
constexpr int C0 = 3, H0 = 32;                     // input
constexpr int F1 = 32, H1 = 30, Q1 = 15;           // conv1 output, pooled
constexpr int F2 = 64, H2 = 13, Q2 = 6;            // conv2 output, pooled (floor: row 12 unused)
constexpr int F3 = 64, H3 = 4;                     // conv3 output
constexpr int D_IN = F3 * H3 * H3, D1 = 64, D2 = 10; // dense sizes
constexpr int K1 = C0 * 9, K2 = F1 * 9, K3 = F2 * 9;

// work items per phase: conv1 (image, 4 filters), conv2 and conv3 (image,
// 8 filters), dense1 (image, 16 units), the head one item for the batch
constexpr int G1 = 4, G2 = 8, G3 = 8, G4 = 16;
__host__ __device__ inline int items_conv1(int n) { return n * (F1 / G1); }
__host__ __device__ inline int items_conv2(int n) { return n * (F2 / G2); }
__host__ __device__ inline int items_conv3(int n) { return n * (F3 / G3); }
__host__ __device__ inline int items_dense1(int n) { return n * (D1 / G4); }
__host__ __device__ inline int items_head(int) { return 1; }

// shared memory of each phase, in floats; the convolutions' 16-byte weight
// loads need sm 16-byte aligned
constexpr int SMEM_CONV1 = C0 * H0 * H0 + G1 * K1 + G1;
constexpr int C2_RS = 19, C2_CS = Q1 * C2_RS; // conv2's input rows in shared memory: phase_conv2
constexpr int SMEM_CONV2 = F1 * C2_CS + G2 * K2 + G2;
constexpr int SMEM_CONV3 = F2 * Q2 * Q2 + G3 * K3 + (STEP_THREADS / 32) * G3 * 16 + G3;
constexpr int SMEM_DENSE1 = D_IN + STEP_THREADS;
constexpr int SMEM_HEAD = MAX_BATCH;
constexpr int cmax(int a, int b) { return a > b ? a : b; }
constexpr int SMEM_MAX =
    cmax(cmax(cmax(SMEM_CONV1, SMEM_CONV2), cmax(SMEM_CONV3, SMEM_DENSE1)), SMEM_HEAD);
static_assert(SMEM_MAX * 4 <= 48 * 1024, "static shared memory");
static_assert((C0 * H0 * H0) % 4 == 0 && (F1 * C2_CS) % 4 == 0 && (F2 * Q2 * Q2) % 4 == 0,
              "the convolutions' weights start 16-byte aligned");
static_assert(STEP_THREADS % 32 == 0 && F2 % (STEP_THREADS / 32) == 0, "conv3's channel slices");

// The network's tensors on the device. Inputs: x, the weights (conv
// (f, c, 3, 3) and dense (in, out) as the engine holds them), labels.
// Outputs: everything else.
struct StepNet {
    int n;
    const float *x;
    const float *w1, *b1, *w2, *b2, *w3, *b3, *w4, *b4, *w5, *b5;
    const int32_t *labels;
    float *p1;
    int32_t *arg1;
    float *p2;
    int32_t *arg2;
    float *a3, *h1, *logits, *probs, *loss, *loss_sum;
};

// The first maximum of v[0..3] (row-major over a 2x2 window).
__device__ inline int first_max4(const float v[4])
{
    int at = 0;
    for (int q = 1; q < 4; ++q)
        if (v[q] > v[at]) at = q;
    return at;
}

// ---- conv1 + bias + ReLU + pool. Item (image i, filters f0..f0+3): the
// image (3x32x32) and the 4 filters in shared memory, the filters
// interleaved (ws[(ch*9 + k)*4 + fl]: one 16-byte load, the same address
// for the whole warp, gives a tap of all 4); thread t < 225 takes pooled
// position (r, s): its 4x4 input patch per channel feeds the 2x2 window's
// 4 outputs of all 4 filters (16 accumulators; 16 + 9 loads per 144
// multiply-adds).
__device__ inline void phase_conv1(const StepNet &p, int item, float *sm)
{
    const int i = item / (F1 / G1), f0 = (item % (F1 / G1)) * G1;
    float *xs = sm, *ws = sm + C0 * H0 * H0, *bs = ws + G1 * K1;
    const float *xi = p.x + (size_t)i * C0 * H0 * H0;
    for (int t = threadIdx.x; t < C0 * H0 * H0; t += blockDim.x) xs[t] = xi[t];
    for (int t = threadIdx.x; t < G1 * K1; t += blockDim.x)
        ws[(t % K1) * G1 + t / K1] = p.w1[(size_t)f0 * K1 + t];
    if (threadIdx.x < G1) bs[threadIdx.x] = p.b1[f0 + threadIdx.x];
    __syncthreads();
    const int t = threadIdx.x;
    if (t < Q1 * Q1) {
        const int r = t / Q1, s = t % Q1;
        float acc[G1][4];
        for (int fl = 0; fl < G1; ++fl)
            for (int q = 0; q < 4; ++q) acc[fl][q] = 0.0f;
        for (int ch = 0; ch < C0; ++ch) {
            float xv[4][4];
            const float *xc = xs + ch * H0 * H0 + (2 * r) * H0 + 2 * s;
#pragma unroll
            for (int a = 0; a < 4; ++a)
#pragma unroll
                for (int b = 0; b < 4; ++b) xv[a][b] = xc[a * H0 + b];
#pragma unroll
            for (int ki = 0; ki < 3; ++ki)
#pragma unroll
                for (int kj = 0; kj < 3; ++kj) {
                    const float4 w4 = *reinterpret_cast<const float4 *>(ws + (ch * 9 + ki * 3 + kj) * G1);
                    const float w[G1] = {w4.x, w4.y, w4.z, w4.w};
#pragma unroll
                    for (int fl = 0; fl < G1; ++fl)
#pragma unroll
                        for (int di = 0; di < 2; ++di)
#pragma unroll
                            for (int dj = 0; dj < 2; ++dj)
                                acc[fl][di * 2 + dj] = fmaf(xv[di + ki][dj + kj], w[fl], acc[fl][di * 2 + dj]);
                }
        }
#pragma unroll
        for (int fl = 0; fl < G1; ++fl) {
            float v[4];
#pragma unroll
            for (int q = 0; q < 4; ++q) v[q] = fmaxf(acc[fl][q] + bs[fl], 0.0f);
            const int at = first_max4(v);
            const size_t o = (((size_t)i * F1 + f0 + fl) * Q1 + r) * Q1 + s;
            p.p1[o] = v[at];
            p.arg1[o] = (2 * r + at / 2) * H1 + 2 * s + at % 2;
        }
    }
    __syncthreads();
}

// ---- conv2 + bias + ReLU + pool. Item (image i, filters f0..f0+7): the
// image's 32x15x15 input and the 8 filters in shared memory, the filters
// interleaved as conv1's (ws[(ch*9 + k)*8 + fl]). Thread t < 144 takes
// pooled position u % 36 (u = t % 72) for the 4 filters f0 + 4 (u / 36) ..
// + 3 over the channels' half t / 72 (16 accumulators; 16 input loads and
// 9 16-byte weight loads per channel for 144 multiply-adds); the second
// half's sums go through shared memory to the first's (first + second),
// then the bias, the ReLU, the pool. The pool drops the convolution's row
// and column 12. The input is stored with each row's even columns, then
// its odd ones (xs[ch*C2_CS + row*C2_RS + (col % 2)*8 + col / 2]), in rows
// of C2_RS = 19 floats: the warp's 32 positions (r, s) then read banks
// 6r + s + const, all different, where the plain layout (a thread's patch
// at 30r + 2s) gave 4-way bank conflicts.
__device__ inline void phase_conv2(const StepNet &p, int item, float *sm)
{
    const int i = item / (F2 / G2), f0 = (item % (F2 / G2)) * G2;
    float *xs = sm, *ws = sm + F1 * C2_CS, *bs = ws + G2 * K2;
    const float *xi = p.p1 + (size_t)i * F1 * Q1 * Q1;
    for (int t = threadIdx.x; t < F1 * Q1 * Q1; t += blockDim.x) {
        const int ch = t / (Q1 * Q1), row = t / Q1 % Q1, col = t % Q1;
        xs[ch * C2_CS + row * C2_RS + (col % 2) * 8 + col / 2] = xi[t];
    }
    for (int t = threadIdx.x; t < G2 * K2; t += blockDim.x)
        ws[(t % K2) * G2 + t / K2] = p.w2[(size_t)f0 * K2 + t];
    if (threadIdx.x < G2) bs[threadIdx.x] = p.b2[f0 + threadIdx.x];
    __syncthreads();
    constexpr int HALF = Q2 * Q2 * (G2 / 4); // 72 threads per channel half
    const int t = threadIdx.x, u = t % HALF, half = t / HALF;
    const int pos = u % (Q2 * Q2), fq = u / (Q2 * Q2), r = pos / Q2, s = pos % Q2;
    float acc[4][4];
    for (int fl = 0; fl < 4; ++fl)
        for (int q = 0; q < 4; ++q) acc[fl][q] = 0.0f;
    if (t < 2 * HALF) {
        for (int ch = half * (F1 / 2); ch < (half + 1) * (F1 / 2); ++ch) {
            float xv[4][4];
            const float *xc = xs + ch * C2_CS + (2 * r) * C2_RS + s;
#pragma unroll
            for (int a = 0; a < 4; ++a)
#pragma unroll
                for (int b = 0; b < 4; ++b) xv[a][b] = xc[a * C2_RS + (b % 2) * 8 + b / 2];
#pragma unroll
            for (int ki = 0; ki < 3; ++ki)
#pragma unroll
                for (int kj = 0; kj < 3; ++kj) {
                    const float4 w4 =
                        *reinterpret_cast<const float4 *>(ws + (ch * 9 + ki * 3 + kj) * G2 + 4 * fq);
                    const float w[4] = {w4.x, w4.y, w4.z, w4.w};
#pragma unroll
                    for (int fl = 0; fl < 4; ++fl)
#pragma unroll
                        for (int di = 0; di < 2; ++di)
#pragma unroll
                            for (int dj = 0; dj < 2; ++dj)
                                acc[fl][di * 2 + dj] = fmaf(xv[di + ki][dj + kj], w[fl], acc[fl][di * 2 + dj]);
                }
        }
    }
    __syncthreads(); // xs is free: the second half's sums go there
    if (t >= HALF && t < 2 * HALF)
#pragma unroll
        for (int fl = 0; fl < 4; ++fl)
#pragma unroll
            for (int q = 0; q < 4; ++q) xs[u * 16 + fl * 4 + q] = acc[fl][q];
    __syncthreads();
    if (t < HALF) {
#pragma unroll
        for (int fl = 0; fl < 4; ++fl) {
            const int f = 4 * fq + fl;
            float v[4];
#pragma unroll
            for (int q = 0; q < 4; ++q) v[q] = fmaxf(acc[fl][q] + xs[u * 16 + fl * 4 + q] + bs[f], 0.0f);
            const int at = first_max4(v);
            const size_t o = (((size_t)i * F2 + f0 + f) * Q2 + r) * Q2 + s;
            p.p2[o] = v[at];
            p.arg2[o] = (2 * r + at / 2) * H2 + 2 * s + at % 2;
        }
    }
    __syncthreads();
}

// ---- conv3 + bias + ReLU. Item (image i, filters f0..f0+7): the image's
// 64x6x6 input and the 8 filters in shared memory, interleaved as conv2's;
// thread t takes output position t % 16 for the 4 filters f0 + 4 ((t / 16)
// % 2) .. + 3 over the 8 channels of slice t / 32 (one slice per warp; the
// warp's two halves read the same inputs; 9 input and 9 16-byte weight
// loads per channel for 36 multiply-adds); the first 128 threads then add
// the 8 slices' sums in order, then the bias, then the ReLU.
constexpr int C3_SLICES = STEP_THREADS / 32, C3_CH = F2 / C3_SLICES;
__device__ inline void phase_conv3(const StepNet &p, int item, float *sm)
{
    const int i = item / (F3 / G3), f0 = (item % (F3 / G3)) * G3;
    float *xs = sm, *ws = sm + F2 * Q2 * Q2, *part = ws + G3 * K3, *bs = part + C3_SLICES * G3 * 16;
    const float *xi = p.p2 + (size_t)i * F2 * Q2 * Q2;
    for (int t = threadIdx.x; t < F2 * Q2 * Q2; t += blockDim.x) xs[t] = xi[t];
    for (int t = threadIdx.x; t < G3 * K3; t += blockDim.x)
        ws[(t % K3) * G3 + t / K3] = p.w3[(size_t)f0 * K3 + t];
    if (threadIdx.x < G3) bs[threadIdx.x] = p.b3[f0 + threadIdx.x];
    __syncthreads();
    const int t = threadIdx.x;
    {
        const int pos = t % 16, fq = (t / 16) % 2, slice = t / 32, r = pos / H3, s = pos % H3;
        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int ch = slice * C3_CH; ch < (slice + 1) * C3_CH; ++ch)
#pragma unroll
            for (int ki = 0; ki < 3; ++ki)
#pragma unroll
                for (int kj = 0; kj < 3; ++kj) {
                    const float xv = xs[ch * Q2 * Q2 + (r + ki) * Q2 + s + kj];
                    const float4 w4 =
                        *reinterpret_cast<const float4 *>(ws + (ch * 9 + ki * 3 + kj) * G3 + 4 * fq);
                    acc[0] = fmaf(xv, w4.x, acc[0]);
                    acc[1] = fmaf(xv, w4.y, acc[1]);
                    acc[2] = fmaf(xv, w4.z, acc[2]);
                    acc[3] = fmaf(xv, w4.w, acc[3]);
                }
#pragma unroll
        for (int fl = 0; fl < 4; ++fl) part[(slice * G3 + 4 * fq + fl) * 16 + pos] = acc[fl];
    }
    __syncthreads();
    if (t < G3 * 16) {
        const int pos = t % 16, fl = t / 16;
        float acc = 0.0f;
        for (int slice = 0; slice < C3_SLICES; ++slice) acc += part[(slice * G3 + fl) * 16 + pos];
        p.a3[((size_t)i * F3 + f0 + fl) * (H3 * H3) + pos] = fmaxf(acc + bs[fl], 0.0f);
    }
    __syncthreads();
}

// ---- dense1 + ReLU. Item (image i, units j0..j0+15): a3's row (1024) in
// shared memory; thread t takes unit j0 + t % 16 over k in slice t / 16
// (64 of them; a warp reads two 64-byte runs of W per k step); the first 16
// threads add the 16 slices in order, then the bias, then the ReLU.
__device__ inline void phase_dense1(const StepNet &p, int item, float *sm)
{
    const int i = item / (D1 / G4), j0 = (item % (D1 / G4)) * G4;
    float *xs = sm, *part = sm + D_IN;
    for (int t = threadIdx.x; t < D_IN; t += blockDim.x) xs[t] = p.a3[(size_t)i * D_IN + t];
    __syncthreads();
    const int t = threadIdx.x;
    constexpr int SLICES = STEP_THREADS / G4, KS = D_IN / SLICES;
    {
        const int j = j0 + t % G4, q = t / G4;
        float acc = 0.0f;
#pragma unroll 8
        for (int k = q * KS; k < (q + 1) * KS; ++k) acc = fmaf(xs[k], p.w4[(size_t)k * D1 + j], acc);
        part[t] = acc;
    }
    __syncthreads();
    if (t < G4) {
        float acc = 0.0f;
        for (int q = 0; q < SLICES; ++q) acc += part[q * G4 + t];
        p.h1[(size_t)i * D1 + j0 + t] = fmaxf(acc + p.b4[j0 + t], 0.0f);
    }
    __syncthreads();
}

// ---- the head: dense2 + softmax + sparse cross-entropy, one item for the
// batch (n <= MAX_BATCH). The logits (thread per output), then a thread per
// image: the softmax (max, the sum of exp(z - max)) and its loss log(sum) -
// (z[label] - max); then warp 0 sums the losses in a fixed order (lane l
// the images l, l + 32, ..., then a butterfly).
__device__ inline void phase_head(const StepNet &p, int item, float *sm)
{
    (void)item;
    const int n = p.n, t = threadIdx.x;
    for (int o = t; o < n * D2; o += blockDim.x) {
        const int i = o / D2, j = o % D2;
        float acc = 0.0f;
        for (int k = 0; k < D1; ++k) acc = fmaf(p.h1[(size_t)i * D1 + k], p.w5[k * D2 + j], acc);
        p.logits[o] = acc + p.b5[j];
    }
    __syncthreads(); // the block's global writes are visible to the block after it
    for (int i = t; i < n; i += blockDim.x) {
        const float *z = p.logits + (size_t)i * D2;
        float m = z[0];
        for (int j = 1; j < D2; ++j) m = fmaxf(m, z[j]);
        float e[D2], sum = 0.0f;
        for (int j = 0; j < D2; ++j) {
            e[j] = expf(z[j] - m);
            sum += e[j];
        }
        for (int j = 0; j < D2; ++j) p.probs[(size_t)i * D2 + j] = e[j] / sum;
        const float l = logf(sum) - (z[p.labels[i]] - m);
        p.loss[i] = l;
        sm[i] = l;
    }
    __syncthreads();
    if (t < 32) {
        float acc = 0.0f;
        for (int i = t; i < n; i += 32) acc += sm[i];
        for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
        if (t == 0) *p.loss_sum = acc;
    }
    __syncthreads();
}

// ---- version 1: a kernel per phase, a block per item.
__global__ void __launch_bounds__(STEP_THREADS) step_conv1_kernel(StepNet p)
{
    __shared__ float4 sm4[(SMEM_CONV1 + 3) / 4];
    phase_conv1(p, blockIdx.x, reinterpret_cast<float *>(sm4));
}
__global__ void __launch_bounds__(STEP_THREADS) step_conv2_kernel(StepNet p)
{
    __shared__ float4 sm4[(SMEM_CONV2 + 3) / 4];
    phase_conv2(p, blockIdx.x, reinterpret_cast<float *>(sm4));
}
__global__ void __launch_bounds__(STEP_THREADS) step_conv3_kernel(StepNet p)
{
    __shared__ float4 sm4[(SMEM_CONV3 + 3) / 4];
    phase_conv3(p, blockIdx.x, reinterpret_cast<float *>(sm4));
}
__global__ void __launch_bounds__(STEP_THREADS) step_dense1_kernel(StepNet p)
{
    __shared__ float4 sm4[(SMEM_DENSE1 + 3) / 4];
    phase_dense1(p, blockIdx.x, reinterpret_cast<float *>(sm4));
}
__global__ void __launch_bounds__(STEP_THREADS) step_head_kernel(StepNet p)
{
    __shared__ float4 sm4[(SMEM_HEAD + 3) / 4];
    phase_head(p, blockIdx.x, reinterpret_cast<float *>(sm4));
}

// The five launches on stream st (1 <= p.n <= MAX_BATCH; the caller checks
// the launches' errors).
inline void step_forward_separate(const StepNet &p, cudaStream_t st)
{
    step_conv1_kernel<<<items_conv1(p.n), STEP_THREADS, 0, st>>>(p);
    step_conv2_kernel<<<items_conv2(p.n), STEP_THREADS, 0, st>>>(p);
    step_conv3_kernel<<<items_conv3(p.n), STEP_THREADS, 0, st>>>(p);
    step_dense1_kernel<<<items_dense1(p.n), STEP_THREADS, 0, st>>>(p);
    step_head_kernel<<<items_head(p.n), STEP_THREADS, 0, st>>>(p);
}

} // namespace stepfwd

#endif
