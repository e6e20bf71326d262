// batchnorm.cu: batch normalization for the cuda engine over x (n, c,
// spatial), per channel c; channel ch of image i is the contiguous run
// x[(i*c + ch)*spatial, +spatial). Training and the backward run one block
// per channel: the block sums in double (per thread, then a shuffle and
// shared-memory reduction), two passes for the biased variance as the cpu
// engine, and then writes y (or dx). Float products are written with the
// __f*_rn intrinsics so the compiler cannot fuse them into FMAs the cpu
// engine does not do: given the same statistics, y and dx match it bit for
// bit.
#include "cuda_common.cuh"
#include "cuda_ops.h"

#define BN_THREADS 512
#define BN_WARPS (BN_THREADS / 32)

static cnn_status check_desc(const char *what, const cnn_bn_desc *d, int need_samples)
{
    if (d->n < 0 || d->c < 1 || d->spatial < 0)
        return cnn_set_error(CNN_ERR_VALUE, "%s: bad shape (n %d, c %d, spatial %d)", what,
                             d->n, d->c, d->spatial);
    if (need_samples && ((long)d->n * d->spatial) == 0)
        return cnn_set_error(CNN_ERR_VALUE, "%s: batch statistics of an empty batch", what);
    return CNN_OK;
}

// The sums of a and b over the block (BN_THREADS threads), returned to every
// thread. scratch: 2*BN_WARPS doubles of shared memory; the call starts and
// ends with a barrier, so the scratch may be reused by the next call.
static __device__ __forceinline__ void block_sum2(double *a, double *b, double *scratch)
{
    double va = *a, vb = *b;
    for (int o = 16; o > 0; o >>= 1) {
        va += __shfl_xor_sync(0xffffffffu, va, o);
        vb += __shfl_xor_sync(0xffffffffu, vb, o);
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads(); // an earlier call's readers are done with scratch
    if (lane == 0) {
        scratch[warp] = va;
        scratch[BN_WARPS + warp] = vb;
    }
    __syncthreads();
    double sa = 0.0, sb = 0.0;
    for (int k = 0; k < BN_WARPS; ++k) { // every thread, in the same order
        sa += scratch[k];
        sb += scratch[BN_WARPS + k];
    }
    *a = sa;
    *b = sb;
}

// y = g ((x - mean) invstd) + shift, without FMA contraction
static __device__ __forceinline__ float bn_apply(float x, float mean, float invstd, float g,
                                                 float shift)
{
    return __fadd_rn(__fmul_rn(g, __fmul_rn(__fsub_rn(x, mean), invstd)), shift);
}

// x (n, c, sp), gamma, beta (c) -> y (n, c, sp); moving_mean, moving_var
// (c) updated; save_mean, save_invstd (c). One block per channel
// (grid-stride over channels); element e of a channel is image e / sp,
// position e % sp.
__global__ void __launch_bounds__(BN_THREADS)
    bn_train_kernel(int n, int c, int sp, float momentum, float rest, float eps,
                    const float *__restrict__ x, const float *__restrict__ gamma,
                    const float *__restrict__ beta, float *__restrict__ moving_mean,
                    float *__restrict__ moving_var, float *__restrict__ y,
                    float *__restrict__ save_mean, float *__restrict__ save_invstd)
{
    cnn_kernel_begin();
    __shared__ double scratch[2 * BN_WARPS];
    const int m = n * sp; // checked on the host to fit an int
    const double count = (double)n * (double)sp;
    for (int ch = blockIdx.x; ch < c; ch += gridDim.x) {
        double sum = 0.0, unused = 0.0;
        for (int e = threadIdx.x; e < m; e += BN_THREADS) {
            const int i = e / sp, j = e - (e / sp) * sp;
            sum += (double)x[((size_t)i * c + ch) * sp + j];
        }
        block_sum2(&sum, &unused, scratch);
        const double mean = sum / count;
        double sq = 0.0;
        for (int e = threadIdx.x; e < m; e += BN_THREADS) {
            const int i = e / sp, j = e - (e / sp) * sp;
            const double t = (double)x[((size_t)i * c + ch) * sp + j] - mean;
            sq += t * t;
        }
        block_sum2(&sq, &unused, scratch);
        const double var = sq / count;
        const float meanf = (float)mean, varf = (float)var;
        const float invstd = (float)(1.0 / sqrt(var + (double)eps));
        if (threadIdx.x == 0) {
            save_mean[ch] = meanf;
            save_invstd[ch] = invstd;
            moving_mean[ch] =
                __fadd_rn(__fmul_rn(moving_mean[ch], momentum), __fmul_rn(meanf, rest));
            moving_var[ch] =
                __fadd_rn(__fmul_rn(moving_var[ch], momentum), __fmul_rn(varf, rest));
        }
        const float g = gamma[ch], shift = beta[ch];
        for (int e = threadIdx.x; e < m; e += BN_THREADS) {
            const int i = e / sp, j = e - (e / sp) * sp;
            const size_t at = ((size_t)i * c + ch) * sp + j;
            y[at] = bn_apply(x[at], meanf, invstd, g, shift);
        }
    }
}

// x (n, c, sp), gamma, beta, moving_mean, moving_var (c) -> y (n, c, sp):
// one thread per element.
__global__ void bn_infer_kernel(size_t total, int c, int sp, float eps,
                                const float *__restrict__ x, const float *__restrict__ gamma,
                                const float *__restrict__ beta,
                                const float *__restrict__ moving_mean,
                                const float *__restrict__ moving_var, float *__restrict__ y)
{
    cnn_kernel_begin();
    CNN_GRID_LOOP(e, total) {
        const int ch = (int)((e / (size_t)sp) % (size_t)c);
        const float invstd = 1.0f / __fsqrt_rn(__fadd_rn(moving_var[ch], eps));
        y[e] = bn_apply(x[e], moving_mean[ch], invstd, gamma[ch], beta[ch]);
    }
}

// x, dy (n, c, sp), gamma, save_mean, save_invstd (c) -> dx (n, c, sp),
// dgamma, dbeta (c) (either may be NULL). One block per channel.
__global__ void __launch_bounds__(BN_THREADS)
    bn_backward_kernel(int n, int c, int sp, const float *x, const float *dy,
                       const float *__restrict__ gamma, const float *__restrict__ save_mean,
                       const float *__restrict__ save_invstd, float *dx,
                       float *__restrict__ dgamma, float *__restrict__ dbeta)
{
    cnn_kernel_begin();
    __shared__ double scratch[2 * BN_WARPS];
    const int m = n * sp;
    const float count = (float)((double)n * (double)sp);
    for (int ch = blockIdx.x; ch < c; ch += gridDim.x) {
        const float meanf = save_mean[ch], invstd = save_invstd[ch];
        const double mean = (double)meanf;
        double sdy = 0.0, sdyx = 0.0;
        for (int e = threadIdx.x; e < m; e += BN_THREADS) {
            const int i = e / sp, j = e - (e / sp) * sp;
            const size_t at = ((size_t)i * c + ch) * sp + j;
            const double g = (double)dy[at];
            sdy += g;
            sdyx += g * ((double)x[at] - mean);
        }
        // its barriers also order every read of dy above before the writes
        // of dx below, should the caller pass dx == dy
        block_sum2(&sdy, &sdyx, scratch);
        const float db = (float)sdy;
        const float dg = (float)(sdyx * (double)invstd);
        if (threadIdx.x == 0) {
            if (dbeta) dbeta[ch] = db;
            if (dgamma) dgamma[ch] = dg;
        }
        const float k = __fdiv_rn(__fmul_rn(gamma[ch], invstd), count);
        for (int e = threadIdx.x; e < m; e += BN_THREADS) {
            const int i = e / sp, j = e - (e / sp) * sp;
            const size_t at = ((size_t)i * c + ch) * sp + j;
            const float xhat = __fmul_rn(__fsub_rn(x[at], meanf), invstd);
            dx[at] = __fmul_rn(k, __fsub_rn(__fsub_rn(__fmul_rn(count, dy[at]), db),
                                            __fmul_rn(xhat, dg)));
        }
    }
}

static cnn_status check_samples(const char *what, const cnn_bn_desc *d)
{
    if ((size_t)d->n * (size_t)d->spatial > 0x7fffffffull)
        return cnn_set_error(CNN_ERR_VALUE, "%s: %d x %d samples per channel are too many", what,
                             d->n, d->spatial);
    return CNN_OK;
}

// x (n, c, spatial), gamma, beta (c) -> y like x; updates moving_mean,
// moving_var (c); save_mean, save_invstd (c) for the backward.
cnn_status cuda_batchnorm_forward_train(cnn_ctx *ctx, const cnn_bn_desc *d, const float *x,
                                        const float *gamma, const float *beta,
                                        float *moving_mean, float *moving_var, float *y,
                                        float *save_mean, float *save_invstd)
{
    CNN_TRY(check_desc("batchnorm_forward_train", d, 1));
    CNN_TRY(check_samples("batchnorm_forward_train", d));
    const float rest = 1.0f - d->momentum;
    const unsigned blocks = cnn_blocks((size_t)d->c, 1);
    bn_train_kernel<<<blocks, BN_THREADS, 0, cnn_stream(ctx)>>>(
        d->n, d->c, d->spatial, d->momentum, rest, d->epsilon, x, gamma, beta, moving_mean,
        moving_var, y, save_mean, save_invstd);
    CNN_CUDA_LAUNCHED("batchnorm_forward_train");
    return CNN_OK;
}

// x (n, c, spatial), gamma, beta, moving_mean, moving_var (c) -> y like x
cnn_status cuda_batchnorm_forward_infer(cnn_ctx *ctx, const cnn_bn_desc *d, const float *x,
                                        const float *gamma, const float *beta,
                                        const float *moving_mean, const float *moving_var,
                                        float *y)
{
    CNN_TRY(check_desc("batchnorm_forward_infer", d, 0));
    const size_t total = (size_t)d->n * (size_t)d->c * (size_t)d->spatial;
    if (total == 0) return CNN_OK;
    bn_infer_kernel<<<cnn_blocks(total, CNN_THREADS), CNN_THREADS, 0, cnn_stream(ctx)>>>(
        total, d->c, d->spatial, d->epsilon, x, gamma, beta, moving_mean, moving_var, y);
    CNN_CUDA_LAUNCHED("batchnorm_forward_infer");
    return CNN_OK;
}

// x, dy (n, c, spatial), gamma, save_mean, save_invstd (c) -> dx like x,
// dgamma, dbeta (c) (overwritten; either may be NULL). With M = n*spatial and
// xhat = (x - mean) invstd:
//   dbeta = sum dy, dgamma = sum dy xhat,
//   dx = gamma invstd / M (M dy - dbeta - xhat dgamma).
cnn_status cuda_batchnorm_backward(cnn_ctx *ctx, const cnn_bn_desc *d, const float *x,
                                   const float *dy, const float *gamma, const float *save_mean,
                                   const float *save_invstd, float *dx, float *dgamma,
                                   float *dbeta)
{
    CNN_TRY(check_desc("batchnorm_backward", d, 1));
    CNN_TRY(check_samples("batchnorm_backward", d));
    const unsigned blocks = cnn_blocks((size_t)d->c, 1);
    bn_backward_kernel<<<blocks, BN_THREADS, 0, cnn_stream(ctx)>>>(
        d->n, d->c, d->spatial, x, dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta);
    CNN_CUDA_LAUNCHED("batchnorm_backward");
    return CNN_OK;
}
