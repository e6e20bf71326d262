// channel_bias.cu: a convolution's bias over NCHW tensors, for the cudnn
// engine: y[i, ch, :] += b[ch] after the convolution, and the bias gradient
// db[ch] = sum of dy[i, ch, :] over images i and pixels. These replace
// cudnnAddTensor and cudnnConvolutionBackwardBias, which took a third of
// the cudnn engine's step at batch 512 on an H200 (BENCHMARKS.md).
// The sums are deterministic: each block sums a fixed chunk of images of one
// channel with a fixed tree, then one thread per channel adds the chunks in
// order.
#include "cuda_common.cuh"
#include "cuda_ops.h"

namespace {

constexpr int CHUNK_ELEMENTS = 4096; // about what one block of the first pass sums

// y (n, c, hw) += b[ch] (b not NULL), then y = relu(y) where RELU: one
// thread per element (grid-stride), indices of type I (unsigned 32-bit
// where the tensor has fewer than 2^31 elements: cheaper division).
template <typename I, bool RELU>
__global__ void add_bias_kernel(I count, int c, int hw, const float *__restrict__ b,
                                float *__restrict__ y)
{
    cnn_kernel_begin();
    for (I e = (I)blockIdx.x * blockDim.x + threadIdx.x; e < count; e += (I)blockDim.x * gridDim.x) {
        float v = y[e];
        if (b) v += b[(e / (I)hw) % (I)c];
        if (RELU) v = v > 0.0f ? v : 0.0f;
        y[e] = v;
    }
}

template <bool RELU>
cnn_status add_bias(cnn_ctx *ctx, int n, int c, int hw, const float *b, float *y)
{
    const size_t count = (size_t)n * c * hw;
    if (count == 0) return CNN_OK;
    const unsigned blocks = cnn_blocks(count, CNN_THREADS);
    if (count < 0x7fffffffu)
        add_bias_kernel<unsigned, RELU><<<blocks, CNN_THREADS, 0, cnn_stream(ctx)>>>(
            (unsigned)count, c, hw, b, y);
    else
        add_bias_kernel<size_t, RELU><<<blocks, CNN_THREADS, 0, cnn_stream(ctx)>>>(count, c, hw,
                                                                                 b, y);
    CNN_CUDA_LAUNCHED(RELU ? "conv bias and ReLU" : "conv bias");
    return CNN_OK;
}

// Block (k, ch) sums images [k*per, min(n, (k+1)*per)) of channel ch of
// x (n, c, hw) into out[ch * gridDim.x + k].
__global__ void chunk_sums_kernel(int n, int c, int hw, int per, const float *__restrict__ x,
                                  float *__restrict__ out)
{
    cnn_kernel_begin();
    __shared__ float partial[CNN_THREADS];
    const int ch = blockIdx.y;
    const int first = blockIdx.x * per;
    const int images = min(per, n - first);
    const size_t count = (size_t)images * hw;
    // element e of the chunk is image first + e / hw, pixel e % hw: followed
    // from one element to the next without dividing (a 64-bit division an
    // element made the pass instruction-bound: 44 us for conv1's 59 MB at
    // batch 512 on an H100), the sum in the same order
    const int step_i = blockDim.x / hw, step_p = blockDim.x % hw;
    int i = threadIdx.x / hw, p = threadIdx.x % hw;
    float sum = 0.0f;
#pragma unroll 4 // loads ahead of the adds, which stay in order
    for (size_t e = threadIdx.x; e < count; e += blockDim.x) {
        sum += x[((size_t)(first + i) * c + ch) * hw + p];
        i += step_i;
        p += step_p;
        if (p >= hw) {
            p -= hw;
            ++i;
        }
    }
    partial[threadIdx.x] = sum;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
        if ((int)threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[(size_t)ch * gridDim.x + blockIdx.x] = partial[0];
}

// out[ch] = sum over k of part[ch * chunks + k], in order
__global__ void add_chunks_kernel(int c, int chunks, const float *__restrict__ part,
                                  float *__restrict__ out)
{
    cnn_kernel_begin();
    CNN_GRID_LOOP(ch, c) {
        float sum = 0.0f;
#pragma unroll 8 // loads ahead of the adds, which stay in order
        for (int k = 0; k < chunks; ++k) sum += part[ch * (size_t)chunks + k];
        out[ch] = sum;
    }
}

} // namespace

cnn_status cnn_cuda_add_channel_bias(cnn_ctx *ctx, int n, int c, int hw, const float *b,
                                     float *y)
{
    return add_bias<false>(ctx, n, c, hw, b, y);
}

cnn_status cnn_cuda_add_channel_bias_relu(cnn_ctx *ctx, int n, int c, int hw, const float *b,
                                          float *y)
{
    return add_bias<true>(ctx, n, c, hw, b, y);
}

cnn_status cnn_cuda_channel_sums(cnn_ctx *ctx, int n, int c, int hw, const float *x, float *out)
{
    if (c <= 0) return CNN_OK;
    const cnn_cuda_impl *impl = (const cnn_cuda_impl *)ctx->impl;
    int per = hw >= CHUNK_ELEMENTS ? 1 : CHUNK_ELEMENTS / (hw > 0 ? hw : 1);
    if (per > n) per = n > 0 ? n : 1;
    int chunks = n > 0 ? (n + per - 1) / per : 1;
    if (n == 0 || hw == 0) {
        CNN_CUDA_TRY(cudaMemsetAsync(out, 0, (size_t)c * sizeof(float), cnn_stream(ctx)),
                     "bias gradient");
        return CNN_OK;
    }
    if (chunks == 1 || (size_t)c * chunks > impl->scratch_floats) {
        // one block per channel sums every image: the first chunk is all of them
        chunk_sums_kernel<<<dim3(1, c), CNN_THREADS, 0, cnn_stream(ctx)>>>(n, c, hw, n, x, out);
        CNN_CUDA_LAUNCHED("bias gradient");
        return CNN_OK;
    }
    chunk_sums_kernel<<<dim3(chunks, c), CNN_THREADS, 0, cnn_stream(ctx)>>>(n, c, hw, per, x,
                                                                          impl->scratch);
    CNN_CUDA_LAUNCHED("bias gradient pass 1");
    add_chunks_kernel<<<cnn_blocks(c, 128), 128, 0, cnn_stream(ctx)>>>(c, chunks, impl->scratch,
                                                                       out);
    CNN_CUDA_LAUNCHED("bias gradient pass 2");
    return CNN_OK;
}
