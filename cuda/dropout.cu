// dropout.cu: inverted dropout for the cuda engine, with the cpu engine's
// mask: element (i, ch, r, s) of an NCHW tensor is kept when
// cnn_uniform(key, (((row0 + i)*h + r)*w + s)*c + ch) >= rate (its index in
// Keras's NHWC order, row0 the first row's number in the whole batch: a
// data-parallel replica holds rows row0 ... of it and draws their masks),
// key = cnn_rng_key(seed, *forward) read on the device (so a recorded step
// draws a new mask each replay), and kept values are multiplied by the float
// 1 / (1 - rate), computed on the host as the cpu engine does. The backward draws the same
// mask again from the key. x and y (and dy and dx) may be the same buffer:
// one thread per element reads and writes it.
#include "cuda_common.cuh"
#include "cuda_ops.h"

static cnn_status check_args(const char *what, int n, int c, int h, int w, float rate,
                             int64_t row0)
{
    if (n < 0 || c < 0 || h < 0 || w < 0)
        return cnn_set_error(CNN_ERR_VALUE, "%s: negative shape (%d, %d, %d, %d)", what, n, c,
                             h, w);
    if (row0 < 0)
        return cnn_set_error(CNN_ERR_VALUE, "%s: row0 %lld is negative", what, (long long)row0);
    if (!(rate >= 0.0f && rate < 1.0f))
        return cnn_set_error(CNN_ERR_VALUE, "%s: rate %g is not in [0, 1)", what, (double)rate);
    return CNN_OK;
}

// in (n, c, plane) -> out (n, c, plane), plane = h*w; I is the index type
// of the element within this tensor (32-bit when the tensor allows: cheaper
// divisions); row0 is added in 64 bits, since the whole batch's index may
// pass 2^32 where this share does not.
template <typename I>
__global__ void dropout_kernel(I count, I c, I plane, uint64_t row0, float rate, float scale,
                               uint64_t seed, const int64_t *__restrict__ forward,
                               const float *in, float *out)
{
    cnn_kernel_begin();
    const uint64_t key = cnn_rng_key(seed, (uint64_t)*forward);
    for (I e = (I)blockIdx.x * blockDim.x + threadIdx.x; e < count;
         e += (I)blockDim.x * gridDim.x) {
        const I t = e / plane;
        const I p = e - t * plane; // pixel r*w + s
        const I i = t / c;
        const I ch = t - i * c;
        // NHWC index (((row0 + i)*plane) + p)*c + ch, wrapping mod 2^64 as
        // the cpu engine's does
        const uint64_t j = ((row0 + (uint64_t)i) * (uint64_t)plane + (uint64_t)p) * (uint64_t)c +
                           (uint64_t)ch;
        const float v = in[e];
        out[e] = cnn_uniform(key, j) >= rate ? v * scale : 0.0f;
    }
}

// in (n, c, h, w) -> out (n, c, h, w) = in * mask * scale
static cnn_status apply_mask(cnn_ctx *ctx, const char *what, int n, int c, int h, int w,
                             float rate, uint64_t seed, const int64_t *forward, int64_t row0,
                             const float *in, float *out)
{
    CNN_TRY(check_args(what, n, c, h, w, rate, row0));
    const size_t plane = (size_t)h * (size_t)w;
    const size_t count = (size_t)n * (size_t)c * plane;
    if (count == 0) return CNN_OK;
    cudaStream_t st = cnn_stream(ctx);
    if (rate == 0.0f) {
        if (in != out)
            CNN_CUDA_TRY(cudaMemcpyAsync(out, in, count * sizeof(float), cudaMemcpyDeviceToDevice,
                                         st),
                         what);
        return CNN_OK;
    }
    const float scale = 1.0f / (1.0f - rate);
    const unsigned blocks = cnn_blocks(count, CNN_THREADS);
    // the grid-stride index must not wrap: keep a margin of one full grid
    if (count + (size_t)blocks * CNN_THREADS < 0xffffffffull)
        dropout_kernel<uint32_t><<<blocks, CNN_THREADS, 0, st>>>(
            (uint32_t)count, (uint32_t)c, (uint32_t)plane, (uint64_t)row0, rate, scale, seed,
            forward, in, out);
    else
        dropout_kernel<uint64_t><<<blocks, CNN_THREADS, 0, st>>>(
            (uint64_t)count, (uint64_t)c, (uint64_t)plane, (uint64_t)row0, rate, scale, seed,
            forward, in, out);
    CNN_CUDA_LAUNCHED(what);
    return CNN_OK;
}

// x (n, c, h, w) -> y (n, c, h, w)
cnn_status cuda_dropout_forward(cnn_ctx *ctx, int n, int c, int h, int w, float rate,
                                uint64_t seed, const int64_t *forward, int64_t row0,
                                const float *x, float *y)
{
    return apply_mask(ctx, "dropout_forward", n, c, h, w, rate, seed, forward, row0, x, y);
}

// dy (n, c, h, w) -> dx (n, c, h, w), with the forward's mask and scale
cnn_status cuda_dropout_backward(cnn_ctx *ctx, int n, int c, int h, int w, float rate,
                                 uint64_t seed, const int64_t *forward, int64_t row0,
                                 const float *dy, float *dx)
{
    return apply_mask(ctx, "dropout_backward", n, c, h, w, rate, seed, forward, row0, dy, dx);
}
