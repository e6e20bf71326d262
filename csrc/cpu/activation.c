/* activation.c: elementwise activations and the row softmax for the cpu and
 * omp engines. The backward takes the forward's output y. x and y (and dy and
 * dx) may be the same buffer. The omp engine cuts the elements (softmax: the
 * rows) into ranges, one per thread. */
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

typedef struct act_job {
    int act, cols;
    const float *x, *y, *dy;
    float *out;
} act_job;

/* Elements [lo, hi) of the forward; softmax: rows [lo, hi). */
static void forward_range(void *arg, long lo, long hi, int slot)
{
    (void)slot;
    const act_job *j = arg;
    const float *x = j->x;
    float *y = j->out;
    switch (j->act) {
    case CNN_ACT_LINEAR:
        if (x != y) memmove(y + lo, x + lo, (size_t)(hi - lo) * sizeof(float));
        return;
    case CNN_ACT_RELU:
        for (long i = lo; i < hi; ++i) y[i] = x[i] < 0.0f ? 0.0f : x[i];
        return;
    case CNN_ACT_SIGMOID:
        for (long i = lo; i < hi; ++i) y[i] = sigmoidf(x[i]);
        return;
    case CNN_ACT_TANH:
        for (long i = lo; i < hi; ++i) y[i] = tanhf(x[i]);
        return;
    default: /* softmax */
        for (long r = lo; r < hi; ++r) {
            const int cols = j->cols;
            const float *xr = x + (size_t)r * cols;
            float *yr = y + (size_t)r * cols;
            float m = xr[0];
            for (int c = 1; c < cols; ++c) m = xr[c] > m ? xr[c] : m;
            double sum = 0.0;
            for (int c = 0; c < cols; ++c) {
                const float e = expf(xr[c] - m);
                yr[c] = e;
                sum += e;
            }
            const float s = (float)sum;
            for (int c = 0; c < cols; ++c) yr[c] /= s;
        }
    }
}

/* Work units per element (softmax: per row) for the cut into parts. */
static double unit_cost(int act, int cols)
{
    switch (act) {
    case CNN_ACT_LINEAR:
    case CNN_ACT_RELU: return 1.0;
    case CNN_ACT_SOFTMAX: return 8.0 * cols;
    default: return 8.0; /* a transcendental */
    }
}

static int known(int act)
{
    return act == CNN_ACT_LINEAR || act == CNN_ACT_RELU || act == CNN_ACT_SIGMOID ||
           act == CNN_ACT_TANH || act == CNN_ACT_SOFTMAX;
}

/* x (rows, cols) -> y (rows, cols) */
cnn_status cpu_activation_forward(cnn_ctx *ctx, int act, int rows, int cols, const float *x,
                                  float *y)
{
    CNN_TRY(check_dims("activation_forward", rows, cols));
    if (!known(act))
        return cnn_set_error(CNN_ERR_VALUE, "activation_forward: unknown activation %d", act);
    if (act == CNN_ACT_SOFTMAX && cols == 0) return CNN_OK;
    const long count = act == CNN_ACT_SOFTMAX ? rows : (long)rows * cols;
    act_job j = {act, cols, x, NULL, NULL, y};
    const int parts = cnn_cpu_parts(ctx, count, unit_cost(act, cols), CNN_GRAIN_ELEMENTS);
    cnn_cpu_parallel(ctx, parts, count, forward_range, &j);
    return CNN_OK;
}

static void backward_range(void *arg, long lo, long hi, int slot)
{
    (void)slot;
    const act_job *j = arg;
    const float *y = j->y, *dy = j->dy;
    float *dx = j->out;
    switch (j->act) {
    case CNN_ACT_LINEAR:
        if (dy != dx) memmove(dx + lo, dy + lo, (size_t)(hi - lo) * sizeof(float));
        return;
    case CNN_ACT_RELU:
        for (long i = lo; i < hi; ++i) {
            const float g = dy[i]; /* loaded unconditionally, so the loop vectorizes */
            dx[i] = y[i] > 0.0f ? g : 0.0f;
        }
        return;
    case CNN_ACT_SIGMOID:
        for (long i = lo; i < hi; ++i) dx[i] = dy[i] * (y[i] * (1.0f - y[i]));
        return;
    case CNN_ACT_TANH:
        for (long i = lo; i < hi; ++i) dx[i] = dy[i] * (1.0f - y[i] * y[i]);
        return;
    default:
        /* softmax: dx_j = y_j (dy_j - sum_k dy_k y_k) */
        for (long r = lo; r < hi; ++r) {
            const int cols = j->cols;
            const float *yr = y + (size_t)r * cols;
            const float *gr = dy + (size_t)r * cols;
            float *dr = dx + (size_t)r * cols;
            double dot = 0.0;
            for (int c = 0; c < cols; ++c) dot += (double)gr[c] * yr[c];
            const float df = (float)dot;
            for (int c = 0; c < cols; ++c) dr[c] = yr[c] * (gr[c] - df);
        }
    }
}

/* y (rows, cols) the forward's output, dy (rows, cols) -> dx (rows, cols) */
cnn_status cpu_activation_backward(cnn_ctx *ctx, int act, int rows, int cols, const float *y,
                                   const float *dy, float *dx)
{
    CNN_TRY(check_dims("activation_backward", rows, cols));
    if (!known(act))
        return cnn_set_error(CNN_ERR_VALUE, "activation_backward: unknown activation %d", act);
    const long count = act == CNN_ACT_SOFTMAX ? rows : (long)rows * cols;
    act_job j = {act, cols, NULL, y, dy, dx};
    /* elementwise backward passes are cheap: 1 unit each */
    const double cost = act == CNN_ACT_SOFTMAX ? 4.0 * cols : 1.0;
    cnn_cpu_parallel(ctx, cnn_cpu_parts(ctx, count, cost, CNN_GRAIN_ELEMENTS), count,
                     backward_range, &j);
    return CNN_OK;
}
