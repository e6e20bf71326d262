/* loss_regression.c: the regression losses (mean squared error, mean
 * absolute error, Huber, mean squared logarithmic error, log-cosh, mean
 * absolute percentage error), their accuracy count and gradient for the cpu
 * and omp engines, as docs/semantics.md. Serial on both, as loss.c: each
 * row's terms (csrc/regression_math.h) are summed in double, the row's loss
 * is that sum over k, the rows' losses and correct counts are summed in
 * double and added to the float sums at the end. The gradient is that of
 * the mean loss over scale_n samples: term' / (scale_n k); with weighted
 * rows (cnn_loss_desc.weighted) a sample's loss and gradient are times the
 * weight after its k targets. dy may be y
 * itself (each element is read before it is written). */
#include "../regression_math.h"
#include "cpu.h"

/* Index of the first maximum of v[0, k). */
static int first_max(const float *v, int k)
{
    int best = 0;
    for (int j = 1; j < k; ++j)
        if (v[j] > v[best]) best = j;
    return best;
}

cnn_status cpu_regression_loss_forward_backward(cnn_ctx *ctx, const cnn_loss_desc *d,
                                                const float *y, const int32_t *labels,
                                                const float *targets, int scale_n, float *dy,
                                                float *sums)
{
    (void)ctx;
    (void)labels;
    const int n = d->n, k = d->k, kind = d->kind;
    CNN_TRY(cnn_regression_loss_check(d, targets, scale_n, dy, sums));

    const float scale_nk = (float)scale_n * (float)k;
    double loss = 0.0, correct = 0.0;
    for (int i = 0; i < n; ++i) {
        const float *z = y + (size_t)i * k;
        const float *t = targets + (size_t)i * (k + (d->weighted != 0)); /* then w */
        const float w = d->weighted ? t[k] : 1.0f;
        float *g = dy ? dy + (size_t)i * k : NULL;
        if (k == 1)
            correct += (z[0] > 0.5f ? 1.0f : 0.0f) == t[0];
        else
            correct += first_max(z, k) == first_max(t, k);
        double row = 0.0;
        for (int j = 0; j < k; ++j) {
            float dj;
            row += (double)cnn_regression_term(kind, d->delta, z[j], t[j], &dj);
            if (g) g[j] = (w * dj) / scale_nk;
        }
        loss += (double)w * (row / (double)k);
    }
    if (d->positions > 1) { /* a sample's rows: their means */
        loss /= (double)d->positions;
        correct /= (double)d->positions;
    }
    sums[0] += (float)loss;
    sums[1] += (float)correct;
    return CNN_OK;
}
