/* regression_math.h: the elementwise terms of the regression losses
 * (cnn.h's CNN_LOSS_MSE on) and their derivatives with respect to the
 * prediction y, one value at a time, shared by the cpu and omp engines
 * (csrc/cpu/loss_regression.c) and the GPU engines (cuda/loss_regression.cu),
 * so that every engine computes the same float32 expressions. A sample's
 * loss is the mean over its k outputs of the term; they are Keras 3's
 * (keras/src/losses/losses.py, on the jax backend), t the target:
 *
 *   mean_squared_error   (y - t)^2                          d: 2 (y - t)
 *   mean_absolute_error  |t - y|                            d: y > t ? 1 : -1
 *   huber                e = y - t; |e| <= delta: e^2 / 2,  d: e, or delta sign(e)
 *                        else delta |e| - delta^2 / 2
 *   mean_squared_log...  (log(max(y, eps) + 1)              d: 2 (a - b) m / (max(y, eps) + 1),
 *                         - log(max(t, eps) + 1))^2            m = 1, 1/2 at y == eps, 0 below
 *   log_cosh             x + softplus(-2 x) - log 2, x = y - t   d: tanh(x)
 *   mean_absolute_perc.. 100 |(t - y) / max(|t|, eps)|       d: 100 (y > t ? 1 : -1)
 *                                                                / max(|t|, eps)
 *
 * eps = 1e-7 (Keras's backend.epsilon()). At a kink the derivative is
 * jax's: |x|' = 1 at x = 0, max(x, c)' = 1/2 at x = c. */
#ifndef CNN_REGRESSION_MATH_H
#define CNN_REGRESSION_MATH_H

#include <math.h>

#include "cnn.h"

#define CNN_KERAS_EPSILON 1e-7f

/* The arguments of a regression_loss_forward_backward call, checked alike
 * by every engine (the host side of the call). */
static inline cnn_status cnn_regression_loss_check(const cnn_loss_desc *d, const float *targets,
                                                   int scale_n, const float *dy,
                                                   const float *sums)
{
    const int n = d->n, k = d->k, kind = d->kind;
    if (!CNN_LOSS_IS_REGRESSION(kind))
        return cnn_set_error(CNN_ERR_VALUE, "regression loss: unknown loss kind %d", kind);
    if (n < 0 || k < 1)
        return cnn_set_error(CNN_ERR_VALUE, "regression loss: bad shape (n %d, k %d)", n, k);
    if (kind == CNN_LOSS_HUBER && !(d->delta > 0.0f && d->delta < INFINITY))
        return cnn_set_error(CNN_ERR_VALUE, "huber loss: delta must be finite and > 0, got %g",
                             (double)d->delta);
    if (dy && scale_n < 1)
        return cnn_set_error(CNN_ERR_VALUE, "regression loss: scale_n %d must be positive",
                             scale_n);
    if (!sums) return cnn_set_error(CNN_ERR_VALUE, "regression loss: no sums buffer");
    if (!targets) return cnn_set_error(CNN_ERR_VALUE, "regression loss: no targets");
    return CNN_OK;
}
#define CNN_LOG2F 0.69314718055994531f

/* The term of prediction y against target t; *d = its derivative in y. */
static inline CNN_HD float cnn_regression_term(int kind, float delta, float y, float t, float *d)
{
    switch (kind) {
    case CNN_LOSS_MSE: {
        const float e = y - t;
        *d = 2.0f * e;
        return e * e;
    }
    case CNN_LOSS_MAE:
        *d = y > t ? 1.0f : -1.0f;
        return fabsf(t - y);
    case CNN_LOSS_HUBER: {
        const float e = y - t, a = fabsf(e);
        if (a <= delta) {
            *d = e;
            return 0.5f * (e * e);
        }
        *d = e > 0.0f ? delta : -delta;
        return delta * a - 0.5f * (delta * delta);
    }
    case CNN_LOSS_MSLE: {
        const float ym = fmaxf(y, CNN_KERAS_EPSILON);
        const float a = logf(ym + 1.0f), b = logf(fmaxf(t, CNN_KERAS_EPSILON) + 1.0f);
        const float m = y > CNN_KERAS_EPSILON ? 1.0f : (y == CNN_KERAS_EPSILON ? 0.5f : 0.0f);
        const float r = a - b;
        *d = (2.0f * r) * m / (ym + 1.0f);
        return r * r;
    }
    case CNN_LOSS_LOG_COSH: {
        const float x = y - t, z = -2.0f * x;
        *d = tanhf(x);
        return (x + (fmaxf(z, 0.0f) + log1pf(expf(-fabsf(z))))) - CNN_LOG2F;
    }
    default: { /* CNN_LOSS_MAPE */
        const float den = fmaxf(fabsf(t), CNN_KERAS_EPSILON);
        *d = (y > t ? 100.0f : -100.0f) / den;
        return 100.0f * fabsf((t - y) / den);
    }
    }
}

#endif
