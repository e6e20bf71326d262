/* activation.c: elementwise activations and the row softmax for the cpu
 * engine. The backward takes the forward's output y. x and y (and dy and dx)
 * may be the same buffer. */
#include <math.h>
#include <string.h>

#include "cpu.h"

static cnn_status check_dims(const char *what, int rows, int cols)
{
    if (rows < 0 || cols < 0)
        return cnn_set_error(CNN_ERR_VALUE, "%s: negative shape (%d, %d)", what, rows, cols);
    return CNN_OK;
}

static inline float sigmoidf(float v)
{
    if (v >= 0.0f) return 1.0f / (1.0f + expf(-v));
    const float e = expf(v);
    return e / (1.0f + e);
}

/* x (rows, cols) -> y (rows, cols) */
cnn_status cpu_activation_forward(cnn_ctx *ctx, int act, int rows, int cols, const float *x,
                                  float *y)
{
    (void)ctx;
    CNN_TRY(check_dims("activation_forward", rows, cols));
    const size_t count = (size_t)rows * cols;
    switch (act) {
    case CNN_ACT_LINEAR:
        if (x != y && count) memmove(y, x, count * sizeof(float));
        return CNN_OK;
    case CNN_ACT_RELU:
        for (size_t i = 0; i < count; ++i) y[i] = x[i] < 0.0f ? 0.0f : x[i];
        return CNN_OK;
    case CNN_ACT_SIGMOID:
        for (size_t i = 0; i < count; ++i) y[i] = sigmoidf(x[i]);
        return CNN_OK;
    case CNN_ACT_TANH:
        for (size_t i = 0; i < count; ++i) y[i] = tanhf(x[i]);
        return CNN_OK;
    case CNN_ACT_SOFTMAX:
        if (cols == 0) return CNN_OK;
        for (int r = 0; r < rows; ++r) {
            const float *xr = x + (size_t)r * cols;
            float *yr = y + (size_t)r * cols;
            float m = xr[0];
            for (int j = 1; j < cols; ++j) m = xr[j] > m ? xr[j] : m;
            double sum = 0.0;
            for (int j = 0; j < cols; ++j) {
                const float e = expf(xr[j] - m);
                yr[j] = e;
                sum += e;
            }
            const float s = (float)sum;
            for (int j = 0; j < cols; ++j) yr[j] /= s;
        }
        return CNN_OK;
    default:
        return cnn_set_error(CNN_ERR_VALUE, "activation_forward: unknown activation %d", act);
    }
}

/* y (rows, cols) the forward's output, dy (rows, cols) -> dx (rows, cols) */
cnn_status cpu_activation_backward(cnn_ctx *ctx, int act, int rows, int cols, const float *y,
                                   const float *dy, float *dx)
{
    (void)ctx;
    CNN_TRY(check_dims("activation_backward", rows, cols));
    const size_t count = (size_t)rows * cols;
    switch (act) {
    case CNN_ACT_LINEAR:
        if (dy != dx && count) memmove(dx, dy, count * sizeof(float));
        return CNN_OK;
    case CNN_ACT_RELU:
        for (size_t i = 0; i < count; ++i) {
            const float g = dy[i]; /* loaded unconditionally, so the loop vectorizes */
            dx[i] = y[i] > 0.0f ? g : 0.0f;
        }
        return CNN_OK;
    case CNN_ACT_SIGMOID:
        for (size_t i = 0; i < count; ++i) dx[i] = dy[i] * (y[i] * (1.0f - y[i]));
        return CNN_OK;
    case CNN_ACT_TANH:
        for (size_t i = 0; i < count; ++i) dx[i] = dy[i] * (1.0f - y[i] * y[i]);
        return CNN_OK;
    case CNN_ACT_SOFTMAX:
        /* dx_j = y_j (dy_j - sum_k dy_k y_k) */
        for (int r = 0; r < rows; ++r) {
            const float *yr = y + (size_t)r * cols;
            const float *gr = dy + (size_t)r * cols;
            float *dr = dx + (size_t)r * cols;
            double dot = 0.0;
            for (int j = 0; j < cols; ++j) dot += (double)gr[j] * yr[j];
            const float df = (float)dot;
            for (int j = 0; j < cols; ++j) dr[j] = yr[j] * (gr[j] - df);
        }
        return CNN_OK;
    default:
        return cnn_set_error(CNN_ERR_VALUE, "activation_backward: unknown activation %d", act);
    }
}
