// conv2d_forward.cu: the convolution forward stages, checked against a CPU
// reference and timed at the seed CIFAR-10 CNN's three convolutions at batch
// 32: y (n, f, oh, ow) = conv(x (n, c, h, w), W (f, c, kh, kw)) + b (f).
//
//   ./conv2d_forward [VERSION] [--jsonl FILE]
//
// Versions:
//   1  naive direct convolution: one thread per output, global memory only
//   2  direct, 8 filters per thread, the block's filters in shared memory
//   3  im2col (the engine's kernel) + naive GEMM (sgemm v1) + bias
//   4  im2col + shared-memory tiled GEMM (sgemm v2) + bias
//   5  im2col + the engine's first 64x64 tile GEMM without split-K (sgemm v4) + bias
//   6  the engine: cuda_conv2d_forward (im2col + cnn_cuda_sgemm, split-K
//      where the output has few tiles; the GEMM writes y in NCHW with the
//      bias as it stores, since 2026-11-25 at every size)
// Versions 3-5 use the layer's workspace as the engine did until
// 2026-11-25: col (K, NP), then t (f, NP), K = c*kh*kw, NP = n*oh*ow; t is
// rearranged into y with the bias added by scatter_bias_kernel
// (conv2d_rearranged.cuh); the engine's own workspace is col alone.
#include "common.cuh"
#include "conv2d_kernels.cuh"
#include "conv2d_rearranged.cuh"
#include "conv_cases.cuh"
#include "conv_forward_case.cuh"
#include "sgemm_stages.cuh"

using namespace dev;

namespace {

// ---- version 1: naive direct convolution, one thread per output.
__global__ void conv_forward_naive(cnn_conv_desc d, const float *__restrict__ x,
                                   const float *__restrict__ w, const float *__restrict__ b,
                                   float *__restrict__ y)
{
    const size_t o = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= (size_t)d.n * d.f * d.oh * d.ow) return;
    const int s = (int)(o % d.ow), r = (int)(o / d.ow % d.oh);
    const int fi = (int)(o / ((size_t)d.ow * d.oh) % d.f), i = (int)(o / ((size_t)d.ow * d.oh * d.f));
    float acc = 0.0f;
    for (int ch = 0; ch < d.c; ++ch)
        for (int ki = 0; ki < d.kh; ++ki) {
            const int row = r * d.sh - d.pad_top + ki;
            if (row < 0 || row >= d.h) continue;
            for (int kj = 0; kj < d.kw; ++kj) {
                const int column = s * d.sw - d.pad_left + kj;
                if (column < 0 || column >= d.w) continue;
                acc = fmaf(x[(((size_t)i * d.c + ch) * d.h + row) * d.w + column],
                           w[(((size_t)fi * d.c + ch) * d.kh + ki) * d.kw + kj], acc);
            }
        }
    y[o] = acc + (b ? b[fi] : 0.0f);
}

bool conv_v1(const cnn_conv_desc &d, const float *x, const float *w, const float *b, float *y,
             cudaStream_t st)
{
    const size_t total = y_count(d);
    conv_forward_naive<<<(unsigned)((total + 255) / 256), 256, 0, st>>>(d, x, w, b, y);
    return launched("conv v1");
}

// ---- version 2: direct convolution, register-blocked over filters. A block
// takes FB filters and 128 output positions (of any images: positions are
// numbered across the batch, so a small output plane still fills a block);
// the FB filters (FB*K floats) are loaded into shared memory once, and each
// input value read from global memory feeds FB multiply-adds instead of one.
constexpr int FB = 8, DIRECT_THREADS = 128;

__global__ void __launch_bounds__(DIRECT_THREADS)
conv_forward_direct(cnn_conv_desc d, const float *__restrict__ x, const float *__restrict__ w,
                    const float *__restrict__ b, float *__restrict__ y)
{
    extern __shared__ float wsh[]; // wsh[fl * K + k] = W[f0 + fl, k] (0 past f)
    const int K = d.c * d.kh * d.kw, f0 = blockIdx.y * FB;
    for (int t = threadIdx.x; t < FB * K; t += blockDim.x)
        wsh[t] = f0 + t / K < d.f ? w[(size_t)f0 * K + t] : 0.0f;
    __syncthreads();
    const int p = d.oh * d.ow;
    const int q = blockIdx.x * blockDim.x + threadIdx.x; // position i*P + r*ow + s
    if (q >= d.n * p) return;
    const int i = q / p, rs = q % p, r = rs / d.ow, s = rs % d.ow;
    float acc[FB] = {};
    const float *xi = x + (size_t)i * d.c * d.h * d.w;
    for (int ch = 0; ch < d.c; ++ch)
        for (int ki = 0; ki < d.kh; ++ki) {
            const int row = r * d.sh - d.pad_top + ki;
            if (row < 0 || row >= d.h) continue;
            for (int kj = 0; kj < d.kw; ++kj) {
                const int column = s * d.sw - d.pad_left + kj;
                if (column < 0 || column >= d.w) continue;
                const float xv = xi[((size_t)ch * d.h + row) * d.w + column];
                const int k = (ch * d.kh + ki) * d.kw + kj;
#pragma unroll
                for (int fl = 0; fl < FB; ++fl) acc[fl] = fmaf(xv, wsh[fl * K + k], acc[fl]);
            }
        }
#pragma unroll
    for (int fl = 0; fl < FB; ++fl) {
        const int fi = f0 + fl;
        if (fi < d.f) y[((size_t)i * d.f + fi) * p + rs] = acc[fl] + (b ? b[fi] : 0.0f);
    }
}

bool conv_v2(const cnn_conv_desc &d, const float *x, const float *w, const float *b, float *y,
             cudaStream_t st)
{
    const size_t smem = (size_t)FB * k_of(d) * sizeof(float);
    if (smem > 48 * 1024) {
        fprintf(stderr, "conv v2: %d filter weights x %d filters do not fit 48 KiB of shared memory\n",
                k_of(d), FB);
        return false;
    }
    const dim3 grid((np_of(d) + DIRECT_THREADS - 1) / DIRECT_THREADS, (d.f + FB - 1) / FB);
    conv_forward_direct<<<grid, DIRECT_THREADS, smem, st>>>(d, x, w, b, y);
    return launched("conv v2");
}

// ---- versions 3-5: im2col + a GEMM stage + bias, in the engine's workspace.
using GemmStage = bool (*)(const stages::Gemm &, cudaStream_t);

bool conv_im2col(const cnn_conv_desc &d, const float *x, const float *w, const float *b, float *y,
                 float *ws, cudaStream_t st, GemmStage gemm)
{
    const int k = k_of(d), np = np_of(d);
    float *col = ws, *t = col + (size_t)k * np;
    cnn_conv2d::im2col_kernel<<<cnn_blocks((size_t)k * np, CNN_THREADS), CNN_THREADS, 0, st>>>(d, x, col);
    if (!launched("im2col")) return false;
    if (!gemm({false, false, d.f, np, k, 1.0f, w, k, col, np, 0.0f, t, np}, st)) return false;
    const size_t p = (size_t)d.oh * d.ow;
    rearranged::scatter_bias_kernel<false><<<cnn_blocks(y_count(d), CNN_THREADS), CNN_THREADS, 0, st>>>(
        d.n, d.f, p, t, b, y);
    return launched("scatter bias");
}

const Version VERSIONS[] = {
    {"naive direct: one thread per output, global memory only",
     [](const cnn_conv_desc &d, Buffers &m, bool bias, Engine &e) {
         return conv_v1(d, m.x.p, m.w.p, bias_of(m, bias), m.y.p, e.stream());
     }},
    {"direct, 8 filters per thread, filters in shared memory",
     [](const cnn_conv_desc &d, Buffers &m, bool bias, Engine &e) {
         return conv_v2(d, m.x.p, m.w.p, bias_of(m, bias), m.y.p, e.stream());
     }},
    {"im2col + naive GEMM (sgemm v1) + bias",
     [](const cnn_conv_desc &d, Buffers &m, bool bias, Engine &e) {
         return conv_im2col(d, m.x.p, m.w.p, bias_of(m, bias), m.y.p, m.ws.p, e.stream(), stages::sgemm_v1);
     }},
    {"im2col + shared-memory 32x32 GEMM (sgemm v2) + bias",
     [](const cnn_conv_desc &d, Buffers &m, bool bias, Engine &e) {
         return conv_im2col(d, m.x.p, m.w.p, bias_of(m, bias), m.y.p, m.ws.p, e.stream(), stages::sgemm_v2);
     }},
    {"im2col + engine tile GEMM, no split-K (sgemm v4) + bias",
     [](const cnn_conv_desc &d, Buffers &m, bool bias, Engine &e) {
         return conv_im2col(d, m.x.p, m.w.p, bias_of(m, bias), m.y.p, m.ws.p, e.stream(), stages::sgemm_v4);
     }},
    {"engine cuda_conv2d_forward: im2col + split-K SGEMM + bias",
     [](const cnn_conv_desc &d, Buffers &m, bool bias, Engine &e) {
         return engine_ok(cuda_conv2d_forward(e.ctx, &d, m.x.p, m.w.p, bias_of(m, bias), m.y.p, m.ws.p),
                          "cuda_conv2d_forward");
     }},
};
} // namespace

int main(int argc, char **argv)
{
    return run_conv_forward("conv2d_forward", VERSIONS, argc, argv, false, 100);
}
