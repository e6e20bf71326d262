// upsample_bilinear.cu: UpSampling2D(interpolation='bilinear') for the cuda
// engine, the cpu engine's arithmetic (cnn_bilinear_source, cnn.h; each
// product and sum rounded on its own: __fmul_rn, __fadd_rn, so the bits are
// the cpu engine's). Forward: one thread per output value. Backward: one
// thread per input value, gathering over the output rows and columns near
// it (ascending, those of weight 0 skipped), as the cpu engine adds them.
#include "cuda_common.cuh"
#include "cuda_ops.h"

__global__ void bilinear_forward_kernel(size_t total, int h, int w, int sh, int sw,
                                        const float *__restrict__ x, float *__restrict__ y)
{
    cnn_kernel_begin();
    const int oh = h * sh, ow = w * sw;
    const size_t oplane = (size_t)oh * ow;
    CNN_GRID_LOOP(e, total) {
        const size_t q = e / oplane, rest = e - q * oplane;
        const int r = (int)(rest / ow), s = (int)(rest % ow);
        int r0, r1, c0, c1;
        float fy, fx;
        cnn_bilinear_source(r, sh, h, &r0, &r1, &fy);
        cnn_bilinear_source(s, sw, w, &c0, &c1, &fx);
        const float *top = x + (q * h + r0) * w, *bottom = x + (q * h + r1) * w;
        const float gx = 1.0f - fx, gy = 1.0f - fy;
        const float upper = __fadd_rn(__fmul_rn(gx, top[c0]), __fmul_rn(fx, top[c1]));
        const float lower = __fadd_rn(__fmul_rn(gx, bottom[c0]), __fmul_rn(fx, bottom[c1]));
        y[e] = __fadd_rn(__fmul_rn(gy, upper), __fmul_rn(fy, lower));
    }
}

// The weight of input pixel k in output pixel o along an axis.
__device__ float bilinear_weight(int o, int s, int size, int k)
{
    int i0, i1;
    float f;
    cnn_bilinear_source(o, s, size, &i0, &i1, &f);
    float wt = i0 == k ? 1.0f - f : 0.0f;
    if (i1 == k) wt = __fadd_rn(wt, f);
    return wt;
}

__global__ void bilinear_backward_kernel(size_t total, int h, int w, int sh, int sw,
                                         const float *__restrict__ dy, float *__restrict__ dx)
{
    cnn_kernel_begin();
    const int oh = h * sh, ow = w * sw;
    const size_t plane = (size_t)h * w;
    CNN_GRID_LOOP(e, total) {
        const size_t q = e / plane, rest = e - q * plane;
        const int r = (int)(rest / w), k = (int)(rest % w);
        const int ra = (r - 1) * sh > 0 ? (r - 1) * sh : 0;
        const int rb = (r + 2) * sh < oh ? (r + 2) * sh : oh;
        const int sa = (k - 1) * sw > 0 ? (k - 1) * sw : 0;
        const int sb = (k + 2) * sw < ow ? (k + 2) * sw : ow;
        const float *g = dy + q * (size_t)oh * ow;
        float sum = 0.0f;
        for (int o = ra; o < rb; ++o) {
            const float wr = bilinear_weight(o, sh, h, r);
            if (wr == 0.0f) continue;
            float row = 0.0f;
            for (int p = sa; p < sb; ++p) {
                const float ws = bilinear_weight(p, sw, w, k);
                if (ws == 0.0f) continue;
                row = __fadd_rn(row, __fmul_rn(ws, g[(size_t)o * ow + p]));
            }
            sum = __fadd_rn(sum, __fmul_rn(wr, row));
        }
        dx[e] = sum;
    }
}

static cnn_status check(const char *what, int n, int c, int h, int w, int sh, int sw)
{
    if (n < 0 || c < 0 || h < 1 || w < 1 || sh < 1 || sw < 1)
        return cnn_set_error(CNN_ERR_VALUE, "%s: shape (%d, %d, %d, %d), size (%d, %d)", what,
                             n, c, h, w, sh, sw);
    return CNN_OK;
}

cnn_status cuda_upsample_bilinear_forward(cnn_ctx *ctx, int n, int c, int h, int w, int sh,
                                          int sw, const float *x, float *y)
{
    CNN_TRY(check("upsample_bilinear_forward", n, c, h, w, sh, sw));
    const size_t total = (size_t)n * c * h * sh * w * sw;
    if (total == 0) return CNN_OK;
    bilinear_forward_kernel<<<cnn_blocks(total, CNN_THREADS), CNN_THREADS, 0, cnn_stream(ctx)>>>(
        total, h, w, sh, sw, x, y);
    CNN_CUDA_LAUNCHED("upsample_bilinear_forward");
    return CNN_OK;
}

cnn_status cuda_upsample_bilinear_backward(cnn_ctx *ctx, int n, int c, int h, int w, int sh,
                                           int sw, const float *dy, float *dx)
{
    CNN_TRY(check("upsample_bilinear_backward", n, c, h, w, sh, sw));
    const size_t total = (size_t)n * c * h * w;
    if (total == 0) return CNN_OK;
    bilinear_backward_kernel<<<cnn_blocks(total, CNN_THREADS), CNN_THREADS, 0,
                               cnn_stream(ctx)>>>(total, h, w, sh, sw, dy, dx);
    CNN_CUDA_LAUNCHED("upsample_bilinear_backward");
    return CNN_OK;
}
