// conv2d_rearranged.cuh: the convolution's path through a rearranged copy t
// (f, n*P) of y and dy, the cuda engine's until the GEMMs read and wrote the
// NCHW layouts themselves (2026-11-25; the engine kept it to compare under
// CNNCUDA_SGEMM=tile64 until 2026-11-27). The conv2d stages that time it:
// the workspace is the column matrix (K, NP) followed by t (f, NP).
#ifndef DEV_CUDA_CONV2D_REARRANGED_CUH
#define DEV_CUDA_CONV2D_REARRANGED_CUH

#include "common.cuh"

namespace rearranged {

// The workspace's floats: col (K, NP), then t (f, NP).
inline size_t workspace_floats(const cnn_conv_desc &d)
{
    const size_t np = (size_t)d.n * d.oh * d.ow;
    return (size_t)d.c * d.kh * d.kw * np + (size_t)d.f * np;
}

// y (n, f, P)[i, f, p] = t (f, n*P)[f, i*P + p] + b[f] (b may be NULL);
// with RELU followed by the ReLU, y = max(t + b, 0)
template <bool RELU>
__global__ void scatter_bias_kernel(int n, int f, size_t p, const float *__restrict__ t,
                                    const float *__restrict__ b, float *__restrict__ y)
{
    const size_t total = (size_t)n * f * p;
    for (size_t o = blockIdx.x * (size_t)blockDim.x + threadIdx.x; o < total;
         o += (size_t)blockDim.x * gridDim.x) {
        const size_t q = o % p, fi = (o / p) % f, i = o / (p * f);
        const float v = t[fi * n * p + i * p + q] + (b ? b[fi] : 0.0f);
        y[o] = RELU && v < 0.0f ? 0.0f : v;
    }
}

// t (f, n*P)[f, i*P + p] = dy (n, f, P)[i, f, p]
__global__ void gather_dy_kernel(int n, int f, size_t p, const float *__restrict__ dy,
                                 float *__restrict__ t)
{
    const size_t total = (size_t)n * f * p;
    for (size_t o = blockIdx.x * (size_t)blockDim.x + threadIdx.x; o < total;
         o += (size_t)blockDim.x * gridDim.x) {
        const size_t q = o % p, fi = (o / p) % f, i = o / (p * f);
        t[fi * n * p + i * p + q] = dy[o];
    }
}

constexpr int ROW_CHUNK = 2048; // columns one block sums in the first pass

// Block (b, r) sums x[r, b * chunk + [0, chunk)) of x (rows, cols) into
// out[r * gridDim.x + b] (blockDim.x == CNN_THREADS).
__global__ void row_chunk_sums_kernel(int cols, const float *__restrict__ x,
                                      float *__restrict__ out, int chunk)
{
    __shared__ float partial[CNN_THREADS];
    const float *row = x + (size_t)blockIdx.y * cols;
    const int end = min(cols, (int)(blockIdx.x + 1) * chunk);
    float sum = 0.0f;
    for (int j = blockIdx.x * chunk + threadIdx.x; j < end; j += blockDim.x) sum += row[j];
    partial[threadIdx.x] = sum;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
        if ((int)threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[(size_t)blockIdx.y * gridDim.x + blockIdx.x] = partial[0];
}

// out[r] = sum_j t[r, j] for t (rows, cols): the bias gradient of this path,
// in two passes where a row is longer than one chunk (chunk sums into
// `scratch`, which holds rows * chunks floats, then those in order).
inline bool row_sums(cudaStream_t st, int rows, int cols, const float *t, float *out,
                     float *scratch)
{
    const int chunks = cols > ROW_CHUNK ? (cols + ROW_CHUNK - 1) / ROW_CHUNK : 1;
    if (chunks == 1) {
        row_chunk_sums_kernel<<<dim3(1, rows), CNN_THREADS, 0, st>>>(cols, t, out, cols);
        return dev::launched("row sums");
    }
    row_chunk_sums_kernel<<<dim3(chunks, rows), CNN_THREADS, 0, st>>>(cols, t, scratch, ROW_CHUNK);
    if (!dev::launched("row sums pass 1")) return false;
    row_chunk_sums_kernel<<<dim3(1, rows), CNN_THREADS, 0, st>>>(chunks, scratch, out, chunks);
    return dev::launched("row sums pass 2");
}

// Scratch floats row_sums needs for (rows, cols).
inline size_t row_sums_scratch(int rows, int cols)
{
    return (size_t)rows * ((cols + ROW_CHUNK - 1) / ROW_CHUNK);
}

} // namespace rearranged

#endif
