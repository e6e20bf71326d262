/* sgd.c: one SGD step for the cpu engine, in Keras's form:
 *   momentum 0: p -= lr g;
 *   else v = momentum v - lr g, then p += v, or with nesterov
 *   p += momentum v - lr g. */
#include "cpu.h"

/* p, g, velocity: (count); velocity is unused (may be NULL) without momentum */
cnn_status cpu_sgd_step(cnn_ctx *ctx, const cnn_optimizer_desc *o, size_t count,
                        float *restrict p, const float *restrict g, float *restrict velocity)
{
    (void)ctx;
    const float lr = o->lr, mom = o->momentum;
    if (mom == 0.0f) {
        for (size_t i = 0; i < count; ++i) p[i] -= lr * g[i];
        return CNN_OK;
    }
    if (!velocity) return cnn_set_error(CNN_ERR_VALUE, "sgd: momentum without a velocity buffer");
    if (o->nesterov) {
        for (size_t i = 0; i < count; ++i) {
            const float vi = mom * velocity[i] - lr * g[i];
            velocity[i] = vi;
            p[i] += mom * vi - lr * g[i];
        }
    } else {
        for (size_t i = 0; i < count; ++i) {
            const float vi = mom * velocity[i] - lr * g[i];
            velocity[i] = vi;
            p[i] += vi;
        }
    }
    return CNN_OK;
}
