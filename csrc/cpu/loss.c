/* loss.c: losses, accuracy and the loss gradient for the cpu and omp
 * engines, as docs/semantics.md. Serial on both: a batch's loss is a few
 * hundred values, less work than handing it to threads, and its sums stay in
 * one order. y (n, k) holds logits or probabilities; per-sample
 * losses and the correct count are accumulated in double and added to the
 * float sums at the end. The gradient is that of the mean loss over scale_n
 * samples. dy may be y itself (every row is reduced before it is written). */
#include <math.h>

#include "cpu.h"

static const float prob_lo = CNN_PROB_EPS;
static const float prob_hi = 1.0f - CNN_PROB_EPS;

static inline float clipf(float v)
{
    return v < prob_lo ? prob_lo : (v > prob_hi ? prob_hi : v);
}

/* Not clipped: clip(v) == v, so the gradient flows. */
static inline int unclipped(float v)
{
    return v >= prob_lo && v <= prob_hi;
}

static inline float sigmoidf(float v)
{
    if (v >= 0.0f) return 1.0f / (1.0f + expf(-v));
    const float e = expf(v);
    return e / (1.0f + e);
}

/* Index of the first maximum of v[0, k). */
static int argmax_row(const float *v, int k)
{
    int best = 0;
    for (int j = 1; j < k; ++j)
        if (v[j] > v[best]) best = j;
    return best;
}

static double sum_row(const float *v, int k)
{
    double s = 0.0;
    for (int j = 0; j < k; ++j) s += v[j];
    return s;
}

/* Softmax pieces of a logit row: its max m (at v[*at]) and sum exp(v - m). */
static double exp_sum(const float *v, int k, float *m, int *at)
{
    const int a = argmax_row(v, k);
    const float mx = v[a];
    double s = 0.0;
    for (int j = 0; j < k; ++j) s += expf(v[j] - mx);
    *m = mx;
    *at = a;
    return s;
}

/* Sparse or categorical CE of one row. t is the target row, or NULL for the
 * one-hot of label. Returns the loss; writes the gradient row (scaled by
 * 1/scale) when g is not NULL. */
static double categorical_row(int from_logits, int k, const float *z, const float *t, int label,
                              float scale, float *g, double *correct)
{
    double loss = 0.0;
    if (from_logits) {
        float m;
        int at;
        const double s = exp_sum(z, k, &m, &at);
        const double log_s = log(s);
        const int want = t ? argmax_row(t, k) : label;
        if (at == want) *correct += 1.0;
        if (t) {
            /* sum_j t_j (lse - z_j) = sum(t) lse - sum(t z) */
            for (int j = 0; j < k; ++j) loss += (double)t[j] * (log_s + ((double)m - z[j]));
        } else {
            loss = log_s + ((double)m - z[label]);
        }
        if (g) {
            const float sf = (float)s;
            const float st = t ? (float)sum_row(t, k) : 1.0f;
            for (int j = 0; j < k; ++j) {
                const float p = expf(z[j] - m) / sf;
                const float tj = t ? t[j] : (j == label ? 1.0f : 0.0f);
                g[j] = (p * st - tj) / scale;
            }
        }
        return loss;
    }
    /* probabilities: q = y / sum(y), clipped inside the log */
    const int want = t ? argmax_row(t, k) : label;
    if (argmax_row(z, k) == want) *correct += 1.0;
    const float sy = (float)sum_row(z, k);
    double sgq = 0.0; /* sum_j g_j q_j with g_j = -t_j / q_j where q_j is unclipped */
    if (t) {
        for (int j = 0; j < k; ++j) {
            const float q = z[j] / sy;
            loss -= (double)t[j] * (double)logf(clipf(q));
            if (unclipped(q)) sgq += (double)((-t[j] / q) * q);
        }
    } else {
        const float q = z[label] / sy;
        loss = -(double)logf(clipf(q));
        if (unclipped(q)) sgq = (double)((-1.0f / q) * q);
    }
    if (g) {
        const float sgqf = (float)sgq;
        for (int j = 0; j < k; ++j) {
            const float q = z[j] / sy;
            const float tj = t ? t[j] : (j == label ? 1.0f : 0.0f);
            const float gj = (unclipped(q) && tj != 0.0f) ? -tj / q : 0.0f;
            g[j] = ((gj - sgqf) / sy) / scale;
        }
    }
    return loss;
}

/* Binary CE of one row: the mean over k of the elementwise losses; the
 * loss and gradient times the sample's weight w (1: unweighted). */
static double binary_row(int from_logits, int k, const float *z, const float *t, float scale_nk,
                         float w, float *g, double *correct)
{
    double loss = 0.0;
    int hits = 0;
    const float thr = from_logits ? 0.0f : 0.5f;
    for (int j = 0; j < k; ++j) {
        const float v = z[j], tj = t[j];
        hits += (v > thr) == (tj > 0.5f);
        if (from_logits) {
            const float pos = v > 0.0f ? v : 0.0f;
            loss += (double)(pos - v * tj + log1pf(expf(-fabsf(v))));
            if (g) g[j] = (w * (sigmoidf(v) - tj)) / scale_nk;
        } else {
            const float p = clipf(v);
            loss -= (double)(tj * logf(p) + (1.0f - tj) * logf(1.0f - p));
            if (g)
                g[j] = unclipped(v) ? (w * (-tj / p + (1.0f - tj) / (1.0f - p))) / scale_nk
                                    : 0.0f;
        }
    }
    *correct += (double)hits / (double)k;
    return (double)w * (loss / (double)k);
}

/* y (n, k), labels (n) for sparse or targets (n, k) otherwise -> sums[0] +=
 * the summed loss, sums[1] += the correct count; dy (n, k) or NULL = the
 * gradient of the mean loss over scale_n samples. */
cnn_status cpu_loss_forward_backward(cnn_ctx *ctx, const cnn_loss_desc *d, const float *y,
                                     const int32_t *labels, const float *targets, int scale_n,
                                     float *dy, float *sums)
{
    (void)ctx;
    const int n = d->n, k = d->k, kind = d->kind, logits = d->from_logits != 0;
    if (kind != CNN_LOSS_SPARSE_CE && kind != CNN_LOSS_CATEGORICAL_CE &&
        kind != CNN_LOSS_BINARY_CE)
        return cnn_set_error(CNN_ERR_VALUE, "loss: unknown loss kind %d", kind);
    if (n < 0 || k < 1)
        return cnn_set_error(CNN_ERR_VALUE, "loss: bad shape (n %d, k %d)", n, k);
    if (d->weighted && kind != CNN_LOSS_BINARY_CE)
        return cnn_set_error(CNN_ERR_VALUE, "loss: weighted rows for the binary cross-entropy "
                             "only, got loss kind %d", kind);
    if (dy && scale_n < 1)
        return cnn_set_error(CNN_ERR_VALUE, "loss: scale_n %d must be positive", scale_n);
    if (!sums) return cnn_set_error(CNN_ERR_VALUE, "loss: no sums buffer");
    if (kind == CNN_LOSS_SPARSE_CE) {
        if (!labels) return cnn_set_error(CNN_ERR_VALUE, "loss: sparse loss without labels");
        for (int i = 0; i < n; ++i)
            if (labels[i] < 0 || labels[i] >= k)
                return cnn_set_error(CNN_ERR_VALUE, "loss: label %d of sample %d not in [0, %d)",
                                     (int)labels[i], i, k);
    } else if (!targets) {
        return cnn_set_error(CNN_ERR_VALUE, "loss: loss kind %d without targets", kind);
    }

    const float scale = (float)scale_n;
    const float scale_nk = (float)scale_n * (float)k;
    double loss = 0.0, correct = 0.0;
    for (int i = 0; i < n; ++i) {
        const float *z = y + (size_t)i * k;
        float *g = dy ? dy + (size_t)i * k : NULL;
        switch (kind) {
        case CNN_LOSS_SPARSE_CE:
            loss += categorical_row(logits, k, z, NULL, labels[i], scale, g, &correct);
            break;
        case CNN_LOSS_CATEGORICAL_CE:
            loss += categorical_row(logits, k, z, targets + (size_t)i * k, 0, scale, g, &correct);
            break;
        default: { /* weighted: rows of k targets and the weight */
            const float *t = targets + (size_t)i * (k + (d->weighted != 0));
            loss += binary_row(logits, k, z, t, scale_nk, d->weighted ? t[k] : 1.0f, g, &correct);
            break;
        }
        }
    }
    if (d->positions > 1) { /* a sample's rows: their means */
        loss /= (double)d->positions;
        correct /= (double)d->positions;
    }
    sums[0] += (float)loss;
    sums[1] += (float)correct;
    return CNN_OK;
}
