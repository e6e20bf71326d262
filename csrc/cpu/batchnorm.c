/* batchnorm.c: batch normalization for the cpu and omp engines over
 * x (n, c, spatial), per channel c; channel ch of image i is the contiguous
 * run x[(i*c + ch)*spatial, +spatial). Statistics are accumulated in double,
 * image after image. Channels are independent: the omp engine cuts them into
 * ranges, one per thread, each computed exactly as by one thread. */
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

typedef struct bn_job {
    const cnn_bn_desc *d;
    const float *x, *dy, *gamma, *beta, *mean_in, *var_in, *save_mean_in, *save_invstd_in;
    float *y, *moving_mean, *moving_var, *save_mean, *save_invstd, *dx, *dgamma, *dbeta;
} bn_job;

static void forward_train_range(void *arg, long lo, long hi, int slot)
{
    (void)slot;
    const bn_job *j = arg;
    const int n = j->d->n, c = j->d->c;
    const size_t sp = (size_t)j->d->spatial;
    const double count = (double)n * (double)sp;
    const float momentum = j->d->momentum, rest = 1.0f - j->d->momentum;
    const float *x = j->x;
    for (long ch = lo; ch < hi; ++ch) {
        double sum = 0.0;
        for (int i = 0; i < n; ++i) sum += cnn_cpu_sum(x + ((size_t)i * c + ch) * sp, sp);
        const double mean = sum / count;
        double sq = 0.0;
        for (int i = 0; i < n; ++i) sq += sum_sq_dev(x + ((size_t)i * c + ch) * sp, sp, mean);
        const double var = sq / count;
        const float meanf = (float)mean, varf = (float)var;
        const float invstd = (float)(1.0 / sqrt(var + (double)j->d->epsilon));
        j->save_mean[ch] = meanf;
        j->save_invstd[ch] = invstd;
        j->moving_mean[ch] = j->moving_mean[ch] * momentum + meanf * rest;
        j->moving_var[ch] = j->moving_var[ch] * momentum + varf * rest;
        const float g = j->gamma[ch], shift = j->beta[ch];
        for (int i = 0; i < n; ++i) {
            const float *restrict xi = x + ((size_t)i * c + ch) * sp;
            float *restrict yi = j->y + ((size_t)i * c + ch) * sp;
            for (size_t q = 0; q < sp; ++q) yi[q] = g * ((xi[q] - meanf) * invstd) + shift;
        }
    }
}

static int bn_parts(cnn_ctx *ctx, const cnn_bn_desc *d, double passes)
{
    return cnn_cpu_parts(ctx, d->c, passes * (double)d->n * d->spatial, CNN_GRAIN_ELEMENTS);
}

/* x (n, c, spatial), gamma, beta (c) -> y like x; updates moving_mean,
 * moving_var (c); save_mean, save_invstd (c) for the backward. */
cnn_status cpu_batchnorm_forward_train(cnn_ctx *ctx, const cnn_bn_desc *d, const float *x,
                                       const float *gamma, const float *beta,
                                       float *moving_mean, float *moving_var, float *y,
                                       float *save_mean, float *save_invstd)
{
    CNN_TRY(check_desc("batchnorm_forward_train", d, 1));
    bn_job j = {.d = d, .x = x, .gamma = gamma, .beta = beta, .y = y,
                .moving_mean = moving_mean, .moving_var = moving_var, .save_mean = save_mean,
                .save_invstd = save_invstd};
    cnn_cpu_parallel(ctx, bn_parts(ctx, d, 3.0), d->c, forward_train_range, &j);
    return CNN_OK;
}

static void forward_infer_range(void *arg, long lo, long hi, int slot)
{
    (void)slot;
    const bn_job *j = arg;
    const int n = j->d->n, c = j->d->c;
    const size_t sp = (size_t)j->d->spatial;
    for (long ch = lo; ch < hi; ++ch) {
        const float meanf = j->mean_in[ch];
        const float invstd = 1.0f / sqrtf(j->var_in[ch] + j->d->epsilon);
        const float g = j->gamma[ch], shift = j->beta[ch];
        for (int i = 0; i < n; ++i) {
            const float *restrict xi = j->x + ((size_t)i * c + ch) * sp;
            float *restrict yi = j->y + ((size_t)i * c + ch) * sp;
            for (size_t q = 0; q < sp; ++q) yi[q] = g * ((xi[q] - meanf) * invstd) + shift;
        }
    }
}

/* x (n, c, spatial), gamma, beta, moving_mean, moving_var (c) -> y like x */
cnn_status cpu_batchnorm_forward_infer(cnn_ctx *ctx, const cnn_bn_desc *d, const float *x,
                                       const float *gamma, const float *beta,
                                       const float *moving_mean, const float *moving_var,
                                       float *y)
{
    CNN_TRY(check_desc("batchnorm_forward_infer", d, 0));
    bn_job j = {.d = d, .x = x, .gamma = gamma, .beta = beta, .mean_in = moving_mean,
                .var_in = moving_var, .y = y};
    cnn_cpu_parallel(ctx, bn_parts(ctx, d, 1.0), d->c, forward_infer_range, &j);
    return CNN_OK;
}

static void backward_range(void *arg, long lo, long hi, int slot)
{
    (void)slot;
    const bn_job *j = arg;
    const int n = j->d->n, c = j->d->c;
    const size_t sp = (size_t)j->d->spatial;
    const float count = (float)((double)n * (double)sp);
    for (long ch = lo; ch < hi; ++ch) {
        const float meanf = j->save_mean_in[ch], invstd = j->save_invstd_in[ch];
        double sdy = 0.0, sdyx = 0.0;
        for (int i = 0; i < n; ++i) {
            const size_t at = ((size_t)i * c + ch) * sp;
            sdy += cnn_cpu_sum(j->dy + at, sp);
            sdyx += sum_dy_dev(j->dy + at, j->x + at, sp, (double)meanf);
        }
        const float db = (float)sdy;
        const float dg = (float)(sdyx * (double)invstd);
        if (j->dbeta) j->dbeta[ch] = db;
        if (j->dgamma) j->dgamma[ch] = dg;
        const float k = j->gamma[ch] * invstd / count;
        for (int i = 0; i < n; ++i) {
            const size_t at = ((size_t)i * c + ch) * sp;
            const float *restrict xi = j->x + at;
            const float *restrict gi = j->dy + at;
            float *restrict dxi = j->dx + at;
            for (size_t q = 0; q < sp; ++q) {
                const float xhat = (xi[q] - meanf) * invstd;
                dxi[q] = k * (count * gi[q] - db - xhat * dg);
            }
        }
    }
}

/* x, dy (n, c, spatial), gamma, save_mean, save_invstd (c) -> dx like x,
 * dgamma, dbeta (c) (overwritten; either may be NULL). With M = n*spatial and
 * xhat = (x - mean) invstd:
 *   dbeta = sum dy, dgamma = sum dy xhat,
 *   dx = gamma invstd / M (M dy - dbeta - xhat dgamma). */
cnn_status cpu_batchnorm_backward(cnn_ctx *ctx, const cnn_bn_desc *d, const float *x,
                                  const float *dy, const float *gamma, const float *save_mean,
                                  const float *save_invstd, float *dx, float *dgamma,
                                  float *dbeta)
{
    CNN_TRY(check_desc("batchnorm_backward", d, 1));
    bn_job j = {.d = d, .x = x, .dy = dy, .gamma = gamma, .save_mean_in = save_mean,
                .save_invstd_in = save_invstd, .dx = dx, .dgamma = dgamma, .dbeta = dbeta};
    cnn_cpu_parallel(ctx, bn_parts(ctx, d, 3.0), d->c, backward_range, &j);
    return CNN_OK;
}
