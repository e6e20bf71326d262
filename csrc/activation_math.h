/* activation_math.h: the formulas of the elementwise activations from
 * CNN_ACT_ELU on (cnn.h), one value at a time, shared by the cpu and omp
 * engines (csrc/cpu/elementwise.c) and the GPU engines (cuda/elementwise.cu),
 * so that every engine computes the same expressions. They are Keras 3's
 * (keras.activations on the jax backend, jax.nn):
 *
 *   elu          x > 0 ? x : alpha expm1(x)            d: 1, alpha exp(x)
 *   selu         scale elu(x, a), a = 1.6732632423543772, scale = 1.0507009873554805
 *   gelu         x erfc(-x / sqrt 2) / 2 (the erf form)  d: Phi(x) + x phi(x)
 *   swish, silu  x sigmoid(x)                          d: s (1 + x (1 - s))
 *   softplus     max(x, 0) + log1p(exp(-|x|))          d: sigmoid(x)
 *   softsign     x / (1 + |x|)                         d: 1 / (1 + |x|)^2
 *   hard_sigmoid relu6(x + 3) / 6                      d: 1/6 where 0 < x + 3 < 6
 *   leaky_relu   x >= 0 ? x : alpha x                  d: 1 where x >= 0, else alpha
 *   relu6        min(max(x, 0), 6)                     d: 1 where 0 < x < 6
 *   exponential  exp(x)                                d: exp(x) (the output)
 *   mish         x tanh(softplus(x))                   d: t + x (1 - t^2) sigmoid(x)
 *   relu_general x > threshold ? min(x, max_value) : 0 - alpha (threshold - x)
 *                (Keras's relu(x, negative_slope, max_value, threshold) for
 *                threshold >= 0 and max_value >= 0, as the ReLU layer
 *                requires)                             d: 1 where threshold < x < max_value,
 *                                                         alpha where x < threshold, else 0
 *
 * At a kink (x exactly 0, threshold or max_value) the derivative is the
 * one written above (jax's choice where Keras calls a jax primitive). */
#ifndef CNN_ACTIVATION_MATH_H
#define CNN_ACTIVATION_MATH_H

#include <math.h>

#include "cnn.h"

#define CNN_SELU_ALPHA 1.6732632423543772f
#define CNN_SELU_SCALE 1.0507009873554805f
#define CNN_SQRT1_2 0.70710678118654752f  /* 1 / sqrt(2) */
#define CNN_INV_SQRT_2PI 0.39894228040143268f /* 1 / sqrt(2 pi) */

static inline CNN_HD float cnn_act_sigmoid(float v)
{
    if (v >= 0.0f) return 1.0f / (1.0f + expf(-v));
    const float e = expf(v);
    return e / (1.0f + e);
}

static inline CNN_HD float cnn_act_softplus(float v)
{
    return fmaxf(v, 0.0f) + log1pf(expf(-fabsf(v)));
}

/* y = f(x) */
static inline CNN_HD float cnn_act_value(const cnn_act_desc *d, float x)
{
    switch (d->act) {
    case CNN_ACT_ELU: return x > 0.0f ? x : d->alpha * expm1f(x);
    case CNN_ACT_SELU: return CNN_SELU_SCALE * (x > 0.0f ? x : CNN_SELU_ALPHA * expm1f(x));
    case CNN_ACT_GELU: return x * erfcf(-x * CNN_SQRT1_2) * 0.5f;
    case CNN_ACT_SWISH: return x * cnn_act_sigmoid(x);
    case CNN_ACT_SOFTPLUS: return cnn_act_softplus(x);
    case CNN_ACT_SOFTSIGN: return x / (1.0f + fabsf(x));
    case CNN_ACT_HARD_SIGMOID: return fminf(fmaxf(x + 3.0f, 0.0f), 6.0f) / 6.0f;
    case CNN_ACT_LEAKY_RELU: return x >= 0.0f ? x : d->alpha * x;
    case CNN_ACT_RELU6: return fminf(fmaxf(x, 0.0f), 6.0f);
    case CNN_ACT_EXPONENTIAL: return expf(x);
    case CNN_ACT_MISH: return x * tanhf(cnn_act_softplus(x));
    default: /* CNN_ACT_RELU_GENERAL */
        /* Keras's 0 - alpha relu(threshold - x) below: +0, not -0, for alpha 0 */
        return x > d->threshold ? fminf(x, d->max_value) : 0.0f - d->alpha * (d->threshold - x);
    }
}

/* dL/dx from x, y = f(x) and g = dL/dy */
static inline CNN_HD float cnn_act_grad(const cnn_act_desc *d, float x, float y, float g)
{
    switch (d->act) {
    case CNN_ACT_ELU: return x > 0.0f ? g : g * (d->alpha * expf(x));
    case CNN_ACT_SELU:
        return x > 0.0f ? g * CNN_SELU_SCALE : g * (CNN_SELU_SCALE * CNN_SELU_ALPHA * expf(x));
    case CNN_ACT_GELU:
        return g * (0.5f * erfcf(-x * CNN_SQRT1_2) + x * CNN_INV_SQRT_2PI * expf(-0.5f * x * x));
    case CNN_ACT_SWISH: {
        const float s = cnn_act_sigmoid(x);
        return g * (s * (1.0f + x * (1.0f - s)));
    }
    case CNN_ACT_SOFTPLUS: return g * cnn_act_sigmoid(x);
    case CNN_ACT_SOFTSIGN: {
        const float a = 1.0f + fabsf(x);
        return g / (a * a);
    }
    case CNN_ACT_HARD_SIGMOID: {
        const float u = x + 3.0f;
        return u > 0.0f && u < 6.0f ? g / 6.0f : 0.0f;
    }
    case CNN_ACT_LEAKY_RELU: return x >= 0.0f ? g : g * d->alpha;
    case CNN_ACT_RELU6: return x > 0.0f && x < 6.0f ? g : 0.0f;
    case CNN_ACT_EXPONENTIAL: return g * y;
    case CNN_ACT_MISH: {
        const float t = tanhf(cnn_act_softplus(x));
        return g * (t + x * (1.0f - t * t) * cnn_act_sigmoid(x));
    }
    default: /* CNN_ACT_RELU_GENERAL */
        if (x > d->threshold) return x < d->max_value ? g : 0.0f;
        return x < d->threshold ? g * d->alpha : 0.0f;
    }
}

#endif
