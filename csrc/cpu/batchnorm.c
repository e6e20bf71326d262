/* batchnorm.c: batch normalization for the cpu engine over x (n, c, spatial),
 * per channel c; channel ch of image i is the contiguous run
 * x[(i*c + ch)*spatial, +spatial). Statistics are accumulated in double. */
#include <math.h>

#include "cpu.h"

/* sum (x - mean)^2 */
static double sum_sq_dev(const float *restrict x, size_t len, double mean)
{
    double lane[4] = {0.0, 0.0, 0.0, 0.0};
    size_t j = 0;
    for (; j + 4 <= len; j += 4)
        for (int l = 0; l < 4; ++l) {
            const double t = (double)x[j + l] - mean;
            lane[l] += t * t;
        }
    for (; j < len; ++j) {
        const double t = (double)x[j] - mean;
        lane[0] += t * t;
    }
    return (lane[0] + lane[1]) + (lane[2] + lane[3]);
}

/* sum dy * (x - mean) */
static double sum_dy_dev(const float *restrict dy, const float *restrict x, size_t len,
                         double mean)
{
    double lane[4] = {0.0, 0.0, 0.0, 0.0};
    size_t j = 0;
    for (; j + 4 <= len; j += 4)
        for (int l = 0; l < 4; ++l) lane[l] += (double)dy[j + l] * ((double)x[j + l] - mean);
    for (; j < len; ++j) lane[0] += (double)dy[j] * ((double)x[j] - mean);
    return (lane[0] + lane[1]) + (lane[2] + lane[3]);
}

static cnn_status check_desc(const char *what, const cnn_bn_desc *d, int need_samples)
{
    if (d->n < 0 || d->c < 1 || d->spatial < 0)
        return cnn_set_error(CNN_ERR_VALUE, "%s: bad shape (n %d, c %d, spatial %d)", what,
                             d->n, d->c, d->spatial);
    if (need_samples && ((long)d->n * d->spatial) == 0)
        return cnn_set_error(CNN_ERR_VALUE, "%s: batch statistics of an empty batch", what);
    return CNN_OK;
}

/* x (n, c, spatial), gamma, beta (c) -> y like x; updates moving_mean,
 * moving_var (c); save_mean, save_invstd (c) for the backward. */
cnn_status cpu_batchnorm_forward_train(cnn_ctx *ctx, const cnn_bn_desc *d,
                                       const float *restrict x, const float *restrict gamma,
                                       const float *restrict beta, float *restrict moving_mean,
                                       float *restrict moving_var, float *restrict y,
                                       float *restrict save_mean, float *restrict save_invstd)
{
    (void)ctx;
    CNN_TRY(check_desc("batchnorm_forward_train", d, 1));
    const int n = d->n, c = d->c;
    const size_t sp = (size_t)d->spatial;
    const double count = (double)n * (double)sp;
    const float momentum = d->momentum, rest = 1.0f - d->momentum;
    for (int ch = 0; ch < c; ++ch) {
        double sum = 0.0;
        for (int i = 0; i < n; ++i) sum += cnn_cpu_sum(x + ((size_t)i * c + ch) * sp, sp);
        const double mean = sum / count;
        double sq = 0.0;
        for (int i = 0; i < n; ++i) sq += sum_sq_dev(x + ((size_t)i * c + ch) * sp, sp, mean);
        const double var = sq / count;
        const float meanf = (float)mean, varf = (float)var;
        const float invstd = (float)(1.0 / sqrt(var + (double)d->epsilon));
        save_mean[ch] = meanf;
        save_invstd[ch] = invstd;
        moving_mean[ch] = moving_mean[ch] * momentum + meanf * rest;
        moving_var[ch] = moving_var[ch] * momentum + varf * rest;
        const float g = gamma[ch], shift = beta[ch];
        for (int i = 0; i < n; ++i) {
            const float *restrict xi = x + ((size_t)i * c + ch) * sp;
            float *restrict yi = y + ((size_t)i * c + ch) * sp;
            for (size_t j = 0; j < sp; ++j) yi[j] = g * ((xi[j] - meanf) * invstd) + shift;
        }
    }
    return CNN_OK;
}

/* x (n, c, spatial), gamma, beta, moving_mean, moving_var (c) -> y like x */
cnn_status cpu_batchnorm_forward_infer(cnn_ctx *ctx, const cnn_bn_desc *d,
                                       const float *restrict x, const float *restrict gamma,
                                       const float *restrict beta,
                                       const float *restrict moving_mean,
                                       const float *restrict moving_var, float *restrict y)
{
    (void)ctx;
    CNN_TRY(check_desc("batchnorm_forward_infer", d, 0));
    const int n = d->n, c = d->c;
    const size_t sp = (size_t)d->spatial;
    for (int ch = 0; ch < c; ++ch) {
        const float meanf = moving_mean[ch];
        const float invstd = 1.0f / sqrtf(moving_var[ch] + d->epsilon);
        const float g = gamma[ch], shift = beta[ch];
        for (int i = 0; i < n; ++i) {
            const float *restrict xi = x + ((size_t)i * c + ch) * sp;
            float *restrict yi = y + ((size_t)i * c + ch) * sp;
            for (size_t j = 0; j < sp; ++j) yi[j] = g * ((xi[j] - meanf) * invstd) + shift;
        }
    }
    return CNN_OK;
}

/* x, dy (n, c, spatial), gamma, save_mean, save_invstd (c) -> dx like x,
 * dgamma, dbeta (c) (overwritten; either may be NULL). With M = n*spatial and
 * xhat = (x - mean) invstd:
 *   dbeta = sum dy, dgamma = sum dy xhat,
 *   dx = gamma invstd / M (M dy - dbeta - xhat dgamma). */
cnn_status cpu_batchnorm_backward(cnn_ctx *ctx, const cnn_bn_desc *d, const float *restrict x,
                                  const float *restrict dy, const float *restrict gamma,
                                  const float *restrict save_mean,
                                  const float *restrict save_invstd, float *restrict dx,
                                  float *restrict dgamma, float *restrict dbeta)
{
    (void)ctx;
    CNN_TRY(check_desc("batchnorm_backward", d, 1));
    const int n = d->n, c = d->c;
    const size_t sp = (size_t)d->spatial;
    const float count = (float)((double)n * (double)sp);
    for (int ch = 0; ch < c; ++ch) {
        const float meanf = save_mean[ch], invstd = save_invstd[ch];
        double sdy = 0.0, sdyx = 0.0;
        for (int i = 0; i < n; ++i) {
            const size_t at = ((size_t)i * c + ch) * sp;
            sdy += cnn_cpu_sum(dy + at, sp);
            sdyx += sum_dy_dev(dy + at, x + at, sp, (double)meanf);
        }
        const float db = (float)sdy;
        const float dg = (float)(sdyx * (double)invstd);
        if (dbeta) dbeta[ch] = db;
        if (dgamma) dgamma[ch] = dg;
        const float k = gamma[ch] * invstd / count;
        for (int i = 0; i < n; ++i) {
            const size_t at = ((size_t)i * c + ch) * sp;
            const float *restrict xi = x + at;
            const float *restrict gi = dy + at;
            float *restrict dxi = dx + at;
            for (size_t j = 0; j < sp; ++j) {
                const float xhat = (xi[j] - meanf) * invstd;
                dxi[j] = k * (count * gi[j] - db - xhat * dg);
            }
        }
    }
    return CNN_OK;
}
