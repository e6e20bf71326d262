/* prelu.c: PReLU for the cpu and omp engines (cnn.h cnn_prelu_desc):
 * y = x where x > 0, else alpha x (Keras's relu(x) - alpha relu(-x)); the
 * backward dx = dy where x > 0, alpha dy where x < 0, 0 at 0, and dalpha the
 * sum of dy x where x < 0 over the batch and the shared axes, each alpha's
 * in a fixed order (batch, then channels, rows, columns) in double. The omp
 * engine cuts the planes (forward, dx) and the alphas (dalpha) into ranges:
 * the same bits for any thread count. */
#include "cpu.h"

typedef struct prelu_job {
    cnn_prelu_desc d;
    const float *x, *alpha, *dy;
    float *out;
} prelu_job;

/* alpha's index of element (ch, r, s) */
static inline long alpha_at(const cnn_prelu_desc *d, int ch, int r, int s)
{
    return ((long)(d->ac == 1 ? 0 : ch) * d->ah + (d->ah == 1 ? 0 : r)) * d->aw +
           (d->aw == 1 ? 0 : s);
}

/* planes [lo, hi) of (n * c): y, or dx when dy is given */
static void planes_range(void *arg, long lo, long hi, int slot)
{
    (void)slot;
    const prelu_job *j = arg;
    const cnn_prelu_desc *d = &j->d;
    const long hw = (long)d->h * d->w;
    for (long p = lo; p < hi; ++p) {
        const int ch = (int)(p % d->c);
        const float *x = j->x + p * hw;
        float *o = j->out + p * hw;
        const float *g = j->dy ? j->dy + p * hw : NULL;
        for (int r = 0; r < d->h; ++r)
            for (int s = 0; s < d->w; ++s) {
                const long i = (long)r * d->w + s;
                const float a = j->alpha[alpha_at(d, ch, r, s)];
                if (g)
                    o[i] = x[i] > 0.0f ? g[i] : x[i] < 0.0f ? a * g[i] : 0.0f;
                else
                    o[i] = x[i] > 0.0f ? x[i] : a * x[i];
            }
    }
}

/* alphas [lo, hi) of dalpha */
static void dalpha_range(void *arg, long lo, long hi, int slot)
{
    (void)slot;
    const prelu_job *j = arg;
    const cnn_prelu_desc *d = &j->d;
    for (long k = lo; k < hi; ++k) {
        const int sa = (int)(k % d->aw), ra = (int)(k / d->aw % d->ah),
                  ca = (int)(k / ((long)d->aw * d->ah));
        const int c0 = d->ac == 1 ? 0 : ca, c1 = d->ac == 1 ? d->c : ca + 1;
        const int r0 = d->ah == 1 ? 0 : ra, r1 = d->ah == 1 ? d->h : ra + 1;
        const int s0 = d->aw == 1 ? 0 : sa, s1 = d->aw == 1 ? d->w : sa + 1;
        double sum = 0.0;
        for (int b = 0; b < d->n; ++b)
            for (int ch = c0; ch < c1; ++ch)
                for (int r = r0; r < r1; ++r)
                    for (int s = s0; s < s1; ++s) {
                        const long i = (((long)b * d->c + ch) * d->h + r) * d->w + s;
                        if (j->x[i] < 0.0f) sum += (double)j->dy[i] * j->x[i];
                    }
        j->out[k] = (float)sum;
    }
}

static cnn_status check(const char *what, const cnn_prelu_desc *d)
{
    if (d->n < 0 || d->c < 1 || d->h < 1 || d->w < 1 || (d->ac != 1 && d->ac != d->c) ||
        (d->ah != 1 && d->ah != d->h) || (d->aw != 1 && d->aw != d->w))
        return cnn_set_error(CNN_ERR_VALUE,
                             "%s: x (%d, %d, %d, %d) and alpha (%d, %d, %d) do not match", what,
                             d->n, d->c, d->h, d->w, d->ac, d->ah, d->aw);
    return CNN_OK;
}

cnn_status cpu_prelu_forward(cnn_ctx *ctx, const cnn_prelu_desc *d, const float *x,
                             const float *alpha, float *y)
{
    CNN_TRY(check("prelu_forward", d));
    const long planes = (long)d->n * d->c;
    prelu_job j = {*d, x, alpha, NULL, y};
    cnn_cpu_parallel(ctx, cnn_cpu_parts(ctx, planes, (double)d->h * d->w, CNN_GRAIN_ELEMENTS),
                     planes, planes_range, &j);
    return CNN_OK;
}

cnn_status cpu_prelu_backward(cnn_ctx *ctx, const cnn_prelu_desc *d, const float *x,
                              const float *alpha, const float *dy, float *dx, float *dalpha)
{
    CNN_TRY(check("prelu_backward", d));
    /* dalpha first: dx may be dy */
    const long alphas = (long)d->ac * d->ah * d->aw;
    const double per = (double)d->n * d->c * d->h * d->w / (double)alphas;
    prelu_job ja = {*d, x, alpha, dy, dalpha};
    cnn_cpu_parallel(ctx, cnn_cpu_parts(ctx, alphas, per, CNN_GRAIN_ELEMENTS), alphas,
                     dalpha_range, &ja);
    if (dx) {
        const long planes = (long)d->n * d->c;
        prelu_job j = {*d, x, alpha, dy, dx};
        cnn_cpu_parallel(ctx,
                         cnn_cpu_parts(ctx, planes, (double)d->h * d->w, CNN_GRAIN_ELEMENTS),
                         planes, planes_range, &j);
    }
    return CNN_OK;
}
