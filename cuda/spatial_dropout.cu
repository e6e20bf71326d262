// spatial_dropout.cu: SpatialDropout2D for the cuda engine, the cpu
// engine's mask: channel ch of row i of an NCHW tensor is kept whole when
// cnn_uniform(key, (row0 + i)*c + ch) >= rate, key = cnn_rng_key(seed,
// *forward) read on the device (a recorded step draws a new mask each
// replay), kept values multiplied by the float 1 / (1 - rate) computed on the
// host as the cpu engine does. The backward draws the same mask again. One
// thread per value; in and out may be the same buffer.
#include "cuda_common.cuh"
#include "cuda_ops.h"

__global__ void spatial_dropout_kernel(size_t count, size_t plane, uint64_t row0, float rate,
                                       float scale, uint64_t seed,
                                       const int64_t *__restrict__ forward, const float *in,
                                       float *out)
{
    cnn_kernel_begin();
    const uint64_t key = cnn_rng_key(seed, (uint64_t)*forward);
    CNN_GRID_LOOP(e, count) {
        // the plane e / plane is (i, ch) = i*c + ch: its draw is at row0*c + that
        const uint64_t q = (uint64_t)(e / plane);
        const float v = in[e];
        out[e] = cnn_uniform(key, row0 + q) >= rate ? v * scale : 0.0f;
    }
}

static cnn_status apply(cnn_ctx *ctx, const char *what, int n, int c, int h, int w, float rate,
                        uint64_t seed, const int64_t *forward, int64_t row0, const float *in,
                        float *out)
{
    if (n < 0 || c < 0 || h < 0 || w < 0)
        return cnn_set_error(CNN_ERR_VALUE, "%s: negative shape (%d, %d, %d, %d)", what, n, c,
                             h, w);
    if (row0 < 0)
        return cnn_set_error(CNN_ERR_VALUE, "%s: row0 %lld is negative", what, (long long)row0);
    if (!(rate >= 0.0f && rate < 1.0f))
        return cnn_set_error(CNN_ERR_VALUE, "%s: rate %g is not in [0, 1)", what, (double)rate);
    const size_t plane = (size_t)h * w, count = (size_t)n * c * plane;
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
    spatial_dropout_kernel<<<cnn_blocks(count, CNN_THREADS), CNN_THREADS, 0, st>>>(
        count, plane, (uint64_t)row0 * (uint64_t)c, rate, scale, seed, forward, in, out);
    CNN_CUDA_LAUNCHED(what);
    return CNN_OK;
}

cnn_status cuda_spatial_dropout_forward(cnn_ctx *ctx, int n, int c, int h, int w, float rate,
                                        uint64_t seed, const int64_t *forward, int64_t row0,
                                        const float *x, float *y)
{
    return apply(ctx, "spatial_dropout_forward", n, c, h, w, rate, seed, forward, row0, x, y);
}

cnn_status cuda_spatial_dropout_backward(cnn_ctx *ctx, int n, int c, int h, int w, float rate,
                                         uint64_t seed, const int64_t *forward, int64_t row0,
                                         const float *dy, float *dx)
{
    return apply(ctx, "spatial_dropout_backward", n, c, h, w, rate, seed, forward, row0, dy, dx);
}
