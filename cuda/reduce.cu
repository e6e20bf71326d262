// reduce.cu: per-channel sums for bias gradients.
#include "cuda_common.cuh"

namespace {

// One block per channel c: out[c] = sum_{i, j} x[(i * channels + c) * inner + j].
__global__ void channel_sums_kernel(int outer, int channels, int inner,
                                    const float *__restrict__ x, float *__restrict__ out)
{
    __shared__ float partial[CNN_THREADS];
    const int c = blockIdx.x;
    const size_t count = (size_t)outer * inner;
    float sum = 0.0f;
    for (size_t t = threadIdx.x; t < count; t += blockDim.x) {
        const size_t i = t / inner, j = t % inner;
        sum += x[(i * channels + c) * inner + j];
    }
    partial[threadIdx.x] = sum;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
        if ((int)threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[c] = partial[0];
}

} // namespace

cnn_status cnn_cuda_channel_sums(cnn_ctx *ctx, int outer, int channels, int inner,
                                 const float *x, float *out)
{
    if (channels <= 0) return CNN_OK;
    channel_sums_kernel<<<channels, CNN_THREADS, 0, cnn_stream(ctx)>>>(outer, channels, inner, x,
                                                                      out);
    CNN_CUDA_LAUNCHED("channel_sums");
    return CNN_OK;
}
